"""A generated channels-last dense (or grouped) convolution of any window, stride, padding and dilation, 1x1 ones
included (`conv_nhwc`).

A unit of work is one image's output row and one block of a group's output channels. Its output columns go by
register tiles of `positions` columns x `vectors` vectors of channels; a tile reduces over the window's rows inside
the image (a loop whose bounds the unit computes: no test per tap), its columns, unrolled, and the group's input
channels: per step one broadcast of each column's input element and one FMA per accumulator, the weights packed
`[block][(channel, ky, kx)][lanes]` (as the runtime packs a constant weight, `jit.packed_weights`). The border
columns, where window columns fall outside the image, go in tiles whose every column leaves its own such taps out.
The input is read where it lies, no im2col copy, and a 3-channel stem's 27-step reduction still fills every
accumulator. A 1x1 convolution is this kernel too: by rows of pixels it took 0.59-0.87x the time of the library's
BLAS product on six 1x1 layers where chunks of 256 pixels (the kernel it replaced) took 0.55-1.12x.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, memref, vector
from xdsl.ir import SSAValue

from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.conv_nhwc import UNROLLED_CHANNELS, ChannelsLastKernel, index
from gnomon.passes.kernel_to_linalg.matmul import for_loop


class DenseKernel(ChannelsLastKernel):
    """A dense convolution's kernel: units of an output row by a block of a group's channels."""

    def emit_units(self) -> int:
        b, plan, window = self.b, self.plan, self.window
        (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.stride, window.dilation
        top, left = window.pads[0], window.pads[1]
        per_group_in = plan.reduction // (kh * kw)
        x = self.sources[self.conv.input]
        out = self._flat(b, self.output)
        begin, end = self.nest.thread_range(self.units(), 1)
        inner_begin, inner_end = self.inner_columns()

        # Units in order of rows within a block where the weights outweigh the input, so that a thread's run of
        # units keeps one block's weights in its cache; else blocks within a row, which keeps its input rows. Not
        # measured apart: on 512 channels at 7x7 (9.4 MB of weights) the order alone left 1.44-1.49x oneDNN's time,
        # within noise; the even row tiles (`row_positions`) brought it to 1.0x.
        image_rows = self.n * self.rows
        by_block = plan.blocks * plan.reduction * plan.block > self.n * self.height * self.in_width * self.in_channels

        def unit(ub: ScalarBuilder, u: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            if by_block:
                j = ub.emit(arith.DivUIOp(u, ub.const(image_rows, index)))
                image_row = ub.emit(arith.RemUIOp(u, ub.const(image_rows, index)))
            else:
                j = ub.emit(arith.RemUIOp(u, ub.const(plan.blocks, index)))
                image_row = ub.emit(arith.DivUIOp(u, ub.const(plan.blocks, index)))
            yo = ub.emit(arith.RemUIOp(image_row, ub.const(self.rows, index)))
            n = ub.emit(arith.DivUIOp(image_row, ub.const(self.rows, index)))
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
            source = ub.emit(arith.MuliOp(group, ub.const(per_group_in, index)))
            masks = self.masks = self._masks(ub, valid)
            initial = self._bias(ub, channel, masks)
            first_row, last_row = _window_rows(ub, yo, sh, top, dh, kh, self.height)
            row_start = ub.emit(arith.MuliOp(image_row, ub.const(self.cols, index)))

            def columns(cb: ScalarBuilder, xs: Sequence[SSAValue], inside: Sequence[Sequence[int]]) -> None:
                """The output columns `xs` (one register tile); `inside[t]` the window's columns inside the image
                for `xs[t]`, whose taps alone it reduces over."""
                count = len(xs)
                bases = [cb.emit(arith.MuliOp(x0, cb.const(sw, index))) for x0 in xs]
                if left:
                    bases = [cb.emit(arith.SubiOp(base, cb.const(left, index))) for base in bases]

                def per_row(rb: ScalarBuilder, ky: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
                    iy = rb.emit(
                        arith.SubiOp(
                            rb.emit(
                                arith.AddiOp(
                                    rb.emit(arith.MuliOp(yo, rb.const(sh, index))),
                                    rb.emit(arith.MuliOp(ky, rb.const(dh, index))),
                                )
                            ),
                            rb.const(top, index),
                        )
                    )
                    tap_row = rb.emit(arith.MuliOp(ky, rb.const(kw, index)))
                    for kx in range(kw):
                        columns_in = [t for t in range(count) if kx in inside[t]]
                        if not columns_in:
                            continue
                        tap = rb.emit(arith.AddiOp(tap_row, rb.const(kx, index)))
                        at = {t: rb.emit(arith.AddiOp(bases[t], rb.const(kx * dw, index))) for t in columns_in}

                        def step(sb: ScalarBuilder, c: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
                            taps_before = sb.emit(arith.MuliOp(c, sb.const(kh * kw, index)))
                            k = sb.emit(arith.AddiOp(taps_before, tap))
                            w = [
                                sb.emit(
                                    vector.LoadOp(self.packed, [j, k, sb.const(lane * plan.width, index)], self.vec)
                                )
                                for lane in range(plan.vectors)
                            ]
                            ic = sb.emit(arith.AddiOp(source, c))
                            result = list(acc)
                            for t, ix in at.items():
                                element = sb.emit(memref.LoadOp.get(x, [n, iy, ix, ic]))
                                broadcast = sb.emit(vector.BroadcastOp(element, self.vec))
                                for lane in range(plan.vectors):
                                    k_acc = t * plan.vectors + lane
                                    result[k_acc] = sb.emit(vector.FMAOp(broadcast, w[lane], acc[k_acc]))
                            return result

                        if per_group_in <= UNROLLED_CHANNELS:
                            for c in range(per_group_in):
                                acc = step(rb, rb.const(c, index), acc)
                        else:
                            acc = for_loop(rb, rb.const(0, index), rb.const(per_group_in, index), 1, step, acc)
                    return acc

                acc = [initial[lane] for _ in range(count) for lane in range(plan.vectors)]
                acc = for_loop(cb, first_row, last_row, 1, per_row, acc)
                pixels = [cb.emit(arith.AddiOp(row_start, x0)) for x0 in xs]
                acc = self._epilogue(cb, acc, pixels, channel, valid)
                for t, pixel in enumerate(pixels):
                    for lane in range(plan.vectors):
                        where = [pixel, cb.emit(arith.AddiOp(channel, cb.const(lane * plan.width, index)))]
                        cb.insert(vector.MaskedStoreOp(out, where, masks[lane], acc[t * plan.vectors + lane]))

            every = list(range(kw))

            def full(fb: ScalarBuilder, x0: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                xs = [x0, *(fb.emit(arith.AddiOp(x0, fb.const(t, index))) for t in range(1, plan.positions))]
                columns(fb, xs, [every] * plan.positions)
                return []

            whole = (inner_end - inner_begin) // plan.positions * plan.positions
            if whole:
                for_loop(ub, ub.const(inner_begin, index), ub.const(inner_begin + whole, index), plan.positions, full)
            # The other columns (borders, and the inner ones past the whole tiles) in as few tiles, evened out: a
            # 7-wide row with padding as 4 + 3 columns, not 1 + 5 + 1 (a one-column tile waits on its FMA chains).
            rest = [*range(inner_begin), *range(inner_begin + whole, self.cols)]
            tiles = -(-len(rest) // plan.positions)
            for i in range(tiles):
                chunk = rest[i * len(rest) // tiles : (i + 1) * len(rest) // tiles]
                taps = [[kx for kx in every if 0 <= xo * sw - left + kx * dw < self.in_width] for xo in chunk]
                columns(ub, [ub.const(xo, index) for xo in chunk], taps)
            return []

        for_loop(b, begin, end, 1, unit)
        return self.units()


def _window_rows(
    b: ScalarBuilder, yo: SSAValue, stride: int, top: int, dilation: int, kernel: int, height: int
) -> tuple[SSAValue, SSAValue]:
    """The window rows [first, last) of output row `yo` that lie inside the image (none: first == last)."""
    start = b.emit(arith.SubiOp(b.emit(arith.MuliOp(yo, b.const(stride, index))), b.const(top, index)))
    # first = ceil(-start / dilation) where start < 0; last = ceil((height - start) / dilation), both within the window.
    above = b.emit(arith.SubiOp(b.const(0, index), start))
    skipped = b.emit(arith.DivSIOp(b.emit(arith.AddiOp(above, b.const(dilation - 1, index))), b.const(dilation, index)))
    first = b.emit(arith.MaxSIOp(skipped, b.const(0, index)))
    left = b.emit(arith.SubiOp(b.const(height + dilation - 1, index), start))
    last = b.emit(arith.MinSIOp(b.emit(arith.DivSIOp(left, b.const(dilation, index))), b.const(kernel, index)))
    return first, b.emit(arith.MaxSIOp(last, first))
