"""A generated f32 2-D convolution, and a depthwise convolution fused after it, over a line buffer.

The kernel is `conv (groups 1) -> elementwise ops [-> depthwise conv -> elementwise ops]`, NCHW in and out. The
output channels split into blocks of one or two vectors (`conv_rows.block_vectors`); a unit of work is one image,
one channel block and one band of output rows, and a call's parts share the units out, bands innermost. For one
unit:

- the producer's weights for the block are packed `[k][channel]`, so a vector of channels loads at once (or read
  from a buffer that holds every block's packed at once, `packing`, which the runtime fills once where the weights
  are a program constant: packing per unit took a third of a late MnasNet layer's time), and its bias (and the
  depthwise conv's) starts the accumulators;
- each producer row the band needs is computed once, in order, into a ring of `span` rows (the depthwise window's
  height) laid out `[column][channel]`, with the depthwise conv's left and right padding as zero columns and one
  zero row standing for the rows above and below the image: the intermediate feature map lives in the ring, in
  L1 and L2, and never goes to DRAM (what made the seed of issue 16 2.09x faster than oneDNN-backed PyTorch);
- a producer row is a register-blocked micro-kernel, `positions` columns x `block` channels of accumulators (the
  schedule's `tile = [vectors, positions]` where set, else 12 accumulators over `block_vectors`), one
  broadcast of the input and one FMA per accumulator per reduction step; a 1x1 stride-1 producer reads its input
  row in place, any other reads an im2col row built for it (zeros for padding);
- the first elementwise ops run over the row in the ring; the depthwise conv reads the ring with vectors over
  channels (unit-stride loads, whatever its stride and dilation), `columns` output columns at a time;
- the second elementwise ops run over the output row, which is then stored transposed back to NCHW.

Without a depthwise conv, the producer's row goes through its elementwise ops and is stored. Channels past the
last in the last block compute from the last channel's weights and are never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Operation, SSAValue

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.nn import ConvOp
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.conv_nhwc import channels_last_plan
from gnomon.passes.kernel_to_linalg.conv_nhwc_dense import DenseKernel
from gnomon.passes.kernel_to_linalg.conv_nhwc_depthwise import DepthwiseKernel
from gnomon.passes.kernel_to_linalg.conv_rows import SPARE, ConvChain, Packing, Point, RowEmitter, block_tile
from gnomon.passes.kernel_to_linalg.matmul import for_loop
from gnomon.passes.kernel_to_linalg.nest import Nest, shape_of
from gnomon.passes.kernel_to_linalg.support import CodegenError, is_depthwise

index = IndexType()

MAX_UNITS_PER_THREAD = 4
"""Bands of rows are considered until each thread has this many units (`band_count`)."""


def band_count(units: int, threads: int, rows: int, stride: int, span: int) -> int:
    """Bands of `rows` output rows per (image, channel block), of which there are `units`: the count, a power of two,
    whose units finish first on `threads`, `ceil(units / threads)` rounds of a band's producer rows each: its output
    rows times the depthwise conv's `stride` and the `span - stride` rows of the window's overlap, which every band
    recomputes (for a 224x224 stem's 112 rows in 8 bands, 14% more producer rows: 214 against 201 us in 2). A tie
    takes more bands: more units balance better when a core is busy with something else."""
    overlap = max(span - stride, 0)
    best, best_rounds = 1, float("inf")
    bands = 1
    while True:
        band_rows = -(-rows // bands) * stride + overlap
        rounds = -(-units * bands // threads) * band_rows
        if rounds <= best_rounds:
            best, best_rounds = bands, rounds
        if units * bands >= MAX_UNITS_PER_THREAD * threads or bands * 4 > rows:
            return best
        bands *= 2


def _band_rows(b: ScalarBuilder, band: SSAValue, bands: int, rows: int) -> tuple[SSAValue, SSAValue]:
    """[begin, end) of output rows in `band` of `bands`."""

    def bound(k: SSAValue) -> SSAValue:
        return b.emit(arith.DivUIOp(b.emit(arith.MuliOp(k, b.const(rows, index))), b.const(bands, index)))

    return bound(band), bound(b.emit(arith.AddiOp(band, b.const(1, index))))


@dataclass(frozen=True)
class _Ring:
    """The line buffer of producer rows the depthwise convolution reads, and the buffers of its own row."""

    ring: SSAValue
    """`[span + 1][padded columns][block]`: row y in slot y % span, slot `span` all zeros."""
    flat: SSAValue
    packed: SSAValue
    bias: SSAValue
    out_row: SSAValue
    """`[output columns][block]`, then stored transposed."""
    flat_out_row: SSAValue


class _ConvKernel:
    """Emits one generated convolution kernel: its units of work, split over the call's parts."""

    def __init__(
        self,
        nest: Nest,
        kernel_op: kernel.FuncOp,
        ops: Sequence[Operation],
        output: SSAValue,
        sources: dict[SSAValue, SSAValue],
        prepacked: SSAValue | None = None,
    ):
        name = kernel_op.sym_name.data
        self.chain = ConvChain.of(name, ops)
        schedule = kernel_op.schedule
        assert schedule is not None
        self.nest = nest
        self.output = output
        b = nest.b
        self.e = e = RowEmitter(b, self.chain, sources, schedule.vector.data, ints(schedule.tile))
        self.blocks = -(-e.channels // e.block)
        threads = max(schedule.threads.data, 1)
        dw = e.dw
        stride, span = (dw.stride[0], dw.span) if dw is not None else (1, 1)
        self.bands = band_count(e.n * self.blocks, threads, e.out_rows, stride, span)
        self.units = e.n * self.blocks * self.bands
        # The producer's weights packed for every block (`packing`), or this unit's block packed on the stack.
        self.prepacked = prepacked is not None
        self.packed = prepacked if prepacked is not None else e.alloc([e.reduction, e.block])
        self.bias = e.alloc([e.block])
        self.columns = e.alloc([e.reduction, e.cols]) if not e.in_place else None
        self.pl = dw.pads[1] if dw is not None else 0
        self.ring_cols = e.cols + (dw.pads[1] + dw.pads[3] if dw is not None else 0)
        span = dw.span if dw is not None else 0
        self.buffer = e.alloc([span + 1, self.ring_cols + SPARE, e.block])
        self.flat_buffer = e.flat(b, self.buffer)
        self.ring: _Ring | None = None
        if dw is not None:
            e.zero(b, self.buffer, [span + 1, self.ring_cols + SPARE, e.block])
            out_row = e.alloc([e.out_cols + SPARE, e.block])
            packed = e.alloc([dw.kernel[0] * dw.kernel[1], e.block])
            self.ring = _Ring(self.buffer, self.flat_buffer, packed, e.alloc([e.block]), out_row, e.flat(b, out_row))

    def emit(self) -> None:
        b = self.nest.b
        begin, end = self.nest.thread_range(self.units, 1)
        for_loop(b, begin, end, 1, self.unit)
        buffers = [self.bias, self.buffer, *([self.columns] if self.columns is not None else [])]
        if not self.prepacked:
            buffers.append(self.packed)
        if self.ring is not None:
            buffers += [self.ring.packed, self.ring.bias, self.ring.out_row]
        for buffer in buffers:
            b.insert(memref.DeallocOp.get(buffer))

    @property
    def flops(self) -> int:
        e = self.e
        flops = e.n * e.channels * e.rows * e.cols * e.reduction
        if e.dw is not None:
            flops += e.n * e.channels * e.out_rows * e.out_cols * e.dw.kernel[0] * e.dw.kernel[1]
        return flops

    def unit(self, b: ScalarBuilder, u: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
        """One image, channel block and band of rows: `u` counts bands fastest, then blocks, then images."""
        e, chain = self.e, self.chain
        n = b.emit(arith.DivUIOp(u, b.const(self.blocks * self.bands, index)))
        block = b.emit(arith.RemUIOp(b.emit(arith.DivUIOp(u, b.const(self.bands, index))), b.const(self.blocks, index)))
        band = b.emit(arith.RemUIOp(u, b.const(self.bands, index)))
        c0 = b.emit(arith.MuliOp(block, b.const(e.block, index)))
        if not self.prepacked:
            e.pack_producer(b, self.packed, c0)
        e.pack_bias(b, chain.producer, self.bias, c0)
        if self.ring is None:
            self.direct_rows(b, n, c0, band)
        else:
            assert chain.depthwise is not None
            e.pack_depthwise(b, self.ring.packed, c0)
            e.pack_bias(b, chain.depthwise, self.ring.bias, c0)
            self.depthwise_rows(b, self.ring, n, c0, band)
        return []

    def produce(self, b: ScalarBuilder, n: SSAValue, c0: SSAValue, y: SSAValue, slot: SSAValue) -> None:
        """Producer row y of the block, through the first elementwise ops, into buffer[slot, pl:pl + cols]."""
        e, columns, pl = self.e, self.columns, self.pl
        if columns is None:

            def read(sb: ScalarBuilder, k: SSAValue, x: SSAValue) -> SSAValue:
                return sb.emit(memref.LoadOp.get(e.x, [n, k, y, x]))

        else:
            e.im2col(b, columns, n, y)

            def read(sb: ScalarBuilder, k: SSAValue, x: SSAValue) -> SSAValue:
                return sb.emit(memref.LoadOp.get(columns, [k, x]))

        def target(sb: ScalarBuilder, x: SSAValue) -> list[SSAValue]:
            return [self.buffer, slot, sb.emit(arith.AddiOp(x, sb.const(pl, index))), sb.const(0, index)]

        lead = [b.emit(arith.DivUIOp(c0, b.const(e.block, index)))] if self.prepacked else []
        e.produce_row(b, read, self.packed, self.bias, target, lead)

        def point(sb: ScalarBuilder, x: SSAValue, c: SSAValue) -> Point:
            return (n, e.channel(sb, c0, c), y, x)

        row_start = b.emit(arith.MuliOp(slot, b.const((self.ring_cols + SPARE) * e.block, index)))
        base = b.emit(arith.AddiOp(row_start, b.const(pl * e.block, index)))
        e.pointwise(b, self.chain.first, self.chain.producer.result, self.flat_buffer, base, e.cols, point)

    def direct_rows(self, b: ScalarBuilder, n: SSAValue, c0: SSAValue, band: SSAValue) -> None:
        """Without a depthwise convolution: each producer row of the band, stored as it is computed."""
        e = self.e
        valid = e.valid(b, c0)
        first, last = _band_rows(b, band, self.bands, e.rows)

        def row(rb: ScalarBuilder, y: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            slot = rb.const(0, index)
            self.produce(rb, n, c0, y, slot)

            def at(sb: ScalarBuilder, x: SSAValue, c: SSAValue) -> list[SSAValue]:
                return [slot, x, c]

            e.store_row(rb, self.buffer, at, self.output, n, c0, y, e.cols, valid)
            return []

        for_loop(b, first, last, 1, row)

    def depthwise_rows(self, b: ScalarBuilder, ring: _Ring, n: SSAValue, c0: SSAValue, band: SSAValue) -> None:
        """Each output row of the band: the producer rows its window needs that the ring lacks, then the depthwise
        row, its elementwise ops and its store. The loop carries the first producer row not yet computed."""
        e, chain = self.e, self.chain
        dw = e.dw
        assert dw is not None
        assert chain.depthwise is not None
        depthwise = chain.depthwise
        valid = e.valid(b, c0)
        span, top_pad = dw.span, dw.pads[0]
        first, last = _band_rows(b, band, self.bands, e.out_rows)

        def window_top(sb: ScalarBuilder, yo: SSAValue) -> SSAValue:
            return sb.emit(
                arith.SubiOp(sb.emit(arith.MuliOp(yo, sb.const(dw.stride[0], index))), sb.const(top_pad, index))
            )

        start = b.emit(arith.MaxSIOp(window_top(b, first), b.const(0, index)))

        def out_row(rb: ScalarBuilder, yo: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            top = window_top(rb, yo)
            low = rb.emit(arith.MaxSIOp(top, rb.const(0, index)))
            high = rb.emit(arith.MinSIOp(rb.emit(arith.AddiOp(top, rb.const(span, index))), rb.const(e.rows, index)))
            high = rb.emit(arith.MaxSIOp(high, rb.const(0, index)))

            def fill(fb: ScalarBuilder, y: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                self.produce(fb, n, c0, y, fb.emit(arith.RemUIOp(y, fb.const(span, index))))
                return []

            for_loop(rb, rb.emit(arith.MaxSIOp(carried[0], low)), high, 1, fill)
            slots: list[SSAValue] = []
            for ky in range(dw.kernel[0]):
                r = rb.emit(arith.AddiOp(top, rb.const(ky * dw.dilation[0], index)))
                inside = rb.emit(
                    arith.AndIOp(rb.cmpi("sge", r, rb.const(0, index)), rb.cmpi("slt", r, rb.const(e.rows, index)))
                )
                wrapped = rb.emit(arith.RemUIOp(rb.emit(arith.MaxSIOp(r, rb.const(0, index))), rb.const(span, index)))
                slots.append(rb.select(inside, wrapped, rb.const(span, index)))
            e.depthwise_row(rb, ring.ring, slots, ring.packed, ring.bias, ring.out_row)

            def at(sb: ScalarBuilder, x: SSAValue, c: SSAValue) -> list[SSAValue]:
                return [x, c]

            def point(sb: ScalarBuilder, x: SSAValue, c: SSAValue) -> Point:
                return (n, e.channel(sb, c0, c), yo, x)

            e.pointwise(rb, chain.second, depthwise.result, ring.flat_out_row, rb.const(0, index), e.out_cols, point)
            e.store_row(rb, ring.out_row, at, self.output, n, c0, yo, e.out_cols, valid)
            return [rb.emit(arith.MaxSIOp(carried[0], high))]

        for_loop(b, first, last, 1, out_row, [start])


def packing(kernel_op: kernel.FuncOp) -> Packing | None:
    """The packed form of a generated convolution kernel's producer weights; None for another kernel."""
    ops = [op for op in kernel_op.body.block.ops if not isinstance(op, kernel.YieldOp)]
    schedule = kernel_op.schedule
    if not ops or not isinstance(ops[0], ConvOp) or schedule is None:
        return None
    if channels_last(ops[0]):
        weight = ops[0].weight
        position = next((i for i, arg in enumerate(kernel_op.body.block.args) if arg is weight), None)
        return None if position is None else channels_last_plan(kernel_op).packing(position)
    producer = ConvChain.of(kernel_op.sym_name.data, ops).producer
    weight = producer.weight
    position = next((i for i, arg in enumerate(kernel_op.body.block.args) if arg is weight), None)
    if position is None:
        return None
    lanes, _ = block_tile(producer, schedule.vector.data, ints(schedule.tile))
    block = lanes * schedule.vector.data
    channels, in_channels, kh, kw = shape_of(weight)
    return Packing(position, (-(-channels // block), in_channels * kh * kw, block))


def conv_kernel(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    ops: Sequence[Operation],
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
    prepacked: SSAValue | None = None,
) -> tuple[int, int]:
    """The generated convolution kernel of `ops` into the output buffer; (parts, work). With `prepacked`, its
    producer's weights are read from that buffer (laid out as `packing` says) instead of packed by each unit."""
    value, output = result
    if value is not ops[-1].results[0]:
        raise CodegenError(
            f"kernel @{kernel_op.sym_name.data}: a generated convolution kernel must return its last value"
        )
    conv = ops[0]
    if isinstance(conv, ConvOp) and channels_last(conv):
        kind = DepthwiseKernel if is_depthwise(conv) else DenseKernel
        return kind(nest, kernel_op, ops, output, sources, prepacked).emit()
    emitter = _ConvKernel(nest, kernel_op, ops, output, sources, prepacked)
    emitter.emit()
    return emitter.units, emitter.flops
