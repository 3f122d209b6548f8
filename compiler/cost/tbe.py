"""fbgemm's table-batched embedding kernels (TBE) on a CPU, as TorchRec's fused embedding modules run a shard: the
pooled lookup forward, and the backward with its SGD update fused in.

Each call costs a fixed time (one call looks up all of a sharding group's tables on a device), and each table in
it a time per id looked up (its index handling; the backward's sort of the ids by row and each row's
gradient sum) and each distinct row's fetch from the memory level that holds the rows (in a training step: the
device's shards and the traffic between two steps' lookups), in whole access granules and in random order, at a
share of that level's bandwidth; the backward reads and writes the row. The calibration times each update after
clearing the caches, as a step's dense layers do, so the fit prices its rows from main memory. The row's level is
most of the difference between tables: the same 16k ids into 64-column tables took 0.25 ms of backward from a 1k-row
table and 0.92 ms from a 4M-row one; the pricing of `graph.embedding_bag` and of gnomon's own sparse update (a stream
over every looked-up element) made them equal, and 1.5-5.7x too slow.

From main memory, an update's rows come slower the larger its table. It visits them in row order: the rows of a
small table likely lie close enough to share pages (their address translations) and DRAM rows, those of a large one
do not. On one host here (one thread, 5120 uniform ids, caches cleared) the update took 315 ns per id at 128 columns
from a 24 MB table, 471 from 244 MB and 589 from 977 MB; at 32 columns 178, 208 and 249 from 6, 61 and 244 MB; with
the tables on 2 MB pages the rise halved. Each doubling of the table beyond the last cache adds a share of the row's
fetch (`Efficiency.tbe_update_spread`, fitted): 5% mean error over those 18 points, 15% with the fetch alone.

A row also costs an access whatever its width, and its address translation more the more its table outgrows the last
cache, in the forward too (`tbe_row_s`, `tbe_row_outgrown_s` and the update's two; each per distinct row). On a
second host (Zen 1, 2 ranks at once) the bytes alone priced a 576 MB table's forward 0.8x its time and a 5M x 32
one's 0.5-0.7x, and column shards (half rows, every id on both devices) as half a table's fetch where dlrm_wide's
column-wise plan measured 11% slower than table-wise. With the row terms, two measurements of the 16 calibration
points fitted and 16 others (8 tables of other shapes, other batches) priced: forward 15-16% mean error on the others
before, 11.5-12.7% after; backward 16.6-16.7% and 13.0-14.4%; the two fits' row factors agreed within 13%.

Every id also adds a row: the forward its table row into the bag's sum, the backward its bag's gradient row into the
row's sum (fbgemm's exact-SGD backward does that in a scalar loop). Per id, then, a cost that grows with the row's
width (`tbe_lookup_byte_s`, `tbe_update_lookup_byte_s`, per byte of the row), which the distinct rows' terms miss
where a small table takes many ids a row. On the Zen 1 host, 2 ranks at once, 16384 ids: the update of a 1500 x 8
table took 0.59 ms, of 500 x 16 0.65, 1000 x 64 0.90, 300 x 128 1.25 (about 0.34 ns per column and id). Fitted
without the width terms, the update of the 300 x 128 table was priced at 0.53-0.65x. Those 12 points (6 small tables,
4096 and 16384 ids, none in the calibration), their updates: 13.1% mean error (largest 47.1%) as fitted before, 15.5%
(35.5%) with an 800 x 128 table (20 ids a row) added to the calibration, 8.4% (17.5%) with it and the width terms;
their forwards 12.5%, 13.7% and 6.4% (largest 9.9%). The 16 points of larger tables above: updates 12.7%, 12.8% and
12.9%, forwards 17.8%, 18.2% and 15.3% (one measurement of each set).

The thirteen factors (`Efficiency.tbe_*`) are fitted by `gnomon calibrate` to fbgemm's kernels on tables of its own
(`gnomon.runtime.calibration.tbe`), least squares in relative error; a device without them (the datasheet GPUs,
whose fbgemm kernels are CUDA's) prices shards as graph ops (`gnomon.cost.sharding.step`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from gnomon.cost.devices import Device
from gnomon.cost.efficiency import efficiency
from gnomon.cost.rates import resident_index

__all__ = ["TbeSample", "fit_tbe", "tbe_call_costs", "tbe_costs"]


class TbeSample(Protocol):
    """One measured call pair (`gnomon.runtime.calibration.tbe.TbePoint`)."""

    @property
    def rows(self) -> int: ...
    @property
    def columns(self) -> int: ...
    @property
    def lookups(self) -> int: ...
    @property
    def distinct(self) -> int: ...
    @property
    def forward_s(self) -> float: ...
    @property
    def backward_s(self) -> float: ...


def _fetch_s(distinct: int, row_bytes: int, resident_bytes: int | None, device: Device) -> float:
    """The distinct rows' granules over the bandwidth of the level that holds `resident_bytes` (None: main memory),
    before the share."""
    granule = efficiency(device).access_bytes
    fetched = math.ceil(row_bytes / granule) * granule * distinct
    level = device.dram if resident_bytes is None else device.memory[resident_index(device, resident_bytes)]
    return fetched / level.bandwidth_bytes_per_s


def _outgrown(shard_bytes: int, device: Device) -> float:
    """How many times the shard's size doubles beyond the device's last cache (0 for a shard it holds)."""
    return max(0.0, math.log2(shard_bytes / device.capacity(device.last_cache)))


def tbe_costs(
    lookups: int, distinct: int, row_bytes: int, resident_bytes: int, shard_bytes: int, device: Device
) -> tuple[float, float] | None:
    """(forward, fused backward and update) seconds of one table's shard of `shard_bytes` within a call
    (`tbe_call_costs` apart), its rows fetched from the level that holds `resident_bytes` (what passes through the
    caches between two reads of them); None where the device has no TBE factors."""
    eff = efficiency(device)
    if min(eff.tbe_lookup_s, eff.tbe_read, eff.tbe_update_lookup_s, eff.tbe_update) <= 0:
        return None
    fetch_s = _fetch_s(distinct, row_bytes, resident_bytes, device)
    outgrown = _outgrown(shard_bytes, device)
    forward = lookups * (eff.tbe_lookup_s + row_bytes * eff.tbe_lookup_byte_s) + fetch_s / eff.tbe_read
    forward += distinct * (eff.tbe_row_s + eff.tbe_row_outgrown_s * outgrown)
    update_fetch_s = fetch_s * (1 + eff.tbe_update_spread * outgrown)
    backward = lookups * (eff.tbe_update_lookup_s + row_bytes * eff.tbe_update_lookup_byte_s)
    backward += 2 * update_fetch_s / eff.tbe_update
    backward += distinct * (eff.tbe_update_row_s + eff.tbe_update_row_outgrown_s * outgrown)
    return forward, backward


def tbe_call_costs(device: Device) -> tuple[float, float]:
    """(forward, backward) seconds one call costs beside its tables: one call per sharding group and device."""
    eff = efficiency(device)
    return eff.tbe_call_s, eff.tbe_update_call_s


def fit_tbe(samples: Sequence[TbeSample], device: Device) -> dict[str, float]:
    """The `tbe_*` factors that price `samples` on `device` best (least squares in relative error, non-negative);
    none if there are too few samples or a fit is degenerate."""
    if len(samples) < 3:
        return {}
    # The forwards ran back to back, each table's rows in its own level; each update after the caches were cleared
    # (`gnomon.runtime.calibration.tbe`), its rows in main memory.
    read = [_fetch_s(s.distinct, s.columns * 4, s.rows * s.columns * 4, device) for s in samples]
    evicted = [_fetch_s(s.distinct, s.columns * 4, None, device) for s in samples]
    outgrown = [_outgrown(s.rows * s.columns * 4, device) for s in samples]
    forward = _nonnegative_fit(
        [s.forward_s for s in samples],
        [
            [1.0, s.lookups, f, s.distinct, s.distinct * o, s.lookups * s.columns * 4]
            for s, f, o in zip(samples, read, outgrown, strict=True)
        ],
    )
    backward = _nonnegative_fit(
        [s.backward_s for s in samples],
        [
            [1.0, s.lookups, 2 * f, 2 * f * o, s.distinct, s.distinct * o, s.lookups * s.columns * 4]
            for s, f, o in zip(samples, evicted, outgrown, strict=True)
        ],
    )
    call, per_lookup, inverse_read, per_row, per_row_outgrown, per_lookup_byte = forward
    (
        update_call, update_per_lookup, inverse_update, spread, update_per_row, update_per_row_outgrown,
        update_per_lookup_byte,
    ) = backward  # fmt: skip
    # Degenerate: an id costs nothing, or a row costs nothing by its bytes and by its count alike.
    row_free = (
        max(inverse_read, per_row, per_row_outgrown) <= 0
        or max(inverse_update, update_per_row, update_per_row_outgrown) <= 0
    )
    if min(per_lookup, update_per_lookup) <= 0 or row_free:
        return {}
    # A term the fit puts at 0 is kept a hair above it: a device file holds positive numbers only (a byte share of
    # `_BYTES_FREE` where the fit puts a row's whole cost on its count).
    return {
        "tbe_call_s": max(call, 1e-9),
        "tbe_lookup_s": per_lookup,
        "tbe_read": 1.0 / inverse_read if inverse_read > 0 else _BYTES_FREE,
        "tbe_row_s": max(per_row, 1e-15),
        "tbe_row_outgrown_s": max(per_row_outgrown, 1e-15),
        "tbe_update_call_s": max(update_call, 1e-9),
        "tbe_update_lookup_s": update_per_lookup,
        "tbe_update": 1.0 / inverse_update if inverse_update > 0 else _BYTES_FREE,
        "tbe_update_spread": max(spread / inverse_update if inverse_update > 0 else spread, 1e-9),
        "tbe_update_row_s": max(update_per_row, 1e-15),
        "tbe_update_row_outgrown_s": max(update_per_row_outgrown, 1e-15),
        "tbe_lookup_byte_s": max(per_lookup_byte, 1e-18),
        "tbe_update_lookup_byte_s": max(update_per_lookup_byte, 1e-18),
    }


_BYTES_FREE = 1e6
"""A share of the bandwidth so large that the rows' bytes cost nothing beside their count."""


def _nonnegative_fit(times: Sequence[float], terms: Sequence[Sequence[float]]) -> list[float]:
    """The non-negative coefficients of `terms` that give `times` best, least squares in relative error."""
    from scipy.optimize import nnls

    weights = np.array([1.0 / t for t in times])
    coefficients, _ = nnls(np.array(terms) * weights[:, None], np.ones(len(times)))
    return [float(c) for c in coefficients]
