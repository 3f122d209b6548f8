"""What a generated kernel's schedule changes in its predicted time: the model `gnomon tune` prunes its space with.

`kernel_cost` prices a generated kernel at its kind's efficiency (`Efficiency.generated_conv`, ...), which was
measured with the default schedule, over the threads its schedule allows. A schedule also sets a register tile (a
convolution's `[vectors, positions]`, a matmul's `[rows, columns]`) and so how the work splits into units; this
module scales the compute time by the candidate's issue cycles over the default's:

- a micro-kernel's reduction step issues `positions x vectors` FMAs and loads `vectors` weight vectors plus
  `positions` broadcasts; a core with two FMA ports and two load ports (Skylake-SP and later, Zen 4) takes
  `max(FMAs, loads) / 2` cycles for it, and no fewer than the FMA latency (4 cycles: each accumulator is a chain);
- a tile covers `width x vectors` channels (or columns): channels past the last in the last block, and a
  narrower vector than the machine's, cost as many cycles as real ones;
- the units of work split over the threads (whose count `kernel_cost` prices); the slowest takes ceil(units /
  threads) of them, more than an even share when they do not divide.

Kernels without a register tile (elementwise nests, reductions) change only with their threads, which
`kernel_cost` prices already.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from gnomon.cost.devices import Device
from gnomon.cost.program import kernel_cost
from gnomon.cost.values import static_shape
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import ConvOp

__all__ = ["FMA_LATENCY", "MIN_CONV_UNITS_PER_THREAD", "predicted_s", "tile_cycles"]

FMA_LATENCY = 4
"""Cycles from an FMA to the next FMA on its accumulator."""
MIN_CONV_UNITS_PER_THREAD = 4
"""A generated convolution splits its rows into bands until each thread has this many units (as `kernel_to_linalg.conv`
does)."""
_DEFAULT_CONV_ACCUMULATORS = 12
_DEFAULT_MATMUL_ROWS = 6
_UNROLLED_CHANNELS = 4
_ROW_ACCUMULATORS = 16
"""A channels-last dense kernel's defaults (`conv_nhwc.UNROLLED_CHANNELS`, `conv_nhwc.ROW_ACCUMULATORS`)."""


def tile_cycles(positions: int, vectors: int) -> float:
    """Cycles of one reduction step of a `positions x vectors` register tile (two FMA and two load ports)."""
    return max(positions * vectors / 2, (positions + vectors) / 2, FMA_LATENCY)


def _row_cycles(columns: int, positions: int, vectors: int) -> float:
    """One reduction step over a row of `columns`: whole tiles, then one of the rest."""
    whole, rest = divmod(columns, positions)
    return whole * tile_cycles(positions, vectors) + (tile_cycles(rest, vectors) if rest else 0.0)


def _conv_tile(kernel_func: kernel.FuncOp, conv: ConvOp, channels: int | None = None) -> tuple[int, int, int]:
    """(vectors, positions, width) of a generated convolution's schedule; the default's where it sets no tile, for
    blocks of its `channels` (its output channels unless given)."""
    schedule = kernel_func.schedule
    assert schedule is not None
    width = schedule.vector.data
    tile = ints(schedule.tile)
    if len(tile) == 2:
        return tile[0], tile[1], width
    channels = static_shape(conv.result)[1] if channels is None else channels
    # `conv_rows.block_vectors`: the most vectors (up to 2) that pad the channels least.
    options = [v for v in (2, 1) if v * width >= 16 and v * width % 8 == 0]
    vectors = min(options, key=lambda v: (-(-channels // (v * width)) * v * width - channels, -v))
    return vectors, _DEFAULT_CONV_ACCUMULATORS // vectors, width


def _channels_last_cycles(kernel_func: kernel.FuncOp, conv: ConvOp, lanes: int) -> float:
    """Relative cycles of the slowest thread of a channels-last generated convolution (`conv_nhwc`): its
    micro-kernel over each output row's columns per block of a group's channels (a depthwise tap's loads counted as
    its FMAs: one each)."""
    schedule = kernel_func.schedule
    assert schedule is not None
    width, tile, threads = schedule.vector.data, ints(schedule.tile), max(schedule.threads.data, 1)
    n, rows, columns, channels = static_shape(conv.result)
    depthwise = conv.groups.value.data == channels and static_shape(conv.weight)[1] == 1
    per_group = channels if depthwise else channels // conv.groups.value.data
    if len(tile) == 2:
        vectors, positions = tile
    elif depthwise:
        vectors, positions = 1, 8  # `ChannelsLastPlan.of`
    else:  # `ChannelsLastPlan.of`: one vector for a stem's few input channels; rows in even tiles (`row_positions`)
        vectors, _, width = _conv_tile(kernel_func, conv, per_group)
        vectors = 1 if static_shape(conv.weight)[1] <= _UNROLLED_CHANNELS else vectors
        most = _ROW_ACCUMULATORS // vectors
        positions = -(-columns // -(-columns // most))
    blocks = channels // per_group * -(-per_group // (vectors * width))
    units = n * rows * blocks
    per_unit = _row_cycles(columns, positions, vectors) * max(lanes // width, 1)
    return units * per_unit * _imbalance(units, threads)


def _conv_cycles(kernel_func: kernel.FuncOp, conv: ConvOp, lanes: int) -> float:
    """Relative cycles of the slowest thread of a generated convolution: its producer's micro-kernel, per block."""
    if channels_last(conv):
        return _channels_last_cycles(kernel_func, conv, lanes)
    vectors, positions, width = _conv_tile(kernel_func, conv)
    n, channels, _, columns = static_shape(conv.result)
    last = [op for op in kernel_func.body.block.ops if isinstance(op, ConvOp)][-1]
    out_rows = static_shape(last.result)[2]
    block = vectors * width
    blocks = -(-channels // block)
    schedule = kernel_func.schedule
    assert schedule is not None
    threads = max(schedule.threads.data, 1)
    bands = 1
    while n * blocks * bands < MIN_CONV_UNITS_PER_THREAD * threads and bands * 4 <= out_rows:
        bands *= 2
    units = n * blocks * bands
    # A narrower vector than the machine's issues as many instructions for half the channels.
    per_block = _row_cycles(columns, positions, vectors) * max(lanes // width, 1)
    return n * blocks * per_block * _imbalance(units, threads)


def _matmul_cycles(kernel_func: kernel.FuncOp, matmul: MatmulOp, lanes: int) -> float:
    schedule = kernel_func.schedule
    assert schedule is not None
    width, tile = schedule.vector.data, ints(schedule.tile)
    m, n = static_shape(matmul.lhs)[0], static_shape(matmul.rhs)[1]
    rows = tile[0] if len(tile) == 2 and tile[0] else _DEFAULT_MATMUL_ROWS
    cols = tile[1] if len(tile) == 2 and tile[1] and tile[1] % width == 0 else 2 * width
    units = -(-m // rows)
    threads = max(schedule.threads.data, 1)
    per_unit = -(-n // cols) * tile_cycles(rows, cols // width) * max(lanes // width, 1)
    return units * per_unit * _imbalance(units, threads)


def _imbalance(units: int, threads: int) -> float:
    """The slowest thread's units over an even share."""
    return ceil(units / threads) * threads / units


def _cycles(kernel_func: kernel.FuncOp, lanes: int) -> float | None:
    """Relative issue cycles of the kernel's register tile under its schedule; None for a kernel without one."""
    first = next(iter(kernel_func.body.block.ops), None)
    if isinstance(first, ConvOp):
        return _conv_cycles(kernel_func, first, lanes)
    if isinstance(first, MatmulOp):
        return _matmul_cycles(kernel_func, first, lanes)
    return None


def predicted_s(kernel_func: kernel.FuncOp, default: kernel.FuncOp, device: Device, lanes: int) -> float:
    """One launch of `kernel_func` (a generated kernel under a candidate schedule): `kernel_cost`, its compute time
    scaled by the candidate's register-tile cycles over those of `default` (the same kernel under the schedule
    whose efficiency the cost package knows). `lanes`: f32 lanes of the machine's widest vectors."""
    cost = kernel_cost(kernel_func, device)
    cycles, reference = _cycles(kernel_func, lanes), _cycles(default, lanes)
    if cycles is not None and reference:
        cost = replace(cost, compute_s=cost.compute_s * cycles / reference)
    return cost.predicted_s
