"""What each of TorchRec's sharding groups adds to a training step on this machine's ranks, beyond the kernels and
collectives gnomon prices (`System.embedding_group_s`): its host work (splitting, permuting and bucketizing the ids,
its awaitables) and the ranks' waits at its blocking collectives.

A small DLRM (tiny tables, so that lookups cost little) is trained by TorchRec under seven plans, each of
table-wise, row-wise and column-wise alone (one group each), each pair of them (two groups) and the three at once
(three groups), measured in the same ranks with their rounds interleaved, and each step is predicted without the
group cost: what the measured steps exceed the predictions by is fitted as a cost once a step plus one per group,
the same for every kind (fitted per kind, the single-group plans' costs moved by up to 3.5 ms between runs here).
One cost per group through 0 left one-group plans 1-1.5 ms short (one calibration: 3.4-4.3 ms over one group, 7.7
ms over three). With one plan of three groups against three of one, the line rested on one point at three groups:
the fitted cost per group moved between 0 and 2.8 ms from one calibration to the next. These models are not
`bench/multidevice.py`'s cases, which judge the fit.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from functools import partial

from gnomon.cost.sharding.plan import KINDS, Placement
from gnomon.cost.topology import System
from gnomon.models import DLRM

__all__ = ["GroupCostFit", "fit_embedding_group_s", "fit_step_and_group"]

CALIBRATION_MODEL = partial(DLRM, 13, tables=3, rows=[4000, 2000, 1000], dim=16, pooling=2, bottom=(32,), top=(32,))
BATCH = 64
_NAMES = tuple(f"embeddings.{i}.weight" for i in range(3))


@dataclass(frozen=True)
class GroupCostFit:
    embedding_group_s: dict[str, float]
    """Per sharding kind, what its group adds to a step."""
    embedding_step_s: float
    """What a step with any group adds once."""
    points: tuple[tuple[str, int, float, float], ...]
    """Per plan: its name, its groups, the measured step and the step predicted without the group cost."""


def _plans(ranks: int) -> dict[str, dict[str, Placement]]:
    """Each kind alone, each pair of kinds and all three: one, two and three groups."""
    everyone = tuple(range(ranks))
    placements = {
        "table_wise": [Placement("table_wise", (i % ranks,)) for i in range(len(_NAMES))],
        "row_wise": [Placement("row_wise", everyone)] * len(_NAMES),
        "column_wise": [Placement("column_wise", everyone)] * len(_NAMES),
    }
    plans = {kind: dict(zip(_NAMES, placements[kind], strict=True)) for kind in KINDS}
    for first, second in itertools.combinations(KINDS, 2):  # the first kind's tables 0 and 2, the second's 1
        plans[f"{first}+{second}"] = {
            _NAMES[0]: placements[first][0], _NAMES[1]: placements[second][1], _NAMES[2]: placements[first][2],
        }  # fmt: skip
    plans["all three"] = {name: placements[kind][i] for i, (name, kind) in enumerate(zip(_NAMES, KINDS, strict=True))}
    return plans


def fit_embedding_group_s(system: System, ranks: int, quick: bool = False) -> GroupCostFit:
    """The group cost on `ranks` of `system` (this machine's, without the group cost yet), from TorchRec's steps."""
    import torch

    import gnomon
    from gnomon.cost.sharding.step import sharded_step
    from gnomon.sharding import dense_step, embedding_tables
    from gnomon.torchrec_steps import measure_sharded

    bare = replace(system, embedding_group_s={})
    dlrm = CALIBRATION_MODEL()
    model = gnomon.with_loss(dlrm, "bce_with_logits")
    dense, indices, offsets = dlrm.example_inputs(BATCH, seed=1000)
    inputs = (dense, indices, offsets, torch.rand(BATCH, 1))
    tables = embedding_tables(model, inputs)
    dense_part = dense_step(model, inputs, tables, bare, ranks)
    plans = _plans(ranks)
    steps, repeats = (5, 2) if quick else (20, 10)
    timings = measure_sharded(CALIBRATION_MODEL, BATCH, list(plans.values()), ranks=ranks, steps=steps,
                              repeats=repeats)  # fmt: skip
    points: list[tuple[str, int, float, float]] = []
    for (name, assignment), measured in zip(plans.items(), timings, strict=True):
        predicted = sharded_step(tables, assignment, dense_part, bare, ranks)
        points.append((name, len(predicted.groups), measured.step_s, predicted.step_s))
    step_s, per_group = fit_step_and_group([(groups, step - predicted) for _, groups, step, predicted in points])
    return GroupCostFit(dict.fromkeys(KINDS, per_group), step_s, tuple(points))


def fit_step_and_group(excess: list[tuple[int, float]]) -> tuple[float, float]:
    """(once a step, per group): the least-squares line through (groups, seconds the step exceeds its prediction
    by), neither part below 0 (where one would be, the other alone is fitted)."""
    n = len(excess)
    mean_g = sum(g for g, _ in excess) / n
    mean_s = sum(s for _, s in excess) / n
    spread = sum((g - mean_g) ** 2 for g, _ in excess)
    per_group = sum((g - mean_g) * (s - mean_s) for g, s in excess) / spread if spread else 0.0
    once = mean_s - per_group * mean_g
    if per_group < 0:
        return max(0.0, mean_s), 0.0
    if once < 0:
        return 0.0, max(0.0, sum(g * s for g, s in excess) / sum(g * g for g, _ in excess))
    return once, per_group
