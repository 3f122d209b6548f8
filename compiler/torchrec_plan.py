"""gnomon's sharding plans as TorchRec runs them, and TorchRec's own planner's choice as a gnomon plan.

gnomon predicts and plans; torch.distributed and TorchRec run. This module is the bridge between the two: a gnomon
plan (`gnomon.cost.sharding.plan.Placement` per table, keyed by the model's embedding parameter names) becomes
TorchRec's `ParameterSharding`s and `ShardingPlan` for `DistributedModelParallel`, TorchRec's
`EmbeddingShardingPlanner` plans the same tables for comparison, and `TorchRecDLRM` runs `gnomon.models.DLRM`'s
computation on an `EmbeddingBagCollection`, the module TorchRec shards.

Every table uses TorchRec's `fused` compute kernel (FBGEMM's table-batched embeddings, the optimizer applied in the
backward pass), which needs each shard's width to be a multiple of 4 columns. TorchRec is imported on first use:
importing this module does not import it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from gnomon.cost.sharding.plan import Placement, ShardingError, check_assignment, torchrec_limit
from gnomon.models import DLRM

if TYPE_CHECKING:
    from torchrec import EmbeddingBagCollection, KeyedJaggedTensor
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.types import ParameterSharding, ShardingPlan

    CpuRowWiseSharder: type[EmbeddingBagCollectionSharder]  # built on first use by `__getattr__`

__all__ = [
    "CpuRowWiseSharder",
    "TorchRecDLRM",
    "parameter_shardings",
    "planner_assignment",
    "sharding_plan",
    "to_kjt",
    "torchrec_name",
]

FUSED = "fused"
"""TorchRec's compute kernel for every table: FBGEMM's table-batched embeddings with the optimizer fused in."""
_INSTALL = "TorchRec is not installed: pip install --no-deps torchrec==1.8.0 (and fbgemm-gpu-cpu==1.8.0)"


def torchrec_name(name: str) -> str:
    """A gnomon table name (the model's parameter name) as a TorchRec table name: an EmbeddingBagCollection's own
    ("ebc.embedding_bags.t0.weight" -> "t0"), else the path ("embeddings.0.weight" -> "embeddings_0")."""
    parts = name.removesuffix(".weight").split(".")
    if len(parts) >= 2 and parts[-2] == "embedding_bags":
        return parts[-1]
    return "_".join(parts)


def _require_torchrec() -> None:
    try:
        import torchrec  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as error:
        raise ShardingError(_INSTALL) from error


@functools.cache
def _sharder_class() -> type[Any]:
    """`CpuRowWiseSharder`, built on first use so that importing this module does not import TorchRec."""
    _require_torchrec()
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder

    class CpuRowWiseSharder(EmbeddingBagCollectionSharder):
        """TorchRec's `EmbeddingBagCollection` sharder with row-wise sharding allowed on CPU too: TorchRec runs it
        there (gloo reduce-scatters the partial sums) but lists it for CUDA only."""

        def sharding_types(self, compute_device_type: str) -> list[str]:
            types = list(super().sharding_types(compute_device_type))
            return types + [kind for kind in ("row_wise", "table_row_wise") if kind not in types]

    CpuRowWiseSharder.__module__ = __name__  # pickles by reference, through this module's __getattr__
    CpuRowWiseSharder.__qualname__ = "CpuRowWiseSharder"
    return CpuRowWiseSharder


def __getattr__(name: str) -> Any:
    if name == "CpuRowWiseSharder":
        return _sharder_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parameter_shardings(
    assignment: Mapping[str, Placement],
    shapes: Mapping[str, tuple[int, int]],
    world_size: int,
    device_type: str = "cpu",
) -> dict[str, ParameterSharding]:
    """TorchRec's ParameterSharding of each table of `assignment` (gnomon names to placements), keyed by
    `torchrec_name`; `shapes` gives each table's (rows, dim). Row-wise blocks are TorchRec's (and
    `row_blocks`'s) ceil(rows / ranks) rows; column shards are equal, one per listed device.

    Raises ShardingError for a plan that misses or invents tables, a device outside the world, or a placement
    TorchRec cannot run: row_wise over other than every rank in order, a column split that is uneven or leaves a
    shard narrower than a multiple of 4 columns (the fused kernel's need)."""
    _require_torchrec()
    from torchrec.distributed.sharding_plan import column_wise, row_wise, table_wise

    if world_size < 1:
        raise ShardingError(f"world_size must be at least 1, got {world_size}")
    check_assignment(assignment, {name: dim for name, (_, dim) in shapes.items()}, world_size)
    sharder = _sharder_class()()
    shardings: dict[str, ParameterSharding] = {}
    for name, placement in assignment.items():
        rows, dim = shapes[name]
        _check_runnable(name, placement, dim, world_size)
        if placement.kind == "table_wise":
            generator = table_wise(rank=placement.devices[0], compute_kernel=FUSED)
        elif placement.kind == "row_wise":
            generator = row_wise(compute_kernel=FUSED)
        else:
            generator = column_wise(ranks=list(placement.devices), compute_kernel=FUSED)
        # The generators read only the parameter's shape: a meta tensor holds no memory.
        weight = nn.Parameter(torch.empty(rows, dim, device="meta"), requires_grad=False)
        shardings[torchrec_name(name)] = generator(weight, world_size, world_size, device_type, sharder)
    return shardings


def _check_runnable(name: str, placement: Placement, dim: int, world_size: int) -> None:
    """A ShardingError for a placement TorchRec cannot run as gnomon means it."""
    limit = torchrec_limit(placement, dim, world_size)
    if limit is not None:
        raise ShardingError(f"table {name} ({placement.describe()}): {limit}")


def sharding_plan(
    ebc_path: str,
    ebc: EmbeddingBagCollection,
    assignment: Mapping[str, Placement],
    world_size: int,
    device_type: str = "cpu",
) -> ShardingPlan:
    """The ShardingPlan for DistributedModelParallel that places the EmbeddingBagCollection at `ebc_path` in the
    wrapped model as `assignment` says; the collection's tables are the `torchrec_name`s of its keys."""
    _require_torchrec()
    from torchrec.distributed.types import EmbeddingModuleShardingPlan, ShardingPlan

    tables = {config.name: (config.num_embeddings, config.embedding_dim) for config in ebc.embedding_bag_configs()}
    unknown = [name for name in assignment if torchrec_name(name) not in tables]
    if unknown:
        raise ShardingError(f"the plan names no table of the EmbeddingBagCollection at '{ebc_path}': {unknown[0]}")
    placed = {torchrec_name(name) for name in assignment}
    missing = [table for table in tables if table not in placed]
    if missing:
        raise ShardingError(f"the plan places no table {', '.join(missing)} (TorchRec's names) of '{ebc_path}'")
    shapes = {name: tables[torchrec_name(name)] for name in assignment}
    shardings = parameter_shardings(assignment, shapes, world_size, device_type)
    return ShardingPlan({ebc_path: EmbeddingModuleShardingPlan(shardings)})


def planner_assignment(
    shapes: Mapping[str, tuple[int, int]],
    pooling: Mapping[str, float],
    batch_per_rank: int,
    world_size: int,
    device_type: str = "cpu",
) -> dict[str, Placement]:
    """The plan TorchRec's EmbeddingShardingPlanner chooses for tables of `shapes` ((rows, dim) by gnomon name),
    looked up `pooling` ids per sample each, at `batch_per_rank` samples per rank: table_wise, row_wise or
    column_wise, the fused kernel. Planned without a process group, on a meta-device collection."""
    _require_torchrec()
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints
    from torchrec.distributed.planner.types import KernelConfig, TopologyFactory, TrainerConfig
    from torchrec.distributed.types import EmbeddingModuleShardingPlan

    missing = [name for name in shapes if name not in pooling]
    if missing:
        raise ShardingError(f"no pooling factor for table {missing[0]}")
    names = {torchrec_name(name): name for name in shapes}
    configs = [
        EmbeddingBagConfig(name=torchrec_name(name), embedding_dim=dim, num_embeddings=rows, feature_names=[name])
        for name, (rows, dim) in shapes.items()
    ]
    ebc = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
    constraints = {
        torchrec_name(name): ParameterConstraints(
            sharding_types=["table_wise", "row_wise", "column_wise"],
            compute_kernels=[FUSED],
            pooling_factors=[float(pooling[name])],
        )
        for name in shapes
    }
    planner = EmbeddingShardingPlanner(
        topology=TopologyFactory.create_topology(
            TrainerConfig(world_size=world_size), kernel_config=KernelConfig(compute_device=device_type)
        ),
        batch_size=batch_per_rank,
        constraints=constraints,
        debug=False,
    )
    plan = planner.plan(ebc, [_sharder_class()()])
    module_plan = plan.get_plan_for_module("")
    if not isinstance(module_plan, EmbeddingModuleShardingPlan):
        raise ShardingError("TorchRec's planner returned no plan for the tables")
    return {
        names[table]: Placement(sharding.sharding_type, tuple(sharding.ranks or ()))
        for table, sharding in module_plan.items()
    }


def to_kjt(indices: torch.Tensor, offsets: torch.Tensor) -> KeyedJaggedTensor:
    """DLRM's sparse input (indices [tables, batch * pooling], offsets [tables, batch], each table's bags starting
    at its offsets) as TorchRec's KeyedJaggedTensor, feature f{i} for table i."""
    _require_torchrec()
    from torchrec import KeyedJaggedTensor

    tables, count = indices.shape
    ends = torch.cat([offsets[:, 1:], torch.full((tables, 1), count, dtype=offsets.dtype)], dim=1)
    return KeyedJaggedTensor(
        keys=[f"f{i}" for i in range(tables)], values=indices.reshape(-1), lengths=(ends - offsets).reshape(-1)
    )


class TorchRecDLRM(nn.Module):
    """`gnomon.models.DLRM`'s computation with its bags in a TorchRec EmbeddingBagCollection (`ebc`, tables
    `torchrec_name("embeddings.{i}.weight")` on features f{i}, the DLRM's weights copied), so that TorchRec can
    shard them. The bottom and top MLPs are the DLRM's own modules, shared, not copied."""

    triu: torch.Tensor

    def __init__(self, model: DLRM) -> None:
        super().__init__()
        _require_torchrec()
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig

        bags: list[nn.EmbeddingBag] = list(model.embeddings)  # pyright: ignore[reportAssignmentType]
        configs = [
            EmbeddingBagConfig(
                name=torchrec_name(f"embeddings.{i}.weight"),
                embedding_dim=bag.embedding_dim,
                num_embeddings=bag.num_embeddings,
                feature_names=[f"f{i}"],
            )
            for i, bag in enumerate(bags)
        ]
        self.ebc = EmbeddingBagCollection(tables=configs)
        self.ebc.load_state_dict(
            {f"embedding_bags.{config.name}.weight": bag.weight for config, bag in zip(configs, bags, strict=True)}
        )
        self.bottom = model.bottom
        self.top = model.top
        self.register_buffer("triu", model.triu.clone(), persistent=False)
        self.features = [f"f{i}" for i in range(len(bags))]

    def forward(self, dense: torch.Tensor, features: KeyedJaggedTensor) -> torch.Tensor:
        x = self.bottom(dense)
        pooled = self.ebc(features).to_dict()  # sharded, a LazyAwaitable: to_dict waits for the lookups
        stacked = torch.stack([x, *(pooled[feature] for feature in self.features)], dim=1)
        dots = torch.bmm(stacked, stacked.transpose(1, 2))
        interactions = dots[:, self.triu[0], self.triu[1]]
        return self.top(torch.cat([x, interactions], dim=1))
