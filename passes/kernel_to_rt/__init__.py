"""`kernel-to-rt`: from kernels on tensors to a flat schedule of launches over a planned arena.

Each function whose graph ops are all in kernels becomes a function on memrefs:

- every kernel result is an `rt.buffer` at the offset the static memory planner gave it;
  a buffer lives from the launch that writes it to the last launch that reads it (or a view
  of it), and to the end when the function returns it;
- a generated elementwise kernel may write its result over an input of the same type that
  dies at that launch (in place), which the planner takes where it is legal;
- reshapes become `rt.view`s of their source's memory, weights `rt.constant`s; so do slices whose
  result is a contiguous window of their input (DLRM's per-table rows of the index matrix, a
  transformer's q, k and v out of one projection): a windowed `rt.view`, no launch;
- a concat whose inputs fill contiguous slots of its result (all dims before the axis are 1:
  channels at batch 1) launches nothing: the kernels that compute its inputs write straight into
  their slots of its buffer, windowed `rt.view`s of it, and the copy is gone. Concats nest (each
  DenseNet layer concatenates the previous concat), so one buffer holds a whole dense block;
- each kernel's body is outlined into a `kernel.func`, one per distinct kernel, so identical
  kernels (ResNet's many equal shapes) are compiled once.

The plan is checked by `verify_plan` (no two buffers live at once overlap) before the pass
returns; the runtime checks it again when it loads a program.

Dynamic dims (`dynamic_dims`): every `?` dim must be named, and each symbol of its name bounded by the module's
`gnomon.dim_bounds` (`gnomon.dialects.graph.base.dim_bounds`). Buffers are sized and planned at the
bounds: live ranges do not depend on sizes, and at run time each buffer is a view of its actual size at
its planned offset, no larger than its block, so live buffers stay apart; an in-place reuse joins two
values of one type, of equal sizes at any shape. The rt values keep the names (`rt.buffer`/`rt.view`
`dims`, the arguments' `rt.dims`) and the function the ranges (`rt.dim_ranges`), for the runtime. A
slice or concat over `?` dims stays a copy: the offset of its window would depend on a `?`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from gnomon.dialects import kernel, rt
from gnomon.dialects.graph.base import dim_bounds, ints, normalize_axis
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.grad import EmbeddingBagAdamUpdateOp, EmbeddingBagUpdateOp
from gnomon.dialects.graph.tensor import ConcatOp, ConstantOp, ReshapeOp, SliceOp
from gnomon.passes.kernel_to_rt.dynamic_dims import Bounds, LoweringError, byte_size, check_bounded, ranges_read
from gnomon.passes.kernel_to_rt.memory_plan import Buffer, MemoryPlan, MemoryPlanError, plan, verify

ALIGNMENT = 64
"""Byte alignment of every buffer: a cache line, and enough for any vector load."""


def _static(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and value.type.has_static_shape()


def _pointwise(body: Region) -> bool:
    """Whether a kernel body reads each input element only to write the result element at the same index (its
    constants read no input)."""
    return all(isinstance(inner, (*POINTWISE, ConstantOp, kernel.YieldOp)) for inner in body.block.ops)


def _updates_its_input(op: kernel.GeneratedOp | kernel.LibraryOp, argument: SSAValue, position: int) -> bool:
    """Whether a library kernel's result `position` is its input `position`, given as `argument`, updated on some
    rows, and the kernel reads that input nowhere else: an embedding table's sparse update (the table), or
    SparseAdam's (the table and its two moments), whose runtime kernels work on the result's memory, copying the
    input in first only when the two differ."""
    ops = [inner for inner in op.body.block.ops if not isinstance(inner, kernel.YieldOp)]
    updated: dict[type[Operation], int] = {EmbeddingBagUpdateOp: 1, EmbeddingBagAdamUpdateOp: 3}
    return (
        isinstance(op, kernel.LibraryOp)
        and len(ops) == 1
        and position < updated.get(type(ops[0]), 0)
        and ops[0].operands[position] is op.body.block.args[position]
        and op.inputs[position] is argument
        and list(op.inputs).count(argument) == 1
    )


def _in_place_candidate(op: kernel.GeneratedOp, owner: dict[SSAValue, int], windows: set[SSAValue]) -> int | None:
    """The buffer of an input the kernel may overwrite with its result: same type, in the arena, read pointwise.
    Neither may be a window of a concat's buffer (a slot, or a reshape of one): that memory is not theirs."""
    if len(op.outputs) != 1 or not _pointwise(op.body) or op.outputs[0] in windows:
        return None
    for operand in op.inputs:
        if operand.type == op.outputs[0].type and operand in owner and operand not in windows:
            return owner[operand]
    return None


def _donations(function: func.FuncOp, windows: set[SSAValue]) -> dict[SSAValue, int]:
    """The results that their launch may write straight into the argument they update (`rt.UPDATES`): made by a
    kernel with that one output (or by a sparse update, which updates each of its inputs in its result at the same
    position), of the argument's type, after every other read of the argument (views included), and reading it, if
    at all, pointwise in a generated kernel or in such an update."""
    updates = function.attributes.get(rt.UPDATES)
    block = function.body.block
    ret = block.last_op
    if updates is None or not isinstance(ret, func.ReturnOp):
        return {}
    order = {op: index for index, op in enumerate(block.ops)}

    def readers(value: SSAValue) -> list[Operation]:
        """The ops that read `value`'s memory: its users, and those of its reshapes, the return aside."""
        found: list[Operation] = []
        for use in value.uses:
            if isinstance(use.operation, ReshapeOp):
                found += readers(use.operation.result)
            elif not isinstance(use.operation, func.ReturnOp):
                found.append(use.operation)
        return found

    donations: dict[SSAValue, int] = {}
    for result, index in zip(ret.operands, ints(updates), strict=True):  # pyright: ignore[reportArgumentType]
        producer = result.owner
        if index < 0 or result in donations or result in windows or index in donations.values():
            continue
        if not isinstance(producer, kernel.GeneratedOp | kernel.LibraryOp):
            continue
        argument = block.args[index]
        position = result.index if isinstance(result, OpResult) else 0
        updates_input = _updates_its_input(producer, argument, position)
        if argument.type != result.type or (len(producer.outputs) != 1 and not updates_input):
            continue
        argument_readers = readers(argument)
        if any(order[op] > order[producer] for op in argument_readers):
            continue
        reads = producer in argument_readers
        pointwise = isinstance(producer, kernel.GeneratedOp) and _pointwise(producer.body)
        if reads and not (pointwise or updates_input):
            continue
        donations[result] = index
    return donations


@dataclass(frozen=True)
class _Slot:
    """Where a kernel writes a concat input: inside the concat kernel's result, after `offset` elements."""

    concat: SSAValue
    offset: int


def _only_op(op: Operation) -> Operation | None:
    """The one graph op a library kernel runs, if it runs one."""
    if not isinstance(op, kernel.LibraryOp):
        return None
    inner = [o for o in op.body.block.ops if not isinstance(o, kernel.YieldOp)]
    return inner[0] if len(inner) == 1 else None


def _concat(op: Operation) -> ConcatOp | None:
    """The graph.concat that a library kernel runs, if that is all it runs."""
    inner = _only_op(op)
    return inner if isinstance(inner, ConcatOp) else None


def _concat_slots(block: Block, windows: dict[SSAValue, int]) -> dict[SSAValue, _Slot]:
    """The concat inputs that their kernels can write into the concat's buffer, and where.

    A concat qualifies when its slots are contiguous and each input is a distinct kernel result (not an
    argument, a weight, a reshape or a slice `windows` holds) that no other concat has claimed.
    """
    computed = {
        r
        for op in block.ops
        if isinstance(op, kernel.GeneratedOp | kernel.LibraryOp)
        for r in op.outputs
        if r not in windows
    }
    slots: dict[SSAValue, _Slot] = {}
    for op in block.ops:
        concat = _concat(op)
        if concat is None:
            continue
        assert isinstance(op, kernel.LibraryOp)
        shape = _shape(concat.result)
        axis = normalize_axis(concat.axis.value.data, len(shape), concat.name)
        arguments: list[SSAValue] = list(op.body.block.args)
        inputs = [op.inputs[arguments.index(v)] for v in concat.inputs]
        if not all(_static(v) for v in (concat.result, *inputs)):
            continue  # a slot's offset would depend on a `?`
        if prod(shape[:axis]) != 1 or len(set(inputs)) != len(inputs):
            continue
        if any(v not in computed or v in slots for v in inputs):
            continue
        offset = 0
        for value in inputs:
            slots[value] = _Slot(op.outputs[0], offset)
            offset += prod(_shape(value))
    return slots


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def _slice_window(op: Operation) -> int | None:
    """The element offset of a slice kernel's result in its input, if the result is a contiguous window of it."""
    inner = _only_op(op)
    if not isinstance(inner, SliceOp) or not _static(inner.input) or not _static(inner.result):
        return None  # with `?` dims, the window's offset would depend on them
    x, r = _shape(inner.input), _shape(inner.result)
    starts, steps = ints(inner.starts), ints(inner.steps)
    partial = [i for i in range(len(x)) if (starts[i], steps[i], r[i]) != (0, 1, x[i])]
    if 0 in r:
        return None
    if not partial:
        return 0
    last = partial[-1]  # dims after it are whole; dims before it must hold one element
    if any(r[i] != 1 for i in range(last)) or (steps[last] != 1 and r[last] != 1):
        return None
    return sum(starts[i] * prod(x[i + 1 :]) for i in range(last + 1))


def _slot_root(value: SSAValue, slots: dict[SSAValue, _Slot]) -> tuple[SSAValue, int]:
    """The outermost concat whose buffer holds `value`, and the value's element offset in it."""
    offset = 0
    while value in slots:
        slot = slots[value]
        value, offset = slot.concat, offset + slot.offset
    return value, offset


@dataclass
class _Liveness:
    """The buffers of one function: which SSA value owns which buffer, and each buffer's live steps."""

    buffers: list[Buffer]
    buffer_of: dict[SSAValue, int]
    """Every tensor value held in the arena (kernel results and views of them) to its buffer id."""


def _liveness(
    function: func.FuncOp,
    slots: dict[SSAValue, _Slot],
    slices: dict[SSAValue, int],
    donated: set[SSAValue],
    bounds: Bounds,
) -> _Liveness:
    """The arena's buffers: one per kernel result, but a concat's slots, a slice's view and a result written into
    the argument it updates (`donated`)."""
    block = function.body.block
    filled = {slot.concat for slot in slots.values()}
    kernels = [op for op in block.ops if isinstance(op, kernel.GeneratedOp | kernel.LibraryOp)]
    steps = len([op for op in kernels if op.outputs[0] not in filled and op.outputs[0] not in slices])
    owner: dict[SSAValue, int] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    candidates: dict[int, int | None] = {}
    sizes: dict[int, int] = {}
    roots: dict[SSAValue, int] = {}
    """Each concat buffer (keyed by its outermost concat's result) to its buffer id, once a slot is written."""
    windows = set(slots) | set(slices)
    """Values that are a part of a buffer: no kernel may write over them in place, nor they over an input."""
    step = -1
    for op in block.ops:
        if isinstance(op, ConstantOp):
            continue
        if isinstance(op, ReshapeOp):
            if op.input in owner:
                owner[op.result] = owner[op.input]
            if op.input in windows:
                windows.add(op.result)
            continue
        if isinstance(op, func.ReturnOp):
            for operand in op.operands:
                if operand in owner:
                    last[owner[operand]] = steps
            continue
        if not isinstance(op, kernel.GeneratedOp | kernel.LibraryOp):
            raise LoweringError(f"@{function.sym_name.data}: {op.name} is not in a kernel; run graph-to-kernel first")
        if op.outputs[0] in slices:  # a view of its input: no launch, and no step
            if op.inputs[0] in owner:
                owner[op.outputs[0]] = owner[op.inputs[0]]
            continue
        if op.outputs[0] in filled:
            # Its inputs were written into its buffer: no launch, and no step.
            owner[op.outputs[0]] = roots[_slot_root(op.outputs[0], slots)[0]]
            continue
        step += 1
        for operand in op.inputs:
            if operand in owner:
                last[owner[operand]] = step
        candidate = _in_place_candidate(op, owner, windows) if isinstance(op, kernel.GeneratedOp) else None
        for result in op.outputs:
            if result in donated:
                continue
            root = _slot_root(result, slots)[0]
            if root in roots:  # a later slot of a concat buffer that an earlier kernel began
                owner[result] = roots[root]
                last[roots[root]] = step
                continue
            buffer = len(sizes)
            owner[result] = buffer
            if root is not result:
                roots[root] = buffer
            sizes[buffer], first[buffer], last[buffer] = byte_size(root, bounds), step, step
            candidates[buffer] = None if root is not result else candidate
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
    return f"library {op.profile_name} {op.transposed_operands} {stream.getvalue()}"


def outline_kernel(op: kernel.GeneratedOp | kernel.LibraryOp, name: str) -> kernel.FuncOp:
    body = op.body.clone()
    function_type = FunctionType.from_lists([v.type for v in op.inputs], [r.type for r in op.outputs])
    if isinstance(op, kernel.GeneratedOp):
        return kernel.FuncOp(name, function_type, body, schedule=op.schedule)
    return kernel.FuncOp(
        name, function_type, body, callee=op.callee.data, epilogue=op.epilogue_ops, transposed=op.transposed_operands
    )


def _kernel_name(op: kernel.GeneratedOp | kernel.LibraryOp, index: int) -> str:
    """The ops a kernel runs and its index among the program's distinct kernels: `conv_relu_3`."""
    ops = "_".join(inner.name.removeprefix("graph.") for inner in op.body.block.ops if inner.name != "kernel.yield")
    return f"{ops}_{index}"


def lower_function(
    function: func.FuncOp, bounds: Bounds | None = None
) -> tuple[func.FuncOp, list[kernel.FuncOp], MemoryPlan]:
    """The rt form of `function`, its outlined kernels and its memory plan; `bounds` ranges the symbols of its `?`
    dims (the module's `gnomon.dim_bounds`)."""
    bounds = bounds or {}
    check_bounded(function, bounds)
    block = function.body.block
    slices: dict[SSAValue, int] = {}
    for op in block.ops:
        offset = _slice_window(op)
        if isinstance(op, kernel.LibraryOp) and offset is not None:
            slices[op.outputs[0]] = offset
    slots = _concat_slots(block, slices)
    filled = {slot.concat for slot in slots.values()}
    donated = _donations(function, set(slots) | set(slices))
    liveness = _liveness(function, slots, slices, set(donated), bounds)
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
            view = rt.ViewOp(values[op.input], rt.memref_of(op.result.type), dims=rt.dims_attr(op.result.type))
            new.add_op(view)
            values[op.result] = view.result
        elif isinstance(op, func.ReturnOp):
            new.add_op(func.ReturnOp(*(values[operand] for operand in op.operands)))
        elif isinstance(op, kernel.LibraryOp) and op.outputs[0] in slices:
            result = op.outputs[0]
            view = rt.ViewOp(values[op.inputs[0]], rt.memref_of(result.type), slices[result])
            new.add_op(view)
            values[result] = view.result
        elif isinstance(op, kernel.GeneratedOp | kernel.LibraryOp):
            outs: list[SSAValue] = []
            for result in op.outputs:
                if result in donated:
                    values[result] = new.args[donated[result]]
                    outs.append(values[result])
                    continue
                buffer_id = liveness.buffer_of[result]
                root, offset = _slot_root(result, slots)
                if buffer_id not in buffers:
                    buffer = rt.BufferOp(
                        memory_plan.offsets[buffer_id], rt.memref_of(root.type), rt.dims_attr(root.type)
                    )
                    new.add_op(buffer)
                    buffers[buffer_id] = buffer.result
                if root is not result:
                    view = rt.ViewOp(buffers[buffer_id], rt.memref_of(result.type), offset)
                    new.add_op(view)
                    values[result] = view.result
                else:
                    values[result] = buffers[buffer_id]
                outs.append(values[result])
            if op.outputs[0] in filled:
                continue
            key = _kernel_key(op)
            if key not in outlined:
                outlined[key] = outline_kernel(op, _kernel_name(op, index))
                index += 1
            launch = rt.LaunchOp(outlined[key].sym_name.data, [values[v] for v in op.inputs], outs)
            launch.location = op.location
            new.add_op(launch)
    function_type = FunctionType.from_lists(
        list(new.arg_types), [rt.memref_of(t) for t in function.function_type.outputs]
    )
    arg_dims = [rt.dims_attr(arg.type) for arg in old.args]
    arg_attrs = ArrayAttr(DictionaryAttr({} if dims is None else {rt.DIMS: dims}) for dims in arg_dims)
    lowered = func.FuncOp(
        function.sym_name.data, function_type, Region(new), arg_attrs=arg_attrs if any(arg_dims) else None
    )
    lowered.attributes |= function.attributes
    lowered.attributes[rt.ARENA_SIZE] = IntegerAttr(memory_plan.arena_size, i64)
    lowered.attributes[rt.ARENA_LOWER_BOUND] = IntegerAttr(memory_plan.lower_bound, i64)
    if ranges := ranges_read(old, bounds):
        lowered.attributes[rt.DIM_RANGES] = ranges
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
    bounds = rt.dim_ranges(function)
    step = -1
    for op in block.ops:
        if isinstance(op, rt.BufferOp):
            buffer = len(offsets)
            buffer_ids[op.result] = owner[op.result] = buffer
            offsets[buffer], sizes[buffer] = op.offset.value.data, byte_size(op.result, bounds)
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
                if out not in owner:
                    continue  # an argument it updates in place (`rt.UPDATES`): not in the arena
                buffer = owner[out]  # a concat buffer is written slot by slot, by several launches
                first.setdefault(buffer, step)
                last[buffer] = step
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
    """Raise MemoryPlanError if two buffers of `function` live at the same time overlap, or two launches write
    overlapping windows of one buffer (a concat's slots)."""
    buffers, memory_plan = plan_of(function)
    verify(buffers, memory_plan)
    windows: dict[SSAValue, tuple[SSAValue, int, int]] = {}
    written: dict[SSAValue, list[tuple[int, int, str]]] = {}
    for op in function.body.block.ops:
        if isinstance(op, rt.ViewOp) and op.offset is not None:
            start = op.element_offset
            windows[op.result] = (op.source, start, start + prod(op.result.type.get_shape()))
        elif isinstance(op, rt.LaunchOp):
            callee = op.callee.string_value()
            for buffer, start, end in (windows[out] for out in op.outs if out in windows):
                for other_start, other_end, other in written.setdefault(buffer, []):
                    if other_start < end and start < other_end:
                        raise MemoryPlanError(
                            f"@{function.sym_name.data}: windows overlap: @{callee} writes elements {start}..{end} "
                            f"of a buffer whose elements {other_start}..{other_end} @{other} wrote"
                        )
                written[buffer].append((start, end, callee))


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
            lowered, kernels, _ = lower_function(function, dim_bounds(op))
            for kernel_func in kernels:
                Rewriter.insert_op(kernel_func, InsertPoint.before(function))
            Rewriter.replace_op(function, lowered)
