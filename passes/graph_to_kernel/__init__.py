"""`graph-to-kernel`: partition each function's graph ops into kernels, the units the runtime launches.

In program order, every graph op except constants and reshapes (which the runtime treats as
data and as views) lands in exactly one kernel:

- a library anchor (convolution, matmul, linear) takes the epilogue ops its library fuses
  (bias, activation, a residual add) into one `kernel.library`;
- an op gnomon can generate code for starts a `kernel.generated`, which takes the
  elementwise ops that follow it on the same shape, so their intermediates stay in registers;
- any other op is a `kernel.library` of its own: an ATen call where torch has the op, else
  NumPy (the reference semantics), so every op the graph dialect has can run.

An op joins the kernel before it only if it consumes that kernel's last value and is that
value's only user: each kernel then has one result, and fusing never changes the order in
which values are computed, so the rewrite is legal without a dependence analysis. One op moves
forward: a transpose that the library reads as a strided view (`reads_transposed`: a matmul's
operand) joins its only user's kernel; it is pure, and its operand is defined before it.

What the library computes and fuses is declared in `library` (the runtime implements it); what
gnomon generates code for is `generatable`'s answer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from gnomon.dialects.graph import linalg, nn
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp, TransposeOp
from gnomon.dialects.kernel import GeneratedOp, LibraryOp, ScheduleAttr, YieldOp
from gnomon.passes.graph_to_kernel.library import fusible_epilogue, library_call, reads_transposed
from gnomon.passes.kernel_to_linalg import generatable


def _short(op: Operation) -> str:
    return op.name.removeprefix("graph.")


def _result_shape(op: Operation) -> tuple[int, ...] | None:
    if len(op.results) != 1 or not isinstance(op.results[0].type, TensorType):
        return None
    return tuple(op.results[0].type.get_shape())


Kind = Literal["anchor", "generated", "single"]
"""A library anchor taking epilogues, a generated kernel taking elementwise ops, or one library op alone."""


# Generatable, but the library is faster here: oneDNN's softmax (bench/codegen.py), and BLAS is as
# fast as the generated matmul on square shapes and safer on ragged ones.
_PREFER_LIBRARY = (linalg.MatmulOp, nn.SoftmaxOp, nn.LogSoftmaxOp)


def _kind(op: Operation) -> Kind:
    if generatable(op) and not isinstance(op, _PREFER_LIBRARY):
        return "generated"
    users = [use.operation for result in op.results for use in result.uses]
    return "anchor" if any(fusible_epilogue(op, user) for user in users) else "single"


@dataclass
class _Group:
    """The ops of one kernel, in order: transposes read as views (`prologue`), then the ops that compute."""

    ops: list[Operation]
    kind: Kind
    prologue: list[Operation]

    def all_ops(self) -> list[Operation]:
        return [*self.prologue, *self.ops]


def _joins(group: _Group, candidate: Operation) -> bool:
    """Whether `candidate` may join the kernel being built from `group`."""
    kind, last = group.kind, group.ops[-1]
    if len(last.results) != 1 or not last.results[0].has_one_use():
        return False
    if kind == "single" or last.results[0] not in candidate.operands or not candidate.results:
        return False
    if kind == "anchor":
        # The library decides whether the whole chain, in this order, is one of its fused calls.
        chain = [*group.all_ops(), candidate]
        operands = _external_operands(chain)
        return (
            fusible_epilogue(group.ops[0], candidate)
            and library_call(_body(chain, operands, list(candidate.results)).block) is not None
        )
    return (
        isinstance(candidate, POINTWISE) and generatable(candidate) and _result_shape(candidate) == _result_shape(last)
    )


def _external_operands(group: Sequence[Operation]) -> list[SSAValue]:
    inside = {result for op in group for result in op.results}
    operands: list[SSAValue] = []
    for op in group:
        for operand in op.operands:
            if operand not in inside and operand not in operands:
                operands.append(operand)
    return operands


def _body(group: Sequence[Operation], operands: Sequence[SSAValue], results: Sequence[SSAValue]) -> Region:
    """The group's ops, cloned into a block whose arguments stand for `operands`."""
    block = Block(arg_types=[operand.type for operand in operands])
    mapping: dict[SSAValue, SSAValue] = dict(zip(operands, block.args, strict=True))
    for op in group:
        clone = op.clone(value_mapper=mapping)
        block.add_op(clone)
    block.add_op(YieldOp(*(mapping[result] for result in results)))
    return Region(block)


TRANSPOSE_TILE = 32
"""Tile of a transpose's two innermost loops: 32x32 f32 blocks (4 KiB each way) stay in L1, where untiled
loops stride through memory on one side (bench/codegen.py)."""


def _schedule(group: Sequence[Operation], result: SSAValue, threads: int) -> ScheduleAttr:
    """The default loop layout: the result's loops in order, 8-wide vectors, all cores; transposes tiled."""
    rank = len(result.type.get_shape()) if isinstance(result.type, TensorType) else 0
    tile = [0] * rank
    if rank >= 2 and any(isinstance(op, TransposeOp) for op in group):
        tile[-2:] = [TRANSPOSE_TILE, TRANSPOSE_TILE]
    return ScheduleAttr.get(tile, 8, list(range(rank)), threads)


def _kernel(group: _Group, index: int, threads: int) -> Operation:
    ops = group.all_ops()
    operands = _external_operands(ops)
    results = list(ops[-1].results)
    body = _body(ops, operands, results)
    result_types = [result.type for result in results]
    if group.kind == "generated":
        name = "_".join(_short(op) for op in ops) + f"_{index}"
        return GeneratedOp(name, _schedule(ops, results[0], threads), operands, result_types, body)
    call = library_call(body.block)
    if call is None:
        return LibraryOp(f"numpy.{_short(group.ops[0])}", operands, result_types, body)
    return LibraryOp(call.callee, operands, result_types, body, epilogue=call.epilogue, transposed=call.transposed)


def partition(function: func.FuncOp, threads: int) -> None:
    """Rewrite `function`'s graph ops into kernels, in place."""
    block = function.body.block
    # Constants go first (in their order), so that a kernel may be placed where its last op was.
    first_compute = next((op for op in block.ops if not isinstance(op, ConstantOp)), None)
    if first_compute is not None:
        for constant in [op for op in block.ops if isinstance(op, ConstantOp)]:
            constant.detach()
            block.insert_op_before(constant, first_compute)
    ops = [op for op in block.ops if op.name.startswith("graph.") and not isinstance(op, ConstantOp | ReshapeOp)]
    prologues: dict[Operation, list[Operation]] = {}
    for op in ops:
        if reads_transposed(op):
            prologues.setdefault(next(iter(op.results[0].uses)).operation, []).append(op)
    moved = {op for prologue in prologues.values() for op in prologue}
    groups: list[_Group] = []
    for op in ops:
        if op in moved:
            continue
        if groups and _joins(groups[-1], op):
            groups[-1].ops.append(op)
            continue
        groups.append(_Group([op], _kind(op), prologues.get(op, [])))
    for index, group in enumerate(groups):
        kernel = _kernel(group, index, threads)
        kernel.location = group.ops[0].location
        last = group.ops[-1]
        Rewriter.insert_op(kernel, InsertPoint.before(last))
        for old, new in zip(last.results, kernel.results, strict=True):
            old.replace_all_uses_with(new)
        for op in reversed(group.ops):
            Rewriter.erase_op(op)
        for op in reversed(group.prologue):
            Rewriter.erase_op(op)


@dataclass(frozen=True)
class GraphToKernelPass(ModulePass):
    """Partition graph functions into generated and library kernels."""

    name = "graph-to-kernel"

    threads: int = 0
    """Threads per generated kernel; 0 means all of this machine's cores."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        threads = self.threads or os.cpu_count() or 1
        for function in op.ops:
            if isinstance(function, func.FuncOp) and function.body.blocks:
                partition(function, threads)
