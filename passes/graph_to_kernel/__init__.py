"""`graph-to-kernel`: partition each function's graph ops into kernels, the units the runtime launches.

In program order, every graph op except constants and reshapes (which the runtime treats as
data and as views) lands in exactly one kernel:

- a library anchor (convolution, matmul, linear) takes the epilogue ops its library fuses
  (bias, activation, a residual add) into one `kernel.library`;
- an op gnomon can generate code for starts a `kernel.generated`, which takes the
  elementwise ops that follow it on the same shape, so their intermediates stay in registers; a
  reduction over trailing axes joins the elementwise ops before it (it computes them as it reads),
  and its elementwise epilogue may return to the reduction's input shape (RMS norm in one kernel);
- any other op is a `kernel.library` of its own: an ATen call where torch has the op, else
  NumPy (the reference semantics), so every op the graph dialect has can run.

An op joins the kernel before it only if it consumes that kernel's last value and is that
value's only user: each kernel then has one result, and fusing never changes the order in
which values are computed, so the rewrite is legal without a dependence analysis. One op moves
forward: a transpose that the library reads as a strided view (`reads_transposed`: a matmul's
operand) joins its only user's kernel; it is pure, and its operand is defined before it.

Which legal joins are taken, and which kind of kernel an op starts where it has a choice, is `graph-fuse`'s
decision, priced by the cost model and recorded on the ops (`FUSION_ATTR`); without it, every legal join is
taken. What the library computes and fuses is declared in `library` (the runtime implements it); what
gnomon generates code for is `generatable`'s answer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, f32, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from gnomon.dialects.graph import linalg, nn
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.reduce import ReduceOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp, TransposeOp
from gnomon.dialects.kernel import GeneratedOp, LibraryOp, ScheduleAttr, YieldOp
from gnomon.errors import GnomonError
from gnomon.locations import location_name
from gnomon.passes.graph_to_kernel.library import fusible_epilogue, library_call, reads_transposed
from gnomon.passes.kernel_to_linalg import generatable, is_depthwise


def _short(op: Operation) -> str:
    return op.name.removeprefix("graph.")


def _result_shape(op: Operation) -> tuple[int, ...] | None:
    if len(op.results) != 1 or not isinstance(op.results[0].type, TensorType):
        return None
    return tuple(op.results[0].type.get_shape())


Kind = Literal["anchor", "generated", "single"]
"""A library anchor taking epilogues, a generated kernel taking elementwise ops, or one library op alone."""

LAYOUT_ATTR = "gnomon.layout"
"""Set by `graph-layout` on the ops of each region it priced: its `region`, the `layout` chosen, how many activations
it transposes in and out, and both predictions in seconds (`gnomon.passes.graph_layout`)."""

FUSION_ATTR = "gnomon.fusion"
"""Set by `graph-fuse` on every graph op it groups: a dictionary with the op's kernel `group` (an index) and the
group's `kind`, and on an op whose joining was priced, the `decision` and both predictions. `graph-to-kernel`
lowers the groups it is given; without them it takes every legal join."""

ATTENTION_ATTR = "gnomon.attention"
"""Set by `graph-fuse` on a written-out attention it priced: the `decision` and both predictions, on the fused
`graph.attention` or on the softmax that stayed (`gnomon.passes.graph_fuse_attention`)."""


# Generatable, but the library is faster here: oneDNN's softmax (bench/codegen.py), and BLAS is as
# fast as the generated matmul on square shapes and safer on ragged ones. A convolution's generated kernel is a
# choice `graph-fuse` prices (`graph_fuse.CHOICE_OPS`). A channels-last max or average pool is generated
# (`pool_nhwc`): one pass over vectors of channels, faster than ATen's channels-last kernel (`bench/pool_kinds.py`).
_PREFER_LIBRARY = (linalg.MatmulOp, nn.SoftmaxOp, nn.LogSoftmaxOp, nn.ConvOp)


def default_kind(op: Operation) -> Kind:
    """The kind of kernel `op` starts when nothing chose one."""
    if generatable(op) and not isinstance(op, _PREFER_LIBRARY):
        return "generated"
    return library_kind(op)


def library_kind(op: Operation) -> Kind:
    """The kind of kernel `op` starts as a library call: an anchor when a user of it is an epilogue its call takes."""
    users = [use.operation for result in op.results for use in result.uses]
    return "anchor" if any(fusible_epilogue(op, user) for user in users) else "single"


@dataclass
class Group:
    """The ops of one kernel, in order: transposes read as views (`prologue`), then the ops that compute."""

    ops: list[Operation]
    kind: Kind
    prologue: list[Operation]

    def all_ops(self) -> list[Operation]:
        return [*self.prologue, *self.ops]


def _joins(group: Group, candidate: Operation) -> bool:
    """Whether `candidate` may join the kernel being built from `group`."""
    kind, last = group.kind, group.ops[-1]
    if len(last.results) != 1 or any(use.operation is not candidate for use in last.results[0].uses):
        return False  # the candidate must be the last value's only user (it may read it twice: x * x)
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
    if not generatable(candidate) or isinstance(group.ops[0], nn.MaxPoolOp | nn.AvgPoolOp):
        return False  # a generated pool is a kernel of its own (`kernel_to_linalg.pool_nhwc`)
    if isinstance(group.ops[0], nn.ConvOp):
        return _conv_join(group, candidate)
    if isinstance(candidate, ReduceOp):
        return _takes_prologue(group, candidate)
    return isinstance(candidate, POINTWISE) and (
        _result_shape(candidate) == _result_shape(last) or _normalizes(group, candidate)
    )


def _conv_join(group: Group, candidate: Operation) -> bool:
    """A generated convolution takes f32 elementwise ops on its output's shape, then one depthwise convolution of
    the last value, then elementwise ops on the depthwise conv's shape (`kernel_to_linalg.conv`)."""
    last, first = group.ops[-1], group.ops[0]
    if isinstance(candidate, nn.ConvOp):
        # Channels-last kernels and a depthwise one are a convolution alone (`kernel_to_linalg.conv_nhwc`).
        return (
            not channels_last(first)
            and not is_depthwise(first)
            and is_depthwise(candidate)
            and candidate.input == last.results[0]
            and not any(isinstance(op, nn.ConvOp) for op in group.ops[1:])
        )
    result = candidate.results[0].type
    return (
        isinstance(candidate, POINTWISE)
        and isinstance(result, TensorType)
        and result.get_element_type() == f32
        and _result_shape(candidate) == _result_shape(last)
    )


def _input_shape(reduction: ReduceOp) -> tuple[int, ...]:
    input_type = reduction.input.type
    assert isinstance(input_type, TensorType)
    return tuple(input_type.get_shape())


def _takes_prologue(group: Group, reduction: ReduceOp) -> bool:
    """A reduction over trailing axes computes the elementwise ops before it as it reads its input."""
    return (
        not group.prologue
        and all(isinstance(op, POINTWISE) for op in group.ops)
        and _result_shape(group.ops[-1]) == _input_shape(reduction)
    )


def _normalizes(group: Group, candidate: Operation) -> bool:
    """An elementwise op that takes a reduction's kernel back to the reduction's input shape, reading each row's
    reduced value (`x * rsqrt(mean(x * x) + eps)`): the group's last value must keep the reduced dims as 1s."""
    reduction = next((op for op in group.ops if isinstance(op, ReduceOp)), None)
    if reduction is None:
        return False
    shape = _input_shape(reduction)
    kept = len(shape) - len(reduction.reduced_axes())
    row = (*shape[:kept], *(1,) * (len(shape) - kept))
    return _result_shape(group.ops[-1]) == row and _result_shape(candidate) == shape


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
        clone.attributes.pop(FUSION_ATTR, None)  # decisions about the graph, not part of the kernel's code
        clone.attributes.pop(LAYOUT_ATTR, None)
        clone.attributes.pop(ATTENTION_ATTR, None)
        block.add_op(clone)
    block.add_op(YieldOp(*(mapping[result] for result in results)))
    return Region(block)


TRANSPOSE_TILE = 32
"""Tile of a transpose's two innermost loops: 32x32 f32 blocks (4 KiB each way) stay in L1, where untiled
loops stride through memory on one side (bench/codegen.py). A transpose that keeps its last dim last (a
transformer's head split, (1, 0, 2)) reads and writes whole rows untiled; tiled, LLVM vectorizes it with
gathers and scatters: 2.8x slower for 128x12x128, 8x with a relu after it at 64x12x64 (issue 19's probe)."""


@cache
def host_vector_lanes() -> int:
    """f32 lanes of this machine's widest vectors: 16 with AVX-512, else 8 (AVX2, or LLVM splits them)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return 8
    return 16 if "avx512f" in flags.split() else 8


def _moves_last_dim(transpose: TransposeOp) -> bool:
    permutation = ints(transpose.permutation)
    return permutation[-1] != len(permutation) - 1


def _schedule(group: Sequence[Operation], result: SSAValue, threads: int) -> ScheduleAttr:
    """The default loop layout: the result's loops in order, 8-wide vectors, all cores; transposes that move the
    last dim tiled. A convolution's register blocks take this machine's widest vectors (measured: 1.5-2x faster
    with AVX-512's)."""
    if isinstance(group[0], nn.ConvOp):
        return ScheduleAttr.get([], host_vector_lanes(), [], threads)
    rank = len(result.type.get_shape()) if isinstance(result.type, TensorType) else 0
    tile = [0] * rank
    if rank >= 2 and any(isinstance(op, TransposeOp) and _moves_last_dim(op) for op in group):
        tile[-2:] = [TRANSPOSE_TILE, TRANSPOSE_TILE]
    return ScheduleAttr.get(tile, 8, list(range(rank)), threads)


def build_kernel(group: Group, index: int, threads: int) -> GeneratedOp | LibraryOp:
    """The kernel op of `group`, its ops cloned into its body; the group's ops are left as they are."""
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


def set_groups(function: func.FuncOp, groups: Sequence[int], kinds: Sequence[Kind]) -> None:
    """Put `function`'s kernel ops (`kernel_ops`, in order) into `groups`, group i of kind `kinds[i]`, as `graph-fuse`
    records its decisions: a way to lower a grouping of one's own (a benchmark's, a test's)."""
    ops, _ = kernel_ops(function)
    if len(groups) != len(ops):
        raise GnomonError(f"graph-to-kernel: {len(groups)} groups given for {len(ops)} kernel ops")
    for op, group in zip(ops, groups, strict=True):
        op.attributes[FUSION_ATTR] = DictionaryAttr(
            {"group": IntegerAttr(group, i64), "kind": StringAttr(kinds[group])}
        )


def fusion_group(op: Operation) -> int | None:
    """The kernel group `graph-fuse` put `op` in; None when the op carries no decision."""
    fusion = op.attributes.get(FUSION_ATTR)
    if not isinstance(fusion, DictionaryAttr):
        return None
    group = fusion.data.get("group")
    return group.value.data if isinstance(group, IntegerAttr) else None


def fusion_kind(op: Operation) -> Kind | None:
    """The kind `graph-fuse` chose for the kernel that `op` starts; None when it chose none."""
    fusion = op.attributes.get(FUSION_ATTR)
    kind = fusion.data.get("kind") if isinstance(fusion, DictionaryAttr) else None
    if isinstance(kind, StringAttr) and kind.data in ("anchor", "generated", "single"):
        return kind.data
    return None


def kernel_ops(function: func.FuncOp) -> tuple[list[Operation], dict[Operation, list[Operation]]]:
    """The graph ops that land in kernels, in program order, and the transposes each op reads as views
    (`reads_transposed`), which move into that op's kernel and are left out of the first list."""
    block = function.body.block
    ops = [op for op in block.ops if op.name.startswith("graph.") and not isinstance(op, ConstantOp | ReshapeOp)]
    prologues: dict[Operation, list[Operation]] = {}
    for op in ops:
        if reads_transposed(op):
            prologues.setdefault(next(iter(op.results[0].uses)).operation, []).append(op)
    moved = {op for prologue in prologues.values() for op in prologue}
    return [op for op in ops if op not in moved], prologues


def legal_join(group: Group, candidate: Operation) -> bool:
    """Whether `candidate` may join the kernel being built from `group` (see the module's docstring)."""
    return _joins(group, candidate)


def _given_groups(ops: list[Operation], prologues: dict[Operation, list[Operation]]) -> list[Group]:
    """The groups `graph-fuse` chose, each checked to be a legal kernel."""
    groups: list[Group] = []
    for op in ops:
        group = fusion_group(op)
        if groups and group is not None and fusion_group(groups[-1].ops[0]) == group:
            if not _joins(groups[-1], op):
                raise GnomonError(
                    f"graph-to-kernel: {op.name} at {location_name(op.location)} is in fusion group {group}, "
                    "but cannot join that kernel (it must be the only user of the kernel's result)"
                )
            groups[-1].ops.append(op)
            continue
        groups.append(Group([op], fusion_kind(op) or default_kind(op), prologues.get(op, [])))
    return groups


def kernel_groups(function: func.FuncOp) -> list[Group]:
    """The kernels `partition` builds from `function`'s graph ops, in program order: the groups `graph-fuse` chose,
    where it ran, else every legal join."""
    ops, prologues = kernel_ops(function)
    if any(fusion_group(op) is not None for op in ops):
        return _given_groups(ops, prologues)
    groups: list[Group] = []
    for op in ops:
        if groups and _joins(groups[-1], op):
            groups[-1].ops.append(op)
            continue
        groups.append(Group([op], default_kind(op), prologues.get(op, [])))
    return groups


def partition(function: func.FuncOp, threads: int) -> None:
    """Rewrite `function`'s graph ops into kernels, in place: the groups `graph-fuse` chose, where it ran, else
    every legal join."""
    block = function.body.block
    # Constants go first (in their order), so that a kernel may be placed where its last op was.
    first_compute = next((op for op in block.ops if not isinstance(op, ConstantOp)), None)
    if first_compute is not None:
        for constant in [op for op in block.ops if isinstance(op, ConstantOp)]:
            constant.detach()
            block.insert_op_before(constant, first_compute)
    for index, group in enumerate(kernel_groups(function)):
        kernel = build_kernel(group, index, threads)
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
