"""A generated channels-last f32 2-D max or average pool (`layout = "nhwc"`): vectors of channels, the window's
maximum or mean.

A unit of work is one image's output row. Each output column's window is `kh x kw` vector loads and maxima (sums), a
vector of channels at a time (the last masked); the border columns, where window columns fall outside the image, are
unrolled with those taps left out. A window row outside the image reads the window's first row inside it instead:
that leaves a maximum as it is, and a sum adds it under a select of zeros. A window with no element of the image
(dilated over a small one, or in padding alone) gives -inf, as torch's does. An average divides by the window's
counted cells, as the reference does: those in the image, and the padding's too with `count_include_pad`, never a
ceil-mode window's overhang past the padding. Padding, stride, dilation and ceil mode are the op's; the maximum
propagates NaN, as torch's does.
"""

from __future__ import annotations

from xdsl.dialects import arith, vector
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IndexType, VectorType, f32, i1, i64
from xdsl.ir import SSAValue

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.nn import AvgPoolOp, MaxPoolOp
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.matmul import for_loop
from gnomon.passes.kernel_to_linalg.nest import Nest, shape_of
from gnomon.passes.kernel_to_linalg.support import CodegenError

index = IndexType()


def pool_kernel(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    pool: MaxPoolOp | AvgPoolOp,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
) -> tuple[int, int]:
    """The channels-last pool into the output buffer; (parts, work)."""
    name = kernel_op.sym_name.data
    value, out = result
    if value is not pool.result:
        raise CodegenError(f"kernel @{name}: a generated pool kernel is the pool alone")
    average = isinstance(pool, AvgPoolOp)
    include_pad = isinstance(pool, AvgPoolOp) and bool(pool.count_include_pad.value.data)
    schedule = kernel_op.schedule
    assert schedule is not None
    width = schedule.vector.data
    vec, mask_type = VectorType(f32, [width]), VectorType(i1, [width])
    b = nest.b
    x = sources[pool.input]
    n_images, height, in_width, channels = shape_of(pool.input)
    _, rows, cols, _ = shape_of(pool.result)
    (kh, kw), (sh, sw) = ints(pool.kernel), ints(pool.strides)
    dh, dw = (1, 1) if isinstance(pool, AvgPoolOp) else ints(pool.dilations)
    top, left, bottom, right = ints(pool.pads)
    whole, rest = divmod(channels, width)
    tail_mask = b.emit(vector.CreateMaskOp([b.const(rest, index)], mask_type)) if rest else None
    lowest = b.emit(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vec, [float("-inf")] * width)))
    zeros = b.emit(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vec, [0.0] * width)))
    empty = zeros if average else lowest
    """What a masked load reads past the channels, and a window starts from."""
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
        # A window whose every row lies outside the image (dilated over a small one, or all padding) gives -inf.
        last_row = ub.emit(arith.AddiOp(start, ub.const((kh - 1) * dh, index)))
        any_row = ub.emit(
            arith.AndIOp(ub.cmpi("slt", first_inside, ub.const(height, index)), ub.cmpi("sle", first_inside, last_row))
        )
        fallback = ub.emit(arith.MinSIOp(first_inside, ub.const(height - 1, index)))
        window_rows, rows_inside = [], []
        for ky in range(kh):
            iy = ub.emit(arith.AddiOp(start, ub.const(ky * dh, index)))
            inside = ub.emit(
                arith.AndIOp(ub.cmpi("sge", iy, ub.const(0, index)), ub.cmpi("slt", iy, ub.const(height, index)))
            )
            window_rows.append(ub.select(inside, iy, fallback))
            rows_inside.append(inside)
        counted_rows = _counted_rows(ub, start, kh, height, bottom if include_pad else None) if average else None

        def column(
            cb: ScalarBuilder, xo: SSAValue, taps: list[int], counted: int, channel: SSAValue, mask: SSAValue | None
        ) -> None:
            """The output vector at (n, yo, xo) from `channel`: `taps` its window's columns inside the image,
            `counted` the columns an average divides by."""
            base = cb.emit(arith.SubiOp(cb.emit(arith.MuliOp(xo, cb.const(sw, index))), cb.const(left, index)))
            best = empty
            for row, inside in zip(window_rows, rows_inside, strict=True):
                along: SSAValue | None = None
                for kx in taps:
                    ix = cb.emit(arith.AddiOp(base, cb.const(kx * dw, index)))
                    where = [n, row, ix, channel]
                    loaded = cb.emit(
                        vector.LoadOp(x, where, vec) if mask is None else vector.MaskedLoadOp(x, where, mask, empty)
                    )
                    if along is None:
                        along = loaded
                    else:
                        along = cb.emit(arith.AddfOp(along, loaded)) if average else cb.maximum(along, loaded)
                if along is None:
                    continue
                if not average:
                    best = along if best is empty else cb.maximum(best, along)
                    continue
                along = cb.select(inside, along, zeros)
                best = along if best is empty else cb.emit(arith.AddfOp(best, along))
            if counted_rows is None:
                best = cb.select(any_row, best, lowest)
            else:
                cells = cb.emit(arith.MulfOp(counted_rows, cb.const(float(counted), f32)))
                best = cb.emit(arith.DivfOp(best, cb.emit(vector.BroadcastOp(cells, vec))))
            target = [n, yo, xo, channel]
            cb.insert(
                vector.StoreOp(best, out, target) if mask is None else vector.MaskedStoreOp(out, target, mask, best)
            )

        def columns(cb: ScalarBuilder, xo: SSAValue, taps: list[int], counted: int) -> None:
            def full(fb: ScalarBuilder, j: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                column(fb, xo, taps, counted, fb.emit(arith.MuliOp(j, fb.const(width, index))), None)
                return []

            if whole:
                for_loop(cb, cb.const(0, index), cb.const(whole, index), 1, full)
            if tail_mask is not None:
                column(cb, xo, taps, counted, cb.const(whole * width, index), tail_mask)

        def taps_at(xo: int) -> list[int]:
            return [kx for kx in range(kw) if 0 <= xo * sw - left + kx * dw < in_width]

        def counted_columns(xo: int) -> int:
            if not include_pad:
                return len(taps_at(xo))
            first = xo * sw - left
            return min(first + kw, in_width + right) - first

        inner_begin = min(-(-left // sw), cols)
        inner_end = max(min((in_width - 1 + left - (kw - 1) * dw) // sw + 1, cols), inner_begin)
        for xo in [*range(inner_begin), *range(inner_end, cols)]:
            columns(ub, ub.const(xo, index), taps_at(xo), counted_columns(xo))

        def inner(ib: ScalarBuilder, xo: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            columns(ib, xo, list(range(kw)), kw)
            return []

        if inner_end > inner_begin:
            for_loop(ub, ub.const(inner_begin, index), ub.const(inner_end, index), 1, inner)
        return []

    for_loop(b, begin, end, 1, unit)
    return n_images * rows, n_images * rows * cols * channels * kh * kw


def _counted_rows(b: ScalarBuilder, start: SSAValue, kh: int, height: int, bottom: int | None) -> SSAValue:
    """The rows of an average's window, from row `start`, that it divides by, as f32: those in the image, or with
    the bottom padding's (`bottom` given: `count_include_pad`) those from `start` to the padding's end."""
    end = b.emit(arith.AddiOp(start, b.const(kh, index)))
    if bottom is None:
        low = b.emit(arith.MaxSIOp(start, b.const(0, index)))
        high = b.emit(arith.MinSIOp(end, b.const(height, index)))
    else:
        low, high = start, b.emit(arith.MinSIOp(end, b.const(height + bottom, index)))
    count = b.emit(arith.MaxSIOp(b.emit(arith.SubiOp(high, low)), b.const(0, index)))
    return b.emit(arith.SIToFPOp(b.emit(arith.IndexCastOp(count, i64)), f32))
