"""Lowering one generated `kernel.func` to a `func.func`, and the `kernel-to-linalg` pass.

A pointwise kernel becomes one fused generic per result shape; a kernel that starts with an
anchor (a matmul, a reduction over trailing axes, a softmax over the last axis) emits the anchor,
then its elementwise epilogue in place in the output buffer, split between threads as the anchor is.
A reduction may also come after elementwise ops, which it computes as it reads (its prologue), and its
epilogue may return to its input's shape (a normalization: RMS norm in one kernel).

A kernel with `?` dims (all but matmuls and convolutions) is one function for every size: its loops, subviews and
per-row buffers read their sizes from the memref arguments, and `PartsRule` tells the runtime how many slices a
call may split into, from the arrays it binds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from math import prod

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.arith import FastMathFlagsAttr
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    FunctionType,
    MemRefType,
    ModuleOp,
    TensorType,
    UnitAttr,
    f32,
    i64,
)
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import dim_names
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import AvgPoolOp, ConvOp, LogSoftmaxOp, MaxPoolOp, SoftmaxOp
from gnomon.dialects.graph.reduce import ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceOp, ReduceProdOp, ReduceSumOp
from gnomon.passes.kernel_to_linalg.approx import exp_of, log_of
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.conv import Packing, conv_kernel, packing
from gnomon.passes.kernel_to_linalg.matmul import MatmulPlan, emit_matmul, matmul_plan
from gnomon.passes.kernel_to_linalg.nest import (
    Access,
    Computed,
    FusedBody,
    Loops,
    Nest,
    Operand,
    element_of,
    index,
    plan_loops,
    scheduled_loops,
    shape_of,
    static_product,
)
from gnomon.passes.kernel_to_linalg.pool_nhwc import pool_kernel
from gnomon.passes.kernel_to_linalg.support import CodegenError, generatable

ANCHORS = (MatmulOp, ReduceOp, SoftmaxOp, LogSoftmaxOp)
"""Ops a generated kernel may hold one of, followed by elementwise ops, but not fuse into one generic; only a
reduction may come after elementwise ops."""


def memref_of(value_type: Attribute) -> MemRefType:
    assert isinstance(value_type, TensorType)
    return MemRefType(value_type.get_element_type(), value_type.get_shape())


@dataclass(frozen=True)
class LoweredKernel:
    """A generated kernel as a `func.func`, and what the runtime needs to split its calls."""

    function: func.FuncOp
    parts: int
    """The most slices its outer loops split into; 1 runs it whole."""
    work: int
    """Scalar results it computes (multiply-adds, for a matmul): what a thread's share is measured in; DYNAMIC_INDEX
    when it depends on `?` dims (the runtime counts its largest array's elements)."""
    parts_rule: PartsRule | None = None
    """Where loop 0's extent has `?` dims: how to count its parts from a call's arrays (at most `parts` otherwise)."""
    packing: Packing | None = None
    """Where it takes its convolution's weights packed (an argument after its outputs), when lowered so."""


@dataclass(frozen=True)
class PartsRule:
    """The most slices a call of a kernel with a dynamic loop 0 splits into: its extent is the product of the
    sizes of `dims` of argument `argument` (an output, whose dims are the nest's), cut into tiles of `tile`."""

    argument: int
    dims: tuple[int, ...]
    tile: int

    def parts(self, shapes: Sequence[Sequence[int]]) -> int:
        """The parts of a call whose arguments (inputs, then outputs) have `shapes`."""
        shape = shapes[self.argument]
        return -(-prod(shape[d] for d in self.dims) // max(self.tile, 1))


@dataclass
class _Parts:
    """The most parts of a kernel's nests, as they are emitted: static, and the rule of the first dynamic loop 0
    (nests split alike, or a part's share of a nest with fewer units is empty)."""

    most: int = 1
    rule: PartsRule | None = None

    def add(self, loops: Loops, output: SSAValue) -> None:
        """A nest over `loops` whose dims are `output`'s (an argument of the kernel's function)."""
        if not loops.dims:
            return
        if loops.extents[0] >= 0:
            self.most = max(self.most, -(-loops.extents[0] // max(loops.tiles[0], 1)))
        elif self.rule is None:
            assert isinstance(output, BlockArgument)
            self.rule = PartsRule(output.index, loops.dims[0], loops.tiles[0])


def _fused_nests(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    results: Sequence[tuple[SSAValue, SSAValue]],
    sources: dict[SSAValue, SSAValue],
    overwritten: SSAValue | None = None,
) -> _Parts:
    """One fused generic per distinct result type; returns the most parts any of them splits into. `overwritten`:
    the input memref that the caller passes as the one output too (`lower_kernel`'s `in_place`). Types, not shapes,
    tell nests apart: two `?` dims of different names are not the same loop."""
    by_type: dict[tuple[tuple[int, ...], tuple[str, ...]], list[tuple[SSAValue, SSAValue]]] = {}
    for value, output in results:
        assert isinstance(value.type, TensorType)
        by_type.setdefault((shape_of(value), dim_names(value.type)), []).append((value, output))
    parts = _Parts()
    for outputs in by_type.values():
        shape = shape_of(outputs[0][0])
        body = FusedBody(sources)
        identity = tuple(range(len(shape)))
        block = body.finish([(body.value(value, identity), element_of(value)) for value, _ in outputs])
        if overwritten is not None and any(operand.access != identity for operand in body.inputs):
            outputs = [(value, overwritten) for value, _ in outputs]
        operands = [*body.inputs, *(Operand(output, identity) for _, output in outputs)]
        loops = scheduled_loops(kernel_op, shape, [o.access for o in operands])
        nest.emit(loops, operands, block, len(body.inputs))
        parts.add(loops, outputs[0][1])
    return parts


def _epilogue(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
    computed: dict[SSAValue, Computed],
    loops: Callable[[list[Access]], Loops],
    rows: tuple[SSAValue, SSAValue] | None = None,
    own_row: int | None = None,
) -> None:
    """The kernel's result, pointwise from the anchor's (a matmul, reduction or softmax) in the output buffer.

    `loops` plans the nest from the accesses; loop 0 must be split exactly as the anchor's was. With `own_row`
    (the count of row dims), the result has the anchor's input shape and reads each row's reduced value.
    """
    value, output = result
    identity = tuple(range(len(shape_of(value))))
    row_read = (*identity[:own_row], *(None,) * (len(identity) - own_row)) if own_row is not None else identity

    def pointwise(compute: Computed) -> Computed:
        # Another element of the anchor's result may belong to another thread's rows, not yet computed.
        def read(body: FusedBody, access: Access) -> SSAValue:
            if access not in (identity, row_read):
                raise CodegenError(f"kernel @{kernel_op.sym_name.data}: its epilogue must read {value} pointwise")
            return compute(body, access)

        return read

    body = FusedBody(sources, {anchor: pointwise(compute) for anchor, compute in computed.items()})
    block = body.finish([(body.value(value, identity), element_of(value))])
    operands = [*body.inputs, Operand(output, identity)]
    nest.emit(loops([o.access for o in operands]), operands, block, len(body.inputs), rows)


_REASSOC = FastMathFlagsAttr([FastMathFlag.REASSOC])

_REDUCTIONS: dict[type[Operation], tuple[float, Callable[[ScalarBuilder, SSAValue, SSAValue], SSAValue]]] = {
    ReduceSumOp: (0.0, lambda b, acc, x: b.emit(arith.AddfOp(acc, x, _REASSOC))),
    ReduceMeanOp: (0.0, lambda b, acc, x: b.emit(arith.AddfOp(acc, x, _REASSOC))),
    ReduceProdOp: (1.0, lambda b, acc, x: b.emit(arith.MulfOp(acc, x, _REASSOC))),
    ReduceMaxOp: (float("-inf"), lambda b, acc, x: b.maximum(acc, x)),
    ReduceMinOp: (float("inf"), lambda b, acc, x: b.minimum(acc, x)),
}
"""Initial value and combining step of each reduction; sums may be reassociated so LLVM vectorizes them."""


class _RowNests:
    """Nests over the rows of a row op (a reduction over trailing axes, a softmax over the last): one plan of the
    row loops for all of them, so every nest splits its rows between threads alike."""

    def __init__(self, nest: Nest, rows: tuple[int, ...], row_loops: Loops):
        self.nest = nest
        self.rows = rows
        self.row_loops = row_loops

    def with_columns(self, columns: tuple[int, ...], accesses: Sequence[Access]) -> Loops:
        """The row loops, then loops over `columns` (dims numbered after the row dims), coalesced as `plan_loops`
        coalesces: only where every access walks them in step. An operand broadcast along some of them (a
        per-column scale of 10 against 10 x 10 columns) keeps their loops apart: one flat index cannot address
        it."""
        first = len(self.rows)
        shape = (*self.rows, *columns)
        column_loops = plan_loops(shape, range(first, len(shape)), [0] * len(shape), accesses, keep_first=False)
        loops = self.row_loops
        return Loops(
            (*loops.dims, *column_loops.dims),
            (*loops.extents, *column_loops.extents),
            (*loops.tiles, *column_loops.tiles),
            shape,
        )

    def fill(self, target: SSAValue, value: float, access: Access) -> None:
        """target[rows of this part] = value."""
        body = FusedBody({})
        block = body.finish([(body.builder.const(value, element_of(target)), element_of(target))])
        self.nest.emit(self.row_loops, [Operand(target, access)], block, 0)

    def reduce(
        self,
        target: tuple[SSAValue, Access],
        columns: tuple[int, ...],
        sources: dict[SSAValue, SSAValue],
        inputs: Sequence[Callable[[FusedBody], SSAValue]],
        step: Callable[[ScalarBuilder, list[SSAValue], SSAValue], SSAValue],
    ) -> None:
        """target[row] = step(... step(target[row], inputs at (row, column 0)) ...) over every column; each input
        is an element the body loads, or computes from the kernel's `sources` (a reduction's prologue)."""
        body = FusedBody(sources)
        elements = [element(body) for element in inputs]
        accumulator = body.block.insert_arg(element_of(target[0]), len(body.block.args))
        result = step(body.builder, elements, accumulator)
        body.block.add_ops([*body.builder.ops, LinalgYieldOp(result)])
        operands = [*body.inputs, Operand(*target)]
        loops = self.with_columns(columns, [o.access for o in operands])
        reductions = len(loops.dims) - len(self.row_loops.dims)
        self.nest.emit(loops, operands, body.block, len(body.inputs), reductions=reductions)


def _row_kernel(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    anchor: Operation,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
) -> tuple[_Parts, int]:
    """A reduction over trailing axes or a softmax over the last one, then the kernel's epilogue; (parts, work).

    A reduction may read its input through elementwise ops before it (its prologue, computed in the reducing
    loop), and its epilogue may return to the input's shape (a normalization: `x * rsqrt(mean(x * x) + eps)`),
    reading each row's reduced value; that epilogue recomputes what it reads of the prologue."""
    b = nest.b
    x = anchor.operands[0]
    shape = shape_of(x)
    if isinstance(anchor, ReduceOp):
        kept = len(shape) - len(anchor.reduced_axes())
    else:
        kept = len(shape) - 1
    rows, columns = shape[:kept], shape[kept:]
    value, output = result
    out_rank = len(shape_of(value))
    row_access = tuple(range(kept))
    x_access = tuple(range(len(shape)))
    normalizes = isinstance(anchor, ReduceOp) and shape_of(value) != shape_of(anchor.results[0])
    # A reduction accumulates in the output, unless the epilogue changes the element type (a row max compared
    # with a bound is i1) or returns to the input's shape: then in a buffer of its own, one element per row.
    accumulator = output
    # The rows' `?` sizes, for per-row buffers: the output's first `kept` dims are the rows.
    row_sizes = [nest.as_index(nest.dim(output, k)) for k in range(kept) if rows[k] < 0]
    if isinstance(anchor, ReduceOp) and (normalizes or element_of(output) != element_of(anchor.results[0])):
        accumulator = b.emit(memref.AllocOp.get(element_of(anchor.results[0]), 64, rows, row_sizes))

    def accumulated(body: FusedBody, access: Access) -> SSAValue:
        return body.load(output, access) if accumulator is output else body.load(accumulator, access[:kept])

    # Every nest splits the same row loops, planned from every access any of them makes (the column
    # terms, numbered from `kept`, take no part): a probe body of the epilogue gives its accesses.
    probe = FusedBody(sources, {anchor.results[0]: accumulated})
    probe.value(value, tuple(range(out_rank)))
    prologue = FusedBody(sources)
    prologue.value(x, x_access)
    accesses = [o.access for o in (*probe.inputs, *prologue.inputs)] + [row_access, x_access, tuple(range(out_rank))]
    row_loops = plan_loops(rows, range(kept), [0] * kept, accesses, keep_first=False)
    nests = _RowNests(nest, rows, row_loops)
    out_access = (
        tuple(range(out_rank))
        if not isinstance(anchor, ReduceOp) or normalizes
        else (*row_access, *(None,) * (out_rank - kept))
    )
    computed: dict[SSAValue, Computed]
    if isinstance(anchor, ReduceOp):
        initial, combine = _REDUCTIONS[type(anchor)]
        target = (output, out_access) if accumulator is output else (accumulator, row_access)
        nests.fill(target[0], initial, target[1])

        def element(body: FusedBody) -> SSAValue:
            return body.value(x, x_access)

        nests.reduce(target, columns, sources, [element], lambda sb, xs, acc: combine(sb, acc, xs[0]))
        count: float | SSAValue | None = None
        if isinstance(anchor, ReduceMeanOp):
            # A `?` count of columns is read at run time, converted once before the nests that divide by it.
            sizes = [nest.size_of(kept + i, c, prologue.inputs) for i, c in enumerate(columns)]
            total_columns = nest.multiply(sizes)
            if isinstance(total_columns, int):
                count = float(total_columns)
            else:
                mean_type = element_of(anchor.results[0])
                assert isinstance(mean_type, AnyFloat)
                count = b.emit(arith.SIToFPOp(b.emit(arith.IndexCastOp(total_columns, i64)), mean_type))

        def reduced(body: FusedBody, access: Access) -> SSAValue:
            loaded = accumulated(body, access)
            if count is None:
                return loaded
            divisor = count if isinstance(count, SSAValue) else body.builder.like(count, loaded)
            return body.builder.div(loaded, divisor)

        computed = {anchor.results[0]: reduced}
        if normalizes:
            _epilogue(
                nest, kernel_op, result, sources, computed, lambda a: nests.with_columns(columns, a), own_row=kept
            )
        elif value is not anchor.results[0] or count is not None:
            _epilogue(nest, kernel_op, result, sources, computed, lambda _: row_loops)
        if accumulator is not output:
            b.insert(memref.DeallocOp.get(accumulator))
    else:
        # Each row's max and sum of exponentials; a part fills only its own rows.
        source = sources[x]
        element_type = element_of(x)
        highest = b.emit(memref.AllocOp.get(element_type, 64, rows, row_sizes))
        total = b.emit(memref.AllocOp.get(element_type, 64, rows, row_sizes))

        def x_element(body: FusedBody) -> SSAValue:
            return body.load(source, x_access)

        def row_highest(body: FusedBody) -> SSAValue:
            return body.load(highest, row_access)

        nests.fill(highest, float("-inf"), row_access)
        nests.reduce((highest, row_access), columns, sources, [x_element], lambda sb, xs, acc: sb.maximum(acc, xs[0]))
        nests.fill(total, 0.0, row_access)

        def exp_sum(sb: ScalarBuilder, xs: list[SSAValue], acc: SSAValue) -> SSAValue:
            return sb.emit(arith.AddfOp(acc, exp_of(sb, sb.sub(xs[0], xs[1])), _REASSOC))

        nests.reduce((total, row_access), columns, sources, [x_element, row_highest], exp_sum)
        log = isinstance(anchor, LogSoftmaxOp)

        def normalized(body: FusedBody, access: Access) -> SSAValue:
            sb = body.builder
            shifted = sb.sub(body.load(source, access), body.load(highest, access[:kept]))
            row_total = body.load(total, access[:kept])
            if log:
                return sb.sub(shifted, log_of(sb, row_total))
            return sb.div(exp_of(sb, shifted), row_total)

        computed = {anchor.results[0]: normalized}
        _epilogue(nest, kernel_op, result, sources, computed, lambda a: nests.with_columns(columns, a))
        b.insert(memref.DeallocOp.get(highest))
        b.insert(memref.DeallocOp.get(total))
    parts = _Parts()
    parts.add(row_loops, output)
    return parts, static_product(shape)


def lower_kernel(kernel_op: kernel.FuncOp, in_place: int | None = None, prepacked: bool = False) -> LoweredKernel:
    """The `func.func` of a generated kernel; raises CodegenError for an op it cannot generate.

    `prepacked`: a convolution kernel takes its producer's weights packed (`conv.packing`) in one more argument,
    after its outputs, instead of packing each block's itself on every call; ignored for another kernel.

    `in_place` names an input that the caller passes as the (one) output too, as the memory plan reuses a dying
    input of a pointwise kernel; the signature is unchanged. LLVM's vectorizer guards its loop with a run-time
    check that the arrays do not overlap. Where every operand walks the loop alike, the check is on the distance
    between pointers and an in-place call passes it. Where one is broadcast (a batch norm's per-channel scale), it
    checks that address ranges are disjoint, which an in-place call fails, so the scalar loop would run. There the
    result is stored through the input's memref, so the load and store of an element share a pointer. (Not
    everywhere: through one pointer LLVM turns an in-place relu's store into a slower masked store.)"""
    name = kernel_op.sym_name.data
    block = kernel_op.body.block
    ops = [op for op in block.ops if not isinstance(op, kernel.YieldOp)]
    for op in ops:
        if not generatable(op):
            raise CodegenError(
                f"kernel @{name}: cannot generate code for {op.name} on {[str(v.type) for v in op.operands]}"
            )
    terminator = block.last_op
    assert isinstance(terminator, kernel.YieldOp)
    inputs = [memref_of(arg.type) for arg in block.args]
    outputs = [memref_of(value.type) for value in terminator.values]
    packed = packing(kernel_op) if prepacked else None
    extra = [MemRefType(f32, packed.shape)] if packed is not None else []
    entry = Block(arg_types=[*inputs, *outputs, *extra, index, index])
    args = list(entry.args)
    part, parts = args[-2], args[-1]
    sources: dict[SSAValue, SSAValue] = dict(zip(block.args, args[: len(inputs)], strict=True))
    results = list(zip(terminator.values, args[len(inputs) : len(inputs) + len(outputs)], strict=True))
    b = ScalarBuilder()
    nest = Nest(b, part, parts)
    if isinstance(ops[0], MaxPoolOp | AvgPoolOp):
        if in_place is not None or len(ops) != 1 or len(results) != 1:
            raise CodegenError(f"kernel @{name}: a generated pool kernel is the pool alone, not in place")
        count, work = pool_kernel(nest, kernel_op, ops[0], results[0], sources)
        return _finish(name, entry, b, count, work)
    if isinstance(ops[0], ConvOp):
        if in_place is not None or len(results) != 1:
            raise CodegenError(f"kernel @{name}: a generated convolution kernel returns one value, not in place")
        weights = args[len(inputs) + len(outputs)] if packed is not None else None
        count, work = conv_kernel(nest, kernel_op, ops, results[0], sources, weights)
        return replace(_finish(name, entry, b, count, work), packing=packed)
    anchors = [op for op in ops if isinstance(op, ANCHORS)]
    prologue = ops[: ops.index(anchors[0])] if anchors else []
    if len(anchors) > 1 or (prologue and not isinstance(anchors[0], ReduceOp)):
        raise CodegenError(
            f"kernel @{name}: a matmul, reduction or softmax must be the kernel's only one, and only a reduction "
            "may follow elementwise ops"
        )
    if in_place is not None and (anchors or len(results) != 1 or inputs[in_place] != outputs[0]):
        raise CodegenError(f"kernel @{name}: only a pointwise kernel's one result may overwrite an input")
    if anchors:
        anchor = anchors[0]
        shapes = [shape_of(anchor.results[0])]
        if isinstance(anchor, ReduceOp):
            shapes.append(shape_of(anchor.operands[0]))  # a normalization
        if len(results) != 1 or shape_of(results[0][0]) not in shapes:
            raise CodegenError(f"kernel @{name}: a kernel of a {anchor.name} must return one value of its shape")
        if isinstance(anchor, MatmulOp):
            count, work = _matmul_kernel(nest, kernel_op, anchor, results[0], sources)
            return _finish(name, entry, b, count, work)
        parts, work = _row_kernel(nest, kernel_op, anchor, results[0], sources)
    else:
        overwritten = args[in_place] if in_place is not None else None
        parts = _fused_nests(nest, kernel_op, results, sources, overwritten)
        sizes = [static_product(shape_of(value)) for value, _ in results]
        work = DYNAMIC_INDEX if DYNAMIC_INDEX in sizes else sum(sizes)
    return _finish(name, entry, b, parts.most, work, parts.rule)


def _finish(
    name: str, entry: Block, b: ScalarBuilder, parts: int, work: int, rule: PartsRule | None = None
) -> LoweredKernel:
    """The kernel's function: `entry` (arguments: inputs, outputs, a convolution's packed weights where it takes
    them, part, parts) holding the body built in `b`."""
    entry.add_ops([*b.ops, func.ReturnOp()])
    signature = [arg.type for arg in entry.args]
    function = func.FuncOp(name, FunctionType.from_lists(signature, []), Region(entry))
    function.attributes["llvm.emit_c_interface"] = UnitAttr()
    return LoweredKernel(function, parts, work, rule)


def _matmul_kernel(
    nest: Nest,
    kernel_op: kernel.FuncOp,
    matmul: MatmulOp,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
) -> tuple[int, int]:
    """The matmul into the output buffer, then the kernel's epilogue over the same rows; (parts, work)."""
    schedule = kernel_op.schedule
    assert schedule is not None
    plan: MatmulPlan = matmul_plan(shape_of(matmul.lhs), shape_of(matmul.rhs), schedule)
    output = result[1]
    rows = nest.thread_range(plan.m, plan.rows)
    emit_matmul(nest.b, plan, sources[matmul.lhs], sources[matmul.rhs], output, rows)
    if result[0] is not matmul.result:

        def loops(accesses: list[Access]) -> Loops:
            return plan_loops(shape_of(matmul.result), range(2), [0, 0], accesses, keep_first=True)

        computed: dict[SSAValue, Computed] = {matmul.result: lambda body, access: body.load(output, access)}
        _epilogue(nest, kernel_op, result, sources, computed, loops, rows)
    return plan.parts, plan.m * plan.n * plan.k


@dataclass(frozen=True)
class KernelToLinalgPass(ModulePass):
    """Rewrite generated `kernel.func`s into `func.func`s of linalg on memrefs; library kernels stay."""

    name = "kernel-to-linalg"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel_op in [o for o in op.walk() if isinstance(o, kernel.FuncOp) and o.is_generated]:
            Rewriter.replace_op(kernel_op, lower_kernel(kernel_op).function)
