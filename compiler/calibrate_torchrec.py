"""What TorchRec adds to a training step on this machine's ranks, beyond the kernels and collectives gnomon prices:
a cost once a step (`System.embedding_step_s`), one per sharding group (`embedding_group_s`: its host work,
splitting, permuting and bucketizing the ids, its awaitables, and the ranks' waits at its blocking collectives), and
one per byte of pooled embeddings a rank gets back (`embedding_pooled_byte_s`: its copies of them into and out of
the collectives' buffers, forward and backward, and the collectives' thread beside the rank's own).

Two small DLRMs are trained by TorchRec. The first has tiny tables and bags (3 x 16 columns, 64 samples), so that
lookups and pooled embeddings cost little, under seven plans: each of table-wise, row-wise and column-wise alone
(one group each), each pair of them (two groups) and the three at once (three groups). The second has wide bags
(6 x 96 columns, 512 samples: 1.1 MiB of pooled embeddings a rank) under each kind alone, so that the cost per byte
rests on points far from 0. Each step is predicted without TorchRec's costs; what the measured steps exceed the
predictions by is fitted as the three costs, non-negative least squares, the same for every kind (fitted per kind,
the single-group plans' costs moved by up to 3.5 ms between runs here). Two calibrations an hour apart fitted 0.11
and 1.38 ms per MiB, beside 1.86 and 1.41 ms a group: the wide plans' excess over the tiny ones' is about 1 ms of
10-14 ms steps, near what one calibration resolves. (Before the ranks kept their freed memory,
`gnomon.runtime.distributed.ranks`, 16 tables of 128 columns at 512 samples, 4 MiB a rank, took 24-30 ms a step in
TorchRec's sharded bags alone, forward and backward; 13.7-14.8 ms after.) With one plan of three groups against three
of one, the line rested on one point at three groups: the fitted cost per group moved between 0 and 2.8 ms from one
calibration to the next. These models are not `bench/multidevice.py`'s cases, which judge the fit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from gnomon.cost.sharding.plan import KINDS, Placement
from gnomon.cost.topology import System
from gnomon.models import DLRM

__all__ = ["GroupCostFit", "HostCostPoint", "fit_embedding_group_s", "fit_host_costs"]

CALIBRATION_MODEL = partial(DLRM, 13, tables=3, rows=[4000, 2000, 1000], dim=16, pooling=2, bottom=(32,), top=(32,))
BATCH = 64
WIDE_MODEL = partial(
    DLRM, 13, tables=6, rows=[3000, 2500, 2000, 1500, 1200, 800], dim=96, pooling=2, bottom=(32,), top=(32,)
)
WIDE_BATCH = 512


@dataclass(frozen=True)
class HostCostPoint:
    """One plan's step on the calibration's ranks."""

    name: str
    groups: int
    pooled_bytes: int
    """The pooled embeddings its output dists return to a rank."""
    measured_s: float
    predicted_s: float
    """Predicted without TorchRec's costs."""


@dataclass(frozen=True)
class GroupCostFit:
    embedding_group_s: dict[str, float]
    """Per sharding kind, what its group adds to a step."""
    embedding_step_s: float
    """What a step with any group adds once."""
    embedding_pooled_byte_s: float
    """What a byte of pooled embeddings a rank gets back adds."""
    points: tuple[HostCostPoint, ...]


def _placements(tables: int, ranks: int) -> dict[str, list[Placement]]:
    everyone = tuple(range(ranks))
    return {
        "table_wise": [Placement("table_wise", (i % ranks,)) for i in range(tables)],
        "row_wise": [Placement("row_wise", everyone)] * tables,
        "column_wise": [Placement("column_wise", everyone)] * tables,
    }


def _names(tables: int) -> list[str]:
    return [f"embeddings.{i}.weight" for i in range(tables)]


def _plans(ranks: int) -> dict[str, dict[str, Placement]]:
    """The tiny model's: each kind alone, each pair of kinds and all three (one, two and three groups)."""
    names = _names(3)
    placements = _placements(3, ranks)
    plans = {kind: dict(zip(names, placements[kind], strict=True)) for kind in KINDS}
    for first, second in itertools.combinations(KINDS, 2):  # the first kind's tables 0 and 2, the second's 1
        plans[f"{first}+{second}"] = {
            names[0]: placements[first][0], names[1]: placements[second][1], names[2]: placements[first][2],
        }  # fmt: skip
    plans["all three"] = {name: placements[kind][i] for i, (name, kind) in enumerate(zip(names, KINDS, strict=True))}
    return plans


def _wide_plans(ranks: int) -> dict[str, dict[str, Placement]]:
    """The wide model's: each kind alone."""
    names = _names(6)
    return {f"wide {kind}": dict(zip(names, p, strict=True)) for kind, p in _placements(6, ranks).items()}


def fit_embedding_group_s(system: System, ranks: int, quick: bool = False) -> GroupCostFit:
    """TorchRec's costs on `ranks` of `system` (this machine's, without them yet), from its steps."""
    bare = replace(system, embedding_group_s={}, embedding_step_s=0.0, embedding_pooled_byte_s=0.0)
    points = [
        *_points(CALIBRATION_MODEL, BATCH, _plans(ranks), bare, ranks, quick),
        *_points(WIDE_MODEL, WIDE_BATCH, _wide_plans(ranks), bare, ranks, quick),
    ]
    step_s, per_group, per_byte = fit_host_costs(
        [(p.groups, p.pooled_bytes, p.measured_s - p.predicted_s) for p in points]
    )
    return GroupCostFit(dict.fromkeys(KINDS, per_group), step_s, per_byte, tuple(points))


def _points(
    build: Callable[[], DLRM], batch: int, plans: dict[str, dict[str, Placement]], bare: System, ranks: int,
    quick: bool,
) -> list[HostCostPoint]:  # fmt: skip
    """`plans` of the DLRM `build` gives, measured in the same ranks and predicted on `bare`."""
    import torch

    import gnomon
    from gnomon.cost.sharding.step import pooled_bytes, sharded_step
    from gnomon.sharding import dense_step, embedding_tables
    from gnomon.torchrec_steps import measure_sharded

    dlrm = build()
    model = gnomon.with_loss(dlrm, "bce_with_logits")
    dense, indices, offsets = dlrm.example_inputs(batch, seed=1000)
    inputs = (dense, indices, offsets, torch.rand(batch, 1))
    tables = embedding_tables(model, inputs)
    dense_part = dense_step(model, inputs, tables, bare, ranks)
    steps, repeats = (5, 2) if quick else (20, 10)
    timings = measure_sharded(build, batch, list(plans.values()), ranks=ranks, steps=steps, repeats=repeats)
    points: list[HostCostPoint] = []
    for (name, assignment), measured in zip(plans.items(), timings, strict=True):
        predicted = sharded_step(tables, assignment, dense_part, bare, ranks)
        points.append(HostCostPoint(name, len(predicted.groups), pooled_bytes(tables, assignment), measured.step_s,
                                    predicted.step_s))  # fmt: skip
    return points


def fit_host_costs(excess: Sequence[tuple[int, int, float]]) -> tuple[float, float, float]:
    """(once a step, per group, per pooled byte): the non-negative least squares through (groups, pooled bytes,
    seconds the step exceeds its prediction by)."""
    from scipy.optimize import nnls

    # Scaled so that the three columns are alike in size: nnls works in absolute terms.
    scale = max(max(b for _, b, _ in excess), 1)
    terms = np.array([[1.0, g, b / scale] for g, b, _ in excess])
    (once, per_group, per_scaled), _ = nnls(terms, np.array([s for _, _, s in excess]))
    return float(once), float(per_group), float(per_scaled) / scale
