"""`gnomon.shard(model, example_inputs, devices="4xh100")`: the embedding tables of a recommender sharded across a
system's devices by predicted step time (`gnomon.cost.sharding`), the dense layers data-parallel.

The model's tables are its embedding bags (`nn.EmbeddingBag`, or any `aten._embedding_bag` call on a parameter):
one forward on the example inputs (one rank's batch) finds them and the ids they look up. The dense layers' step is
priced on the model with those tables frozen, as PyTorch DDP trains it; each plan adds its lookups, updates and
collectives (`gnomon.cost.sharding.step`). The chosen plan exports to TorchRec (`ShardResult.parameter_shardings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gnomon.cost.data_parallel import data_parallel_step
from gnomon.cost.sharding.equivalence import distinct_plans
from gnomon.cost.sharding.plan import Placement, ShardingError, check_assignment
from gnomon.cost.sharding.search import Candidate, search_plans
from gnomon.cost.sharding.step import DenseStep, ShardCosts, sharded_step
from gnomon.cost.sharding.tables import EmbeddingTable, synthetic_ids
from gnomon.cost.topology import System, load_system

__all__ = ["ShardResult", "dense_step", "device_capacity", "embedding_tables", "plan_tables", "shard"]

_BAG_OPS = (torch.ops.aten._embedding_bag.default, torch.ops.aten._embedding_bag_forward_only.default)
_MODES = {0: "sum", 1: "mean", 2: "max"}


@dataclass(frozen=True)
class ShardResult:
    model: str
    system: System
    tables: tuple[EmbeddingTable, ...]
    plans: tuple[Candidate, ...]
    """Every distinct plan priced, fastest fitting first (of plans that differ only by swapping tables of one shape
    or devices of one node, the fastest: `gnomon.cost.sharding.equivalence`)."""
    capacity_bytes: int
    """Each device's memory."""

    @property
    def chosen(self) -> Candidate:
        return self.plans[0]

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        plans = self.plans if top is None else self.plans[:top]
        return {
            "model": self.model,
            "system": self.system.name,
            "provenance": self.system.provenance,
            "devices": self.chosen.step.ranks,
            "capacity_bytes_per_device": self.capacity_bytes,
            "tables": [
                {
                    "name": t.name,
                    "rows": t.rows,
                    "dim": t.dim,
                    "bytes": t.bytes,
                    "pooling": t.pooling,
                    "distinct_fraction": t.distinct_fraction,
                }
                for t in self.tables
            ],
            "plans": [_plan_json(c, self.capacity_bytes) for c in plans],
            "chosen": _plan_json(self.chosen, self.capacity_bytes),
        }

    def parameter_shardings(self, device_type: str = "cpu") -> dict[str, Any]:
        """The chosen plan as TorchRec's `ParameterSharding`s (`gnomon.torchrec_plan`)."""
        from gnomon.torchrec_plan import parameter_shardings

        shapes = {t.name: (t.rows, t.dim) for t in self.tables}
        return parameter_shardings(self.chosen.assignment, shapes, self.chosen.step.ranks, device_type)


def _plan_json(candidate: Candidate, capacity: int) -> dict[str, Any]:
    step = candidate.step
    return {
        "assignment": {name: p.to_json() for name, p in sorted(candidate.assignment.items())},
        "predicted_step_s": step.step_s,
        "memory_bytes_per_device": list(step.memory_bytes_per_device),
        "fits": candidate.fits(capacity),
        "load_balance": step.load_balance,
        "breakdown_s": {
            "dense_compute": step.dense_compute_s,
            "embedding_compute": step.embedding_compute_s,
            "all_to_all": step.all_to_all_s,
            "all_reduce": step.all_reduce_s,
            "sync": step.sync_s,
            "host": step.host_s,
        },
        "found_by": candidate.source,
    }


def device_capacity(system: System, ranks: int) -> int:
    """Each rank's memory: its device's, or a share of the host's where the ranks are processes of one machine."""
    capacity = system.device.dram.capacity_bytes
    if system.device.kind == "cpu" and system.calibrated:
        return capacity // min(ranks, system.devices_per_node)
    return capacity


def shard(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    devices: str = "4xh100",
    *,
    ranks: int | None = None,
    loss: str | None = None,
    train: object = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    plan: Mapping[str, Placement] | None = None,
    batch: int | None = None,
    zipf: float | None = None,
) -> ShardResult:
    """Plans for `model`'s embedding tables on `ranks` of `devices`' devices (default: all), fastest that fits
    first; `plan` prices that one plan only. The example inputs are one rank's batch (with `loss`'s target); a
    model file's are random, `batch` samples (default: the file's), and its tables' ids are drawn anew, uniform over
    each table's rows or, with `zipf`, from a power law (`gnomon.cost.sharding.tables.synthetic_ids`); `zipf`
    redraws a module's too."""
    from gnomon.frontends.torch_training import training_model_from_file, with_loss

    system = load_system(devices)
    n = system.ranks if ranks is None else ranks
    if not 1 <= n <= system.ranks:
        raise ShardingError(f"system {system.name} has {system.ranks} devices, not {n}")
    if isinstance(model, str | Path):
        name = str(model)
        module, inputs = training_model_from_file(Path(model), input_shapes, loss, batch_size=batch)
    else:
        name = type(model).__name__
        module, inputs = (with_loss(model, loss) if loss is not None else model), example_inputs
    if inputs is None:
        raise ShardingError(f"{name}: give example inputs (one rank's batch) to find its tables' ids")
    tables = embedding_tables(module, inputs)
    if zipf is not None or isinstance(model, str | Path):
        # A file's example ids are random integers valid for its smallest table, not a click log's.
        tables = [replace(t, ids=synthetic_ids(t.rows, len(t.ids), zipf or 0.0, seed=i)) for i, t in enumerate(tables)]
    if not tables:
        raise ShardingError(f"{name} has no embedding bag to shard: `gnomon analyze --train --devices` predicts "
                            "its data-parallel step")  # fmt: skip
    dense = dense_step(module, inputs, tables, system, n, train)
    return plan_tables(name, tables, dense, system, n, plan)


def plan_tables(
    name: str,
    tables: Sequence[EmbeddingTable],
    dense: DenseStep,
    system: System,
    ranks: int,
    plan: Mapping[str, Placement] | None = None,
) -> ShardResult:
    """`shard` from its parts: tables given as shapes and ids (tables too large to build here), the dense layers'
    step priced already."""
    capacity = device_capacity(system, ranks)
    costs = ShardCosts(system, ranks)

    def evaluate(assignment: Mapping[str, Placement]) -> Any:
        return sharded_step(tables, assignment, dense, system, ranks, costs)

    if plan is not None:
        check_assignment(plan, {t.name: t.dim for t in tables}, ranks)
        candidates = [Candidate(dict(plan), evaluate(plan), "given")]
    else:
        found = search_plans(tables, ranks, capacity, evaluate)
        candidates = distinct_plans(found, tables, ranks, min(system.devices_per_node, ranks))
    result = ShardResult(name, system, tuple(tables), tuple(candidates), capacity)
    if not result.chosen.fits(capacity):
        raise ShardingError(
            _shortfall(result.chosen, tables, capacity, "the plan does not fit" if plan else "no plan fits")
        )
    return result


def _shortfall(candidate: Candidate, tables: Sequence[EmbeddingTable], capacity: int, what: str) -> str:
    memory = candidate.step.memory_bytes_per_device
    device = max(range(len(memory)), key=memory.__getitem__)
    on_device = [t for t in tables if device in candidate.assignment[t.name].devices]
    largest = max(on_device, key=lambda t: t.bytes) if on_device else max(tables, key=lambda t: t.bytes)
    return (
        f"{what}: device {device} needs {_size(memory[device])} of its {_size(capacity)} (short "
        f"{_size(memory[device] - capacity)}); its largest table {largest.name} ({largest.rows} x {largest.dim}) "
        f"takes {_size(largest.bytes)}"
    )


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


class _BagCalls(TorchDispatchMode):
    """Records each embedding bag's table, ids and bags."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.Tensor, torch.Tensor, int, int]] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in _BAG_OPS:
            weight, indices, offsets = args[0], args[1], args[2]
            mode = int(args[4]) if len(args) > 4 else int(kwargs.get("mode", 0))
            include_last = bool(args[7]) if len(args) > 7 else bool(kwargs.get("include_last_offset", False))
            bags = offsets.numel() - (1 if include_last else 0)
            self.calls.append((weight, indices.detach().clone(), bags, mode))
        return func(*args, **kwargs)


def embedding_tables(model: torch.nn.Module, example_inputs: Sequence[Any]) -> list[EmbeddingTable]:
    """The embedding bags `model` calls on its parameters in one forward, with the ids each looks up (a table
    called twice is one table with both calls' ids)."""
    from gnomon.frontends.torch_training import WithLoss

    owner = model.model if isinstance(model, WithLoss) else model  # the user's names, without the wrapper's
    names = {p.data_ptr(): n for n, p in owner.named_parameters()}
    recorder = _BagCalls()
    with torch.no_grad(), recorder:
        model(*example_inputs)
    found: dict[str, EmbeddingTable] = {}
    for weight, indices, bags, mode in recorder.calls:
        name = names.get(weight.data_ptr())
        if name is None:
            continue  # a table that is not a parameter (a constant) is not trained: nothing to shard
        ids = indices.reshape(-1).to(torch.int64).numpy()
        if name in found:
            previous = found[name]
            ids = np.concatenate([previous.ids, ids])
            bags += previous.batch
        rows, dim = weight.shape
        found[name] = EmbeddingTable(name, rows, dim, weight.element_size(), bags, ids, _MODES.get(mode, "sum"))
    return list(found.values())


def dense_step(
    model: torch.nn.Module, inputs: Sequence[Any], tables: Sequence[EmbeddingTable], system: System, ranks: int,
    train: object = True,
) -> DenseStep:  # fmt: skip
    """The dense layers' DDP step: the model trained with its tables frozen."""
    from gnomon.analysis import eager_training_graph
    from gnomon.frontends.torch_training import WithLoss

    parameters = dict((model.model if isinstance(model, WithLoss) else model).named_parameters())
    frozen = [parameters[t.name] for t in tables if parameters[t.name].requires_grad]
    for parameter in frozen:
        parameter.requires_grad_(False)
    try:
        graph = eager_training_graph(model, inputs, None, None, train)
    finally:
        for parameter in frozen:
            parameter.requires_grad_(True)
    report = graph.report(system.device)
    ddp = data_parallel_step(graph.module, report, graph.parameters, system, ranks)
    lookups = sum(r.predicted_s for r in report.records if "embedding_bag" in r.op)
    traffic = sum(r.bytes for r in report.records if "embedding_bag" not in r.op)
    return DenseStep(ddp.step_s, ddp.compute_s, ddp.exposed_s, ddp.sync_s, lookups, graph.totals[1], traffic)


def render(result: ShardResult, top: int) -> str:
    """The top plans as a table, the chosen one first."""
    ranks = result.chosen.step.ranks
    lines = [
        f"embedding sharding of {result.model} on {ranks} devices of {result.system.provenance}",
        f"  {len(result.tables)} tables, {sum(t.bytes for t in result.tables) / 2**20:.1f} MiB; "
        f"{len(result.plans)} {'plan' if len(result.plans) == 1 else 'distinct plans'} priced; "
        f"device memory {result.capacity_bytes / 2**30:.1f} GiB",
        f"  {'#':>2}  {'step ms':>9}  {'dense':>8}  {'embed':>8}  {'a2a':>8}  {'allred':>8}  {'sync':>7}  "
        f"{'groups':>7}  {'balance':>7}  {'memory per device':<24}  plan",
    ]
    for index, candidate in enumerate(result.plans[:top]):
        step = candidate.step
        counts: dict[str, int] = {}
        for placement in candidate.assignment.values():
            counts[placement.kind] = counts.get(placement.kind, 0) + 1
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        fits = "" if candidate.fits(result.capacity_bytes) else "  DOES NOT FIT"
        lines.append(
            f"  {index + 1:>2}  {step.step_s * 1e3:9.3f}  {step.dense_compute_s * 1e3:8.3f}  "
            f"{step.embedding_compute_s * 1e3:8.3f}  {step.all_to_all_s * 1e3:8.3f}  {step.all_reduce_s * 1e3:8.3f}  "
            f"{step.sync_s * 1e3:7.3f}  {step.host_s * 1e3:7.3f}  {step.load_balance:7.2f}  "
            f"{_memories(step.memory_bytes_per_device):<24}  {summary} ({candidate.source}){fits}"
        )
    placed: dict[str, list[str]] = {}
    for table, placement in result.chosen.assignment.items():
        placed.setdefault(placement.describe(), []).append(table)
    lines.append("  chosen plan:")
    lines += [f"    {where:<24} {', '.join(sorted(tables))}" for where, tables in sorted(placed.items())]
    return "\n".join(lines)


def _memories(memory: Sequence[int]) -> str:
    """Each device's memory, in GiB (or MiB, where all are under one GiB), `/`-separated."""
    if max(memory) >= 2**30:
        return "/".join(f"{m / 2**30:.1f}" for m in memory) + " GiB"
    return "/".join(f"{m / 2**20:.0f}" for m in memory) + " MiB"


def dumps(result: ShardResult, top: int) -> str:
    return json.dumps(result.to_json(top), indent=2)
