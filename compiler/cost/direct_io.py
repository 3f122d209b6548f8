"""Which of an rt program's inputs and results a run binds to the caller's memory instead of copying.

A run copies each input into an array of its own and each result out of the arena, so that the arena and the
caller's arrays never alias. A generated kernel takes its arrays as memref descriptors, which a run can point
anywhere for the length of one run: so an input that only generated kernels read is read where the caller's array
lies, and a result that only generated kernels write is written straight into the array the run returns, as ONNX
Runtime does (the copies were 15-35 us of a 200-450 us MobileNet layer pair at 112x112 and 224x224, and the input's
copy left the kernel a further 20-110 us slower, not explained here). A library call (ATen,
oneDNN) holds tensors over the arena made when it is bound, so the bytes one touches are copied as before.

The rule is on the arena's byte ranges, not on values: the memory plan puts several buffers at one offset (an
in-place kernel's output over its dying input, buffers whose lives do not overlap), so a result's bytes move with
every buffer that lies in them, and each must then lie wholly inside and be touched only by generated launches.
Programs with `?` dims copy: a binding at a smaller shape shrinks each buffer from its planned offset, so which
buffers lie inside a result's bytes would depend on the shape. A training step (`rt.updates`) copies too: it keeps
its state in its input arrays and runs in place (`gnomon.training`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import SSAValue

from gnomon.cost.steps import memref_bytes, memref_element_bytes
from gnomon.dialects import kernel, rt

__all__ = ["DirectIO", "Span", "arena_spans", "direct_io", "overlap"]

Span = tuple[int, int]


@dataclass(frozen=True)
class DirectIO:
    """The inputs (by argument index) and results (by position) a run binds to the caller's memory."""

    inputs: frozenset[int] = frozenset()
    results: frozenset[int] = frozenset()


def arena_spans(function: func.FuncOp) -> dict[SSAValue, Span]:
    """The bytes each value of an rt program occupies: a buffer its planned range of the arena, a view its window
    of its source's (a reshape covers it all), an argument a space of its own below the arena's. Constants have
    none."""
    spans: dict[SSAValue, Span] = {}
    for arg in function.body.block.args:
        start = -(arg.index + 1) * 2**48
        spans[arg] = (start, start + memref_bytes(arg.type))
    for op in function.body.block.ops:
        if isinstance(op, rt.BufferOp):
            spans[op.result] = (op.offset.value.data, op.offset.value.data + memref_bytes(op.result.type))
        elif isinstance(op, rt.ViewOp) and op.source in spans:
            start = spans[op.source][0] + op.element_offset * memref_element_bytes(op.result.type)
            spans[op.result] = (start, start + memref_bytes(op.result.type))
    return spans


def direct_io(function: func.FuncOp, kernels: Mapping[str, kernel.FuncOp]) -> DirectIO:
    """The rule above, for the rt program `function` whose kernels are `kernels` (by name)."""
    if rt.dim_ranges(function) or rt.UPDATES in function.attributes:
        return DirectIO()
    block = function.body.block
    spans = arena_spans(function)
    users: list[tuple[Span, bool]] = []
    """The span of every launch operand, and whether a generated kernel (its descriptor can be pointed elsewhere)."""
    returned: list[SSAValue] = []
    for op in block.ops:
        if isinstance(op, rt.LaunchOp):
            generated = kernels[op.callee.string_value()].is_generated
            users += [(spans[v], generated) for v in (*op.ins, *op.outs) if v in spans]
        elif isinstance(op, func.ReturnOp):
            returned = list(op.operands)
    returned_spans = [spans.get(v) for v in returned]

    def movable(span: Span) -> bool:
        """Every launch operand over `span` lies inside it and belongs to a generated kernel."""
        return all(generated and inside(s, span) for s, generated in users if overlap(s, span))

    inputs = frozenset(
        arg.index
        for arg in block.args
        if movable(spans[arg]) and not any(r is not None and overlap(r, spans[arg]) for r in returned_spans)
    )
    results: set[int] = set()
    for position, span in enumerate(returned_spans):
        if span is None or span[0] < 0:  # a constant, or an argument returned as it is
            continue
        others = [r for p, r in enumerate(returned_spans) if p != position and r is not None]
        if movable(span) and not any(overlap(r, span) for r in others):
            results.add(position)
    return DirectIO(inputs, frozenset(results))


def overlap(a: Span, b: Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def inside(a: Span, b: Span) -> bool:
    return b[0] <= a[0] and a[1] <= b[1]
