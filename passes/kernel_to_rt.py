"""`kernel-to-rt`: from kernels on tensors to a flat schedule of launches over a planned arena.

Each function whose graph ops are all in kernels becomes a function on memrefs:

- every kernel result is an `rt.buffer` at the offset the static memory planner gave it;
  a buffer lives from the launch that writes it to the last launch that reads it (or a view
  of it), and to the end when the function returns it;
- a generated elementwise kernel may write its result over an input of the same type that
  dies at that launch (in place), which the planner takes where it is legal;
- reshapes become `rt.view`s of their source's memory, weights `rt.constant`s;
- each kernel's body is outlined into a `kernel.func`, one per distinct kernel, so identical
  kernels (ResNet's many equal shapes) are compiled once.

The plan is checked by `verify_plan` (no two buffers live at once overlap) before the pass
returns; the runtime checks it again when it loads a program.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from math import prod

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, IntegerAttr, MemRefType, ModuleOp, TensorType, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from gnomon.dialects import kernel, rt
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
from gnomon.errors import GnomonError
from gnomon.runtime.memory_plan import Buffer, MemoryPlan, plan, verify

ALIGNMENT = 64
"""Byte alignment of every buffer: a cache line, and enough for any vector load."""


class LoweringError(GnomonError):
    """A function cannot be lowered to the runtime (dynamic shapes, an op outside any kernel)."""


def _byte_size(value: SSAValue) -> int:
    """Bytes of a dense row-major buffer of the value's type (i1 takes a byte, as in NumPy)."""
    shaped = value.type
    assert isinstance(shaped, TensorType | MemRefType)
    dtype = numpy_dtype(shaped.element_type)
    if dtype is None:
        raise LoweringError(f"the runtime has no buffers of element type {shaped.element_type}")
    return prod(shaped.get_shape()) * np.dtype(dtype).itemsize


def _check_static(function: func.FuncOp) -> None:
    for op in function.walk():
        for value in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)):
            if isinstance(value.type, TensorType) and any(d < 0 for d in value.type.get_shape()):
                raise LoweringError(
                    f"@{function.sym_name.data}: {value.type} has a dynamic dim; the runtime needs static shapes "
                    "(give --input-shape or example inputs)"
                )


def _pointwise(body: Region) -> bool:
    """Whether a kernel body reads each input element only to write the result element at the same index."""
    return all(isinstance(inner, (*POINTWISE, kernel.YieldOp)) for inner in body.block.ops)


def _in_place_candidate(op: kernel.GeneratedOp, owner: dict[SSAValue, int]) -> int | None:
    """The buffer of an input the kernel may overwrite with its result: same type, in the arena, read pointwise."""
    if len(op.outputs) != 1 or not _pointwise(op.body):
        return None
    for operand in op.inputs:
        if operand.type == op.outputs[0].type and operand in owner:
            return owner[operand]
    return None


@dataclass
class _Liveness:
    """The buffers of one function: which SSA value owns which buffer, and each buffer's live steps."""

    buffers: list[Buffer]
    buffer_of: dict[SSAValue, int]
    """Every tensor value held in the arena (kernel results and views of them) to its buffer id."""


def _liveness(function: func.FuncOp) -> _Liveness:
    block = function.body.block
    kernels = [op for op in block.ops if isinstance(op, kernel.GeneratedOp | kernel.LibraryOp)]
    steps = len(kernels)
    owner: dict[SSAValue, int] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    candidates: dict[int, int | None] = {}
    sizes: dict[int, int] = {}
    step = -1
    for op in block.ops:
        if isinstance(op, ConstantOp):
            continue
        if isinstance(op, ReshapeOp):
            if op.input in owner:
                owner[op.result] = owner[op.input]
            continue
        if isinstance(op, func.ReturnOp):
            for operand in op.operands:
                if operand in owner:
                    last[owner[operand]] = steps
            continue
        if not isinstance(op, kernel.GeneratedOp | kernel.LibraryOp):
            raise LoweringError(f"@{function.sym_name.data}: {op.name} is not in a kernel; run graph-to-kernel first")
        step += 1
        for operand in op.inputs:
            if operand in owner:
                last[owner[operand]] = step
        candidate = _in_place_candidate(op, owner) if isinstance(op, kernel.GeneratedOp) else None
        for result in op.outputs:
            buffer = len(sizes)
            owner[result] = buffer
            sizes[buffer], first[buffer], last[buffer] = _byte_size(result), step, step
            candidates[buffer] = candidate
    buffers = [
        Buffer(id=b, size=sizes[b], first=first[b], last=last[b], inplace_of=candidates[b]) for b in sorted(sizes)
    ]
    return _Liveness(buffers, owner)


def _kernel_key(op: kernel.GeneratedOp | kernel.LibraryOp) -> str:
    """Two launches with equal keys run the same code on buffers of the same types."""
    stream = io.StringIO()
    Printer(stream=stream, print_generic_format=True).print_region(op.body)
    if isinstance(op, kernel.GeneratedOp):
        return f"generated {op.schedule} {stream.getvalue()}"
    return f"library {op.callee.data} {stream.getvalue()}"


def _outline(op: kernel.GeneratedOp | kernel.LibraryOp, name: str) -> kernel.FuncOp:
    body = op.body.clone()
    function_type = FunctionType.from_lists([v.type for v in op.inputs], [r.type for r in op.outputs])
    if isinstance(op, kernel.GeneratedOp):
        return kernel.FuncOp(name, function_type, body, schedule=op.schedule)
    return kernel.FuncOp(name, function_type, body, callee=op.callee.data)


def _kernel_name(op: kernel.GeneratedOp | kernel.LibraryOp, index: int) -> str:
    """The ops a kernel runs and its index among the program's distinct kernels: `conv_relu_3`."""
    ops = "_".join(inner.name.removeprefix("graph.") for inner in op.body.block.ops if inner.name != "kernel.yield")
    return f"{ops}_{index}"


def lower_function(function: func.FuncOp) -> tuple[func.FuncOp, list[kernel.FuncOp], MemoryPlan]:
    """The rt form of `function`, its outlined kernels and its memory plan."""
    _check_static(function)
    liveness = _liveness(function)
    memory_plan = plan(liveness.buffers, alignment=ALIGNMENT)
    verify(liveness.buffers, memory_plan)

    old = function.body.block
    new = Block(arg_types=[rt.memref_of(arg.type) for arg in old.args])
    values: dict[SSAValue, SSAValue] = dict(zip(old.args, new.args, strict=True))
    buffers: dict[int, SSAValue] = {}
    outlined: dict[str, kernel.FuncOp] = {}
    index = 0
    for op in old.ops:
        if isinstance(op, ConstantOp):
            constant = rt.ConstantOp(op.value, rt.memref_of(op.result.type))
            new.add_op(constant)
            values[op.result] = constant.result
        elif isinstance(op, ReshapeOp):
            view = rt.ViewOp(values[op.input], rt.memref_of(op.result.type))
            new.add_op(view)
            values[op.result] = view.result
        elif isinstance(op, func.ReturnOp):
            new.add_op(func.ReturnOp(*(values[operand] for operand in op.operands)))
        elif isinstance(op, kernel.GeneratedOp | kernel.LibraryOp):
            outs: list[SSAValue] = []
            for result in op.outputs:
                buffer_id = liveness.buffer_of[result]
                buffer = rt.BufferOp(memory_plan.offsets[buffer_id], rt.memref_of(result.type))
                new.add_op(buffer)
                buffers[buffer_id] = buffer.result
                values[result] = buffer.result
                outs.append(buffer.result)
            key = _kernel_key(op)
            if key not in outlined:
                outlined[key] = _outline(op, _kernel_name(op, index))
                index += 1
            launch = rt.LaunchOp(outlined[key].sym_name.data, [values[v] for v in op.inputs], outs)
            launch.location = op.location
            new.add_op(launch)
    function_type = FunctionType.from_lists(
        list(new.arg_types), [rt.memref_of(t) for t in function.function_type.outputs]
    )
    lowered = func.FuncOp(function.sym_name.data, function_type, Region(new))
    lowered.attributes |= function.attributes
    lowered.attributes[rt.ARENA_SIZE] = IntegerAttr(memory_plan.arena_size, i64)
    lowered.attributes[rt.ARENA_LOWER_BOUND] = IntegerAttr(memory_plan.lower_bound, i64)
    return lowered, list(outlined.values()), memory_plan


def rt_functions(module: ModuleOp) -> list[func.FuncOp]:
    """The functions of `module` that are rt programs."""
    return [op for op in module.ops if isinstance(op, func.FuncOp) and rt.ARENA_SIZE in op.attributes]


def plan_of(function: func.FuncOp) -> tuple[list[Buffer], MemoryPlan]:
    """The buffers and the plan an rt function encodes, read back from its ops, for `verify`."""
    block = function.body.block
    launches = [op for op in block.ops if isinstance(op, rt.LaunchOp)]
    steps = len(launches)
    buffer_ids: dict[SSAValue, int] = {}
    owner: dict[SSAValue, int] = {}
    offsets: dict[int, int] = {}
    sizes: dict[int, int] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    shared: list[tuple[int, int, int]] = []
    step = -1
    for op in block.ops:
        if isinstance(op, rt.BufferOp):
            buffer = len(offsets)
            buffer_ids[op.result] = owner[op.result] = buffer
            offsets[buffer], sizes[buffer] = op.offset.value.data, _byte_size(op.result)
        elif isinstance(op, rt.ViewOp) and op.source in owner:
            owner[op.result] = owner[op.source]
        elif isinstance(op, rt.LaunchOp):
            step += 1
            reads = [owner[v] for v in op.ins if v in owner]
            for buffer in reads:
                last[buffer] = step
            callee = SymbolTable.lookup_symbol(op, op.callee)
            pointwise = isinstance(callee, kernel.FuncOp) and callee.is_generated and _pointwise(callee.body)
            for out in op.outs:
                buffer = owner[out]
                first[buffer] = last[buffer] = step
                if pointwise:
                    shared += [(buffer, read, step) for read in reads if offsets[read] == offsets[buffer]]
        elif isinstance(op, func.ReturnOp):
            for operand in op.operands:
                if operand in owner:
                    last[owner[operand]] = steps
    # An output at the offset of an input that is last read by the same launch is written in place.
    inplace = {buffer: read for buffer, read, at in shared if last[read] == at and sizes[read] >= sizes[buffer]}
    missing = sorted(set(offsets) - set(first))
    if missing:
        raise LoweringError(f"@{function.sym_name.data}: buffer {missing[0]} is never written by a launch")
    buffers = [
        Buffer(id=b, size=sizes[b], first=first[b], last=last[b], inplace_of=inplace.get(b)) for b in sorted(offsets)
    ]
    arena = function.attributes[rt.ARENA_SIZE]
    assert isinstance(arena, IntegerAttr)
    memory_plan = MemoryPlan(
        offsets=offsets, arena_size=arena.value.data, inplace=inplace, lower_bound=0, alignment=ALIGNMENT
    )
    return buffers, memory_plan


def verify_plan(function: func.FuncOp) -> None:
    """Raise MemoryPlanError if two buffers of `function` live at the same time overlap."""
    buffers, memory_plan = plan_of(function)
    verify(buffers, memory_plan)


@dataclass(frozen=True)
class KernelToRtPass(ModulePass):
    """Lower kernel functions to rt programs with a static memory plan."""

    name = "kernel-to-rt"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = [
            f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks and rt.ARENA_SIZE not in f.attributes
        ]
        if len(functions) > 1:
            # Kernel symbols are named per function; one program per module keeps them unique.
            raise LoweringError(f"kernel-to-rt: expected one function to lower, found {len(functions)}")
        for function in functions:
            lowered, kernels, _ = lower_function(function)
            for kernel_func in kernels:
                Rewriter.insert_op(kernel_func, InsertPoint.before(function))
            Rewriter.replace_op(function, lowered)
