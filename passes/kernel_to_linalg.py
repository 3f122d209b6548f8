"""`kernel-to-linalg`: generated kernels as upstream linalg, arith and math on memrefs.

Each `kernel.func` of kind "generated" becomes a `func.func` of the same name (with
`llvm.emit_c_interface`) that takes the kernel's inputs, then its outputs, as memrefs, then
`%part, %parts : index`: a call computes the `part`-th of `parts` slices of the outermost loop,
so the runtime can run the slices on threads of its own (the bundled MLIR has no OpenMP runtime).

- The kernel's ops are fused into one `linalg.generic` per result shape (usually one): its body
  computes every op for one element and reads the inputs through indexing maps that say where
  broadcasting, transposes and expands move the index, so no intermediate touches memory.
- Loops of extent 1 are dropped, and neighbouring loops that every operand walks contiguously
  are coalesced after a `memref.collapse_shape` of the operands (a 1x64x56x56 add is one loop of
  200704): LLVM's loop vectorizer gets long inner loops and the threads a long outer one.
- The schedule's loop order permutes the loops. A loop with a tile size is split into an
  `scf.for` over tiles, with the `linalg.generic` on `memref.subview`s of one tile (a blocked
  transpose); a tiled loop is never coalesced.
- A kernel may instead start with an anchor that is not one pointwise generic, and follow it
  with an elementwise epilogue over the anchor's result, in place in the output buffer and split
  between threads exactly as the anchor is:
  - a `graph.matmul` (2-D, f32): a register-blocked vector micro-kernel
    (`gnomon.runtime.codegen.matmul`), split by rows;
  - a float reduction over trailing axes: a fill of the initial value, then a generic with a
    reduction loop (sums reassociable, so that LLVM vectorizes them), split by rows;
  - a softmax (or log-softmax) over the last axis: each row's max and sum of exponentials into
    per-row buffers by two reductions, then one pointwise generic that normalizes and applies
    the epilogue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.arith import FastMathFlagsAttr
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StridedLayoutAttr,
    TensorType,
    UnitAttr,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import LogSoftmaxOp, SoftmaxOp
from gnomon.dialects.graph.reduce import ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceOp, ReduceProdOp, ReduceSumOp
from gnomon.dialects.graph.tensor import ExpandOp, TransposeOp
from gnomon.runtime.codegen.approx import ScalarBuilder, exp_of, log_of
from gnomon.runtime.codegen.matmul import MatmulPlan, emit_matmul, matmul_plan
from gnomon.runtime.codegen.scalar import SCALAR_OPS
from gnomon.runtime.codegen.support import CodegenError, generatable

ANCHORS = (MatmulOp, ReduceOp, SoftmaxOp, LogSoftmaxOp)
"""Ops a generated kernel may start with and follow with elementwise ops, but not fuse into one generic."""

Term = int | None
"""One index of an operand, as a loop of the nest (an output dim), or None for index 0."""
Access = tuple[Term, ...]
"""Where an operand is read for one point of the nest: one term per operand dim."""

index = IndexType()


def memref_of(value_type: Attribute) -> MemRefType:
    assert isinstance(value_type, TensorType)
    return MemRefType(value_type.get_element_type(), value_type.get_shape())


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType | MemRefType)
    return tuple(value.type.get_shape())


def _broadcast(operand: SSAValue, result: SSAValue, access: Access) -> Access:
    """The operand's access for a result access, under NumPy broadcasting (trailing dims align)."""
    operand_shape, result_shape = _shape(operand), _shape(result)
    offset = len(result_shape) - len(operand_shape)
    return tuple(
        None if size == 1 and result_shape[offset + k] != 1 else access[offset + k]
        for k, size in enumerate(operand_shape)
    )


@dataclass(frozen=True)
class LoweredKernel:
    """A generated kernel as a `func.func`, and what the runtime needs to split its calls."""

    function: func.FuncOp
    parts: int
    """The most slices its outer loops split into; 1 runs it whole."""
    work: int
    """Scalar results it computes (multiply-adds, for a matmul): what a thread's share is measured in."""


@dataclass
class _Operand:
    """One operand of a fused `linalg.generic`: a memref argument and where the nest reads it."""

    memref: SSAValue
    access: Access


Computed = Callable[["_FusedBody", Access], SSAValue]
"""Emits the element of a kernel value at an access from other values (a softmax from its row's max and sum)."""


class _FusedBody:
    """The scalar body of a fused loop nest, built from the kernel's values back to its sources."""

    def __init__(self, sources: dict[SSAValue, SSAValue], computed: dict[SSAValue, Computed] | None = None):
        self.sources = sources
        """Kernel values that live in memory (the kernel's arguments), and their memrefs."""
        self.computed = computed or {}
        self.builder = ScalarBuilder()
        self.block = Block()
        self.inputs: list[_Operand] = []
        self._memo: dict[tuple[SSAValue, Access], SSAValue] = {}
        self._loads: dict[tuple[SSAValue, Access], SSAValue] = {}

    def value(self, value: SSAValue, access: Access) -> SSAValue:
        """The element of `value` at `access`, computed once per distinct access."""
        key = (value, access)
        if key not in self._memo:
            self._memo[key] = self._compute(value, access)
        return self._memo[key]

    def load(self, source: SSAValue, access: Access) -> SSAValue:
        """The element of memref `source` at `access`: an input of the generic, once per distinct access."""
        key = (source, access)
        if key not in self._loads:
            memref_type = source.type
            assert isinstance(memref_type, MemRefType)
            self.inputs.append(_Operand(source, access))
            self._loads[key] = self.block.insert_arg(memref_type.element_type, len(self.block.args))
        return self._loads[key]

    def _compute(self, value: SSAValue, access: Access) -> SSAValue:
        if value in self.computed:
            return self.computed[value](self, access)
        source = self.sources.get(value)
        if source is not None:
            return self.load(source, access)
        op = value.owner
        assert isinstance(op, Operation)
        if isinstance(op, TransposeOp):
            inner: list[Term] = [None] * len(access)
            for i, p in enumerate(ints(op.permutation)):
                inner[p] = access[i]
            return self.value(op.input, tuple(inner))
        if isinstance(op, ExpandOp):
            return self.value(op.input, _broadcast(op.input, op.result, access))
        scalars = [self.value(operand, _broadcast(operand, op.results[0], access)) for operand in op.operands]
        return SCALAR_OPS[type(op)].emit(self.builder, op, scalars)

    def finish(self, outputs: Sequence[tuple[SSAValue, Attribute]]) -> Block:
        """The block yielding `outputs` (scalar, element type of its memref), after an argument per output."""
        for _, element_type in outputs:
            self.block.insert_arg(element_type, len(self.block.args))
        self.block.add_ops([*self.builder.ops, LinalgYieldOp(*(scalar for scalar, _ in outputs))])
        return self.block


@dataclass(frozen=True)
class _Loops:
    """The loops of a nest after dropping unit loops, ordering and coalescing."""

    dims: tuple[tuple[int, ...], ...]
    """The output dims each loop covers, outermost loop first."""
    extents: tuple[int, ...]
    tiles: tuple[int, ...]
    """Tile size per loop; 0 for an untiled loop."""

    def loop_of(self) -> dict[int, int]:
        return {d: loop for loop, dims in enumerate(self.dims) for d in dims}


def _plan_loops(
    shape: Sequence[int], order: Sequence[int], tiles: Sequence[int], accesses: Sequence[Access], keep_first: bool
) -> _Loops:
    """Order the output dims, drop unit ones, and coalesce neighbours every access walks in step.

    `keep_first` keeps dim 0 as loop 0 on its own, whatever its extent: a matmul's epilogue runs
    over the rows the matmul gave this part.
    """
    tile = [t if 0 < t < shape[d] else 0 for d, t in enumerate(tiles)]
    kept = [d for d in order if shape[d] != 1 and not (keep_first and d == 0)]
    kept = [0, *kept] if keep_first else kept
    walked = [[t for t in access if t in kept] for access in accesses]

    def adjacent(dims: list[int], a: int, b: int) -> bool:
        if a not in dims or b not in dims:
            return a not in dims and b not in dims
        return dims.index(b) == dims.index(a) + 1

    def mergeable(previous: int, d: int) -> bool:
        untiled = not tile[d] and not tile[previous] and not (keep_first and previous == 0)
        return untiled and all(adjacent(w, previous, d) for w in walked)

    groups: list[list[int]] = []
    for d in kept:
        if groups and mergeable(groups[-1][-1], d):
            groups[-1].append(d)
        else:
            groups.append([d])
    return _Loops(
        tuple(tuple(g) for g in groups),
        tuple(prod(shape[d] for d in g) for g in groups),
        tuple(tile[g[0]] if len(g) == 1 else 0 for g in groups),
    )


def _collapse(access: Access, loops: _Loops) -> tuple[list[list[int]], list[int]]:
    """How an operand's dims group into the nest's loops: the reassociation, and each group's loop.

    A dim read at index 0 (broadcast, or of a dropped unit loop) joins its neighbour's group.
    """
    loop_of = loops.loop_of()
    groups: list[list[int]] = []
    group_loops: list[int] = []
    leading: list[int] = []
    for k, term in enumerate(access):
        loop = loop_of.get(term) if term is not None else None
        if loop is None:
            (groups[-1] if groups else leading).append(k)
        elif group_loops and group_loops[-1] == loop:
            groups[-1].append(k)
        else:
            groups.append([*leading, k])
            leading = []
            group_loops.append(loop)
    return groups, group_loops


class _Nest:
    """Emits loop nests into a function body: collapse, split over threads, tile, generic."""

    def __init__(self, b: ScalarBuilder, part: SSAValue, parts: SSAValue):
        self.b = b
        self.part = part
        self.parts = parts
        self._ranges: dict[tuple[int, int], tuple[SSAValue, SSAValue]] = {}

    def index(self, value: int) -> SSAValue:
        return self.b.const(value, index)

    def thread_range(self, extent: int, tile: int) -> tuple[SSAValue, SSAValue]:
        """[begin, end) of loop 0 for this part: an even share of its tiles (or iterations)."""
        if (extent, tile) not in self._ranges:
            self._ranges[extent, tile] = self._thread_range(extent, tile)
        return self._ranges[extent, tile]

    def _thread_range(self, extent: int, tile: int) -> tuple[SSAValue, SSAValue]:
        b = self.b
        unit = max(tile, 1)
        units = self.index(-(-extent // unit))

        def bound(part: SSAValue) -> SSAValue:
            share = b.emit(arith.DivUIOp(b.emit(arith.MuliOp(units, part)), self.parts))
            if unit == 1:
                return share
            return b.emit(arith.MinUIOp(b.emit(arith.MuliOp(share, self.index(unit))), self.index(extent)))

        return bound(self.part), bound(b.emit(arith.AddiOp(self.part, self.index(1))))

    def emit(
        self,
        loops: _Loops,
        operands: list[_Operand],
        body: Block,
        inputs: int,
        rows: tuple[SSAValue, SSAValue] | None = None,
        reductions: int = 0,
    ) -> None:
        """The nest over `operands` (inputs first, then outputs) with `body` as the generic's region.

        Loop 0 runs over this part's share of it, or over `rows` where given; the last `reductions`
        loops reduce (the outputs do not index them) and are never split.
        """
        b = self.b
        collapsed: list[tuple[SSAValue, list[int]]] = []
        memo: dict[tuple[SSAValue, str], SSAValue] = {}
        for operand in operands:
            shape = _shape(operand.memref)
            groups, group_loops = _collapse(operand.access, loops)
            value = operand.memref
            if len(groups) != len(shape):
                key = (operand.memref, repr(groups))
                if key not in memo:
                    memref_type = operand.memref.type
                    assert isinstance(memref_type, MemRefType)
                    result = MemRefType(memref_type.element_type, [prod(shape[k] for k in g) for g in groups])
                    reassociation = ArrayAttr([ArrayAttr([IntegerAttr(k, 64) for k in g]) for g in groups])
                    memo[key] = b.emit(
                        memref.CollapseShapeOp(
                            operands=[operand.memref],
                            properties={"reassociation": reassociation},
                            result_types=[result],
                        )
                    )
                value = memo[key]
            collapsed.append((value, group_loops))
        iterators = [IteratorTypeAttr.parallel()] * (len(loops.dims) - reductions)
        iterators += [IteratorTypeAttr.reduction()] * reductions
        if len(loops.dims) == reductions:
            self._generic(b, loops, collapsed, {}, body, inputs, iterators)
            return
        begin, end = rows if rows is not None else self.thread_range(loops.extents[0], loops.tiles[0])
        tiled = [loop for loop in range(len(loops.dims)) if loop == 0 or loops.tiles[loop]]
        self._tile(b, loops, collapsed, tiled, {}, (begin, end), (body, inputs, iterators))

    def _tile(
        self,
        b: ScalarBuilder,
        loops: _Loops,
        operands: list[tuple[SSAValue, list[int]]],
        tiled: list[int],
        ranges: dict[int, tuple[SSAValue, SSAValue]],
        outer: tuple[SSAValue, SSAValue],
        generic: tuple[Block, int, list[IteratorTypeAttr]],
    ) -> None:
        """Loops over the tiles of each loop in `tiled` (loop 0 within this part's range), then the generic."""
        if not tiled:
            self._generic(b, loops, operands, ranges, *generic)
            return
        loop, rest = tiled[0], tiled[1:]
        begin, end = outer if loop == 0 else (b.const(0, index), b.const(loops.extents[loop], index))
        tile = loops.tiles[loop]
        if not tile:
            ranges = {**ranges, loop: (begin, b.emit(arith.SubiOp(end, begin)))}
            self._tile(b, loops, operands, rest, ranges, outer, generic)
            return
        block = Block(arg_types=[index])
        inner = ScalarBuilder()
        iv = block.args[0]
        size = inner.emit(arith.MinUIOp(inner.const(tile, index), inner.emit(arith.SubiOp(end, iv))))
        self._tile(inner, loops, operands, rest, {**ranges, loop: (iv, size)}, outer, generic)
        block.add_ops([*inner.ops, scf.YieldOp()])
        b.insert(scf.ForOp(begin, end, b.const(tile, index), [], block))

    def _generic(
        self,
        b: ScalarBuilder,
        loops: _Loops,
        operands: list[tuple[SSAValue, list[int]]],
        ranges: dict[int, tuple[SSAValue, SSAValue]],
        body: Block,
        inputs: int,
        iterators: list[IteratorTypeAttr],
    ) -> None:
        views: list[SSAValue] = []
        for value, group_loops in operands:
            if not any(loop in ranges for loop in group_loops):
                views.append(value)
                continue
            memref_type = value.type
            assert isinstance(memref_type, MemRefType)
            shape = memref_type.get_shape()
            strides = [prod(shape[k + 1 :]) for k in range(len(shape))]
            offsets: list[SSAValue | int] = [ranges[loop][0] if loop in ranges else 0 for loop in group_loops]
            sizes: list[SSAValue | int] = [
                ranges[loop][1] if loop in ranges else shape[k] for k, loop in enumerate(group_loops)
            ]
            view_type = MemRefType(
                memref_type.element_type,
                [DYNAMIC_INDEX if loop in ranges else shape[k] for k, loop in enumerate(group_loops)],
                StridedLayoutAttr(strides, None),
            )
            views.append(b.emit(memref.SubviewOp.get(value, offsets, sizes, [1] * len(shape), view_type)))
        count = len(loops.dims)
        maps = [
            AffineMapAttr(AffineMap(count, 0, tuple(AffineExpr.dimension(loop) for loop in group_loops)))
            for _, group_loops in operands
        ]
        b.insert(GenericOp(views[:inputs], views[inputs:], Region(body), maps, iterators))


def _scheduled_loops(kernel_op: kernel.FuncOp, shape: tuple[int, ...], accesses: Sequence[Access]) -> _Loops:
    """The loops of a nest over `shape`, in the schedule's order and tiles where they are for this rank."""
    schedule = kernel_op.schedule
    assert schedule is not None
    order, tiles = list(ints(schedule.order)), list(ints(schedule.tile))
    rank = len(shape)
    scheduled = len(order) == rank
    return _plan_loops(
        shape,
        order if scheduled else range(rank),
        tiles if scheduled and len(tiles) == rank else [0] * rank,
        accesses,
        keep_first=False,
    )


def _fused_nests(
    nest: _Nest,
    kernel_op: kernel.FuncOp,
    results: Sequence[tuple[SSAValue, SSAValue]],
    sources: dict[SSAValue, SSAValue],
    overwritten: SSAValue | None = None,
) -> int:
    """One fused generic per distinct result shape; returns the most parts any of them splits into. `overwritten`:
    the input memref that the caller passes as the one output too (`lower_kernel`'s `in_place`)."""
    by_shape: dict[tuple[int, ...], list[tuple[SSAValue, SSAValue]]] = {}
    for value, output in results:
        by_shape.setdefault(_shape(value), []).append((value, output))
    parts = 1
    for shape, outputs in by_shape.items():
        body = _FusedBody(sources)
        identity = tuple(range(len(shape)))
        block = body.finish([(body.value(value, identity), _element(value)) for value, _ in outputs])
        if overwritten is not None and any(operand.access != identity for operand in body.inputs):
            outputs = [(value, overwritten) for value, _ in outputs]
        operands = [*body.inputs, *(_Operand(output, identity) for _, output in outputs)]
        loops = _scheduled_loops(kernel_op, shape, [o.access for o in operands])
        nest.emit(loops, operands, block, len(body.inputs))
        if loops.dims:
            parts = max(parts, -(-loops.extents[0] // max(loops.tiles[0], 1)))
    return parts


def _element(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType | MemRefType)
    return value.type.get_element_type()


def _epilogue(
    nest: _Nest,
    kernel_op: kernel.FuncOp,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
    computed: dict[SSAValue, Computed],
    loops: Callable[[list[Access]], _Loops],
    rows: tuple[SSAValue, SSAValue] | None = None,
) -> None:
    """The kernel's result, pointwise from the anchor's (a matmul, reduction or softmax) in the output buffer.

    `loops` plans the nest from the accesses; loop 0 must be split exactly as the anchor's was.
    """
    value, output = result
    identity = tuple(range(len(_shape(value))))

    def pointwise(compute: Computed) -> Computed:
        # Another element of the anchor's result may belong to another thread's rows, not yet computed.
        def read(body: _FusedBody, access: Access) -> SSAValue:
            if access != identity:
                raise CodegenError(f"kernel @{kernel_op.sym_name.data}: its epilogue must read {value} pointwise")
            return compute(body, access)

        return read

    body = _FusedBody(sources, {anchor: pointwise(compute) for anchor, compute in computed.items()})
    block = body.finish([(body.value(value, identity), _element(value))])
    operands = [*body.inputs, _Operand(output, identity)]
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

    def __init__(self, nest: _Nest, rows: tuple[int, ...], row_loops: _Loops):
        self.nest = nest
        self.rows = rows
        self.row_loops = row_loops

    def with_columns(self, columns: tuple[int, ...]) -> _Loops:
        """The row loops, then one loop over `columns` (dims numbered after the row dims)."""
        first = len(self.rows)
        dims = tuple(range(first, first + len(columns)))
        loops = self.row_loops
        if not columns or prod(columns) == 1:
            return loops
        return _Loops((*loops.dims, dims), (*loops.extents, prod(columns)), (*loops.tiles, 0))

    def fill(self, target: SSAValue, value: float, access: Access) -> None:
        """target[rows of this part] = value."""
        body = _FusedBody({})
        block = body.finish([(body.builder.const(value, _element(target)), _element(target))])
        self.nest.emit(self.row_loops, [_Operand(target, access)], block, 0)

    def reduce(
        self,
        target: tuple[SSAValue, Access],
        columns: tuple[int, ...],
        inputs: list[tuple[SSAValue, Access]],
        step: Callable[[ScalarBuilder, list[SSAValue], SSAValue], SSAValue],
    ) -> None:
        """target[row] = step(... step(target[row], inputs at (row, column 0)) ...) over every column."""
        body = _FusedBody({})
        elements = [body.load(source, access) for source, access in inputs]
        accumulator = body.block.insert_arg(_element(target[0]), len(body.block.args))
        result = step(body.builder, elements, accumulator)
        body.block.add_ops([*body.builder.ops, LinalgYieldOp(result)])
        operands = [*body.inputs, _Operand(*target)]
        reductions = 1 if columns and prod(columns) != 1 else 0
        self.nest.emit(self.with_columns(columns), operands, body.block, len(body.inputs), reductions=reductions)


def _row_kernel(
    nest: _Nest,
    kernel_op: kernel.FuncOp,
    anchor: Operation,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
) -> tuple[int, int]:
    """A reduction over trailing axes or a softmax over the last one, then the kernel's epilogue; (parts, work)."""
    b = nest.b
    x = anchor.operands[0]
    source = sources[x]
    shape = _shape(x)
    if isinstance(anchor, ReduceOp):
        kept = len(shape) - len(anchor.reduced_axes())
    else:
        kept = len(shape) - 1
    rows, columns = shape[:kept], shape[kept:]
    value, output = result
    out_rank = len(_shape(value))
    row_access = tuple(range(kept))
    x_access = tuple(range(len(shape)))
    # Every nest splits the same row loops, planned from every access any of them makes (the column
    # terms, numbered from `kept`, take no part): a probe body of the epilogue gives its accesses.
    probe = _FusedBody(sources, {anchor.results[0]: lambda body, access: body.load(output, access)})
    probe.value(value, tuple(range(out_rank)))
    accesses = [o.access for o in probe.inputs] + [row_access, x_access, tuple(range(out_rank))]
    row_loops = _plan_loops(rows, range(kept), [0] * kept, accesses, keep_first=False)
    nests = _RowNests(nest, rows, row_loops)
    out_access = (
        tuple(range(out_rank)) if not isinstance(anchor, ReduceOp) else (*row_access, *(None,) * (out_rank - kept))
    )
    computed: dict[SSAValue, Computed]
    if isinstance(anchor, ReduceOp):
        initial, combine = _REDUCTIONS[type(anchor)]
        nests.fill(output, initial, out_access)
        nests.reduce((output, out_access), columns, [(source, x_access)], lambda sb, xs, acc: combine(sb, acc, xs[0]))
        count = prod(columns) if isinstance(anchor, ReduceMeanOp) else None

        def reduced(body: _FusedBody, access: Access) -> SSAValue:
            loaded = body.load(output, access)
            return loaded if count is None else body.builder.div(loaded, body.builder.like(count, loaded))

        computed = {anchor.results[0]: reduced}
        if value is not anchor.results[0] or count is not None:
            _epilogue(nest, kernel_op, result, sources, computed, lambda _: row_loops)
    else:
        # Each row's max and sum of exponentials; a part fills only its own rows.
        element = _element(x)
        highest = b.emit(memref.AllocOp.get(element, 64, rows))
        total = b.emit(memref.AllocOp.get(element, 64, rows))
        nests.fill(highest, float("-inf"), row_access)
        nests.reduce((highest, row_access), columns, [(source, x_access)], lambda sb, xs, acc: sb.maximum(acc, xs[0]))
        nests.fill(total, 0.0, row_access)

        def exp_sum(sb: ScalarBuilder, xs: list[SSAValue], acc: SSAValue) -> SSAValue:
            return sb.emit(arith.AddfOp(acc, exp_of(sb, sb.sub(xs[0], xs[1])), _REASSOC))

        nests.reduce((total, row_access), columns, [(source, x_access), (highest, row_access)], exp_sum)
        log = isinstance(anchor, LogSoftmaxOp)

        def normalized(body: _FusedBody, access: Access) -> SSAValue:
            sb = body.builder
            shifted = sb.sub(body.load(source, access), body.load(highest, access[:kept]))
            row_total = body.load(total, access[:kept])
            if log:
                return sb.sub(shifted, log_of(sb, row_total))
            return sb.div(exp_of(sb, shifted), row_total)

        computed = {anchor.results[0]: normalized}
        _epilogue(nest, kernel_op, result, sources, computed, lambda _: nests.with_columns(columns))
        b.insert(memref.DeallocOp.get(highest))
        b.insert(memref.DeallocOp.get(total))
    parts = row_loops.extents[0] if row_loops.dims else 1
    return parts, prod(shape)


def lower_kernel(kernel_op: kernel.FuncOp, in_place: int | None = None) -> LoweredKernel:
    """The `func.func` of a generated kernel; raises CodegenError for an op it cannot generate.

    `in_place` names an input that the caller passes as the (one) output too, as the memory plan reuses a dying
    input of a pointwise kernel; the signature is unchanged. LLVM's vectorizer guards its loop with a run-time
    check that the arrays do not overlap. Where every operand walks the loop alike, the check is on the distance
    between pointers and an in-place call passes it. Where one is broadcast (a batch norm's per-channel scale), it
    checks that address ranges are disjoint, which an in-place call fails: it ran the scalar loop, 7-8x slower.
    There the result is stored through the input's memref, so the load and store of an element share a pointer.
    (Not everywhere: on one pointer, LLVM turned an in-place relu's store into a masked store, 3-7x slower.)"""
    name = kernel_op.sym_name.data
    block = kernel_op.body.block
    ops = [op for op in block.ops if not isinstance(op, kernel.YieldOp)]
    for op in ops:
        if not generatable(op):
            raise CodegenError(
                f"kernel @{name}: cannot generate code for {op.name} on {[str(v.type) for v in op.operands]}"
            )
    anchors = [op for op in ops if isinstance(op, ANCHORS)]
    if len(anchors) > 1 or (anchors and anchors[0] is not ops[0]):
        raise CodegenError(f"kernel @{name}: a matmul, reduction or softmax must be the kernel's first and only one")
    terminator = block.last_op
    assert isinstance(terminator, kernel.YieldOp)
    inputs = [memref_of(arg.type) for arg in block.args]
    outputs = [memref_of(value.type) for value in terminator.values]
    entry = Block(arg_types=[*inputs, *outputs, index, index])
    args = list(entry.args)
    part, parts = args[-2], args[-1]
    sources: dict[SSAValue, SSAValue] = dict(zip(block.args, args[: len(inputs)], strict=True))
    results = list(zip(terminator.values, args[len(inputs) : len(inputs) + len(outputs)], strict=True))
    if in_place is not None and (anchors or len(results) != 1 or inputs[in_place] != outputs[0]):
        raise CodegenError(f"kernel @{name}: only a pointwise kernel's one result may overwrite an input")
    b = ScalarBuilder()
    nest = _Nest(b, part, parts)
    if anchors:
        anchor = anchors[0]
        if len(results) != 1 or _shape(results[0][0]) != _shape(anchor.results[0]):
            raise CodegenError(f"kernel @{name}: a kernel of a {anchor.name} must return one value of its shape")
        if isinstance(anchor, MatmulOp):
            count, work = _matmul_kernel(nest, kernel_op, anchor, results[0], sources)
        else:
            count, work = _row_kernel(nest, kernel_op, anchor, results[0], sources)
    else:
        overwritten = args[in_place] if in_place is not None else None
        count = _fused_nests(nest, kernel_op, results, sources, overwritten)
        work = sum(prod(_shape(value)) for value, _ in results)
    entry.add_ops([*b.ops, func.ReturnOp()])
    function = func.FuncOp(name, FunctionType.from_lists([*inputs, *outputs, index, index], []), Region(entry))
    function.attributes["llvm.emit_c_interface"] = UnitAttr()
    return LoweredKernel(function, count, work)


def _matmul_kernel(
    nest: _Nest,
    kernel_op: kernel.FuncOp,
    matmul: MatmulOp,
    result: tuple[SSAValue, SSAValue],
    sources: dict[SSAValue, SSAValue],
) -> tuple[int, int]:
    """The matmul into the output buffer, then the kernel's epilogue over the same rows; (parts, work)."""
    schedule = kernel_op.schedule
    assert schedule is not None
    plan: MatmulPlan = matmul_plan(_shape(matmul.lhs), _shape(matmul.rhs), schedule)
    output = result[1]
    rows = nest.thread_range(plan.m, plan.rows)
    emit_matmul(nest.b, plan, sources[matmul.lhs], sources[matmul.rhs], output, rows)
    if result[0] is not matmul.result:

        def loops(accesses: list[Access]) -> _Loops:
            return _plan_loops(_shape(matmul.result), range(2), [0, 0], accesses, keep_first=True)

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
