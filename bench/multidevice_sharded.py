"""The sharded half of `bench/multidevice.py`: DLRM steps under several sharding plans, predicted by gnomon and
measured under TorchRec on local gloo ranks, the rank of gnomon's chosen plan and of TorchRec's planner's among
them; and the DLRM benchmark's configurations predicted on datasheet systems."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from sharded_cases import BENCHMARK, SHARDED, BenchmarkConfig, ShardedCase

import gnomon
from gnomon.cost.sharding.equivalence import plan_class
from gnomon.cost.sharding.plan import Placement
from gnomon.cost.sharding.search import largest_first
from gnomon.cost.sharding.step import DenseStep, ShardedStep
from gnomon.cost.sharding.tables import EmbeddingTable, synthetic_ids
from gnomon.cost.topology import System, load_system
from gnomon.models import DLRM
from gnomon.runtime.distributed.collectives import faster_half_mean
from gnomon.runtime.distributed.paired import fastest, ratio, ratio_interval
from gnomon.sharding import ShardResult, dense_step, embedding_tables, plan_tables
from gnomon.torchrec_plan import planner_assignment
from gnomon.torchrec_steps import measure_sharded

__all__ = ["CasePlans", "benchmark_configs", "case_plans", "sharded"]

_LOSS = "bce_with_logits"
_GNOMON_TOP = 3  # gnomon's best plans measured, beside the standard ones and TorchRec's
_CONFIDENCE = 0.9


@dataclass(frozen=True)
class _Row:
    case: str
    label: str
    assignment: dict[str, Placement]
    predicted: ShardedStep
    measured_s: float = math.nan
    spread: float = math.nan
    rounds: tuple[tuple[float, ...], ...] = ()
    """The plan's steps in each round (the plans' rounds interleaved)."""


def _inputs(model: DLRM, case: ShardedCase) -> tuple[torch.Tensor, ...]:
    dense, indices, offsets = model.example_inputs(case.batch, zipf=case.zipf, seed=1000)  # rank 0's batch
    return dense, indices, offsets, torch.rand(case.batch, 1)


def _describe(assignment: Mapping[str, Placement]) -> str:
    counts: dict[str, list[str]] = {}
    for name, placement in sorted(assignment.items()):
        counts.setdefault(placement.describe(), []).append(name.removeprefix("embeddings.").removesuffix(".weight"))
    return " ".join(f"{where}:{','.join(tables)}" for where, tables in sorted(counts.items()))


@dataclass(frozen=True)
class CasePlans:
    result: ShardResult
    """gnomon's search and its chosen plan."""
    dense: DenseStep
    torchrec: dict[str, Placement]
    """TorchRec's planner's plan."""
    plans: dict[str, dict[str, Placement]]
    """The plans measured, by label."""


def case_plans(name: str, system: System, ranks: int) -> CasePlans:
    """A sharded case's plans to measure on `ranks` of `system`: gnomon's best, TorchRec's planner's and the
    standard ones, each once."""
    case = SHARDED[name]
    model = case.build()
    inputs = _inputs(model, case)
    wrapped = gnomon.with_loss(model, _LOSS)
    tables = embedding_tables(wrapped, inputs)
    dense = dense_step(wrapped, inputs, tables, system, ranks)
    result = plan_tables(name, tables, dense, system, ranks)
    shapes = {t.name: (t.rows, t.dim) for t in tables}
    pooling = {t.name: t.pooling for t in tables}
    torchrec = planner_assignment(shapes, pooling, case.batch, ranks)
    return CasePlans(result, dense, torchrec, _plans(result, ranks, torchrec))


def _plans(result: ShardResult, ranks: int, torchrec: dict[str, Placement]) -> dict[str, dict[str, Placement]]:
    """gnomon's best plans, the standard ones and TorchRec's planner's, each once (the first label kept; plans that
    differ only by swapping tables of one shape or the devices are one plan, `gnomon.cost.sharding.equivalence`)."""
    tables = result.tables
    everyone = tuple(range(ranks))
    balanced = largest_first(tables, ranks, lambda t: float(t.bytes))
    candidates = {f"gnomon #{i + 1}": c.assignment for i, c in enumerate(result.plans[:_GNOMON_TOP])}
    candidates |= {
        "torchrec planner": torchrec,
        "all row_wise": {t.name: Placement("row_wise", everyone) for t in tables},
        "all column_wise": {t.name: Placement("column_wise", everyone) for t in tables},
        "table_wise by bytes": balanced,
        "all on device 0": {t.name: Placement("table_wise", (0,)) for t in tables},
    }
    unique: dict[str, dict[str, Placement]] = {}
    seen: set[object] = set()
    for label, assignment in candidates.items():
        key = _class(result, assignment)
        if key not in seen:
            seen.add(key)
            unique[label] = assignment
    return unique


def _class(result: ShardResult, assignment: Mapping[str, Placement]) -> object:
    ranks = result.chosen.step.ranks
    return plan_class(assignment, {t.name: t for t in result.tables}, ranks, min(result.system.devices_per_node, ranks))


def sharded(cases: list[str], ranks: int, repeats: int, steps: int, until_apart: int, sessions: int) -> list[float]:
    """Prints each case's plans predicted and measured, in `sessions` fresh sets of ranks whose rounds are pooled;
    returns the absolute errors of the steps."""
    system = load_system(f"{ranks}xlocal")
    print(f"\nsharded DLRM steps (TorchRec over gloo), {ranks} ranks of 1 thread, predicted on {system.provenance}")
    errors: list[float] = []
    chosen_ranks: list[int] = []
    torchrec_ranks: list[int] = []
    tied = tied_torchrec = 0
    sets_agree = 0
    for name in cases:
        case = SHARDED[name]
        planned = case_plans(name, system, ranks)
        result, plans, torchrec = planned.result, planned.plans, planned.torchrec
        tables, dense = result.tables, planned.dense
        # A plan's instance in one set of ranks keeps an offset all its rounds share (one run ordered two plans 6.8%
        # apart that the runs before had ordered the other way): fresh sets of ranks average it.
        runs = [
            measure_sharded(case.build, case.batch, list(plans.values()), zipf=case.zipf, ranks=ranks, steps=steps,
                            repeats=repeats, until_apart=until_apart)
            for _ in range(sessions)
        ]  # fmt: skip
        rows = []
        labels = list(plans)
        for index, (label, assignment) in enumerate(plans.items()):
            pooled = tuple(one for run in runs for one in run[index].rounds)
            rows.append(
                _Row(name, label, assignment, plan_tables(name, tables, dense, system, ranks, assignment).chosen.step,
                     faster_half_mean([t for one in pooled for t in one]), max(run[index].spread for run in runs),
                     pooled)
            )  # fmt: skip
        best = rows[fastest([r.rounds for r in rows])]
        # The measurement's own repeatability: which plan each set of ranks alone found fastest. A chooser that knew
        # one set's order scores no better against the other than the sets agree.
        per_set = [labels[fastest([timing.rounds for timing in run])] for run in runs]
        sets_agree += len(set(per_set)) == 1
        over_best = {r.label: ratio(r.rounds, best.rounds) for r in rows}
        order = sorted(rows, key=lambda r: over_best[r.label])
        intervals = {r.label: ratio_interval(r.rounds, best.rounds, _CONFIDENCE) for r in rows}
        _print_case(name, case, rows, result, order, over_best, intervals)
        print(f"    fastest in each set of ranks alone: {', '.join(per_set)}")
        errors += [abs(r.predicted.step_s - r.measured_s) / r.measured_s for r in rows]
        chosen_row = next(r for r in rows if r.label == "gnomon #1")
        torchrec_row = next(r for r in rows if _class(result, r.assignment) == _class(result, torchrec))
        chosen_ranks.append(1 + order.index(chosen_row))
        torchrec_ranks.append(1 + order.index(torchrec_row))
        tied += intervals[chosen_row.label][0] <= 1.0
        tied_torchrec += intervals[torchrec_row.label][0] <= 1.0
    first = sum(r == 1 for r in chosen_ranks)
    print(
        f"  gnomon's chosen plan measured fastest in {first} of {len(chosen_ranks)} cases (ranks "
        f"{chosen_ranks}; target >= 80%); TorchRec's planner's: fastest in {sum(r == 1 for r in torchrec_ranks)} "
        f"(ranks {torchrec_ranks})"
    )
    print(
        f"  fastest or not told apart from it (the {_CONFIDENCE:.0%} interval of its time over the fastest's, "
        f"resampling rounds, reaches 1): gnomon's chosen plan in {tied} of {len(chosen_ranks)} cases, TorchRec's "
        f"planner's in {tied_torchrec}"
    )
    if sessions > 1:
        print(
            f"  the {sessions} sets of ranks, each alone, found the same plan fastest in {sets_agree} of "
            f"{len(chosen_ranks)} cases: how far this measurement repeats its own choice"
        )
    print(f"  geomean absolute error of the sharded steps over {len(errors)} plans: {_geomean(errors):.1%}")
    return errors


def _print_case(
    name: str,
    case: ShardedCase,
    rows: list[_Row],
    result: ShardResult,
    order: list[_Row],
    over_best: dict[str, float],
    intervals: dict[str, tuple[float, float]],
) -> None:
    tables = result.tables
    sizes = ", ".join(f"{t.rows // 1000}k" if t.rows >= 1000 else str(t.rows) for t in tables)
    print(
        f"  {name}: {len(tables)} tables of dim {tables[0].dim} ({sizes} rows), pooling {tables[0].pooling:g}, "
        f"batch {case.batch} per rank, ids {'uniform' if case.zipf == 0 else f'zipf {case.zipf}'}"
    )
    print(
        f"    {'plan':<20} {'predicted ms':>12} {'measured':>9} {'spread':>6} {'err':>6} {'/fastest':>8} "
        f"{f'{_CONFIDENCE:.0%} interval':>13} {'rounds':>6} {'rank':>4}  {'embed':>6} {'a2a':>6} {'sync':>6}  placement"
    )
    for row in rows:
        p = row.predicted
        error = abs(p.step_s - row.measured_s) / row.measured_s
        low, high = intervals[row.label]
        print(
            f"    {row.label:<20} {p.step_s * 1e3:>12.2f} {row.measured_s * 1e3:>9.2f} {row.spread:>6.0%} "
            f"{error:>6.1%} {over_best[row.label]:>8.3f} {f'{low:.3f}-{high:.3f}':>13} "
            f"{sum(1 for steps in row.rounds if steps):>6} {order.index(row) + 1:>4}  "
            f"{p.embedding_compute_s * 1e3:>6.2f} {p.all_to_all_s * 1e3:>6.2f} {p.sync_s * 1e3:>6.2f}  "
            f"{_describe(row.assignment)}"
        )


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(max(v, 1e-4)) for v in values)) if values else math.nan


def benchmark_configs(systems: tuple[str, ...]) -> None:
    """The DLRM benchmark's configurations on datasheet systems: the chosen plan's step broken down."""
    for system_name in systems:
        system = load_system(system_name)
        print(f"\nDLRM benchmark configurations predicted on {system.provenance}")
        print(
            "  (ids drawn from a power law of exponent 1.05 for Criteo's hot rows: an assumption, not Criteo's "
            "measured distribution); sync: the ranks' waits at the blocking collectives, a typical 10 us each)"
        )
        print(
            f"  {'config':<16} {'batch/dev':>9} {'tables GiB':>10} {'step ms':>8} {'compute':>8} {'embed':>7} "
            f"{'all-to-all':>10} {'all-reduce':>10} {'sync':>6} {'balance':>7} {'max GiB':>7}  plan"
        )
        for name, config in BENCHMARK.items():
            result = _benchmark_result(name, config, system)
            step = result.chosen.step
            kinds: dict[str, int] = {}
            for placement in result.chosen.assignment.values():
                kinds[placement.kind] = kinds.get(placement.kind, 0) + 1
            print(
                f"  {name:<16} {config.global_batch // system.ranks:>9} "
                f"{sum(t.bytes for t in result.tables) / 2**30:>10.1f} {step.step_s * 1e3:>8.2f} "
                f"{step.dense_compute_s * 1e3:>8.2f} {step.embedding_compute_s * 1e3:>7.2f} "
                f"{step.all_to_all_s * 1e3:>10.2f} {step.all_reduce_s * 1e3:>10.3f} "
                f"{(step.sync_s + step.host_s) * 1e3:>6.3f} "
                f"{step.load_balance:>7.2f} {max(step.memory_bytes_per_device) / 2**30:>7.1f}  "
                + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
            )


def _benchmark_result(name: str, config: BenchmarkConfig, system: System) -> ShardResult:
    batch = config.global_batch // system.ranks
    tables = [
        EmbeddingTable(f"t{i}", rows, config.dim, 4, batch, synthetic_ids(rows, batch * pooling, config.zipf, seed=i))
        for i, (rows, pooling) in enumerate(zip(config.rows, config.pooling, strict=True))
    ]
    # The dense layers' step does not depend on the tables' rows: priced on a DLRM with small tables.
    model = DLRM(13, tables=len(config.rows), rows=16, dim=config.dim, pooling=1, bottom=config.bottom, top=config.top)
    dense, indices, offsets = model.example_inputs(batch)
    wrapped = gnomon.with_loss(model, _LOSS)
    inputs = (dense, indices, offsets, torch.rand(batch, 1))
    small = embedding_tables(wrapped, inputs)
    return plan_tables(name, tables, dense_step(wrapped, inputs, small, system, system.ranks), system, system.ranks)
