"""The row-level emitters of a generated convolution kernel (`conv`): packing, im2col, the producer's register
blocks, elementwise ops over a row, the depthwise convolution's row, and the transposed store back to NCHW.

A row buffer is `[column][channel]` over one block of channels (`block_vectors`), so that a vector of channels loads at
once whatever the convolution's stride; NCHW's unit stride is along columns, which `store_row` restores with
in-register transposes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
    f32,
    i1,
    i64,
)
from xdsl.ir import Operation, SSAValue

from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.nn import ConvOp
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.matmul import for_loop
from gnomon.passes.kernel_to_linalg.nest import shape_of
from gnomon.passes.kernel_to_linalg.scalar import SCALAR_OPS
from gnomon.passes.kernel_to_linalg.support import CodegenError, is_depthwise

index = IndexType()

Point = tuple[SSAValue, SSAValue, SSAValue, SSAValue]
"""An element's (n, channel, row, column) in the graph."""

MAX_VECTORS = 2
"""The most vectors of channels in a block: 16 or 32 channels with AVX-512 (16 with AVX2). Two vectors took 0.7-0.9x
the time of one on 1x1 producers with 128-512 input channels; three took 1.4-1.5x on 24 (bench/fusion.py shapes)."""
ACCUMULATORS = 12
"""Vector accumulators of a producer micro-tile: positions x vectors, 12 x 1 or 6 x 2. More vectors per block
mean fewer broadcasts per FMA (8 loads for 12 FMAs at 6 x 2, against 13 at 12 x 1)."""
TILE = 8
"""Columns x channels of the tiles `store_row` transposes in registers."""
SPARE = TILE
"""Columns a row buffer has past its last, which the last transposed tile reads and never stores."""
CHAINS = 8
"""Independent FMA chains of the depthwise row (output columns x vectors): enough to hide the FMA latency."""


def block_vectors(channels: int, width: int) -> int:
    """Vectors of `width` channels per block: the most, up to `MAX_VECTORS`, that pads the channels to the fewest
    extra (the last block computes channels that do not exist); a block is at least 16 channels, a multiple of the
    transposed tile."""
    options = [v for v in range(MAX_VECTORS, 0, -1) if v * width >= 2 * TILE and v * width % TILE == 0]
    return min(options, key=lambda v: (-(-channels // (v * width)) * v * width - channels, -v))


def block_tile(producer: ConvOp, width: int, tile: Sequence[int] = ()) -> tuple[int, int]:
    """(vectors of channels per block, producer columns per micro-tile): the schedule's `tile` where set, else
    `block_vectors` and as many columns as `ACCUMULATORS` allows."""
    if tile:
        return register_tile(tile, width)
    lanes = block_vectors(shape_of(producer.result)[1], width)
    return lanes, ACCUMULATORS // lanes


def register_tile(tile: Sequence[int], width: int) -> tuple[int, int]:
    """A schedule's `tile = [vectors, positions]`: vectors of channels per block and producer columns per micro-tile,
    checked to fit the vector registers (32 with 16 lanes, 16 with 8) beside one weight vector each and a broadcast."""
    if len(tile) != 2:
        raise CodegenError(f"a generated convolution's tile is [vectors, positions], not {list(tile)}")
    vectors, positions = tile
    registers = 32 if width == 16 else 16
    if not (1 <= vectors <= MAX_VECTORS and vectors * width % TILE == 0 and vectors * width >= 2 * TILE):
        raise CodegenError(f"a generated convolution's block of {vectors} vectors of {width} lanes is not supported")
    if positions < 1 or vectors * (positions + 1) + 1 > registers:
        raise CodegenError(
            f"a generated convolution's micro-tile of {positions} positions x {vectors} vectors does not fit "
            f"{registers} vector registers"
        )
    return vectors, positions


@dataclass(frozen=True)
class Packing:
    """Where a generated convolution kernel finds its weights packed for every channel block, as a unit packs its
    own: `[blocks][reduction][block]`, element `[j, (ci * kh + ky) * kw + kx, c]` the weight of output channel
    `g * per_group + min(b * block + c, per_group - 1)` for block b of group g (j = g * blocks per group + b; the
    last block's channels past its group's end repeat the group's last channel's). Channels-first kernels and
    depthwise ones have one group."""

    weight: int
    """The kernel input holding the weight, `[channels][in channels per group][kh][kw]`."""
    shape: tuple[int, int, int]
    """blocks, reduction, block."""
    groups: int = 1


@dataclass(frozen=True)
class ConvChain:
    """A generated convolution kernel's ops: the producer, its elementwise ops, the depthwise conv and its."""

    producer: ConvOp
    first: tuple[Operation, ...]
    depthwise: ConvOp | None
    second: tuple[Operation, ...]

    @staticmethod
    def of(name: str, ops: Sequence[Operation]) -> ConvChain:
        producer = ops[0]
        assert isinstance(producer, ConvOp)
        if producer.groups.value.data != 1:
            raise CodegenError(f"kernel @{name}: a generated convolution kernel starts with a dense (groups 1) one")
        split = next((i for i, op in enumerate(ops) if i > 0 and isinstance(op, ConvOp)), len(ops))
        first, rest = tuple(ops[1:split]), list(ops[split:])
        depthwise = rest[0] if rest else None
        second = tuple(rest[1:])
        if depthwise is not None and not is_depthwise(depthwise):
            raise CodegenError(f"kernel @{name}: a generated convolution may only be followed by a depthwise one")
        if not all(isinstance(op, POINTWISE) for op in (*first, *second)):
            raise CodegenError(f"kernel @{name}: only elementwise ops may follow a generated convolution")
        assert depthwise is None or isinstance(depthwise, ConvOp)
        return ConvChain(producer, first, depthwise, second)


@dataclass(frozen=True)
class Window:
    """One convolution's window along both spatial dims."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]
    """Top, left, bottom, right."""
    dilation: tuple[int, int]

    @staticmethod
    def of(op: ConvOp) -> Window:
        w = shape_of(op.weight)
        s, p, d = ints(op.strides), ints(op.pads), ints(op.dilations)
        return Window((w[2], w[3]), (s[0], s[1]), (p[0], p[1], p[2], p[3]), (d[0], d[1]))

    @property
    def span(self) -> int:
        """Input rows one output row reads."""
        return (self.kernel[0] - 1) * self.dilation[0] + 1


def argument_at(
    b: ScalarBuilder, sources: dict[SSAValue, SSAValue], value: SSAValue, point: Sequence[SSAValue]
) -> tuple[SSAValue, list[SSAValue]]:
    """The buffer of a kernel argument that an elementwise op after a generated convolution reads, and its indices at
    a point of the convolution's result (either layout), broadcast as NumPy does: a size-1 dimension at 0."""
    source = sources.get(value)
    if source is None:
        raise CodegenError(f"an elementwise op after a generated convolution reads {value}, computed elsewhere")
    shape = shape_of(value)
    dims = point[len(point) - len(shape) :]
    return source, [b.const(0, index) if size == 1 else dim for size, dim in zip(shape, dims, strict=True)]


class RowEmitter:
    """The row-level code of one generated convolution kernel: its geometry, and emitters that append to a builder."""

    def __init__(
        self,
        b: ScalarBuilder,
        chain: ConvChain,
        sources: dict[SSAValue, SSAValue],
        width: int,
        tile: Sequence[int] = (),
    ):
        self.b = b
        self.chain = chain
        self.sources = sources
        if width not in (8, 16):
            raise CodegenError(f"a generated convolution takes vectors of 8 or 16 lanes, not {width}")
        producer = chain.producer
        self.width = width
        self.lanes, self.positions = block_tile(producer, width, tile)
        self.block = self.lanes * width
        self.columns = max(2, CHAINS // self.lanes)
        self.x = sources[producer.input]
        self.n, self.in_channels, self.height, self.in_width = shape_of(producer.input)
        _, self.channels, self.rows, self.cols = shape_of(producer.result)
        self.conv = Window.of(producer)
        self.reduction = self.in_channels * self.conv.kernel[0] * self.conv.kernel[1]
        self.in_place = self.conv.kernel == (1, 1) and self.conv.stride == (1, 1) and self.conv.pads == (0,) * 4
        self.dw = Window.of(chain.depthwise) if chain.depthwise is not None else None
        last = chain.depthwise or producer
        _, _, self.out_rows, self.out_cols = shape_of(last.result)

    @property
    def vec(self) -> VectorType[Float32Type]:
        return VectorType(f32, [self.width])

    def i(self, value: int) -> SSAValue:
        return self.b.const(value, index)

    def alloc(self, shape: Sequence[int]) -> SSAValue:
        return self.b.emit(memref.AllocOp.get(f32, 64, list(shape)))

    def zero(self, b: ScalarBuilder, buffer: SSAValue, shape: Sequence[int]) -> None:
        """buffer[...] = 0, by vectors along its last dim (a multiple of the vector width)."""
        zero = b.emit(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(self.vec, [0.0] * self.width)))

        def loop(lb: ScalarBuilder, depth: int, indices: list[SSAValue]) -> None:
            if depth == len(shape) - 1:
                for start in range(0, shape[-1], self.width):
                    lb.insert(vector.StoreOp(zero, buffer, [*indices, lb.const(start, index)]))
                return

            def body(sb: ScalarBuilder, i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                loop(sb, depth + 1, [*indices, i])
                return []

            for_loop(lb, lb.const(0, index), lb.const(shape[depth], index), 1, body)

        loop(b, 0, [])

    def valid(self, b: ScalarBuilder, c0: SSAValue) -> SSAValue:
        """How many of the block's channels exist: `block`, but in the last block."""
        return b.emit(arith.MinUIOp(self.i(self.block), b.emit(arith.SubiOp(self.i(self.channels), c0))))

    def channel(self, b: ScalarBuilder, c0: SSAValue, c: SSAValue) -> SSAValue:
        """The channel a lane of the block reads parameters of: c0 + c, the last channel past the end."""
        return b.emit(arith.MinUIOp(b.emit(arith.AddiOp(c0, c)), b.const(self.channels - 1, index)))

    def pack_bias(self, b: ScalarBuilder, conv: ConvOp, packed: SSAValue, c0: SSAValue) -> None:
        """packed[c] = conv's bias of channel c0 + c (0 without one): where its accumulators start."""

        def per_c(cb: ScalarBuilder, c: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            if conv.bias is not None:
                value = cb.emit(memref.LoadOp.get(self.sources[conv.bias], [self.channel(cb, c0, c)]))
            else:
                value = cb.const(0.0, f32)
            cb.insert(memref.StoreOp.get(value, packed, [c]))
            return []

        for_loop(b, self.i(0), self.i(self.block), 1, per_c)

    def pack_producer(self, b: ScalarBuilder, packed: SSAValue, c0: SSAValue) -> None:
        """packed[(ci * kh + ky) * kw + kx, c] = weight[c0 + c, ci, ky, kx]."""
        weight = self.sources[self.chain.producer.weight]
        kh, kw = self.conv.kernel

        def per_k(kb: ScalarBuilder, k: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            ci = kb.emit(arith.DivUIOp(k, kb.const(kh * kw, index)))
            ky = kb.emit(arith.RemUIOp(kb.emit(arith.DivUIOp(k, kb.const(kw, index))), kb.const(kh, index)))
            kx = kb.emit(arith.RemUIOp(k, kb.const(kw, index)))

            def per_c(cb: ScalarBuilder, c: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                loaded = cb.emit(memref.LoadOp.get(weight, [self.channel(cb, c0, c), ci, ky, kx]))
                cb.insert(memref.StoreOp.get(loaded, packed, [k, c]))
                return []

            for_loop(kb, kb.const(0, index), kb.const(self.block, index), 1, per_c)
            return []

        for_loop(b, self.i(0), self.i(self.reduction), 1, per_k)

    def pack_depthwise(self, b: ScalarBuilder, packed: SSAValue, c0: SSAValue) -> None:
        """packed[ky * kw + kx, c] = weight[c0 + c, 0, ky, kx]."""
        depthwise = self.chain.depthwise
        assert depthwise is not None
        assert self.dw is not None
        weight = self.sources[depthwise.weight]
        kh, kw = self.dw.kernel

        def per_c(cb: ScalarBuilder, c: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            channel = self.channel(cb, c0, c)
            for ky in range(kh):
                for kx in range(kw):
                    indices = [channel, cb.const(0, index), cb.const(ky, index), cb.const(kx, index)]
                    loaded = cb.emit(memref.LoadOp.get(weight, indices))
                    cb.insert(memref.StoreOp.get(loaded, packed, [cb.const(ky * kw + kx, index), c]))
            return []

        for_loop(b, self.i(0), self.i(self.block), 1, per_c)

    def im2col(self, b: ScalarBuilder, columns: SSAValue, n: SSAValue, y: SSAValue) -> None:
        """columns[(ci * kh + ky) * kw + kx, x] = input[n, ci, y * sh - pt + ky * dh, x * sw - pl + kx * dw], or 0
        in the padding. The window offsets are unrolled, so that the columns inside the input are a static range
        with no bounds check; a row outside it reads row 0 and stores zeros (a select LLVM hoists)."""
        kh, kw = self.conv.kernel
        sh, sw = self.conv.stride
        pt, pl = self.conv.pads[0], self.conv.pads[1]
        dh, dw = self.conv.dilation
        zero = b.const(0.0, f32)

        def per_channel(cb: ScalarBuilder, ci: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            for ky in range(kh):
                iy = cb.emit(arith.AddiOp(cb.emit(arith.MuliOp(y, cb.const(sh, index))), cb.const(ky * dh - pt, index)))
                inside = cb.emit(
                    arith.AndIOp(
                        cb.cmpi("sge", iy, cb.const(0, index)), cb.cmpi("slt", iy, cb.const(self.height, index))
                    )
                )
                row = cb.select(inside, iy, cb.const(0, index))
                for kx in range(kw):
                    k = cb.emit(
                        arith.AddiOp(cb.emit(arith.MuliOp(ci, cb.const(kh * kw, index))), cb.const(ky * kw + kx, index))
                    )
                    offset = kx * dw - pl
                    low = min(max(0, -(offset // sw)), self.cols)  # first x with x * sw + offset >= 0
                    high = max(min(self.cols, -(-(self.in_width - offset) // sw)), low)

                    def pad(xb: ScalarBuilder, x: SSAValue, _: list[SSAValue], k: SSAValue = k) -> list[SSAValue]:
                        xb.insert(memref.StoreOp.get(zero, columns, [k, x]))
                        return []

                    def copy(
                        xb: ScalarBuilder, x: SSAValue, _: list[SSAValue], k: SSAValue = k, offset: int = offset
                    ) -> list[SSAValue]:
                        ix = xb.emit(
                            arith.AddiOp(xb.emit(arith.MuliOp(x, xb.const(sw, index))), xb.const(offset, index))
                        )
                        loaded = xb.emit(memref.LoadOp.get(self.x, [n, ci, row, ix]))
                        xb.insert(memref.StoreOp.get(xb.select(inside, loaded, zero), columns, [k, x]))
                        return []

                    for_loop(cb, cb.const(0, index), cb.const(low, index), 1, pad)
                    for_loop(cb, cb.const(low, index), cb.const(high, index), 1, copy)
                    for_loop(cb, cb.const(high, index), cb.const(self.cols, index), 1, pad)
            return []

        for_loop(b, self.i(0), self.i(self.in_channels), 1, per_channel)

    def produce_row(
        self,
        b: ScalarBuilder,
        read: Callable[[ScalarBuilder, SSAValue, SSAValue], SSAValue],
        packed: SSAValue,
        bias: SSAValue,
        target: Callable[[ScalarBuilder, SSAValue], list[SSAValue]],
        lead: Sequence[SSAValue] = (),
    ) -> None:
        """target(x)[0:block] = bias + sum over k of read(k, x) * packed[*lead, k, 0:block], for every column x of a
        producer row, `positions` columns at a time in registers."""
        vec, width, lanes = self.vec, self.width, self.lanes
        initial = [b.emit(vector.LoadOp(bias, [b.const(lane * width, index)], vec)) for lane in range(lanes)]

        def tile(tb: ScalarBuilder, x0: SSAValue, count: int) -> None:

            def step(sb: ScalarBuilder, k: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
                w = [
                    sb.emit(vector.LoadOp(packed, [*lead, k, sb.const(lane * width, index)], vec))
                    for lane in range(lanes)
                ]
                result: list[SSAValue] = []
                for r in range(count):
                    x = x0 if r == 0 else sb.emit(arith.AddiOp(x0, sb.const(r, index)))
                    broadcast = sb.emit(vector.BroadcastOp(read(sb, k, x), vec))
                    result += [
                        sb.emit(vector.FMAOp(broadcast, w[lane], acc[r * lanes + lane])) for lane in range(lanes)
                    ]
                return result

            final = for_loop(tb, tb.const(0, index), tb.const(self.reduction, index), 1, step, initial * count)
            for r in range(count):
                x = x0 if r == 0 else tb.emit(arith.AddiOp(x0, tb.const(r, index)))
                where = target(tb, x)
                for lane in range(lanes):
                    column = tb.emit(arith.AddiOp(where[-1], tb.const(lane * width, index)))
                    tb.insert(vector.StoreOp(final[r * lanes + lane], where[0], [*where[1:-1], column]))

        _tiles(b, self.cols, self.positions, tile)

    def flat(self, b: ScalarBuilder, buffer: SSAValue) -> SSAValue:
        """`buffer` as one dim."""
        memref_type = buffer.type
        assert isinstance(memref_type, MemRefType)
        shape = memref_type.get_shape()
        reassociation = ArrayAttr([ArrayAttr([IntegerAttr(k, 64) for k in range(len(shape))])])
        return b.emit(
            memref.CollapseShapeOp(
                operands=[buffer],
                properties={"reassociation": reassociation},
                result_types=[MemRefType(f32, [prod(shape)])],
            )
        )

    def pointwise(
        self,
        b: ScalarBuilder,
        ops: Sequence[Operation],
        start: SSAValue,
        flat: SSAValue,
        base: SSAValue,
        count: int,
        point: Callable[[ScalarBuilder, SSAValue, SSAValue], tuple[SSAValue, SSAValue, SSAValue, SSAValue]],
    ) -> None:
        """flat[base + x * block + c] = ops(that element) for x < count and every channel c of the block, in place:
        one unit-stride loop, which LLVM vectorizes. `point(x, c)` is the element's (n, channel, row, column) in the
        graph, where the ops' other operands are read (broadcast as NumPy does); the block's channels past the last
        compute from the last channel's operands."""
        if not ops:
            return
        last = ops[-1].results[0]

        def per_element(eb: ScalarBuilder, i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            where = [eb.emit(arith.AddiOp(base, i))]
            values: dict[SSAValue, SSAValue] = {start: eb.emit(memref.LoadOp.get(flat, where))}
            for op in ops:
                scalars: list[SSAValue] = []
                for operand in op.operands:
                    if operand not in values:
                        x = eb.emit(arith.DivUIOp(i, eb.const(self.block, index)))
                        c = eb.emit(arith.RemUIOp(i, eb.const(self.block, index)))
                        values[operand] = self._element(eb, operand, point(eb, x, c))
                    scalars.append(values[operand])
                values[op.results[0]] = SCALAR_OPS[type(op)].emit(eb, op, scalars)
            eb.insert(memref.StoreOp.get(values[last], flat, where))
            return []

        for_loop(b, self.i(0), self.i(count * self.block), 1, per_element)

    def _element(self, b: ScalarBuilder, value: SSAValue, point: Sequence[SSAValue]) -> SSAValue:
        """The element of a kernel argument at an (n, c, y, x) point, broadcast against NCHW."""
        return b.emit(memref.LoadOp.get(*argument_at(b, self.sources, value, point)))

    def store_row(
        self,
        b: ScalarBuilder,
        buffer: SSAValue,
        at: Callable[[ScalarBuilder, SSAValue, SSAValue], list[SSAValue]],
        output: SSAValue,
        n: SSAValue,
        c0: SSAValue,
        y: SSAValue,
        count: int,
        valid: SSAValue,
    ) -> None:
        """output[n, c0 + c, y, x] = buffer[at(x, c)] for the block's `valid` channels and x < count. A full block
        goes by `TILE` x `TILE` tiles transposed in registers (unit-stride loads and stores; the last tile's stores
        masked, its loads reading the buffer's `SPARE` columns); the last block, element by element."""
        vec = VectorType(f32, [TILE])

        def tile(tb: ScalarBuilder, x0: SSAValue, stored_columns: int) -> None:
            mask = None
            if stored_columns < TILE:
                mask = tb.emit(vector.CreateMaskOp([tb.const(stored_columns, index)], VectorType(i1, [TILE])))
            for group in range(self.block // TILE):
                first = tb.const(group * TILE, index)
                columns = [tb.emit(arith.AddiOp(x0, tb.const(r, index))) if r else x0 for r in range(TILE)]
                rows = [tb.emit(vector.LoadOp(buffer, at(tb, x, first), vec)) for x in columns]
                for c, column in enumerate(_transpose(tb, rows)):
                    channel = tb.emit(arith.AddiOp(c0, tb.const(group * TILE + c, index)))
                    where = [n, channel, y, x0]
                    tb.insert(
                        vector.StoreOp(column, output, where)
                        if mask is None
                        else vector.MaskedStoreOp(output, where, mask, column)
                    )

        fast = ScalarBuilder()
        _tiles(fast, count, TILE, tile)
        fast.insert(scf.YieldOp())

        def per_c(cb: ScalarBuilder, c: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            channel = cb.emit(arith.AddiOp(c0, c))

            def per_x(xb: ScalarBuilder, x: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                loaded = xb.emit(memref.LoadOp.get(buffer, at(xb, x, c)))
                xb.insert(memref.StoreOp.get(loaded, output, [n, channel, y, x]))
                return []

            for_loop(cb, cb.const(0, index), cb.const(count, index), 1, per_x)
            return []

        slow = ScalarBuilder()
        for_loop(slow, slow.const(0, index), valid, 1, per_c)
        slow.insert(scf.YieldOp())
        full = b.cmpi("eq", valid, self.i(self.block))
        b.insert(scf.IfOp(full, [], fast.ops, slow.ops))

    def depthwise_row(
        self,
        b: ScalarBuilder,
        ring: SSAValue,
        slots: Sequence[SSAValue],
        packed: SSAValue,
        bias: SSAValue,
        out_row: SSAValue,
    ) -> None:
        """out_row[xo, :] = bias + sum over (ky, kx) of ring[slots[ky], xo * sw + kx * dw, :] * packed[ky * kw + kx],
        `columns` output columns at a time."""
        dw = self.dw
        assert dw is not None
        kh, kw = dw.kernel
        sw, dwid = dw.stride[1], dw.dilation[1]
        vec, width, lanes = self.vec, self.width, self.lanes
        weights = [
            [
                b.emit(vector.LoadOp(packed, [b.const(t, index), b.const(lane * width, index)], vec))
                for lane in range(lanes)
            ]
            for t in range(kh * kw)
        ]
        initial = [b.emit(vector.LoadOp(bias, [b.const(lane * width, index)], vec)) for lane in range(lanes)]

        def tile(tb: ScalarBuilder, x0: SSAValue, count: int) -> None:
            acc = [initial[lane] for _ in range(count) for lane in range(lanes)]
            base = tb.emit(arith.MuliOp(x0, tb.const(sw, index)))
            for ky in range(kh):
                for kx in range(kw):
                    for t in range(count):
                        column = tb.emit(arith.AddiOp(base, tb.const(t * sw + kx * dwid, index)))
                        for lane in range(lanes):
                            loaded = tb.emit(
                                vector.LoadOp(ring, [slots[ky], column, tb.const(lane * width, index)], vec)
                            )
                            k = t * lanes + lane
                            acc[k] = tb.emit(vector.FMAOp(loaded, weights[ky * kw + kx][lane], acc[k]))
            for t in range(count):
                x = tb.emit(arith.AddiOp(x0, tb.const(t, index)))
                for lane in range(lanes):
                    tb.insert(vector.StoreOp(acc[t * lanes + lane], out_row, [x, tb.const(lane * width, index)]))

        _tiles(b, self.out_cols, self.columns, tile)


def _tiles(b: ScalarBuilder, count: int, size: int, tile: Callable[[ScalarBuilder, SSAValue, int], None]) -> None:
    """tile(start, size) over [0, count) in steps of `size` (a loop), then tile(start, rest) for the rest (once)."""
    whole = count // size * size

    def full(fb: ScalarBuilder, x0: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
        tile(fb, x0, size)
        return []

    if whole:
        for_loop(b, b.const(0, index), b.const(whole, index), size, full)
    if count > whole:
        tile(b, b.const(whole, index), count - whole)


def _transpose(b: ScalarBuilder, rows: list[SSAValue]) -> list[SSAValue]:
    """The columns of the square matrix whose rows are `rows` (vectors of len(rows) lanes, a power of two): for
    each bit of the index, rows i and i + bit swap their elements whose column has that bit, by two shuffles."""
    size = len(rows)
    vec = rows[0].type
    assert isinstance(vec, VectorType)
    bit = 1
    while bit < size:
        low = [j if not j & bit else size + j - bit for j in range(size)]
        high = [j + bit if not j & bit else size + j for j in range(size)]
        swapped = list(rows)
        for i in range(size):
            if not i & bit:
                pair = (rows[i], rows[i + bit])
                swapped[i] = b.emit(vector.ShuffleOp(*pair, DenseArrayBase.from_list(i64, low), result_type=vec))
                swapped[i + bit] = b.emit(vector.ShuffleOp(*pair, DenseArrayBase.from_list(i64, high), result_type=vec))
        rows = swapped
        bit *= 2
    return rows
