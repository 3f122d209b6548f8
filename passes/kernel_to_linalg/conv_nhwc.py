"""A generated channels-last f32 2-D convolution (`layout = "nhwc"`): a depthwise one (`conv_nhwc_depthwise`), or a
dense or grouped one of any window (`conv_nhwc_dense`); elementwise ops after it. This module holds what the two
share: the blocking, the weights' packing and the epilogue.

Channels innermost, a vector of channels loads from the activations as they are: no line buffer and no transposes,
which the channels-first kernel (`conv`) needs. The weights are packed `[block][reduction][lanes]` (`ChannelsLastPlan`,
`conv_rows.Packing`): by the runtime once where they are a program constant, else by every call first. A block's
last vectors past its group's channels load and store through masks.

The elementwise ops then run over a register tile's outputs before they are stored: on the accumulators' vectors
where every op can (`ON_VECTORS`), else through a tile buffer in L1, an element loop LLVM vectorizes along the
channels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
    f32,
    i1,
)
from xdsl.ir import Operation, SSAValue

from gnomon.dialects import kernel
from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.nn import ConvOp
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.conv_rows import (
    CHAINS,
    Packing,
    Window,
    argument_at,
    block_vectors,
    register_tile,
)
from gnomon.passes.kernel_to_linalg.matmul import for_loop
from gnomon.passes.kernel_to_linalg.nest import Nest, shape_of
from gnomon.passes.kernel_to_linalg.scalar import SCALAR_OPS
from gnomon.passes.kernel_to_linalg.support import CodegenError, channels_last_generatable, is_depthwise

index = IndexType()

ON_VECTORS = (
    ew.ReluOp, ew.ClipOp, ew.HardSwishOp, ew.HardSigmoidOp, ew.LeakyReluOp, ew.NegOp, ew.AbsOp,
    ew.SigmoidOp, ew.SiluOp, ew.ExpOp, ew.TanhOp, ew.GeluOp,
    ew.AddOp, ew.SubOp, ew.MulOp, ew.DivOp, ew.MaxOp, ew.MinOp,
)  # fmt: skip
"""Elementwise ops whose bodies (`scalar.SCALAR_OPS`) are float arith and math alone, the approximations of
`approx` included, which run on the accumulators' vectors as they are; an epilogue with any other op runs through
the tile buffer, element by element."""


UNROLLED_CHANNELS = 4
"""Input channels per group up to which a dense kernel unrolls a tap's reduction (no loop of 3 steps) and blocks one
vector of output channels (`conv_nhwc_dense`): a stem's 3 (its 7x7 one by 2 vectors x 8 columns took 2.0x the time
of 1 x 8, 1.6x oneDNN's)."""
ROW_ACCUMULATORS = 16
"""Most accumulators of a dense kernel's register tile along an output row (`row_positions`)."""


def row_positions(columns: int, vectors: int) -> int:
    """Output columns per register tile of a dense kernel's row (`conv_nhwc_dense`): the row in as few tiles of at
    most `ROW_ACCUMULATORS / vectors` columns as it takes, evened out: a 7-wide row one tile of 7 (6 + 1 took 1.18x
    its time on 512 channels at 7x7), 14 two of 7, 56 seven of 8. Tiles of 7-8 columns by 2 vectors measured
    0.84-0.99x the time of 6 x 2 on 3x3 layers at 14x14 to 56x56."""
    most = ROW_ACCUMULATORS // vectors
    return -(-columns // -(-columns // most))


@dataclass(frozen=True)
class ChannelsLastPlan:
    """The blocking of a channels-last generated convolution, which its packed weights follow."""

    depthwise: bool
    groups: int
    """Groups of the packing: a grouped convolution's; 1 for a depthwise one (its taps are the reduction)."""
    per_group: int
    """Output channels per group."""
    reduction: int
    """The window's taps times the input channels per group (a depthwise one's: one)."""
    vectors: int
    width: int
    positions: int
    """Output columns per register tile."""

    @property
    def block(self) -> int:
        return self.vectors * self.width

    @property
    def blocks_per_group(self) -> int:
        return -(-self.per_group // self.block)

    @property
    def blocks(self) -> int:
        return self.groups * self.blocks_per_group

    @staticmethod
    def of(conv: ConvOp, width: int, tile: Sequence[int] = ()) -> ChannelsLastPlan:
        if width not in (8, 16):
            raise CodegenError(f"a generated convolution takes vectors of 8 or 16 lanes, not {width}")
        channels, per_group_in, kh, kw = shape_of(conv.weight)
        depthwise = is_depthwise(conv)
        groups = 1 if depthwise else conv.groups.value.data
        per_group = channels // groups
        if tile:
            vectors, positions = register_tile(tile, width)
        elif depthwise:
            vectors, positions = 1, CHAINS  # the window's weights take kh x kw registers per vector
        else:
            vectors = 1 if per_group_in <= UNROLLED_CHANNELS else block_vectors(per_group, width)
            positions = row_positions(shape_of(conv.result)[2], vectors)
        reduction = kh * kw * (1 if depthwise else per_group_in)
        return ChannelsLastPlan(depthwise, groups, per_group, reduction, vectors, width, positions)

    def packing(self, weight: int) -> Packing:
        return Packing(weight, (self.blocks, self.reduction, self.block), self.groups)


def channels_last_plan(kernel_op: kernel.FuncOp) -> ChannelsLastPlan:
    conv = next(iter(kernel_op.body.block.ops))
    schedule = kernel_op.schedule
    assert isinstance(conv, ConvOp)
    assert schedule is not None
    return ChannelsLastPlan.of(conv, schedule.vector.data, ints(schedule.tile))


class ChannelsLastKernel:
    """Emits one channels-last convolution kernel: its units (`emit_units`, per kind), split over the call's parts."""

    def __init__(
        self,
        nest: Nest,
        kernel_op: kernel.FuncOp,
        ops: Sequence[Operation],
        output: SSAValue,
        sources: dict[SSAValue, SSAValue],
        prepacked: SSAValue | None,
    ):
        name = kernel_op.sym_name.data
        conv = ops[0]
        assert isinstance(conv, ConvOp)
        if not channels_last_generatable(conv):
            raise CodegenError(f"kernel @{name}: a channels-last generated convolution is 2-D")
        self.epilogue = tuple(ops[1:])
        if not all(isinstance(op, POINTWISE) for op in self.epilogue):
            raise CodegenError(f"kernel @{name}: only elementwise ops may follow a generated convolution")
        self.conv = conv
        self.nest, self.b = nest, nest.b
        self.output, self.sources = output, sources
        self.plan = plan = channels_last_plan(kernel_op)
        self.vec = VectorType(f32, [plan.width])
        self.window = Window.of(conv)
        self.n, self.height, self.in_width, self.in_channels = shape_of(conv.input)
        _, self.rows, self.cols, self.channels = shape_of(conv.result)
        self.packs = prepacked is None
        self.packed = prepacked if prepacked is not None else self._pack()
        on_vectors = all(isinstance(op, ON_VECTORS) for op in self.epilogue)
        self.masks: list[SSAValue] = []
        """The current unit's lane masks, for the vector epilogue's loads."""
        self.tile = None
        if self.epilogue and not on_vectors:
            self.tile = self.b.emit(memref.AllocOp.get(f32, 64, [plan.positions, plan.block]))

    # ---- shared pieces ----

    def i(self, value: int) -> SSAValue:
        return self.b.const(value, index)

    def _pack(self) -> SSAValue:
        """The weights packed as `ChannelsLastPlan.packing` lays them out, by this call (each part packs them all)."""
        b, plan = self.b, self.plan
        packed = b.emit(memref.AllocOp.get(f32, 64, [plan.blocks, plan.reduction, plan.block]))
        weight = self.sources[self.conv.weight]
        kh, kw = self.window.kernel

        def per_block(jb: ScalarBuilder, j: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            group = jb.emit(arith.DivUIOp(j, jb.const(plan.blocks_per_group, index)))
            first = jb.emit(
                arith.AddiOp(
                    jb.emit(arith.MuliOp(group, jb.const(plan.per_group, index))),
                    jb.emit(
                        arith.MuliOp(
                            jb.emit(arith.RemUIOp(j, jb.const(plan.blocks_per_group, index))),
                            jb.const(plan.block, index),
                        )
                    ),
                )
            )
            last = jb.emit(
                arith.SubiOp(
                    jb.emit(
                        arith.MuliOp(jb.emit(arith.AddiOp(group, jb.const(1, index))), jb.const(plan.per_group, index))
                    ),
                    jb.const(1, index),
                )
            )

            def per_k(kb: ScalarBuilder, k: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                def per_c(cb: ScalarBuilder, c: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                    channel = cb.emit(arith.MinUIOp(cb.emit(arith.AddiOp(first, c)), last))
                    # k runs over (input channel, ky, kx), as `jit.packed_weights` packs a constant weight.
                    tap = cb.emit(arith.RemUIOp(k, cb.const(kh * kw, index)))
                    where = [
                        channel,
                        cb.emit(arith.DivUIOp(k, cb.const(kh * kw, index))),
                        cb.emit(arith.DivUIOp(tap, cb.const(kw, index))),
                        cb.emit(arith.RemUIOp(tap, cb.const(kw, index))),
                    ]
                    loaded = cb.emit(memref.LoadOp.get(weight, where))
                    cb.insert(memref.StoreOp.get(loaded, packed, [j, k, c]))
                    return []

                for_loop(kb, kb.const(0, index), kb.const(plan.block, index), 1, per_c)
                return []

            for_loop(jb, jb.const(0, index), jb.const(plan.reduction, index), 1, per_k)
            return []

        for_loop(b, self.i(0), self.i(plan.blocks), 1, per_block)
        return packed

    def _masks(self, b: ScalarBuilder, valid: SSAValue) -> list[SSAValue]:
        """Per vector of the block, the mask of its lanes among the block's `valid` channels."""
        masks = []
        for lane in range(self.plan.vectors):
            left = b.emit(
                arith.SubiOp(
                    b.emit(arith.MaxSIOp(valid, b.const(lane * self.plan.width, index))),
                    b.const(lane * self.plan.width, index),
                )
            )
            count = b.emit(arith.MinUIOp(left, b.const(self.plan.width, index)))
            masks.append(b.emit(vector.CreateMaskOp([count], VectorType(i1, [self.plan.width]))))
        return masks

    def _zeros(self, b: ScalarBuilder) -> SSAValue:
        return b.emit(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(self.vec, [0.0] * self.plan.width)))

    def _bias(self, b: ScalarBuilder, first: SSAValue, masks: Sequence[SSAValue]) -> list[SSAValue]:
        """The block's bias vectors (channels `first`...), zeros without a bias or past the block's channels."""
        zeros = self._zeros(b)
        if self.conv.bias is None:
            return [zeros] * self.plan.vectors
        bias = self.sources[self.conv.bias]
        return [
            b.emit(
                vector.MaskedLoadOp(
                    bias, [b.emit(arith.AddiOp(first, b.const(lane * self.plan.width, index)))], mask, zeros
                )
            )
            for lane, mask in enumerate(masks)
        ]

    def _flat(self, b: ScalarBuilder, buffer: SSAValue) -> SSAValue:
        """A (N, H, W, C) buffer as (N*H*W, C)."""
        n, h, w, c = shape_of(buffer)
        reassociation = ArrayAttr([ArrayAttr([IntegerAttr(k, 64) for k in group]) for group in ((0, 1, 2), (3,))])
        return b.emit(
            memref.CollapseShapeOp(
                operands=[buffer],
                properties={"reassociation": reassociation},
                result_types=[MemRefType(f32, [n * h * w, c])],
            )
        )

    def _epilogue(
        self, b: ScalarBuilder, acc: list[SSAValue], pixels: Sequence[SSAValue], channel: SSAValue, valid: SSAValue
    ) -> list[SSAValue]:
        """The elementwise ops over a register tile (`acc`: per pixel, the block's vectors from channel `channel`):
        on the vectors themselves where every op is `ON_VECTORS` (`_vector_epilogue`), else through the tile
        buffer, a loop over each pixel's `valid` channels that LLVM vectorizes (their operands unit-stride; the
        lanes past them are never stored). Their other operands are read at the element's (n, y, x, c), broadcast
        as NumPy does."""
        if not self.epilogue:
            return acc
        if self.tile is None:
            return self._vector_epilogue(b, acc, pixels, channel)
        plan, tile = self.plan, self.tile
        vectors, width = plan.vectors, plan.width
        for r in range(len(pixels)):
            for lane in range(vectors):
                b.insert(
                    vector.StoreOp(acc[r * vectors + lane], tile, [b.const(r, index), b.const(lane * width, index)])
                )
        result = self.conv.result
        for r, p in enumerate(pixels):
            x = b.emit(arith.RemUIOp(p, b.const(self.cols, index)))
            image_row = b.emit(arith.DivUIOp(p, b.const(self.cols, index)))
            y = b.emit(arith.RemUIOp(image_row, b.const(self.rows, index)))
            n = b.emit(arith.DivUIOp(image_row, b.const(self.rows, index)))
            slot = b.const(r, index)

            def per_element(eb: ScalarBuilder, c: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                values: dict[SSAValue, SSAValue] = {result: eb.emit(memref.LoadOp.get(tile, [slot, c]))}
                at = eb.emit(arith.AddiOp(channel, c))
                for op in self.epilogue:
                    for operand in op.operands:
                        if operand not in values:
                            values[operand] = self._element(eb, operand, (n, y, x, at))
                    scalars = [values[operand] for operand in op.operands]
                    values[op.results[0]] = SCALAR_OPS[type(op)].emit(eb, op, scalars)
                eb.insert(memref.StoreOp.get(values[self.epilogue[-1].results[0]], tile, [slot, c]))
                return []

            for_loop(b, b.const(0, index), valid, 1, per_element)
        return [
            b.emit(vector.LoadOp(tile, [b.const(r, index), b.const(lane * width, index)], self.vec))
            for r in range(len(pixels))
            for lane in range(vectors)
        ]

    def _vector_epilogue(
        self, b: ScalarBuilder, acc: list[SSAValue], pixels: Sequence[SSAValue], channel: SSAValue
    ) -> list[SSAValue]:
        """The elementwise ops (all `ON_VECTORS`) on the accumulators themselves; another operand is a vector of
        its channels (a masked load) or, broadcast along them, one element splat."""
        plan, result = self.plan, self.conv.result
        zeros = self._zeros(b)
        out: list[SSAValue] = []
        for r, p in enumerate(pixels):
            x = b.emit(arith.RemUIOp(p, b.const(self.cols, index)))
            image_row = b.emit(arith.DivUIOp(p, b.const(self.cols, index)))
            point = (
                b.emit(arith.DivUIOp(image_row, b.const(self.rows, index))),
                b.emit(arith.RemUIOp(image_row, b.const(self.rows, index))),
                x,
            )
            for lane in range(plan.vectors):
                first = b.emit(arith.AddiOp(channel, b.const(lane * plan.width, index)))
                values: dict[SSAValue, SSAValue] = {result: acc[r * plan.vectors + lane]}
                for op in self.epilogue:
                    for operand in op.operands:
                        if operand not in values:
                            values[operand] = self._vector_operand(b, operand, (*point, first), self.masks[lane], zeros)
                    scalars = [values[operand] for operand in op.operands]
                    values[op.results[0]] = SCALAR_OPS[type(op)].emit(b, op, scalars)
                out.append(values[self.epilogue[-1].results[0]])
        return out

    def _vector_operand(
        self, b: ScalarBuilder, value: SSAValue, point: Sequence[SSAValue], mask: SSAValue, zeros: SSAValue
    ) -> SSAValue:
        """A vector of a kernel argument's channels from an (n, y, x, c) point, broadcast against NHWC."""
        shape = shape_of(value)
        if not shape or shape[-1] == 1:
            return b.emit(vector.BroadcastOp(self._element(b, value, point), self.vec))
        return b.emit(vector.MaskedLoadOp(*argument_at(b, self.sources, value, point), mask, zeros))

    def _element(self, b: ScalarBuilder, value: SSAValue, point: Sequence[SSAValue]) -> SSAValue:
        """The element of a kernel argument at an (n, y, x, c) point, broadcast against NHWC."""
        return b.emit(memref.LoadOp.get(*argument_at(b, self.sources, value, point)))

    def units(self) -> int:
        """Units of work: an output row by a block of a group's channels."""
        return self.n * self.rows * self.plan.blocks

    def inner_columns(self) -> tuple[int, int]:
        """The output columns whose whole window lies inside the image: [begin, end)."""
        (_, kw), (_, sw), (_, dw), left = (
            self.window.kernel,
            self.window.stride,
            self.window.dilation,
            self.window.pads[1],
        )
        begin = min(-(-left // sw), self.cols)
        return begin, max(min((self.in_width - 1 + left - (kw - 1) * dw) // sw + 1, self.cols), begin)

    def emit_units(self) -> int:
        """The units of work, split over the call's parts; their count."""
        raise NotImplementedError

    def emit(self) -> tuple[int, int]:
        """The kernel's body; (parts, multiply-adds)."""
        units = self.emit_units()
        if self.packs:
            self.b.insert(memref.DeallocOp.get(self.packed))
        if self.tile is not None:
            self.b.insert(memref.DeallocOp.get(self.tile))
        return units, self.n * self.rows * self.cols * self.channels * self.plan.reduction
