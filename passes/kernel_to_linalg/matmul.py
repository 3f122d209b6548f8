"""A generated f32 matmul: a register-blocked vector micro-kernel over packed panels of B.

C = A @ B for row-major A (M x K), B (K x N), C (M x N); one call computes the rows
[begin, end) it is given (a thread's share: whole micro-tiles, but for the last part). The
loops, outermost first (Goto and van de Geijn's GEMM layout, without packing A):

- K in blocks of `depth`, so a packed panel of B stays in L1;
- N in panels of `cols` (a few vectors), then single vectors for what is left: the panel's
  `depth` rows of B are copied into a contiguous stack buffer, which removes the cache-set
  conflicts of B's long row stride;
- rows in micro-tiles of `rows` (then one tile of the M % rows rows left, in the last part):
  `rows` x `cols` accumulators stay in vector registers through the K block, each step one
  vector FMA per accumulator with a broadcast element of A.

The first K block starts from zero, later ones accumulate onto C. The last N % width columns
are scalar loops over all of K.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, Float32Type, IndexType, VectorType, f32
from xdsl.ir import Block, SSAValue

from gnomon.dialects.graph.base import ints
from gnomon.dialects.kernel import ScheduleAttr
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder

index = IndexType()

DEPTH = 256
"""K block: a packed panel of B is DEPTH x cols floats (16 KiB for 16 columns)."""

LoopBody = Callable[[ScalarBuilder, SSAValue, list[SSAValue]], list[SSAValue]]
"""Emits a loop's body given its induction variable and carried values; returns the values to carry."""


@dataclass(frozen=True)
class MatmulPlan:
    """The blocking of one matmul: sizes from the operand shapes, micro-tile from the schedule."""

    m: int
    n: int
    k: int
    rows: int
    """Micro-tile rows: also the unit in which rows are shared between threads."""
    width: int
    """Vector width in f32 lanes."""
    cols: int
    """Micro-tile columns, a multiple of `width`."""
    depth: int

    @property
    def parts(self) -> int:
        return -(-self.m // self.rows)


def matmul_plan(lhs: tuple[int, ...], rhs: tuple[int, ...], schedule: ScheduleAttr) -> MatmulPlan:
    """The plan for (M x K) @ (K x N), from the schedule's `tile = [rows, cols]` and `vector` where set.

    The default micro-tile, 6 rows x 2 vectors, keeps 12 accumulators, two vectors of B and a
    broadcast of A in AVX2's 16 vector registers.
    """
    tile = ints(schedule.tile)
    width = schedule.vector.data
    rows = tile[0] if len(tile) == 2 and tile[0] else 6
    cols = tile[1] if len(tile) == 2 and tile[1] and tile[1] % width == 0 else 2 * width
    return MatmulPlan(lhs[0], rhs[1], lhs[1], rows, width, cols, min(DEPTH, lhs[1]))


def for_loop(
    b: ScalarBuilder, lower: SSAValue, upper: SSAValue, step: int, body: LoopBody, carried: list[SSAValue] | None = None
) -> list[SSAValue]:
    """An `scf.for` appended to `b`; returns its results (the carried values after the last step)."""
    initial = carried or []
    block = Block(arg_types=[index, *(value.type for value in initial)])
    inner = ScalarBuilder()
    yields = body(inner, block.args[0], list(block.args[1:]))
    block.add_ops([*inner.ops, scf.YieldOp(*yields)])
    op = scf.ForOp(lower, upper, b.const(step, index), initial, block)
    b.insert(op)
    return list(op.results)


def _add(b: ScalarBuilder, x: SSAValue, y: int) -> SSAValue:
    return x if y == 0 else b.emit(arith.AddiOp(x, b.const(y, index)))


@dataclass(frozen=True)
class _Emitter:
    """The operands of one matmul and the buffer B's panels are packed into."""

    plan: MatmulPlan
    a: SSAValue
    b: SSAValue
    c: SSAValue
    packed: SSAValue

    @property
    def vec(self) -> VectorType[Float32Type]:
        return VectorType(f32, [self.plan.width])

    def pack(self, b: ScalarBuilder, k0: SSAValue, depth: SSAValue, j: SSAValue, lanes: int) -> None:
        """packed[0:depth, 0:lanes*width] = B[k0:k0+depth, j:j+lanes*width]."""

        def row(rb: ScalarBuilder, kk: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            source = rb.emit(arith.AddiOp(k0, kk))
            for lane in range(lanes):
                loaded = rb.emit(vector.LoadOp(self.b, [source, _add(rb, j, lane * self.plan.width)], self.vec))
                rb.insert(vector.StoreOp(loaded, self.packed, [kk, rb.const(lane * self.plan.width, index)]))
            return []

        for_loop(b, b.const(0, index), depth, 1, row)

    def tile(
        self,
        b: ScalarBuilder,
        corner: tuple[SSAValue, SSAValue, SSAValue],
        depth: SSAValue,
        shape: tuple[int, int],
        first: bool,
    ) -> None:
        """C[i:i+rows, j:j+lanes*width] (+)= A[i:i+rows, k0:k0+depth] @ packed, accumulating in registers."""
        i, j, k0 = corner
        rows, lanes = shape
        width, vec = self.plan.width, self.vec
        row_index = [_add(b, i, r) for r in range(rows)]
        col_index = [_add(b, j, lane * width) for lane in range(lanes)]
        if first:
            zero = b.emit(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vec, [0.0] * width)))
            initial = [zero] * (rows * lanes)
        else:
            initial = [
                b.emit(vector.LoadOp(self.c, [row_index[r], col_index[lane]], vec))
                for r in range(rows)
                for lane in range(lanes)
            ]

        def step(sb: ScalarBuilder, kk: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
            column = sb.emit(arith.AddiOp(k0, kk))
            panel = [
                sb.emit(vector.LoadOp(self.packed, [kk, sb.const(lane * width, index)], vec)) for lane in range(lanes)
            ]
            result: list[SSAValue] = []
            for r in range(rows):
                element = sb.emit(memref.LoadOp.get(self.a, [_add(sb, i, r), column]))
                broadcast = sb.emit(vector.BroadcastOp(element, vec))
                result += [
                    sb.emit(vector.FMAOp(broadcast, panel[lane], acc[r * lanes + lane])) for lane in range(lanes)
                ]
            return result

        final = for_loop(b, b.const(0, index), depth, 1, step, initial)
        for r in range(rows):
            for lane in range(lanes):
                b.insert(vector.StoreOp(final[r * lanes + lane], self.c, [row_index[r], col_index[lane]]))

    def k_block(self, b: ScalarBuilder, k0: SSAValue, rows: tuple[SSAValue, SSAValue, SSAValue], first: bool) -> None:
        """One K block of this part's rows: every vector panel of columns, every micro-tile of rows."""
        plan = self.plan
        begin, whole_end, end = rows
        depth = b.emit(arith.MinUIOp(b.const(plan.depth, index), b.emit(arith.SubiOp(b.const(plan.k, index), k0))))
        lanes = plan.cols // plan.width
        panels = [(0, plan.n // plan.cols * plan.cols, lanes)]
        panels.append((panels[0][1], plan.n // plan.width * plan.width, 1))
        for start, stop, panel_lanes in panels:
            if start == stop:
                continue

            def panel(
                pb: ScalarBuilder, j: SSAValue, _: list[SSAValue], panel_lanes: int = panel_lanes
            ) -> list[SSAValue]:
                self.pack(pb, k0, depth, j, panel_lanes)

                def full(tb: ScalarBuilder, i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                    self.tile(tb, (i, j, k0), depth, (plan.rows, panel_lanes), first)
                    return []

                for_loop(pb, begin, whole_end, plan.rows, full)
                if plan.m % plan.rows:
                    # Runs once, in the last part only: the M % rows rows past the last whole tile.
                    def rest(tb: ScalarBuilder, i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                        self.tile(tb, (i, j, k0), depth, (plan.m % plan.rows, panel_lanes), first)
                        return []

                    for_loop(pb, whole_end, end, plan.rows, rest)
                return []

            for_loop(b, b.const(start, index), b.const(stop, index), panel_lanes * plan.width, panel)

    def scalar_columns(self, b: ScalarBuilder, begin: SSAValue, end: SSAValue, first_column: int) -> None:
        """C[begin:end, first_column:] = A[begin:end] @ B[:, first_column:] with scalar loops."""
        plan = self.plan

        def row(rb: ScalarBuilder, i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            def col(cb: ScalarBuilder, j: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                def step(sb: ScalarBuilder, kk: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
                    product = sb.mul(
                        sb.emit(memref.LoadOp.get(self.a, [i, kk])), sb.emit(memref.LoadOp.get(self.b, [kk, j]))
                    )
                    return [sb.add(acc[0], product)]

                total = for_loop(cb, cb.const(0, index), cb.const(plan.k, index), 1, step, [cb.const(0.0, f32)])
                cb.insert(memref.StoreOp.get(total[0], self.c, [i, j]))
                return []

            for_loop(rb, rb.const(first_column, index), rb.const(plan.n, index), 1, col)
            return []

        for_loop(b, begin, end, 1, row)


def emit_matmul(
    b: ScalarBuilder, plan: MatmulPlan, a: SSAValue, bm: SSAValue, c: SSAValue, rows: tuple[SSAValue, SSAValue]
) -> None:
    """C[begin:end] = A[begin:end] @ B, appended to `b`."""
    begin, end = rows
    tile_rows = b.const(plan.rows, index)
    whole = b.emit(arith.MuliOp(b.emit(arith.DivUIOp(b.emit(arith.SubiOp(end, begin)), tile_rows)), tile_rows))
    part_rows = (begin, b.emit(arith.AddiOp(begin, whole)), end)
    packed = b.emit(memref.AllocaOp.get(f32, alignment=64, shape=[plan.depth, plan.cols]))
    emitter = _Emitter(plan, a, bm, c, packed)
    emitter.k_block(b, b.const(0, index), part_rows, first=True)
    if plan.k > plan.depth:

        def later(kb: ScalarBuilder, k0: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            emitter.k_block(kb, k0, part_rows, first=False)
            return []

        for_loop(b, b.const(plan.depth, index), b.const(plan.k, index), plan.depth, later)
    vector_columns = plan.n // plan.width * plan.width
    if vector_columns < plan.n:
        emitter.scalar_columns(b, begin, end, vector_columns)
