"""A generated channels-last f32 2-D max pool (`layout = "nhwc"`): vectors of channels, the window's maximum.

A unit of work is one image's output row. Each output column's window is `kh x kw` vector loads and maxima, a
vector of channels at a time (the last masked). A window row outside the image reads the window's first row inside
it instead, which leaves the maximum as it is; the border columns, where window columns fall outside the image, are
unrolled with those taps left out. A window with no element of the image (dilated over a small one) gives -inf, as
torch's. Padding, stride, dilation and ceil mode are the op's; the maximum propagates NaN, as torch's does.
"""

from __future__ import annotations

from xdsl.dialects import arith, vector
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IndexType, VectorType, f32, i1
from xdsl.ir import SSAValue

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.nn import MaxPoolOp
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.matmul import for_loop
from gnomon.passes.kernel_to_linalg.nest import Nest, shape_of
from gnomon.passes.kernel_to_linalg.support import CodegenError

index = IndexType()


def max_pool_kernel(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    pool: MaxPoolOp,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
) -> tuple[int, int]:
    """The channels-last max pool into the output buffer; (parts, work)."""
    name = kernel_op.sym_name.data
    value, out = result
    if value is not pool.result:
        raise CodegenError(f"kernel @{name}: a generated max pool kernel is the pool alone")
    schedule = kernel_op.schedule
    assert schedule is not None
    width = schedule.vector.data
    vec, mask_type = VectorType(f32, [width]), VectorType(i1, [width])
    b = nest.b
    x = sources[pool.input]
    n_images, height, in_width, channels = shape_of(pool.input)
    _, rows, cols, _ = shape_of(pool.result)
    (kh, kw), (sh, sw), (dh, dw) = ints(pool.kernel), ints(pool.strides), ints(pool.dilations)
    top, left = ints(pool.pads)[0], ints(pool.pads)[1]
    whole, rest = divmod(channels, width)
    tail_mask = b.emit(vector.CreateMaskOp([b.const(rest, index)], mask_type)) if rest else None
    lowest = b.emit(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vec, [float("-inf")] * width)))
    begin, end = nest.thread_range(n_images * rows, 1)

    def unit(ub: ScalarBuilder, u: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
        n = ub.emit(arith.DivUIOp(u, ub.const(rows, index)))
        yo = ub.emit(arith.RemUIOp(u, ub.const(rows, index)))
        start = ub.emit(arith.SubiOp(ub.emit(arith.MuliOp(yo, ub.const(sh, index))), ub.const(top, index)))
        # The window's first row inside the image: start + ceil(-start / dh) * dh where start < 0.
        skipped = ub.emit(
            arith.DivUIOp(
                ub.emit(arith.AddiOp(ub.emit(arith.SubiOp(ub.const(0, index), start)), ub.const(dh - 1, index))),
                ub.const(dh, index),
            )
        )
        first_inside = ub.select(
            ub.cmpi("slt", start, ub.const(0, index)),
            ub.emit(arith.AddiOp(start, ub.emit(arith.MuliOp(skipped, ub.const(dh, index))))),
            start,
        )
        # A window whose every row lies outside the image (dilated over a small one) gives -inf, as torch's.
        any_row = ub.cmpi("slt", first_inside, ub.const(height, index))
        fallback = ub.emit(arith.MinSIOp(first_inside, ub.const(height - 1, index)))
        window_rows = []
        for ky in range(kh):
            iy = ub.emit(arith.AddiOp(start, ub.const(ky * dh, index)))
            inside = ub.emit(
                arith.AndIOp(ub.cmpi("sge", iy, ub.const(0, index)), ub.cmpi("slt", iy, ub.const(height, index)))
            )
            window_rows.append(ub.select(inside, iy, fallback))

        def column(cb: ScalarBuilder, xo: SSAValue, taps: list[int], channel: SSAValue, mask: SSAValue | None) -> None:
            base = cb.emit(arith.SubiOp(cb.emit(arith.MuliOp(xo, cb.const(sw, index))), cb.const(left, index)))
            best = lowest
            for row in window_rows:
                for k, kx in enumerate(taps):
                    ix = cb.emit(arith.AddiOp(base, cb.const(kx * dw, index)))
                    where = [n, row, ix, channel]
                    loaded = cb.emit(
                        vector.LoadOp(x, where, vec) if mask is None else vector.MaskedLoadOp(x, where, mask, lowest)
                    )
                    best = loaded if best is lowest and k == 0 else cb.maximum(best, loaded)
            best = cb.select(any_row, best, lowest)
            target = [n, yo, xo, channel]
            cb.insert(
                vector.StoreOp(best, out, target) if mask is None else vector.MaskedStoreOp(out, target, mask, best)
            )

        def columns(cb: ScalarBuilder, xo: SSAValue, taps: list[int]) -> None:
            def full(fb: ScalarBuilder, j: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                column(fb, xo, taps, fb.emit(arith.MuliOp(j, fb.const(width, index))), None)
                return []

            if whole:
                for_loop(cb, cb.const(0, index), cb.const(whole, index), 1, full)
            if tail_mask is not None:
                column(cb, xo, taps, cb.const(whole * width, index), tail_mask)

        def taps_at(xo: int) -> list[int]:
            return [kx for kx in range(kw) if 0 <= xo * sw - left + kx * dw < in_width]

        inner_begin = min(-(-left // sw), cols)
        inner_end = max(min((in_width - 1 + left - (kw - 1) * dw) // sw + 1, cols), inner_begin)
        for xo in [*range(inner_begin), *range(inner_end, cols)]:
            columns(ub, ub.const(xo, index), taps_at(xo))

        def inner(ib: ScalarBuilder, xo: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            columns(ib, xo, list(range(kw)))
            return []

        if inner_end > inner_begin:
            for_loop(ub, ub.const(inner_begin, index), ub.const(inner_end, index), 1, inner)
        return []

    for_loop(b, begin, end, 1, unit)
    return n_images * rows, n_images * rows * cols * channels * kh * kw
