"""fbgemm's embedding kernels inside TorchRec's sharded steps, plan by plan, against gnomon's price of them.

`bench/multidevice.py`'s sharded half times whole steps, and there the best plans of a case lie within 1-3% of each
other, while from a rank's last lookup to its pooled embeddings' arrival (gloo's all-to-all) took 4-7 ms instead of
about 2 in 13 of 168 steps of the five cases on the Zen 1 host (torch.profiler): which plan measures fastest changes
between runs of the same code. This times, inside the same steps, what the plans differ by: each rank's
fbgemm lookups (the autograd function's forward) and fused backward with its SGD update (its autograd node), with
torch.profiler on both ranks, one profiled step per plan in each round, the plans in a fresh order each round. A
plan's embedding time is its slowest rank's lookups plus its slowest rank's updates (an all-to-all follows each, and
waits for the slowest), as `gnomon.cost.sharding.step` prices it (`ShardedStep.embedding_compute_s`).

Per case: each plan's price and median measured time with the interquartile range over the rounds, the order of the
plans by each and its rank correlation. Then in how many cases the plan gnomon prices cheapest measured cheapest. The
price holds each kernel call's fixed cost as the calibration timed it (the embedding module's Python included), which
the kernels' own times leave out in part: compare the orders more than the levels. The profiler's own cost is in
every measured figure alike.

    python bench/sharded_phases.py [--cases dlrm_mixed,...] [--rounds 16]

Needs `gnomon calibrate --collectives` first (the plans are gnomon's on the `2xlocal` system). Run it alone.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
from multidevice_sharded import case_plans
from sharded_cases import SHARDED

from gnomon.cost.sharding.plan import Placement
from gnomon.cost.topology import load_system
from gnomon.errors import GnomonError
from gnomon.pytorch_memory import quiet_stderr
from gnomon.runtime.distributed import free_port, rank_cores, run_ranks
from gnomon.runtime.distributed.group import process_group
from gnomon.sharding import plan_tables
from gnomon.torchrec_steps import training_batches, training_step

_RANKS = 2
_WARMUP = 3
_LOOKUPS = "split_embedding_codegen_lookup_"  # fbgemm's autograd function, forward
_UPDATES = "CppNode<SplitLookupFunction"  # its backward node: the fused backward and SGD update


@dataclass(frozen=True)
class _Job:
    case: str
    assignments: list[dict[str, Placement]]
    rounds: int
    port: int
    cores: tuple[tuple[int, ...], ...]


def _rank_main(rank: int, job: _Job) -> list[list[list[tuple[float, float]]]]:
    """Every rank's (lookups, updates) seconds for each plan, a pair a round (rank 0's return is the result)."""
    os.sched_setaffinity(0, set(job.cores[rank]))
    warnings.filterwarnings("ignore")  # TorchRec's deprecation notes
    case = SHARDED[job.case]
    with process_group(rank, _RANKS, job.port, timeout_s=600.0, threads=1):
        model = case.build()
        batches, expected = training_batches(model, case.batch, case.zipf, rank, _RANKS)
        steps = [training_step(model, a, _RANKS, expected, batches)[0] for a in job.assignments]
        for _ in range(_WARMUP):
            for step in steps:
                step()
        times: list[list[tuple[float, float]]] = [[] for _ in steps]
        for index in range(job.rounds):
            order = list(range(len(steps)))
            random.Random(index).shuffle(order)  # the same order on every rank
            for plan in order:
                dist.barrier()
                with (
                    quiet_stderr(),
                    torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile,
                ):
                    steps[plan]()
                events = profile.events()
                lookups = sum(e.cpu_time_total for e in events if e.name.startswith(f"fbgemm::{_LOOKUPS}"))
                updates = sum(e.cpu_time_total for e in events if _UPDATES in e.name and "evaluate_function" in e.name)
                times[plan].append((lookups * 1e-6, updates * 1e-6))
        everyone: list[list[list[tuple[float, float]]]] = [[] for _ in range(_RANKS)]
        dist.all_gather_object(everyone, times)
        return everyone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(SHARDED))
    parser.add_argument("--rounds", type=int, default=16)
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in SHARDED]
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)} (known: {', '.join(SHARDED)})")
    if args.rounds < 2:
        parser.error(f"--rounds must be at least 2 (a spread needs two), got {args.rounds}")
    system = load_system(f"{_RANKS}xlocal")
    print(f"embedding kernels in TorchRec's steps, {_RANKS} ranks of 1 thread, priced on {system.provenance}")
    cheapest = 0
    correlations: list[float] = []
    for name in cases:
        planned = case_plans(name, system, _RANKS)
        labels = list(planned.plans)
        cores = rank_cores(_RANKS, 1, what="sharded_phases", error=GnomonError)
        job = _Job(name, list(planned.plans.values()), args.rounds, free_port(), cores)
        per_rank = run_ranks(_rank_main, job, _RANKS, timeout_s=1800.0, what="sharded_phases", error=GnomonError)
        measured = {label: _embedding_s(per_rank, index) for index, label in enumerate(labels)}
        priced = {
            label: plan_tables(
                name, planned.result.tables, planned.dense, system, _RANKS, assignment
            ).chosen.step.embedding_compute_s
            for label, assignment in planned.plans.items()
        }
        first, correlation = _print_case(name, labels, priced, measured)
        cheapest += first
        correlations.append(correlation)
    print(
        f"  the plan gnomon prices cheapest measured cheapest in {cheapest} of {len(cases)} cases; rank correlation "
        f"of prices and measured times {statistics.fmean(correlations):.2f} on average"
    )


def _embedding_s(per_rank: list[list[list[tuple[float, float]]]], plan: int) -> list[float]:
    """The plan's embedding time in each round: its slowest rank's lookups plus its slowest rank's updates."""
    rounds = zip(*(times[plan] for times in per_rank), strict=True)
    return [max(f for f, _ in ranks) + max(b for _, b in ranks) for ranks in rounds]


def _print_case(
    name: str, labels: list[str], priced: dict[str, float], measured: dict[str, list[float]]
) -> tuple[bool, float]:
    """Prints the case's plans; whether the plan priced cheapest measured cheapest (median over the rounds), and the
    rank correlation of the prices with the medians."""
    from scipy.stats import spearmanr

    median = {label: statistics.median(times) for label, times in measured.items()}
    by_price = sorted(labels, key=lambda label: priced[label])
    by_time = sorted(labels, key=lambda label: median[label])
    print(f"  {name}")
    print(
        f"    {'plan':<20} {'priced ms':>9} {'measured ms':>11} {'quartiles':>11} {'err':>6} {'rank':>4} {'priced':>6}"
    )
    for label in labels:
        low, _, high = statistics.quantiles(measured[label], n=4)
        error = (priced[label] - median[label]) / median[label]
        print(
            f"    {label:<20} {priced[label] * 1e3:>9.2f} {median[label] * 1e3:>11.2f} "
            f"{f'{low * 1e3:.2f}-{high * 1e3:.2f}':>11} {error:>+6.0%} {by_time.index(label) + 1:>4} "
            f"{by_price.index(label) + 1:>6}"
        )
    correlation = float(spearmanr([priced[label] for label in labels], [median[label] for label in labels])[0])
    print(f"    rank correlation of prices and measured times: {correlation:.2f}")
    return by_time[0] == by_price[0], correlation


if __name__ == "__main__":
    main()
