"""fbgemm's CPU table-batched embedding kernels (TBE), as TorchRec's fused embedding modules run them: a pooled
lookup forward and the backward with its exact SGD update fused in, on one table at a time, over tables that live in
each memory level. `gnomon.cost.lookups.fit_tbe` turns the points into the device's `tbe_*` factors, which price a
sharded table's shards (`gnomon.cost.sharding.step`).

The tables are the calibration's own (none is a bench case's shape): rows from 3k to 2M, 16 to 96 columns, ids drawn
uniformly, two batch sizes (so that the cost per lookup separates from the cost per distinct row). Measured on
torch's threads; ranks (`gnomon.calibrate_ranks`) run each call together, as a sharded step's ranks do (two ranks
alone on this host's cores ran the same backward 1.5-2.3x slower than one: they share the last cache and DRAM). Needs
TorchRec's fbgemm (`gnomon[torchrec]`), else nothing is measured.

The backward is timed as a training step runs it: its forward first, then a stream over twice the last cache
(`evict_bytes`), as the step's dense layers and collectives move data between the lookup and the update. Right after
its forward, an update finds the rows that forward fetched still in cache: dlrm_wide's shards (bench/sharded_cases.py,
one thread alone) updated in 1.05-1.6 ms so, in 2.9-3.6 ms after a 64 MB stream, and in 2.6-3.4 ms within TorchRec's
steps (torch.profiler, both ranks).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gnomon.runtime.calibration.timing import median_time

__all__ = ["QUICK_TABLES", "TBE_TABLES", "TbePoint", "measure_tbe"]

TBE_TABLES: tuple[tuple[int, int], ...] = (
    (3_000, 16), (3_000, 96), (30_000, 16), (30_000, 96), (300_000, 16), (300_000, 96), (2_000_000, 32),
)  # fmt: skip
"""(rows, columns) of the tables measured: from L2-sized to ten times the last cache."""

QUICK_TABLES: tuple[tuple[int, int], ...] = ((3_000, 16), (30_000, 96), (300_000, 16))
"""A quick calibration's (for tests): up to 20 MB."""

POOLING = 8
BATCHES = (512, 2048)
ID_SETS = 8
"""Batches of ids per table, looked up in turn."""


@dataclass(frozen=True)
class TbePoint:
    rows: int
    columns: int
    lookups: int
    distinct: int
    forward_s: float
    backward_s: float
    """The backward pass with its fused SGD update, the caches cleared since its forward."""


class Timer(Protocol):
    """`(call, trials, before) -> seconds` a call takes, `before` run untimed ahead of each call."""

    def __call__(
        self, call: Callable[[], object], trials: int, before: Callable[[], object] | None = None
    ) -> float: ...


MEDIANS = 3
"""Each figure is the smallest of this many medians: other tenants only ever slow a round (three rank calibrations
that took one median each fitted the update's share at 0.63, 0.30 and 0.26)."""


def measure_tbe(quick: bool, trials: int, evict_bytes: int, timer: Timer = median_time) -> list[TbePoint]:
    """Each table's forward and fused backward, timed by `timer` over `trials` calls (by default the median; ranks
    time each call on all ranks at once), the smallest of `MEDIANS` such figures, each backward after a stream over
    `evict_bytes` (twice the last cache: see above); none where fbgemm is not installed."""
    try:
        from fbgemm_gpu.split_embedding_configs import EmbOptimType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )
    except ImportError:
        return []
    import torch

    evict = torch.zeros(max(evict_bytes // 4, 1))
    points: list[TbePoint] = []
    for rows, columns in QUICK_TABLES if quick else TBE_TABLES:
        kernel = SplitTableBatchedEmbeddingBagsCodegen(
            [(rows, columns, EmbeddingLocation.HOST, ComputeDevice.CPU)],
            optimizer=EmbOptimType.EXACT_SGD,
            learning_rate=1e-6,
            pooling_mode=PoolingMode.SUM,
        )
        points += [_timed(kernel, rows, columns, batch, trials, timer, evict) for batch in BATCHES]
    return points


def _timed(kernel: Any, rows: int, columns: int, batch: int, trials: int, timer: Timer, evict: Any) -> TbePoint:
    """Each call looks up ids it has not looked up lately (`ID_SETS` batches in turn), as a training step's new batch
    does: repeating one batch's ids kept its rows in the last cache, and four tables of 1k-500k rows looked up 1.9x
    (forward) and 1.5x (update) faster than with new ids. The backward runs on its own forward's output, after
    `evict` (a tensor as large as the caches to clear) was streamed through."""
    import torch

    generator = torch.Generator().manual_seed(rows + batch)
    batches = [torch.randint(0, rows, (batch * POOLING,), generator=generator) for _ in range(ID_SETS)]
    offsets = torch.arange(0, batch * POOLING + 1, POOLING)
    gradient = torch.ones_like(kernel(batches[0], offsets))
    turn = itertools.count()
    looked_up: list[Any] = []

    def forward_and_evict() -> None:
        looked_up[:] = [kernel(batches[next(turn) % ID_SETS], offsets)]
        evict.add_(1.0)

    forward_s = min(timer(lambda: kernel(batches[next(turn) % ID_SETS], offsets), trials) for _ in range(MEDIANS))
    backward_s = min(timer(lambda: looked_up[0].backward(gradient), trials, forward_and_evict) for _ in range(MEDIANS))
    distinct = round(statistics.fmean(int(ids.unique().numel()) for ids in batches))
    return TbePoint(rows, columns, batch * POOLING, distinct, forward_s, backward_s)
