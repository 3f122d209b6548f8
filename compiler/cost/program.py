"""The `gnomon` target: the kernels gnomon's runtime launches, after its rewrites (batch-norm folding, constant
folding, fusion into library and generated kernels).

Each `rt.launch` is one task: the runtime's launch overhead on the host and the library calls it makes (each priced
by the traffic since its function last ran, around the program as a serving loop runs it: `gnomon.cost.calls`; a
generated kernel split over threads wakes them), then its `kernel.func` body on a stream,
priced by the kernel models (`group_cost` for a fused body, `op_cost` for a one-op body, which keeps that op's own
model, e.g. an embedding table's hit pattern). A launch waits for the launches that wrote the arena bytes it reads,
and for those that read or wrote the bytes it overwrites. On a CPU the runtime also copies each input into its
buffer and each result out, priced as streaming copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp
from xdsl.ir import SSAValue

from gnomon.cost.analytical import OpCost, boundary_bytes, efficiency, group_cost, op_cost, written_in_place
from gnomon.cost.calls import (
    GENERATED,
    Call,
    call_distances,
    cold_call_s,
    library_call_s,
    library_calls,
    post_ops_s,
    with_libm_calls,
)
from gnomon.cost.critical_path import Task
from gnomon.cost.devices import Device, MemoryLevel
from gnomon.cost.direct_io import arena_spans, direct_io, overlap
from gnomon.cost.report import AnalysisError, Report
from gnomon.cost.steps import (
    Step,
    build_report,
    count_parameters,
    memref_bytes,
    memref_shape,
    program_function,
    weights_in_dram,
)
from gnomon.cost.threads import generated_threads, library_threads
from gnomon.dialects import kernel, rt
from gnomon.dialects.graph.base import GraphOperation, ints
from gnomon.locations import location_name

GPU_STREAMS = 4
"""Streams gnomon's kernels may spread over on a GPU (eager PyTorch runs on its one default stream)."""


def program_report(
    module: ModuleOp, device: Device, name: str = "the program", parameters: tuple[int, int] | None = None
) -> Report:
    """The `gnomon` target of a module already lowered to rt (`Executable.module`, a `gnomon compile` output);
    `parameters` (count, bytes) default to its constants'."""
    streams = 1 if device.kind == "cpu" else GPU_STREAMS
    steps = gnomon_steps(module, device)
    counted = parameters if parameters is not None else count_parameters(module)
    return build_report(name, "gnomon", device, steps, streams, counted, _arena_lower_bound(module))


def kernel_cost(
    kernel_func: kernel.FuncOp,
    device: Device,
    *,
    weights_in_dram: bool = False,
    call_distances: Sequence[int | None] | None = None,
    calls: Sequence[Call] | None = None,
) -> OpCost:
    """What one launch of a kernel costs: its body as one fused group, or its one op's own model; `weights_in_dram`
    says that the program's weights do not fit the caches together (see `weights_in_dram()`); `call_distances`, for
    a library kernel, the bytes moved before each of its calls since that function's last call
    (`gnomon.cost.calls.library_calls`, `library_call_s`; None: each call alone); `calls`, its `library_calls` where
    the caller has them already (a calibration fit prices each kernel thousands of times). A generated kernel's
    `call_distances` holds one figure, the bytes moved since the last generated launch: its launch path's misses
    (`gnomon.cost.calls.GENERATED`)."""
    ops = [op for op in kernel_func.body.block.ops if isinstance(op, GraphOperation)]
    call = kernel_func.call
    # The runtime runs a 1x1 convolution as a BLAS product (its library call is then `aten.mm`).
    as_gemm = call is not None and call.callee == "aten.mm"
    library = not kernel_func.is_generated
    cores = None
    if device.kind == "cpu":
        cores = library_threads(ops, device) if library else generated_threads(kernel_func, device)
    if len(ops) == 1:
        cost = op_cost(
            ops[0],
            device,
            conv_as_gemm=as_gemm,
            library=library,
            weights_in_dram=weights_in_dram,
            cores=cores,
            generated=not library,
        )
    else:
        cost = group_cost(
            ops,
            device,
            conv_as_gemm=as_gemm,
            library=library,
            weights_in_dram=weights_in_dram,
            cores=cores,
            generated=not library,
        )
    if library:
        calls = calls if calls is not None else library_calls(kernel_func)
        distances = call_distances if call_distances is not None else [None] * len(calls)
        calls_s = sum(
            library_call_s(d, device, copy=c.copy, function=c.function) for c, d in zip(calls, distances, strict=True)
        ) + post_ops_s(kernel_func, device)
        cost = replace(cost, launch_s=device.launch_overhead_s + calls_s)
    elif cost.launch_s > 0:  # a view launches nothing
        distance = call_distances[0] if call_distances else None
        wake_s = efficiency(device).pool_wake_s if cores is not None and cores > 1 else 0.0
        cost = replace(cost, launch_s=cost.launch_s + cold_call_s(distance, device, thin=True) + wake_s)
    return with_libm_calls(cost, ops, device, cores, generated=not library)


def launch_call_distances(module: ModuleOp) -> list[list[int | None]]:
    """Per `rt.launch` of a lowered module, in order: for each library call it makes (`library_calls`), the bytes
    moved since that function's last call, or for a generated kernel, since the last generated launch (`GENERATED`),
    as a serving loop runs the program: input copies, the launches, result copies, again."""
    function = program_function(module)
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, kernel.FuncOp)}
    calls: dict[str, list[Call]] = {}
    moved: dict[str, int] = {}
    sequence: list[tuple[str | None, int]] = [(None, 2 * memref_bytes(arg.type)) for arg in function.body.block.args]
    launches: list[range] = []
    for op in function.body.block.ops:
        if isinstance(op, rt.LaunchOp):
            kernel_func = kernels[op.callee.string_value()]
            name = kernel_func.sym_name.data
            if name not in calls:
                calls[name] = library_calls(kernel_func)
                moved[name] = boundary_bytes([o for o in kernel_func.body.block.ops if isinstance(o, GraphOperation)])
            start = len(sequence)
            own = GENERATED if kernel_func.is_generated else None
            sequence += [(c.function, c.moved) for c in calls[name]] or [(own, moved[name])]
            launches.append(range(start, start + (1 if kernel_func.is_generated else len(calls[name]))))
        elif isinstance(op, func.ReturnOp):
            sequence += [(None, 2 * memref_bytes(value.type)) for value in op.operands]
    distances = call_distances(sequence)
    return [[distances[index] for index in launch] for launch in launches]


def gnomon_steps(module: ModuleOp, device: Device) -> list[Step]:
    """A lowered module's schedule: its input copies, one task per `rt.launch`, its result copies."""
    function = program_function(module)
    if rt.ARENA_SIZE not in function.attributes:
        raise AnalysisError("the module is not an rt program (lower it with gnomon.executable.lower first)")
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, kernel.FuncOp)}
    costs: dict[tuple[str, tuple[int | None, ...], int], OpCost] = {}
    calls: dict[str, list[Call]] = {}
    cold_weights = weights_in_dram(module, device)
    distances = iter(launch_call_distances(module))
    block = function.body.block
    steps: list[Step] = []
    # A training step (`rt.updates`) keeps its state in its input arrays and updates it in place: it copies in
    # only the batch, and out only the loss (its runtime leaves the gradients in the arena until asked for).
    updates = function.attributes.get(rt.UPDATES)
    updated = {i for i in ints(updates) if i >= 0} if isinstance(updates, DenseArrayBase) else set()
    # What only generated kernels touch is read from, or written into, the caller's arrays (`direct_io`).
    direct = direct_io(function, kernels)
    if device.kind == "cpu":
        copied_inputs = [(i, arg) for i, arg in enumerate(block.args) if i not in updated and i not in direct.inputs]
        steps += [_copy_step(f"copy input {i}", "input", arg, device) for i, arg in copied_inputs]
    ranges = arena_spans(function)
    touched: list[tuple[int, tuple[int, int]]] = []
    """(task, arena range) of every buffer a launch so far read or wrote: a later writer of those bytes waits."""
    written: list[tuple[int, tuple[int, int]]] = []
    """(task, arena range) of every buffer a launch so far wrote: a later reader of those bytes waits."""
    for op in block.ops:
        if isinstance(op, rt.LaunchOp):
            index = len(steps)
            kernel_func = kernels[op.callee.string_value()]
            name = kernel_func.sym_name.data
            # Bytes it writes over an input it reads: a pointwise kernel reusing a dying input, an update in place.
            in_place_bytes = sum(
                memref_bytes(v.type) for v in op.outs if v in ranges and ranges[v] in {ranges.get(i) for i in op.ins}
            )
            key = (name, tuple(next(distances)), in_place_bytes)
            if key not in costs:  # launches of one kernel.func after as much traffic cost the same
                if name not in calls:
                    calls[name] = library_calls(kernel_func)
                cost = kernel_cost(
                    kernel_func, device, weights_in_dram=cold_weights, call_distances=key[1], calls=calls[name]
                )
                costs[key] = written_in_place(cost, in_place_bytes, device)
            cost = costs[key]
            read = [ranges[v] for v in op.ins if v in ranges]
            depends = {task for task, span in written if any(overlap(span, r) for r in read)}
            for out in op.outs:
                depends |= {task for task, span in touched if overlap(span, ranges[out])}
            touched += [(index, ranges[v]) for v in (*op.ins, *op.outs) if v in ranges]
            written += [(index, ranges[v]) for v in op.outs]
            task = Task(name, cost.launch_s, cost.kernel_s, tuple(sorted(depends)))
            ops = [inner.name.removeprefix("graph.") for inner in kernel_func.body.block.ops]
            shapes = tuple(memref_shape(v.type) for v in op.outs)
            kind = kernel_func.profile_name
            op_label = "+".join(n for n in ops if n != "kernel.yield")
            steps.append(Step(task, op_label, kind, location_name(op.location), shapes, cost))
        elif isinstance(op, func.ReturnOp) and device.kind == "cpu":
            copied = op.operands[:1] if updated else op.operands
            steps += [
                _copy_step(f"copy output {i}", "output", v, device)
                for i, v in enumerate(copied)
                if i not in direct.results
            ]
    return steps


def _copy_step(name: str, what: str, value: SSAValue, device: Device) -> Step:
    """The runtime copies each input into its buffer and each result out: a read and a write of the array."""
    size = memref_bytes(value.type)
    level = _resident(device, 2 * size)
    seconds = device.launch_overhead_s + 2 * size / (level.bandwidth_bytes_per_s * efficiency(device).stream)
    task = Task(name, seconds, 0.0)
    return Step(task, "copy", "runtime", what, (memref_shape(value.type),), None, 2 * size)


def _resident(device: Device, working_set: int) -> MemoryLevel:
    """The innermost level that holds `working_set` bytes, as the kernel models place streaming kernels."""
    for level in device.memory[:-1]:
        if working_set <= device.capacity(level):
            return level
    return device.dram


def _arena_lower_bound(module: ModuleOp) -> int:
    function = program_function(module)
    bound = function.attributes.get(rt.ARENA_LOWER_BOUND, function.attributes.get(rt.ARENA_SIZE))
    return bound.value.data if isinstance(bound, IntegerAttr) else 0
