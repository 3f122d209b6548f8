"""fbgemm's embedding kernels (TorchRec's fused lookups and updates): measured by the calibration, fitted, and pricing
a sharded table's shards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gnomon.cost.devices import Device, load_device
from gnomon.cost.sharding.plan import Placement
from gnomon.cost.sharding.step import DenseStep, sharded_step
from gnomon.cost.sharding.tables import EmbeddingTable, synthetic_ids
from gnomon.cost.tbe import fit_tbe, tbe_call_costs, tbe_costs
from gnomon.cost.topology import load_system
from gnomon.runtime.calibration.tbe import BATCHES, QUICK_TABLES, ROUNDS, TbePoint, measure_tbe

FACTORS = {
    "tbe_call_s": 80e-6, "tbe_lookup_s": 5e-9, "tbe_read": 0.9,
    "tbe_row_s": 2e-9, "tbe_row_outgrown_s": 6e-9,
    "tbe_update_call_s": 60e-6, "tbe_update_lookup_s": 12e-9, "tbe_update": 0.4, "tbe_update_spread": 0.3,
    "tbe_update_row_s": 30e-9, "tbe_update_row_outgrown_s": 10e-9,
    "tbe_lookup_byte_s": 0.04e-9, "tbe_update_lookup_byte_s": 0.09e-9,
}  # fmt: skip
DENSE = DenseStep(step_s=1e-3, compute_s=8e-4, all_reduce_s=1e-4, sync_s=1e-5, local_lookups_s=0.0,
                  parameter_bytes=1 << 20)  # fmt: skip


IN_MAIN_MEMORY = 1 << 40
"""Resident bytes that no cache level holds."""


def _measured_cpu() -> Device:
    device = load_device("generic-cpu")
    return replace(device, efficiency=device.efficiency | FACTORS)


def test_the_fit_recovers_the_factors_that_priced_the_samples() -> None:
    device = _measured_cpu()
    samples = []
    for rows, columns in [
        (800, 128), (3_000, 16), (30_000, 96), (300_000, 16), (2_000_000, 32), (3_000, 96), (1_500_000, 96)
    ]:  # fmt: skip
        for lookups in (4096, 16384):
            distinct = min(rows, lookups // 2)
            # As the calibration measures them: forwards back to back, each table's rows in its own level; each
            # update after the caches were cleared, its rows in main memory.
            forward = tbe_costs(lookups, distinct, 4 * columns, 4 * columns * rows, 4 * columns * rows, device)
            backward = tbe_costs(lookups, distinct, 4 * columns, IN_MAIN_MEMORY, 4 * columns * rows, device)
            assert forward is not None
            assert backward is not None
            call = tbe_call_costs(device)
            samples.append(TbePoint(rows, columns, lookups, distinct, forward[0] + call[0], backward[1] + call[1]))
    fitted = fit_tbe(samples, device)
    assert fitted == pytest.approx(FACTORS, rel=1e-4)


def test_a_fixed_cost_fitted_at_zero_stays_positive_for_the_device_file() -> None:
    """Kernels with no fixed cost (the fit's least squares put it at 0): the device file takes positive numbers
    only, so a `gnomon calibrate` whose quick TBE timings fitted 0 failed to reload its own rank device."""
    device = replace(
        _measured_cpu(), efficiency=_measured_cpu().efficiency | {"tbe_call_s": 0.0, "tbe_update_call_s": 0.0}
    )
    samples = []
    for rows, columns in [(3_000, 16), (300_000, 16), (2_000_000, 32), (30_000, 96)]:
        for lookups in (4096, 16384):
            distinct = min(rows, lookups // 2)
            forward = tbe_costs(lookups, distinct, 4 * columns, 4 * columns * rows, 4 * columns * rows, device)
            backward = tbe_costs(lookups, distinct, 4 * columns, IN_MAIN_MEMORY, 4 * columns * rows, device)
            assert forward is not None
            assert backward is not None
            samples.append(TbePoint(rows, columns, lookups, distinct, forward[0], backward[1]))
    fitted = fit_tbe(samples, device)
    assert 0 < fitted["tbe_call_s"] <= 1e-8
    assert 0 < fitted["tbe_update_call_s"] <= 1e-8
    assert fitted["tbe_lookup_s"] == pytest.approx(FACTORS["tbe_lookup_s"], rel=1e-3)


def test_rows_that_cost_by_their_count_alone_still_fit() -> None:
    """Kernels whose rows cost the same whatever their width (no cost a byte): the fit's byte terms come out 0, and
    the factors must still price the samples, not be dropped as a degenerate fit."""
    device = load_device("generic-cpu")
    samples = []
    for rows, columns in [(3_000, 16), (30_000, 96), (300_000, 16), (2_000_000, 32), (3_000, 96), (1_500_000, 96)]:
        for lookups in (4096, 16384):
            distinct = min(rows, lookups // 2)
            forward = 50e-6 + 5e-9 * lookups + 40e-9 * distinct
            backward = 70e-6 + 12e-9 * lookups + 90e-9 * distinct
            samples.append(TbePoint(rows, columns, lookups, distinct, forward, backward))
    fitted = fit_tbe(samples, device)
    assert fitted
    measured = replace(device, efficiency=device.efficiency | fitted)
    call = tbe_call_costs(measured)
    for s in samples:
        size = 4 * s.columns * s.rows
        forward = tbe_costs(s.lookups, s.distinct, 4 * s.columns, size, size, measured)
        backward = tbe_costs(s.lookups, s.distinct, 4 * s.columns, IN_MAIN_MEMORY, size, measured)
        assert forward is not None
        assert backward is not None
        assert forward[0] + call[0] == pytest.approx(s.forward_s, rel=0.01)
        assert backward[1] + call[1] == pytest.approx(s.backward_s, rel=0.01)


def test_without_the_factors_shards_are_priced_as_graph_ops() -> None:
    assert tbe_costs(1000, 500, 64, 64_000, 64_000, load_device("generic-cpu")) is None
    assert tbe_call_costs(load_device("h100")) == (0.0, 0.0)


def test_a_table_in_dram_costs_more_per_id_than_one_in_cache() -> None:
    device = _measured_cpu()
    small, large = (tbe_costs(16384, 8000, 256, rows * 256, rows * 256, device) for rows in (1_000, 10_000_000))
    assert small is not None
    assert large is not None
    assert large[0] > small[0]
    assert large[1] > small[1]


def test_an_update_from_main_memory_slows_as_its_table_outgrows_the_last_cache() -> None:
    """The same ids and distinct rows, all fetched from main memory: measured here, 315 ns per id from a 24 MB table
    of 128 columns, 471 from 244 MB and 589 from 977 MB. A table within the last cache pays no spread, and each
    doubling beyond it the same: in the forward, each distinct row's address translation alone."""
    device = _measured_cpu()
    last_cache = device.capacity(device.last_cache)
    costs = [
        tbe_costs(8192, 8000, 512, IN_MAIN_MEMORY, size, device)
        for size in (last_cache // 2, last_cache, 2 * last_cache, 4 * last_cache)
    ]
    within, at, twice, four_times = (c for c in costs if c is not None)
    assert within == at
    assert twice[0] - at[0] == pytest.approx(8000 * FACTORS["tbe_row_outgrown_s"])
    assert twice[1] > at[1]
    assert four_times[0] - twice[0] == pytest.approx(twice[0] - at[0])
    assert four_times[1] - twice[1] == pytest.approx(twice[1] - at[1])


def test_every_id_of_a_small_table_costs_by_its_rows_width() -> None:
    """800 rows take 4096 or 16384 ids, every row either way: each id adds its row (forward) and its gradient row
    (update) whatever the distinct rows cost. Measured on a Zen 1 host (2 ranks at once): 16384 ids updated a 1500 x 8
    table in 0.59 ms and a 300 x 128 one in 1.25 ms, about 0.34 ns per column and id."""
    device = _measured_cpu()

    def per_id(columns: int) -> tuple[float, float]:
        few, many = (
            tbe_costs(ids, 800, 4 * columns, IN_MAIN_MEMORY, 800 * 4 * columns, device) for ids in (4096, 16384)
        )
        assert few is not None
        assert many is not None
        return (many[0] - few[0]) / 12288, (many[1] - few[1]) / 12288

    narrow, wide = per_id(16), per_id(128)
    assert narrow[0] == pytest.approx(FACTORS["tbe_lookup_s"] + 64 * FACTORS["tbe_lookup_byte_s"])
    assert wide[0] - narrow[0] == pytest.approx(448 * FACTORS["tbe_lookup_byte_s"])
    assert wide[1] - narrow[1] == pytest.approx(448 * FACTORS["tbe_update_lookup_byte_s"])


def test_a_row_costs_an_access_whatever_its_width() -> None:
    """Column shards fetch every id's row on each device, each half as wide: the bytes alone priced two halves as one
    whole row, where dlrm_wide's column-wise plan measured 11% slower than its table-wise one (a Zen 1 host)."""
    device = _measured_cpu()
    whole = tbe_costs(8192, 8000, 512, IN_MAIN_MEMORY, 1 << 30, device)
    half = tbe_costs(8192, 8000, 256, IN_MAIN_MEMORY, 1 << 29, device)
    assert whole is not None
    assert half is not None
    assert 2 * half[0] > whole[0]
    assert 2 * half[1] > whole[1]


def test_a_groups_kernel_call_is_paid_once_per_device() -> None:
    """Two tables of one group on one device cost one call more than their tables, not two (tables of 12.8 KB,
    which one core's L1 holds together)."""
    system = replace(load_system("2xh100"), device=_measured_cpu(), embedding_group_s={})
    tables = [EmbeddingTable(f"t{i}", 200, 16, 4, 64, synthetic_ids(200, 256, 0.0, seed=0)) for i in range(2)]
    together = {t.name: Placement("table_wise", (0,)) for t in tables}
    one = sharded_step(tables[:1], {"t0": Placement("table_wise", (0,))}, DENSE, system)
    both = sharded_step(tables, together, DENSE, system)
    call = FACTORS["tbe_call_s"] + FACTORS["tbe_update_call_s"]
    per_table = one.embedding_compute_s - call
    assert both.embedding_compute_s == pytest.approx(call + 2 * per_table, rel=1e-6)


def test_the_calibration_times_fbgemms_kernels() -> None:
    points = measure_tbe(quick=True, trials=2, evict_bytes=1 << 20)
    assert [(p.rows, p.columns) for p in points] == [table for table in QUICK_TABLES for _ in BATCHES]
    assert all(p.forward_s > 0 and p.backward_s > 0 and 0 < p.distinct <= p.lookups for p in points)


def test_each_backward_is_timed_after_its_forward_and_the_caches_cleared() -> None:
    """A training step's dense layers run between a lookup and its update: the calibration's backward must not find
    the rows its forward just fetched in cache, nor run without a forward of its own."""
    timed: list[bool] = []

    def recording_timer(call: Callable[[], object], trials: int, before: Callable[[], object] | None = None) -> float:
        for _ in range(trials):
            if before is not None:
                before()
            call()  # a backward without a fresh forward before it would fail: its graph is freed
        timed.append(before is not None)
        return 1e-3

    points = measure_tbe(quick=True, trials=2, evict_bytes=1 << 20, timer=recording_timer)
    # In each round, per table and batch: the forward's timing without a setup, then the backward's after one.
    assert timed == [False, True] * len(points) * ROUNDS
