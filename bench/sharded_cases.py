"""The sharded DLRM cases of `bench/multidevice.py`: DLRM-style models with tables of mixed sizes, each rank's
batch 128 to 1024, ids uniform or from a power law (hot rows); and the DLRM benchmark's configurations (Criteo
Kaggle and Criteo Terabyte, as the MLPerf DLRM reference and TorchRec's DLRM example size them) for the datasheet
systems. Factories are module-level partials, so the spawned ranks can rebuild the same model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from gnomon.models import DLRM


@dataclass(frozen=True)
class ShardedCase:
    build: partial[DLRM]
    batch: int
    """Samples per rank."""
    zipf: float
    """The ids' power-law exponent (0: uniform)."""


SHARDED: dict[str, ShardedCase] = {
    "dlrm_mixed": ShardedCase(
        partial(DLRM, 13, tables=4, rows=[200_000, 50_000, 10_000, 1_000], dim=64, pooling=16), 512, 0.0),
    "dlrm_hot": ShardedCase(
        partial(DLRM, 13, tables=8, rows=[500_000, 200_000, 100_000, 50_000, 20_000, 5_000, 1_000, 100], dim=64,
                pooling=8, bottom=(128,), top=(128,)), 512, 1.05),
    "dlrm_onehot": ShardedCase(
        partial(DLRM, 13, tables=6, rows=[1_000_000, 300_000, 30_000, 3_000, 300, 30], dim=16, pooling=1,
                bottom=(128, 64), top=(128, 64)), 1024, 0.0),
    "dlrm_multihot": ShardedCase(
        partial(DLRM, 13, tables=12, rows=[100_000] * 3 + [10_000] * 9, dim=32, pooling=20), 128, 1.2),
    "dlrm_wide": ShardedCase(
        partial(DLRM, 13, tables=4, rows=[1_000_000, 100_000, 100_000, 10_000], dim=128, pooling=10,
                bottom=(256,), top=(256, 128)), 256, 0.0),
}  # fmt: skip
"""Sharded cases measured on this machine's ranks: model, per-rank batch, id distribution."""


@dataclass(frozen=True)
class BenchmarkConfig:
    """A DLRM benchmark configuration, too large to build here: its tables as row counts, its MLPs built."""

    rows: tuple[int, ...]
    dim: int
    pooling: tuple[int, ...]
    bottom: tuple[int, ...]
    top: tuple[int, ...]
    global_batch: int
    zipf: float


CRITEO_KAGGLE_ROWS = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992, 5461306, 10, 5652,
    2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip
"""The 26 categorical features' distinct values in Criteo Kaggle (the DLRM reference's table sizes)."""

CRITEO_TERABYTE_ROWS = (
    40_000_000, 39_060, 17_295, 7_424, 20_265, 3, 7_122, 1_543, 63, 40_000_000, 3_067_956, 405_282, 10, 2_209,
    11_938, 155, 4, 976, 14, 40_000_000, 40_000_000, 40_000_000, 590_152, 12_973, 108, 36,
)  # fmt: skip
"""Criteo Terabyte's tables capped at 40M rows, as the MLPerf DLRM reference and TorchRec's example use them."""

MULTI_HOT_POOLING = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)
"""The multi-hot Criteo dataset's ids per sample (MLPerf DLRM-DCNv2)."""

BENCHMARK: dict[str, BenchmarkConfig] = {
    "criteo_kaggle": BenchmarkConfig(CRITEO_KAGGLE_ROWS, 16, (1,) * 26, (512, 256, 64), (512, 256), 16_384, 1.05),
    "criteo_terabyte": BenchmarkConfig(
        CRITEO_TERABYTE_ROWS, 128, (1,) * 26, (512, 256), (1024, 1024, 512, 256), 65_536, 1.05),
    "criteo_multihot": BenchmarkConfig(
        CRITEO_TERABYTE_ROWS, 128, MULTI_HOT_POOLING, (512, 256), (1024, 1024, 512, 256), 65_536, 1.05),
}  # fmt: skip
"""The datasheet configurations. The Criteo ids' distribution is not public as a parameter: a power law of exponent
1.05 stands for its hot rows (an assumption, said where printed)."""
