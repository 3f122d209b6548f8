"""A generated channels-last 1x1, stride-1 convolution without padding, dense or grouped (`conv_nhwc`).

It is the product of the pixels' rows by each group's weights. A unit of work is a chunk of `CHUNK` pixels and one
block of a group's output channels (`vectors` vectors; a group's last block stores only the group's channels, through
masks): per `positions` pixels, `positions x vectors` accumulators, and per input channel one broadcast and one FMA
per accumulator, the block's weights staying in L1 over the chunk. A grouped one needs no gather and no zeros: each
group's blocks reduce over its own input channels only.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref, vector
from xdsl.ir import SSAValue

from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.conv_nhwc import ChannelsLastKernel, index
from gnomon.passes.kernel_to_linalg.matmul import for_loop

CHUNK = 256
"""Pixels per unit (rounded to whole micro-tiles): its inputs, 256 x (input channels per group), stay in L1 and L2
while every block of the group reads them."""


class PointwiseKernel(ChannelsLastKernel):
    """A 1x1 convolution's kernel: units of a chunk of pixels by a block of a group's channels."""

    def units(self) -> int:
        pixels, plan = self.n * self.rows * self.cols, self.plan
        chunk = max(CHUNK // plan.positions, 1) * plan.positions
        return -(-pixels // chunk) * plan.blocks

    def emit_units(self) -> int:
        b, plan = self.b, self.plan
        pixels = self.n * self.rows * self.cols
        chunk = max(CHUNK // plan.positions, 1) * plan.positions
        x, out = self._flat(b, self.sources[self.conv.input]), self._flat(b, self.output)
        begin, end = self.nest.thread_range(self.units(), 1)

        def unit(ub: ScalarBuilder, u: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            j = ub.emit(arith.RemUIOp(u, ub.const(plan.blocks, index)))
            first_pixel = ub.emit(
                arith.MuliOp(ub.emit(arith.DivUIOp(u, ub.const(plan.blocks, index))), ub.const(chunk, index))
            )
            last_pixel = ub.emit(
                arith.MinUIOp(ub.emit(arith.AddiOp(first_pixel, ub.const(chunk, index))), ub.const(pixels, index))
            )
            group = ub.emit(arith.DivUIOp(j, ub.const(plan.blocks_per_group, index)))
            within = ub.emit(
                arith.MuliOp(
                    ub.emit(arith.RemUIOp(j, ub.const(plan.blocks_per_group, index))), ub.const(plan.block, index)
                )
            )
            channel = ub.emit(arith.AddiOp(ub.emit(arith.MuliOp(group, ub.const(plan.per_group, index))), within))
            valid = ub.emit(
                arith.MinUIOp(
                    ub.const(plan.block, index), ub.emit(arith.SubiOp(ub.const(plan.per_group, index), within))
                )
            )
            source = ub.emit(arith.MuliOp(group, ub.const(plan.reduction, index)))
            masks = self.masks = self._masks(ub, valid)
            initial = self._bias(ub, channel, masks)

            def tile(tb: ScalarBuilder, p0: SSAValue, count: int) -> None:
                pixels_at = [p0 if r == 0 else tb.emit(arith.AddiOp(p0, tb.const(r, index))) for r in range(count)]

                def step(sb: ScalarBuilder, k: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
                    w = [
                        sb.emit(vector.LoadOp(self.packed, [j, k, sb.const(lane * plan.width, index)], self.vec))
                        for lane in range(plan.vectors)
                    ]
                    column = sb.emit(arith.AddiOp(source, k))
                    result: list[SSAValue] = []
                    for r, p in enumerate(pixels_at):
                        broadcast = sb.emit(vector.BroadcastOp(sb.emit(memref.LoadOp.get(x, [p, column])), self.vec))
                        result += [
                            sb.emit(vector.FMAOp(broadcast, w[lane], acc[r * plan.vectors + lane]))
                            for lane in range(plan.vectors)
                        ]
                    return result

                final = for_loop(tb, tb.const(0, index), tb.const(plan.reduction, index), 1, step, initial * count)
                final = self._epilogue(tb, final, pixels_at, channel, valid)
                for r, p in enumerate(pixels_at):
                    for lane in range(plan.vectors):
                        where = [p, tb.emit(arith.AddiOp(channel, tb.const(lane * plan.width, index)))]
                        tb.insert(vector.MaskedStoreOp(out, where, masks[lane], final[r * plan.vectors + lane]))

            whole = ub.emit(
                arith.SubiOp(
                    last_pixel,
                    ub.emit(
                        arith.RemUIOp(ub.emit(arith.SubiOp(last_pixel, first_pixel)), ub.const(plan.positions, index))
                    ),
                )
            )

            def full(fb: ScalarBuilder, p0: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                tile(fb, p0, plan.positions)
                return []

            for_loop(ub, first_pixel, whole, plan.positions, full)
            rest = pixels % plan.positions
            if rest:  # only the last chunk has a partial tile: `rest` pixels before the end

                def partial(pb: ScalarBuilder, p0: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                    tile(pb, p0, rest)
                    return []

                for_loop(ub, whole, last_pixel, plan.positions, partial)
            return []

        for_loop(b, begin, end, 1, unit)
        return self.units()
