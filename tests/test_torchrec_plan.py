"""`gnomon.torchrec_plan`: gnomon's sharding plans as TorchRec's, TorchRec's planner's choice as a gnomon plan, and
DLRM on a TorchRec EmbeddingBagCollection. The two-rank check runs DistributedModelParallel over gloo on the exported
plan and compares its forward with the unsharded model's."""

from __future__ import annotations

import functools
import gc
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import pytest
import torch

from gnomon.cost.sharding.plan import Placement, ShardingError, row_blocks
from gnomon.errors import GnomonError
from gnomon.models import DLRM
from gnomon.runtime.distributed import free_port, run_ranks
from gnomon.runtime.distributed.group import process_group
from gnomon.torchrec_plan import (
    CpuRowWiseSharder,
    TorchRecDLRM,
    parameter_shardings,
    planner_assignment,
    sharding_plan,
    to_kjt,
    torchrec_name,
)

if TYPE_CHECKING:
    from torchrec.distributed.types import ModuleSharder

NAMES = [f"embeddings.{i}.weight" for i in range(3)]
SHAPES = {NAMES[0]: (10, 8), NAMES[1]: (7, 8), NAMES[2]: (5, 8)}
MIXED = {
    NAMES[0]: Placement("column_wise", (1, 0)),
    NAMES[1]: Placement("row_wise", (0, 1)),
    NAMES[2]: Placement("table_wise", (1,)),
}
SMALL_DLRM = functools.partial(DLRM, 13, tables=3, rows=[10, 7, 5], dim=8, pooling=3)


class _CheckError(GnomonError):
    pass


def _shards(sharding: object) -> list[tuple[list[int], list[int], str]]:
    spec = sharding.sharding_spec  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    return [(s.shard_sizes, s.shard_offsets, str(s.placement)) for s in spec.shards]  # pyright: ignore


def test_torchrec_name() -> None:
    assert torchrec_name("embeddings.0.weight") == "embeddings_0"
    assert torchrec_name("sparse.tables.user") == "sparse_tables_user"
    assert torchrec_name("model.ebc.embedding_bags.t_user.weight") == "t_user"  # an EmbeddingBagCollection's own


def test_importing_the_bridge_leaves_torchrec_unloaded() -> None:
    import subprocess

    code = "import sys, gnomon.torchrec_plan; print('torchrec' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_parameter_shardings_of_each_kind() -> None:
    shardings = parameter_shardings(MIXED, SHAPES, world_size=2)
    assert list(shardings) == ["embeddings_0", "embeddings_1", "embeddings_2"]
    column, row, table = shardings.values()
    assert {s.compute_kernel for s in shardings.values()} == {"fused"}
    assert (column.sharding_type, column.ranks) == ("column_wise", [1, 0])
    assert _shards(column) == [([10, 4], [0, 0], "rank:1/cpu"), ([10, 4], [0, 4], "rank:0/cpu")]
    assert (row.sharding_type, row.ranks) == ("row_wise", [0, 1])
    assert _shards(row) == [([4, 8], [0, 0], "rank:0/cpu"), ([3, 8], [4, 0], "rank:1/cpu")]
    assert [size[0] for size, _, _ in _shards(row)] == row_blocks(7, 2)  # gnomon's blocks are TorchRec's
    assert (table.sharding_type, table.ranks) == ("table_wise", [1])
    assert _shards(table) == [([5, 8], [0, 0], "rank:1/cpu")]


def test_column_wise_may_put_several_shards_on_one_rank() -> None:
    shardings = parameter_shardings({"t.weight": Placement("column_wise", (0, 1, 0))}, {"t.weight": (6, 12)}, 2)
    assert shardings["t"].ranks == [0, 1, 0]
    assert [offset for _, offset, _ in _shards(shardings["t"])] == [[0, 0], [0, 4], [0, 8]]


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({**MIXED, "embeddings.9.weight": Placement("table_wise", (0,))},
         "the plan names no table of the model: embeddings.9.weight"),
        ({NAMES[0]: MIXED[NAMES[0]]}, "the plan places no table embeddings.1.weight, embeddings.2.weight"),
        ({**MIXED, NAMES[2]: Placement("table_wise", (2,))},
         "table embeddings.2.weight: device 2 is not one of the system's 2"),
        ({**MIXED, NAMES[1]: Placement("row_wise", (1, 0))},
         "table embeddings.1.weight (row_wise@1,0): TorchRec shards row_wise over every rank in order, [0, 1], "
         "not [1, 0]"),
        ({**MIXED, NAMES[0]: Placement("column_wise", (0, 1, 0))},
         "table embeddings.0.weight (column_wise@0,1,0): TorchRec's fused kernel splits the 8 columns evenly, "
         "not into 3"),
        ({**MIXED, NAMES[0]: Placement("column_wise", (0, 1, 0, 1))},
         "table embeddings.0.weight (column_wise@0,1,0,1): TorchRec's fused kernel needs shards a multiple of 4 "
         "columns wide, not 2"),
    ],
)  # fmt: skip
def test_placements_torchrec_cannot_run_are_one_line(assignment: dict[str, Placement], message: str) -> None:
    with pytest.raises(ShardingError) as raised:
        parameter_shardings(assignment, SHAPES, world_size=2)
    assert str(raised.value) == message


def test_unknown_kind_is_one_line() -> None:
    with pytest.raises(ShardingError, match=r"^unknown sharding kind 'diagonal'; choose one of table_wise, "):
        Placement("diagonal", (0,))


def test_sharding_plan_names_the_collection_and_its_tables() -> None:
    model = TorchRecDLRM(SMALL_DLRM())
    plan = sharding_plan("ebc", model.ebc, MIXED, 2)
    assert list(plan.plan) == ["ebc"]
    assert list(plan.plan["ebc"]) == ["embeddings_0", "embeddings_1", "embeddings_2"]  # pyright: ignore[reportArgumentType]
    with pytest.raises(ShardingError, match=r"^the plan places no table embeddings_2 \(TorchRec's names\) of 'ebc'$"):
        sharding_plan("ebc", model.ebc, {NAMES[0]: MIXED[NAMES[0]], NAMES[1]: MIXED[NAMES[1]]}, 2)


def test_planner_assignment_places_every_table() -> None:
    shapes = {NAMES[0]: (100_000, 32), NAMES[1]: (5_000, 16), NAMES[2]: (50, 8)}
    assignment = planner_assignment(shapes, {NAMES[0]: 8.0, NAMES[1]: 2.0, NAMES[2]: 1.0}, 64, 2)
    assert sorted(assignment) == sorted(shapes)
    for placement in assignment.values():
        assert placement.kind in ("table_wise", "row_wise", "column_wise")
        assert all(0 <= device < 2 for device in placement.devices)
    parameter_shardings(assignment, shapes, 2)  # and the bridge can export what the planner chose


def test_planner_assignment_needs_every_pooling_factor() -> None:
    with pytest.raises(ShardingError, match=r"^no pooling factor for table embeddings\.1\.weight$"):
        planner_assignment({NAMES[0]: (10, 8), NAMES[1]: (10, 8)}, {NAMES[0]: 1.0}, 8, 2)


def test_torchrec_dlrm_computes_what_dlrm_does() -> None:
    model = SMALL_DLRM()
    dense, indices, offsets = model.example_inputs(8, zipf=1.1, seed=3)
    torch.testing.assert_close(TorchRecDLRM(model)(dense, to_kjt(indices, offsets)), model(dense, indices, offsets))


@dataclass(frozen=True)
class _Ranks:
    port: int
    make_model: Callable[[], DLRM]
    assignment: dict[str, Placement]


def _sharded_forward_error(rank: int, plan: _Ranks) -> float:
    """In each rank: the largest difference, over the ranks, of the DMP forward of its own batch from DLRM's."""
    warnings.filterwarnings("ignore")
    with process_group(rank, 2, plan.port, timeout_s=60.0, threads=1):
        error = _forward_error(rank, plan)
        # TorchRec's sharded modules hold the group in reference cycles: a group that outlives its leaving is torn
        # down at interpreter exit, where gloo now and then aborts the rank.
        gc.collect()
        return error


def _forward_error(rank: int, plan: _Ranks) -> float:
    import torch.distributed as dist
    from torchrec.distributed.model_parallel import DistributedModelParallel

    model = plan.make_model()
    dense, indices, offsets = model.example_inputs(8, seed=1000 + rank)
    with torch.no_grad():
        expected = model(dense, indices, offsets)
    wrapped = TorchRecDLRM(model)
    state = wrapped.state_dict()
    sharded = DistributedModelParallel(
        wrapped,
        device=torch.device("cpu"),
        plan=sharding_plan("ebc", wrapped.ebc, plan.assignment, 2),
        sharders=[cast("ModuleSharder[torch.nn.Module]", CpuRowWiseSharder())],
    )
    sharded.load_state_dict(OrderedDict(state))
    with torch.no_grad():
        error = (sharded(dense, to_kjt(indices, offsets)) - expected).abs().max().reshape(1)
    dist.all_reduce(error, op=dist.ReduceOp.MAX)
    return error.item()


def test_sharded_forward_equals_the_unsharded_model() -> None:
    plan = _Ranks(free_port(), SMALL_DLRM, MIXED)
    error = run_ranks(_sharded_forward_error, plan, 2, timeout_s=120.0, what="sharded forward", error=_CheckError)
    assert error <= 1e-5
