"""A generated channels-last depthwise convolution (`conv_nhwc`).

A unit of work is one image's output row and one block of channels. An output column's window is `kh x kw` vector
loads and FMAs, `positions` columns at a time for independent chains. A window row outside the image reads row 0
under zero weights (chosen once per unit); the border columns, where window columns fall outside it, are unrolled
with those taps left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, vector
from xdsl.ir import SSAValue

from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.conv_nhwc import ChannelsLastKernel, index
from gnomon.passes.kernel_to_linalg.matmul import for_loop


class DepthwiseKernel(ChannelsLastKernel):
    """A depthwise convolution's kernel: units of an output row by a block of channels."""

    def emit_units(self) -> int:
        b, plan, window = self.b, self.plan, self.window
        (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.stride, window.dilation
        top, left = window.pads[0], window.pads[1]
        x = self.sources[self.conv.input]
        out = self._flat(b, self.output)
        begin, end = self.nest.thread_range(self.units(), 1)
        inner_begin, inner_end = self.inner_columns()

        def unit(ub: ScalarBuilder, u: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            j = ub.emit(arith.RemUIOp(u, ub.const(plan.blocks, index)))
            image_row = ub.emit(arith.DivUIOp(u, ub.const(plan.blocks, index)))
            yo = ub.emit(arith.RemUIOp(image_row, ub.const(self.rows, index)))
            n = ub.emit(arith.DivUIOp(image_row, ub.const(self.rows, index)))
            channel = ub.emit(arith.MuliOp(j, ub.const(plan.block, index)))
            valid = ub.emit(
                arith.MinUIOp(
                    ub.const(plan.block, index), ub.emit(arith.SubiOp(ub.const(self.channels, index), channel))
                )
            )
            masks = self.masks = self._masks(ub, valid)
            initial = self._bias(ub, channel, masks)
            zeros = self._zeros(ub)
            rows: list[SSAValue] = []
            weights: list[list[SSAValue]] = []  # [tap][vector]
            for ky in range(kh):
                iy = ub.emit(
                    arith.SubiOp(
                        ub.emit(arith.AddiOp(ub.emit(arith.MuliOp(yo, ub.const(sh, index))), ub.const(ky * dh, index))),
                        ub.const(top, index),
                    )
                )
                inside = ub.emit(
                    arith.AndIOp(
                        ub.cmpi("sge", iy, ub.const(0, index)), ub.cmpi("slt", iy, ub.const(self.height, index))
                    )
                )
                rows.append(ub.select(inside, iy, ub.const(0, index)))
                for kx in range(kw):
                    tap = ub.const(ky * kw + kx, index)
                    weights.append(
                        [
                            ub.select(
                                inside,
                                ub.emit(
                                    vector.LoadOp(self.packed, [j, tap, ub.const(lane * plan.width, index)], self.vec)
                                ),
                                zeros,
                            )
                            for lane in range(plan.vectors)
                        ]
                    )
            lanes = [ub.emit(arith.AddiOp(channel, ub.const(lane * plan.width, index))) for lane in range(plan.vectors)]
            row_start = ub.emit(arith.MuliOp(image_row, ub.const(self.cols, index)))

            def columns(cb: ScalarBuilder, x0: SSAValue, count: int, taps: Sequence[tuple[int, int]] | None) -> None:
                """Output columns x0 .. x0 + count; `taps` (ky, kx) inside the image, None for all of them."""
                acc = [initial[lane] for _ in range(count) for lane in range(plan.vectors)]
                base = (
                    cb.emit(arith.SubiOp(cb.emit(arith.MuliOp(x0, cb.const(sw, index))), cb.const(left, index)))
                    if left
                    else cb.emit(arith.MuliOp(x0, cb.const(sw, index)))
                )
                for ky, kx in taps if taps is not None else [(ky, kx) for ky in range(kh) for kx in range(kw)]:
                    for t in range(count):
                        ix = cb.emit(arith.AddiOp(base, cb.const(t * sw + kx * dw, index)))
                        for lane in range(plan.vectors):
                            loaded = cb.emit(vector.MaskedLoadOp(x, [n, rows[ky], ix, lanes[lane]], masks[lane], zeros))
                            k = t * plan.vectors + lane
                            acc[k] = cb.emit(vector.FMAOp(loaded, weights[ky * kw + kx][lane], acc[k]))
                pixels = [
                    cb.emit(arith.AddiOp(row_start, cb.emit(arith.AddiOp(x0, cb.const(t, index)))))
                    for t in range(count)
                ]
                acc = self._epilogue(cb, acc, pixels, channel, valid)
                for t, pixel in enumerate(pixels):
                    for lane in range(plan.vectors):
                        cb.insert(
                            vector.MaskedStoreOp(out, [pixel, lanes[lane]], masks[lane], acc[t * plan.vectors + lane])
                        )

            def border(xo: int) -> None:
                taps = [
                    (ky, kx) for ky in range(kh) for kx in range(kw) if 0 <= xo * sw - left + kx * dw < self.in_width
                ]
                columns(ub, ub.const(xo, index), 1, taps)

            for xo in range(inner_begin):
                border(xo)
            span = inner_end - inner_begin
            whole = span // plan.positions * plan.positions

            def full(fb: ScalarBuilder, x0: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                columns(fb, x0, plan.positions, None)
                return []

            if whole:
                for_loop(ub, ub.const(inner_begin, index), ub.const(inner_begin + whole, index), plan.positions, full)
            if span > whole:
                columns(ub, ub.const(inner_begin + whole, index), span - whole, None)
            for xo in range(inner_end, self.cols):
                border(xo)
            return []

        for_loop(b, begin, end, 1, unit)
        return self.units()
