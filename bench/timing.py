"""What the benchmarks share to time a call: the smallest of several medians, and their spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(run: Callable[[], object], repeats: int, calls: int) -> tuple[float, float]:
    """The smallest of `repeats` medians of `calls` timed calls, and their spread (max - min), in seconds."""
    medians = []
    for _ in range(repeats):
        times = []
        for _ in range(calls):
            start = time.perf_counter_ns()
            run()
            times.append(time.perf_counter_ns() - start)
        medians.append(statistics.median(times) * 1e-9)
    return min(medians), max(medians) - min(medians)
