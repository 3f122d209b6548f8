"""fbgemm's CPU table-batched embedding kernels (TBE), as TorchRec's fused embedding modules run them: a pooled
lookup forward and the backward with its exact SGD update fused in, on one table at a time, over tables that live in
each memory level. `gnomon.cost.tbe.fit_tbe` turns the points into the device's `tbe_*` factors, which price a
sharded table's shards (`gnomon.cost.sharding.step`).

The tables are the calibration's own (none is a bench case's shape): rows from 800 to 2M, 16 to 128 columns, ids drawn
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
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gnomon.runtime.calibration.timing import median_time

__all__ = ["QUICK_TABLES", "ROUNDS", "TBE_TABLES", "TbePoint", "measure_tbe"]

TBE_TABLES: tuple[tuple[int, int], ...] = (
    (800, 128), (4_000, 16), (3_000, 96), (40_000, 16), (30_000, 96), (400_000, 16), (300_000, 96), (2_000_000, 32),
    (1_500_000, 96),
)  # fmt: skip
"""(rows, columns) of the tables measured: from L2-sized to 18 times the last cache (576 MB), three sizes beyond it,
where the update slows as the table grows (`Efficiency.tbe_update_spread`); the 800-row one takes 5 and 20 ids a
row, where each id's work by the row's width shows (`Efficiency.tbe_update_lookup_byte_s`). Not the bench's tables:
dlrm_onehot's 16-column tables of 3k, 30k and 300k rows were measured here until 2026-12-07."""

QUICK_TABLES: tuple[tuple[int, int], ...] = ((800, 128), (4_000, 16), (30_000, 96), (400_000, 16))
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


ROUNDS = 7
"""Each figure is the smallest of this many medians, taken in rounds over every table and batch: other tenants only
ever slow a round, and a slow spell of the host (seconds) then reaches one median of several points, not every median
of one. The factors still move between calibrations on a shared host: three rank calibrations that took one median
each fitted the update's share at 0.63, 0.30 and 0.26; two that took three in a row, table by table, fitted its
growth beyond the last cache at 0.53 and 0.21, and three in rounds at 0.30, 0.13 and 0.25."""


def measure_tbe(quick: bool, trials: int, evict_bytes: int, timer: Timer = median_time) -> list[TbePoint]:
    """Each table's forward and fused backward, timed by `timer` over `trials` calls (by default the median; ranks
    time each call on all ranks at once), the smallest of `ROUNDS` such figures, each backward after a stream over
    `evict_bytes` (twice the last cache: see above); none where fbgemm is not installed. Every table is held
    throughout: about 1 GB for the full set."""
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
    calls: list[_Calls] = []
    for rows, columns in QUICK_TABLES if quick else TBE_TABLES:
        kernel = SplitTableBatchedEmbeddingBagsCodegen(
            [(rows, columns, EmbeddingLocation.HOST, ComputeDevice.CPU)],
            optimizer=EmbOptimType.EXACT_SGD,
            learning_rate=1e-6,
            pooling_mode=PoolingMode.SUM,
        )
        calls += [_Calls(kernel, rows, columns, batch, evict) for batch in BATCHES]
    forward_s = [math.inf] * len(calls)
    backward_s = [math.inf] * len(calls)
    for _ in range(ROUNDS):
        for index, call in enumerate(calls):
            forward_s[index] = min(forward_s[index], timer(call.forward, trials))
            backward_s[index] = min(backward_s[index], timer(call.backward, trials, call.forward_and_evict))
    return [
        TbePoint(call.rows, call.columns, call.lookups, call.distinct, forward, backward)
        for call, forward, backward in zip(calls, forward_s, backward_s, strict=True)
    ]


class _Calls:
    """One table's calls at one batch size. Each call looks up ids it has not looked up lately (`ID_SETS` batches in
    turn), as a training step's new batch does: repeating one batch's ids kept its rows in the last cache, and four
    tables of 1k-500k rows looked up 1.9x (forward) and 1.5x (update) faster than with new ids. The backward runs on
    its own forward's output, after `evict` (a tensor as large as the caches to clear) was streamed through."""

    def __init__(self, kernel: Any, rows: int, columns: int, batch: int, evict: Any) -> None:
        import torch

        generator = torch.Generator().manual_seed(rows + batch)
        self.kernel, self.rows, self.columns, self.lookups, self.evict = kernel, rows, columns, batch * POOLING, evict
        self.batches = [torch.randint(0, rows, (self.lookups,), generator=generator) for _ in range(ID_SETS)]
        self.distinct = round(statistics.fmean(int(ids.unique().numel()) for ids in self.batches))
        self.offsets = torch.arange(0, self.lookups + 1, POOLING)
        self.turn = itertools.count()
        self.gradient = torch.ones_like(self.forward())
        self.looked_up: Any = None

    def forward(self) -> Any:
        return self.kernel(self.batches[next(self.turn) % ID_SETS], self.offsets)

    def forward_and_evict(self) -> None:
        self.looked_up = self.forward()
        self.evict.add_(1.0)

    def backward(self) -> None:
        self.looked_up.backward(self.gradient)
