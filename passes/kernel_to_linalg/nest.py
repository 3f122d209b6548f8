"""Loop nests over memrefs for `kernel-to-linalg`: fused scalar bodies, loop plans and their emission.

A `FusedBody` builds the scalar body of one `linalg.generic` from a kernel's values back to its
memref arguments, reading each through an `Access` (which loop of the nest indexes each dim).
`plan_loops` orders the loops, drops unit ones and coalesces neighbours every operand walks
contiguously; a `Nest` emits the collapsed operands, this part's share of loop 0, the `scf.for`
loops over tiles and the generic itself.

Shapes may hold `?` dims (DYNAMIC_INDEX): a dynamic loop's extent is read at run time, as the product
of `memref.dim`s of an operand that walks its dims, and so is a subview's size; only static 1s are
dropped (a `?` that is 1 at run time keeps a loop of one trip).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    StridedLayoutAttr,
    TensorType,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.tensor import ExpandOp, TransposeOp
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder
from gnomon.passes.kernel_to_linalg.scalar import SCALAR_OPS
from gnomon.passes.kernel_to_linalg.support import CodegenError

Term = int | None
"""One index of an operand, as a loop of the nest (an output dim), or None for index 0."""
Access = tuple[Term, ...]
"""Where an operand is read for one point of the nest: one term per operand dim."""

index = IndexType()

Size = int | SSAValue
"""A loop extent or a dim: a static size, or an index value read at run time (`memref.dim`)."""


def static_product(sizes: Sequence[int]) -> int:
    """The product of sizes; DYNAMIC_INDEX if any of them is dynamic."""
    return DYNAMIC_INDEX if any(s < 0 for s in sizes) else prod(sizes)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType | MemRefType)
    return tuple(value.type.get_shape())


def element_of(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType | MemRefType)
    return value.type.get_element_type()


def _broadcast(operand: SSAValue, result: SSAValue, access: Access) -> Access:
    """The operand's access for a result access, under NumPy broadcasting (trailing dims align)."""
    operand_shape, result_shape = shape_of(operand), shape_of(result)
    offset = len(result_shape) - len(operand_shape)
    return tuple(
        None if size == 1 and result_shape[offset + k] != 1 else access[offset + k]
        for k, size in enumerate(operand_shape)
    )


@dataclass
class Operand:
    """One operand of a fused `linalg.generic`: a memref argument and where the nest reads it."""

    memref: SSAValue
    access: Access


Computed = Callable[["FusedBody", Access], SSAValue]
"""Emits the element of a kernel value at an access from other values (a softmax from its row's max and sum)."""


class FusedBody:
    """The scalar body of a fused loop nest, built from the kernel's values back to its sources."""

    def __init__(self, sources: dict[SSAValue, SSAValue], computed: dict[SSAValue, Computed] | None = None):
        self.sources = sources
        """Kernel values that live in memory (the kernel's arguments), and their memrefs."""
        self.computed = computed or {}
        self.builder = ScalarBuilder()
        self.block = Block()
        self.inputs: list[Operand] = []
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
            self.inputs.append(Operand(source, access))
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
class Loops:
    """The loops of a nest after dropping unit loops, ordering and coalescing."""

    dims: tuple[tuple[int, ...], ...]
    """The output dims each loop covers, outermost loop first."""
    extents: tuple[int, ...]
    """Static extent per loop; DYNAMIC_INDEX where it covers a `?` dim (`Nest.extent` reads it at run time)."""
    tiles: tuple[int, ...]
    """Tile size per loop; 0 for an untiled loop."""
    shape: tuple[int, ...]
    """The nest's shape, which `dims` index."""

    def loop_of(self) -> dict[int, int]:
        return {d: loop for loop, dims in enumerate(self.dims) for d in dims}


def plan_loops(
    shape: Sequence[int], order: Sequence[int], tiles: Sequence[int], accesses: Sequence[Access], keep_first: bool
) -> Loops:
    """Order the output dims, drop unit ones, and coalesce neighbours every access walks in step.

    `keep_first` keeps dim 0 as loop 0 on its own, whatever its extent: a matmul's epilogue runs
    over the rows the matmul gave this part.
    """
    tile = [t if 0 < t and (shape[d] < 0 or t < shape[d]) else 0 for d, t in enumerate(tiles)]
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
    return Loops(
        tuple(tuple(g) for g in groups),
        tuple(static_product([shape[d] for d in g]) for g in groups),
        tuple(tile[g[0]] if len(g) == 1 else 0 for g in groups),
        tuple(shape),
    )


def _collapse(access: Access, loops: Loops) -> tuple[list[list[int]], list[int]]:
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


class Nest:
    """Emits loop nests into a function body: collapse, split over threads, tile, generic."""

    def __init__(self, b: ScalarBuilder, part: SSAValue, parts: SSAValue):
        self.b = b
        self.part = part
        self.parts = parts
        self._ranges: dict[tuple[Size, int], tuple[SSAValue, SSAValue]] = {}
        self._dims: dict[tuple[SSAValue, int], SSAValue] = {}

    def index(self, value: int) -> SSAValue:
        return self.b.const(value, index)

    def dim(self, memref_value: SSAValue, k: int) -> Size:
        """Dim `k` of a memref: its static size, or a `memref.dim` emitted once per (memref, dim)."""
        size = shape_of(memref_value)[k]
        if size >= 0:
            return size
        if (memref_value, k) not in self._dims:
            self._dims[memref_value, k] = self.b.emit(memref.DimOp(memref_value, self.index(k)))
        return self._dims[memref_value, k]

    def multiply(self, sizes: Sequence[Size]) -> Size:
        """The product of sizes, with `arith.muli`s for the dynamic ones."""
        static = prod(s for s in sizes if isinstance(s, int))
        dynamic = [s for s in sizes if not isinstance(s, int)]
        if not dynamic:
            return static
        result = dynamic[0]
        for s in dynamic[1:]:
            result = self.b.emit(arith.MuliOp(result, s))
        return result if static == 1 else self.b.emit(arith.MuliOp(result, self.index(static)))

    def size_of(self, d: int, static: int, operands: Sequence[Operand]) -> Size:
        """Nest dim `d`'s size: `static` if known, else a dim of an operand that walks it (a function argument
        rather than a per-row buffer: its size is read once for every nest)."""
        if static >= 0:
            return static
        found = [(operand.memref, k) for operand in operands for k, term in enumerate(operand.access) if term == d]
        found.sort(key=lambda pair: not isinstance(pair[0], BlockArgument))
        if not found:
            raise CodegenError(f"no operand of the loop nest walks its dynamic dim {d}")
        return self.dim(*found[0])

    def extent(self, loops: Loops, loop: int, operands: Sequence[Operand]) -> Size:
        """Loop `loop`'s extent: static, or the product of its dims' sizes read at run time."""
        if loops.extents[loop] >= 0:
            return loops.extents[loop]
        return self.multiply([self.size_of(d, loops.shape[d], operands) for d in loops.dims[loop]])

    def as_index(self, size: Size) -> SSAValue:
        return self.index(size) if isinstance(size, int) else size

    def thread_range(self, extent: Size, tile: int) -> tuple[SSAValue, SSAValue]:
        """[begin, end) of loop 0 for this part: an even share of its tiles (or iterations)."""
        if (extent, tile) not in self._ranges:
            self._ranges[extent, tile] = self._thread_range(extent, tile)
        return self._ranges[extent, tile]

    def _thread_range(self, extent: Size, tile: int) -> tuple[SSAValue, SSAValue]:
        b = self.b
        unit = max(tile, 1)
        if isinstance(extent, int):
            units = self.index(-(-extent // unit))
        elif unit == 1:
            units = extent
        else:  # ceil(extent / unit) at run time
            units = b.emit(arith.DivUIOp(b.emit(arith.AddiOp(extent, self.index(unit - 1))), self.index(unit)))
        extent_value = self.as_index(extent)

        def bound(part: SSAValue) -> SSAValue:
            share = b.emit(arith.DivUIOp(b.emit(arith.MuliOp(units, part)), self.parts))
            if unit == 1:
                return share
            return b.emit(arith.MinUIOp(b.emit(arith.MuliOp(share, self.index(unit))), extent_value))

        return bound(self.part), bound(b.emit(arith.AddiOp(self.part, self.index(1))))

    def emit(
        self,
        loops: Loops,
        operands: list[Operand],
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
            shape = shape_of(operand.memref)
            groups, group_loops = _collapse(operand.access, loops)
            value = operand.memref
            if len(groups) != len(shape):
                key = (operand.memref, repr(groups))
                if key not in memo:
                    memref_type = operand.memref.type
                    assert isinstance(memref_type, MemRefType)
                    result = MemRefType(
                        memref_type.element_type, [static_product([shape[k] for k in g]) for g in groups]
                    )
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
        tiled = [loop for loop in range(len(loops.dims)) if loop == 0 or loops.tiles[loop]]
        extents = {loop: self.extent(loops, loop, operands) for loop in tiled}
        begin, end = rows if rows is not None else self.thread_range(extents[0], loops.tiles[0])
        self._tile(b, loops, collapsed, tiled, {}, (begin, end), (body, inputs, iterators), extents)

    def _tile(
        self,
        b: ScalarBuilder,
        loops: Loops,
        operands: list[tuple[SSAValue, list[int]]],
        tiled: list[int],
        ranges: dict[int, tuple[SSAValue, SSAValue]],
        outer: tuple[SSAValue, SSAValue],
        generic: tuple[Block, int, list[IteratorTypeAttr]],
        extents: dict[int, Size],
    ) -> None:
        """Loops over the tiles of each loop in `tiled` (loop 0 within this part's range), then the generic."""
        if not tiled:
            self._generic(b, loops, operands, ranges, *generic)
            return
        loop, rest = tiled[0], tiled[1:]
        begin, end = outer if loop == 0 else (b.const(0, index), self.as_index(extents[loop]))
        tile = loops.tiles[loop]
        if not tile:
            ranges = {**ranges, loop: (begin, b.emit(arith.SubiOp(end, begin)))}
            self._tile(b, loops, operands, rest, ranges, outer, generic, extents)
            return
        block = Block(arg_types=[index])
        inner = ScalarBuilder()
        iv = block.args[0]
        size = inner.emit(arith.MinUIOp(inner.const(tile, index), inner.emit(arith.SubiOp(end, iv))))
        self._tile(inner, loops, operands, rest, {**ranges, loop: (iv, size)}, outer, generic, extents)
        block.add_ops([*inner.ops, scf.YieldOp()])
        b.insert(scf.ForOp(begin, end, b.const(tile, index), [], block))

    def _generic(
        self,
        b: ScalarBuilder,
        loops: Loops,
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
            strides = [static_product(shape[k + 1 :]) for k in range(len(shape))]
            offsets: list[SSAValue | int] = [ranges[loop][0] if loop in ranges else 0 for loop in group_loops]
            sizes: list[SSAValue | int] = [
                ranges[loop][1] if loop in ranges else self.dim(value, k) for k, loop in enumerate(group_loops)
            ]
            view_type = MemRefType(
                memref_type.element_type,
                [DYNAMIC_INDEX if loop in ranges else shape[k] for k, loop in enumerate(group_loops)],
                # A dynamic stride prints as `?` only as None (xDSL prints DYNAMIC_INDEX as a number).
                StridedLayoutAttr([stride if stride >= 0 else None for stride in strides], None),
            )
            views.append(b.emit(memref.SubviewOp.get(value, offsets, sizes, [1] * len(shape), view_type)))
        count = len(loops.dims)
        maps = [
            AffineMapAttr(AffineMap(count, 0, tuple(AffineExpr.dimension(loop) for loop in group_loops)))
            for _, group_loops in operands
        ]
        b.insert(GenericOp(views[:inputs], views[inputs:], Region(body), maps, iterators))


def scheduled_loops(kernel_op: kernel.FuncOp, shape: tuple[int, ...], accesses: Sequence[Access]) -> Loops:
    """The loops of a nest over `shape`, in the schedule's order and tiles where they are for this rank."""
    schedule = kernel_op.schedule
    assert schedule is not None
    order, tiles = list(ints(schedule.order)), list(ints(schedule.tile))
    rank = len(shape)
    scheduled = len(order) == rank
    return plan_loops(
        shape,
        order if scheduled else range(rank),
        tiles if scheduled and len(tiles) == rank else [0] * rank,
        accesses,
        keep_first=False,
    )
