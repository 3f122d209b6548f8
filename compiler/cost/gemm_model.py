"""The blocked-GEMM model the analytical cost model prices matrix products with (`gnomon.cost.analytical`).

A library GEMM runs output tiles in waves over the cores, each at a fraction of the core's peak, and moves each
operand block from the innermost memory level that holds it; of the tile sizes a library chooses from, the one that
finishes first is taken. `KernelTime` is the time a kernel model gives, in parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gnomon.cost.devices import Device
from gnomon.cost.efficiency import Efficiency
from gnomon.cost.rates import resident_index, sustained
from gnomon.cost.roofline import GemmShape, OpWork

__all__ = ["KernelTime", "Traffic", "gemm_kernel"]


@dataclass(frozen=True)
class KernelTime:
    """A kernel's modeled time, in parts: its compute, its compulsory traffic, the re-reads that add to it."""

    model: str
    compute_s: float
    memory_s: float
    """The compulsory bytes at the bandwidth of the level they come from."""
    reuse_s: float = 0.0
    """What re-reading operand blocks that miss a cache level adds to `memory_s`."""
    weights_s: float = 0.0
    """Streaming its weights from DRAM, the least `memory_s` can be (0 when they are in cache, or packed)."""


@dataclass(frozen=True)
class Traffic:
    """A GEMM's operands as stored: the A side (m x k), the B side (k x n), and the rest (result, bias)."""

    a_bytes: int
    b_bytes: int
    c_bytes: int
    element_bytes: int

    @property
    def total(self) -> int:
        return self.a_bytes + self.b_bytes + self.c_bytes


def _tile_edges(largest: int, smallest: int) -> list[int]:
    """The tile edges a library chooses from: the largest, halved down to the smallest."""
    edges = [largest]
    while edges[-1] // 2 >= smallest:
        edges.append(edges[-1] // 2)
    return edges


def _gemm_compute_s(
    model: str, shape: GemmShape, tile: tuple[int, int], peak: float, device: Device, eff: Efficiency
) -> float:
    """Tiles run in waves over the cores, each core at its fraction of the peak (`gemm`, `conv`); a partial wave, a
    padded tile and each tile's K overhead all cost time. A CPU BLAS also copies B's panels, and A's, into its
    blocked layout once a call: as much time as `gemm_pack_rows` more rows of A (`gemm_pack_columns` more columns
    of B) would take, which a product of few rows (columns) feels most."""
    conv = model == "conv"
    fraction = eff.conv if conv else eff.gemm
    k_overhead = eff.conv_k_overhead if conv else eff.gemm_k_overhead
    tile_m, tile_n = tile
    tiles = shape.batch * math.ceil(shape.m / tile_m) * math.ceil(shape.n / tile_n)
    waves = math.ceil(tiles / device.cores)
    tiled_s = waves * 2 * tile_m * tile_n * (shape.k + k_overhead) / (peak / device.cores * fraction)
    if model != "gemm" or device.kind != "cpu":
        return tiled_s
    packed = eff.gemm_pack_rows * shape.n + eff.gemm_pack_columns * shape.m
    return tiled_s + 2 * shape.batch * shape.k * packed / (peak * fraction)


def _gemm_memory_s(
    shape: GemmShape, tile: tuple[int, int], traffic: Traffic, device: Device, eff: Efficiency
) -> tuple[float, float]:
    """(compulsory, re-read) time of the blocked-GEMM traffic model.

    The data starts in the innermost level that holds it between kernels. Each level inside that one receives A
    once per block of B's columns and B once per block of A's rows, from the level outside it and at that level's
    bandwidth; the slowest level sets the time. A GPU stages each output tile's operands in its SM's shared memory,
    so there the blocks are the tile; a CPU's caches hold square blocks that fill a third of the level each (and
    a problem that fits a level is read into it once).
    """
    resident = resident_index(device, traffic.total)
    compulsory = traffic.total / device.memory[resident].bandwidth_bytes_per_s
    slowest = compulsory
    for index, level in enumerate(device.memory[:resident]):
        if device.kind == "gpu" and level.per_core:
            block_m, block_n = tile
        elif traffic.total / shape.batch <= level.capacity_bytes:
            block_m, block_n = shape.m, shape.n
        else:
            block_m = block_n = max(1, math.isqrt(level.capacity_bytes // (3 * traffic.element_bytes)))
        moved = (
            traffic.a_bytes * math.ceil(shape.n / min(shape.n, block_n))
            + traffic.b_bytes * math.ceil(shape.m / min(shape.m, block_m))
            + traffic.c_bytes
        )
        slowest = max(slowest, moved / device.memory[index + 1].bandwidth_bytes_per_s)
    factor = sustained(device, eff, resident) / device.memory[resident].bandwidth_bytes_per_s
    return compulsory / factor, (slowest - compulsory) / factor


def gemm_kernel(
    model: str, shapes: Sequence[GemmShape], traffic: Traffic, work: OpWork, device: Device, eff: Efficiency
) -> KernelTime:
    """Like a library's heuristic, take the tile that finishes first: big tiles re-read less, but smaller ones
    keep more cores busy on a small problem."""
    peak = device.peak(work.peak_key)
    best: KernelTime | None = None
    for tile_m in _tile_edges(eff.gemm_tile_m, eff.gemm_min_tile):
        for tile_n in _tile_edges(eff.gemm_tile_n, eff.gemm_min_tile):
            tile = (tile_m, tile_n)
            compute_s = sum(_gemm_compute_s(model, shape, tile, peak, device, eff) for shape in shapes)
            memory_s, reuse_s = _gemm_memory_s(shapes[0], tile, traffic, device, eff)
            kernel = KernelTime(model, compute_s, memory_s, reuse_s)
            if best is None or _rank(kernel) < _rank(best):
                best = kernel
    assert best is not None  # there is at least one tile edge per dim
    return best


def _rank(kernel: KernelTime) -> tuple[float, float]:
    """Faster first; of equally fast tiles, the one that moves less."""
    traffic_s = kernel.memory_s + kernel.reuse_s
    return max(kernel.compute_s, traffic_s), traffic_s
