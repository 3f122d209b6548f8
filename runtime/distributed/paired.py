"""Telling interleaved measurements apart: plans timed in the same ranks, one round of each in turn.

Round i of one plan ran beside round i of the others, so the load of that moment hit them alike: the comparison of
two plans resamples their shared rounds together (a paired bootstrap), and a plan's figure is the mean of the faster
half of its steps (`faster_half_mean`). A plan's rounds are aligned by index; a round it sat out is empty.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from gnomon.runtime.distributed.collectives import faster_half_mean

__all__ = ["Rounds", "contenders", "fastest", "ratio", "ratio_interval"]

Rounds = Sequence[Sequence[float]]
"""One plan's steps in each round; an empty round is one it did not run."""

RESAMPLES = 400


def _steps(rounds: Rounds, picked: Sequence[int] | None = None) -> list[float]:
    indices = range(len(rounds)) if picked is None else picked
    return [t for i in indices for t in rounds[i]]


def fastest(plans: Sequence[Rounds]) -> int:
    """The index of the plan whose steps' faster half is fastest among those that ran the most rounds: a plan that
    sat out the later rounds had been told apart from the fastest, and its figure over the earlier rounds alone
    would meet another host (one measurement: a plan dropped after 70 rounds had the lowest figure of all, and was
    3.3% slower than the plan that ran 120 on the rounds both ran)."""
    counts = [sum(1 for steps in rounds if steps) for rounds in plans]
    eligible = [p for p in range(len(plans)) if counts[p] == max(counts)]
    return min(eligible, key=lambda p: faster_half_mean(_steps(plans[p])))


def _shared(plan: Rounds, best: Rounds) -> list[int]:
    return [i for i in range(min(len(plan), len(best))) if plan[i] and best[i]]


def ratio(plan: Rounds, best: Rounds) -> float:
    """`plan`'s figure over `best`'s on the rounds both ran (a plan that sat out later rounds is not compared with
    what the host did then)."""
    shared = _shared(plan, best)
    if not shared:
        return float("nan")
    return faster_half_mean(_steps(plan, shared)) / faster_half_mean(_steps(best, shared))


def ratio_interval(plan: Rounds, best: Rounds, confidence: float = 0.9, seed: int = 0) -> tuple[float, float]:
    """The central `confidence` interval of `ratio(plan, best)`, resampling the rounds both ran."""
    shared = _shared(plan, best)
    if not shared:
        return (0.0, float("inf"))
    generator = random.Random(seed)
    ratios = []
    for _ in range(RESAMPLES):
        picked = [shared[generator.randrange(len(shared))] for _ in shared]
        ratios.append(faster_half_mean(_steps(plan, picked)) / faster_half_mean(_steps(best, picked)))
    ratios.sort()
    tail = (1 - confidence) / 2
    return ratios[int(tail * (RESAMPLES - 1))], ratios[int((1 - tail) * (RESAMPLES - 1))]


def contenders(plans: Sequence[Rounds], confidence: float = 0.9) -> list[int]:
    """The plans this measurement does not tell apart from the fastest (the fastest included): those whose interval
    of their figure over the fastest's reaches 1."""
    best = fastest(plans)
    return [p for p in range(len(plans)) if p == best or ratio_interval(plans[p], plans[best], confidence)[0] <= 1.0]
