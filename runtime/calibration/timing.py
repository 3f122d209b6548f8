"""Timing a call: after one warm-up call, the best or the median of a few."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["best_time", "median_time"]


def _times(call: Callable[[], object], trials: int, before: Callable[[], object] | None = None) -> list[float]:
    """`trials` timed calls after a warm-up one; `before`, if given, runs untimed ahead of each."""
    if before is not None:
        before()
    call()
    times: list[float] = []
    for _ in range(trials):
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def best_time(call: Callable[[], object], trials: int) -> float:
    """For a peak: noise from other processes only ever slows a call down, so the best call is reproducible."""
    return min(_times(call, trials))


def median_time(call: Callable[[], object], trials: int, before: Callable[[], object] | None = None) -> float:
    """For an overhead: what a typical call pays, as each of a model's many calls does; `before` runs untimed ahead
    of each call (what sets up the state the call is timed in)."""
    return statistics.median(_times(call, trials, before))
