"""fbgemm's table-batched embedding kernels (TBE) on a CPU, as TorchRec's fused embedding modules run a shard: the
pooled lookup forward, and the backward with its SGD update fused in.

Each call costs a fixed time (one call looks up all of a sharding group's tables on a device), and each table in
it a time per id looked up (its index handling; the backward's sort of the ids by row and each row's
gradient sum) and each distinct row's fetch from the memory level that holds the rows (in a training step: the
device's shards and the traffic between two steps' lookups), in whole access granules and in random order, at a
share of that level's bandwidth; the backward reads and writes the row. The calibration times each update after
clearing the caches, as a step's dense layers do, so the fit prices its rows from main memory. On this host the
row's level is most of the difference between tables: the same 16k ids into 64-column tables took 0.25 ms of
backward from a 1k-row table and 0.92 ms from a 4M-row one; the pricing of `graph.embedding_bag` and of gnomon's own
sparse update (a stream over every looked-up element) made them equal, and 1.5-5.7x too slow.

The six factors (`Efficiency.tbe_*`) are fitted by `gnomon calibrate` to fbgemm's kernels on tables of its own
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


def tbe_costs(
    lookups: int, distinct: int, row_bytes: int, resident_bytes: int, device: Device
) -> tuple[float, float] | None:
    """(forward, fused backward and update) seconds of one table's shard within a call (`tbe_call_costs` apart), its
    rows fetched from the level that holds `resident_bytes` (what passes through the caches between two reads of
    them); None where the device has no TBE factors."""
    eff = efficiency(device)
    if min(eff.tbe_lookup_s, eff.tbe_read, eff.tbe_update_lookup_s, eff.tbe_update) <= 0:
        return None
    fetch_s = _fetch_s(distinct, row_bytes, resident_bytes, device)
    forward = lookups * eff.tbe_lookup_s + fetch_s / eff.tbe_read
    backward = lookups * eff.tbe_update_lookup_s + 2 * fetch_s / eff.tbe_update
    return forward, backward


def tbe_call_costs(device: Device) -> tuple[float, float]:
    """(forward, backward) seconds one call costs beside its tables: one call per sharding group and device."""
    eff = efficiency(device)
    return eff.tbe_call_s, eff.tbe_update_call_s


def fit_tbe(samples: Sequence[TbeSample], device: Device) -> dict[str, float]:
    """The `tbe_*` factors that price `samples` on `device` best (least squares in relative error, non-negative);
    none if there are too few samples or a fit is degenerate."""
    from scipy.optimize import nnls

    if len(samples) < 3:
        return {}
    # The forwards ran back to back, each table's rows in its own level; each update after the caches were cleared
    # (`gnomon.runtime.calibration.tbe`), its rows in main memory.
    read = [_fetch_s(s.distinct, s.columns * 4, s.rows * s.columns * 4, device) for s in samples]
    evicted = [_fetch_s(s.distinct, s.columns * 4, None, device) for s in samples]
    factors: dict[str, float] = {}
    for call, per_lookup, share, times, fetch, moved in (
        ("tbe_call_s", "tbe_lookup_s", "tbe_read", [s.forward_s for s in samples], read, 1.0),
        ("tbe_update_call_s", "tbe_update_lookup_s", "tbe_update", [s.backward_s for s in samples], evicted, 2.0),
    ):
        weights = np.array([1.0 / t for t in times])
        terms = np.array([[1.0, s.lookups, moved * f] for s, f in zip(samples, fetch, strict=True)])
        (fixed, each, inverse_share), _ = nnls(terms * weights[:, None], np.ones(len(samples)))
        if each <= 0 or inverse_share <= 0:
            return {}
        # A fixed cost the fit puts at 0 is kept a hair above it: a device file holds positive numbers only.
        factors |= {call: max(float(fixed), 1e-9), per_lookup: float(each), share: float(1.0 / inverse_share)}
    return factors
