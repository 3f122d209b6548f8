"""Timing torch.distributed's collectives across local ranks: one spawned process per rank, on 127.0.0.1.

One call's time is the time until every rank has finished it: each timed call starts after a barrier, each
rank times its own part, and the call's time is the largest of the ranks' (an all_reduce MAX of the times,
after the timed calls). The barrier's own skew (ranks leave it a little apart) is in that figure; it is the
price of timing without a shared clock.

Before timing, each rank checks each collective's result once against a reference: a harness that times a
wrong call (a misread API, a backend that drops data) measures nothing.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NoReturn

import torch
import torch.distributed as dist

from gnomon.errors import GnomonError
from gnomon.runtime.distributed.group import process_group, slowest_rank_times
from gnomon.runtime.distributed.ranks import free_port, run_ranks

__all__ = [
    "COLLECTIVES",
    "CollectiveMeasureError",
    "CollectiveTiming",
    "faster_half_mean",
    "faster_half_uncertainty",
    "measure_collectives",
]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

_WARMUP_CALLS = 3
_MOST_ITERATIONS = 2000
_ELEMENT_BYTES = 4  # fp32
# "undefined" is no backend, and "fake" communicates nothing: neither has a cost to measure.
_NOT_MEASURABLE = ("undefined", "fake")


class CollectiveMeasureError(GnomonError):
    """The collectives could not be measured (bad arguments, a rank that died or failed, a run past its timeout)."""


@dataclass(frozen=True)
class CollectiveTiming:
    """One collective's time at one message size on `ranks` local ranks."""

    collective: str
    ranks: int
    message_bytes: int
    """nccl-tests' convention: all_reduce: the tensor each rank reduces; all_gather: the gathered output (ranks x
    each rank's input); reduce_scatter: the input (ranks x output); all_to_all: what each rank sends (= receives)."""
    seconds: float
    """The mean of the faster half of `repeats` medians (`faster_half_mean`; more where the point had not settled),
    taken in rounds over every point measured, each median over at least `iterations` timed calls (more for short
    calls: enough to last `min_median_s`)."""
    spread: float
    """(largest median - smallest) / smallest: how much the host disturbed the measurement."""


def measure_collectives(
    ranks: int,
    sizes: Sequence[int],
    *,
    collectives: Sequence[str] = COLLECTIVES,
    backend: str = "gloo",
    repeats: int = 5,
    until_settled: int = 0,
    settled: float = 0.03,
    iterations: int = 20,
    min_median_s: float = 0.0,
    threads_per_rank: int = 1,
    timeout_s: float = 300.0,
) -> list[CollectiveTiming]:
    """Each collective's time at each message size (in bytes, rounded up to a multiple of 4 x ranks, fp32),
    in that order; sizes or collectives given twice are measured once. `min_median_s` makes each median span that
    long at least: on a shared host, short calls come in bursts of slow ones lasting tens of milliseconds, which a
    median over a few milliseconds of calls does not outvote. After `repeats` rounds, up to `until_settled` more
    go to the points whose figure is not yet `settled` (`faster_half_uncertainty`, relative), in rounds over them.

    Raises CollectiveMeasureError for bad arguments, a rank that fails or dies, or no result within timeout_s;
    the ranks never outlive the call."""
    _validate(ranks, sizes, collectives, backend, repeats, iterations, threads_per_rank, timeout_s)
    if until_settled < 0:
        raise CollectiveMeasureError(f"collective measurement: until_settled must be at least 0, got {until_settled}")
    unit = _ELEMENT_BYTES * ranks
    plan = _Plan(
        ranks=ranks,
        port=free_port(),
        backend=backend,
        collectives=tuple(dict.fromkeys(collectives)),
        message_bytes=tuple(dict.fromkeys(-(-size // unit) * unit for size in sizes)),
        repeats=repeats,
        until_settled=until_settled,
        settled=settled,
        iterations=iterations,
        min_median_s=min_median_s,
        threads_per_rank=threads_per_rank,
        timeout_s=timeout_s,
    )
    return run_ranks(
        _rank_main, plan, ranks, timeout_s=timeout_s, what="collective measurement", error=CollectiveMeasureError
    )


def _validate(
    ranks: int,
    sizes: Sequence[int],
    collectives: Sequence[str],
    backend: str,
    repeats: int,
    iterations: int,
    threads_per_rank: int,
    timeout_s: float,
) -> None:
    def fail(message: str) -> NoReturn:
        raise CollectiveMeasureError(f"collective measurement: {message}")

    if ranks < 2:
        fail(f"ranks must be at least 2, got {ranks}")
    if not sizes:
        fail("no message sizes given")
    if bad_sizes := [size for size in sizes if size <= 0]:
        fail(f"message sizes must be positive, got {bad_sizes[0]}")
    if not collectives:
        fail("no collectives given")
    if unknown := [name for name in collectives if name not in COLLECTIVES]:
        fail(f"unknown collective '{unknown[0]}' (known: {', '.join(COLLECTIVES)})")
    available = [name for name in dist.Backend.backend_list if name not in _NOT_MEASURABLE and _available(name)]
    if backend not in available:
        fail(f"backend '{backend}' is not available in torch.distributed (available: {', '.join(available)})")
    for name, value in (("repeats", repeats), ("iterations", iterations), ("threads_per_rank", threads_per_rank)):
        if value < 1:
            fail(f"{name} must be at least 1, got {value}")
    if timeout_s <= 0:
        fail(f"timeout_s must be positive, got {timeout_s:g}")


def _available(backend: str) -> bool:
    return dist.is_available() and dist.is_backend_available(backend)


@dataclass(frozen=True)
class _Plan:
    """What every rank measures, sent to each spawned process."""

    ranks: int
    port: int
    backend: str
    collectives: tuple[str, ...]
    message_bytes: tuple[int, ...]
    repeats: int
    until_settled: int
    settled: float
    iterations: int
    min_median_s: float
    threads_per_rank: int
    timeout_s: float


def _rank_main(rank: int, plan: _Plan) -> list[CollectiveTiming]:
    """One rank's work, in its own process: its timings (rank 0's are the result)."""
    with process_group(
        rank, plan.ranks, plan.port, timeout_s=plan.timeout_s, threads=plan.threads_per_rank, backend=plan.backend
    ):
        return _measure(rank, plan)


def _measure(rank: int, plan: _Plan) -> list[CollectiveTiming]:
    """Each point (collective, message size) timed in `plan.repeats` rounds over all the points, not in a block of
    its own: a slow spell of the host (seconds, on a shared machine) then reaches one round of several points, not
    every median of one, and `faster_half_mean` leaves it out. Every point's buffers are held throughout: about
    half a GiB a rank for the calibration's sizes up to 64 MiB."""
    for collective in plan.collectives:
        _check(collective, rank, plan.ranks)
    points = [(c, b) for c in plan.collectives for b in plan.message_bytes]
    calls = [_call(collective, message_bytes // _ELEMENT_BYTES, plan.ranks) for collective, message_bytes in points]
    counts = [_iterations(call, plan.iterations, plan.min_median_s) for call in calls]
    medians: list[list[float]] = [[] for _ in points]
    unsettled = list(range(len(points)))
    for done in range(plan.repeats + plan.until_settled):
        if done >= plan.repeats:
            # Every rank holds the same medians (the slowest rank's), so every rank picks the same points.
            unsettled = [p for p in unsettled if faster_half_uncertainty(medians[p]) > plan.settled]
            if not unsettled:
                break
        for p in unsettled:
            calls[p]()  # its buffers back in cache after the other points' traffic, as in a median of calls in a row
            medians[p].append(statistics.median(slowest_rank_times(calls[p], counts[p])))
    return [
        CollectiveTiming(
            collective, plan.ranks, message_bytes, faster_half_mean(found), (max(found) - min(found)) / min(found)
        )
        for (collective, message_bytes), found in zip(points, medians, strict=True)
    ]


def _call(collective: str, elements: int, ranks: int) -> Callable[[], object]:
    """One call of `collective` on a message of `elements` fp32 values (nccl-tests' convention), its buffers
    allocated once."""
    whole = torch.zeros(elements)  # zeros: repeated sums stay zeros, never overflow to inf or slow denormals
    if collective == "all_reduce":
        return partial(dist.all_reduce, whole)
    if collective == "all_gather":
        part = torch.zeros(elements // ranks)
        return partial(dist.all_gather_single, whole, part)
    if collective == "reduce_scatter":
        part = torch.zeros(elements // ranks)
        return partial(dist.reduce_scatter_single, part, whole)
    received = torch.empty(elements)
    return partial(dist.all_to_all_single, received, whole)


def faster_half_mean(medians: Sequence[float]) -> float:
    """The mean of the faster half of `medians` (the faster one of two), or of any timings: the slower half holds
    the host's slow spells, and the mean outvotes the spread within the faster one. Chosen on two calibrations of ten
    rounds on this 2-core VM (28 of 32 points within 10% of each other with the smallest of the first five medians,
    31 with this); judged on two fresh pairs of calibrations: 28 of 32 both times (26 with the smallest of five taken
    point by point)."""
    faster = sorted(medians)[: max(len(medians) // 2, 1)]
    return sum(faster) / len(faster)


def faster_half_uncertainty(medians: Sequence[float], resamples: int = 200) -> float:
    """Half the width of the central 90% interval of `faster_half_mean(medians)` over resamples of the medians,
    relative to it: how far another measurement of the point may land."""
    if len(medians) < 2:
        return math.inf
    generator = random.Random(len(medians))
    figures = sorted(
        faster_half_mean([medians[generator.randrange(len(medians))] for _ in medians]) for _ in range(resamples)
    )
    low, high = figures[int(0.05 * (resamples - 1))], figures[int(0.95 * (resamples - 1))]
    return (high - low) / 2 / faster_half_mean(medians)


def _iterations(call: Callable[[], object], iterations: int, min_median_s: float) -> int:
    """How many calls one median takes: `iterations`, or more where they would not last `min_median_s`; every
    rank gets the same count (from the slowest rank's fastest warm-up call)."""
    warm = torch.full((1,), math.inf, dtype=torch.float64)
    for _ in range(_WARMUP_CALLS):
        dist.barrier()
        start = time.perf_counter()
        call()
        warm[0] = min(float(warm[0]), time.perf_counter() - start)
    dist.all_reduce(warm, op=dist.ReduceOp.MAX)  # every rank must run as many calls: they agree on one count
    return min(_MOST_ITERATIONS, max(iterations, math.ceil(min_median_s / max(float(warm[0]), 1e-6))))


def _check(collective: str, rank: int, ranks: int) -> None:
    """Runs `collective` once on values that tell the ranks apart, and compares the result with its reference."""
    chunk = 3
    ids = torch.arange(ranks, dtype=torch.float32).repeat_interleave(chunk)  # chunk j holds j
    if collective == "all_reduce":
        result, expected = torch.full((chunk,), rank + 1.0), torch.full((chunk,), ranks * (ranks + 1) / 2)
        dist.all_reduce(result)
    elif collective == "all_gather":
        result, expected = torch.empty(ranks * chunk), ids
        dist.all_gather_single(result, torch.full((chunk,), float(rank)))
    elif collective == "reduce_scatter":  # rank r sends chunk j holding j + r; rank j gets ranks*j + sum(r)
        result, expected = torch.empty(chunk), torch.full((chunk,), ranks * rank + ranks * (ranks - 1) / 2)
        dist.reduce_scatter_single(result, ids + rank)
    else:  # rank r sends chunk j holding ranks*r + j; rank j gets chunk r holding ranks*r + j
        result, expected = torch.empty(ranks * chunk), ids * ranks + rank
        dist.all_to_all_single(result, ranks * rank + ids)
    if not torch.equal(result, expected):
        raise CollectiveMeasureError(
            f"collective measurement: {collective} on rank {rank} of {ranks} ({dist.get_backend()}) returned "
            f"{result.tolist()}, expected {expected.tolist()}"
        )
