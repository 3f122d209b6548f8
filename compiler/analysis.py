"""`gnomon.analyze`: a model's predicted cost on a device, op by op and end to end, for one of two targets.

- `gnomon`: the kernels gnomon's runtime launches, after its rewrites (batch-norm folding, constant folding,
  fusion into library and generated kernels). Each `rt.launch` is one task: the runtime's launch overhead on the
  host, then its `kernel.func` body on a stream, priced by the cost service (`group_cost` for a fused body,
  `op_cost` for a one-op body, which keeps that op's own model, e.g. an embedding table's hit pattern). On a CPU
  the runtime also copies each input into its buffer and each result out, priced as streaming copies.
- `torch-eager`: the imported graph, before any rewrite, op by op, as PyTorch eager runs it: each op pays
  PyTorch's dispatch overhead on the host and runs alone (`op_cost`, no fusion); views dispatch but run no kernel.

`gnomon.passes.cost.critical_path` turns the tasks into a timeline: synchronous on a CPU; on a GPU the host runs
ahead, eager PyTorch uses its one default stream and gnomon's kernels spread over `GPU_STREAMS` streams, each
waiting for the kernels whose buffers it reads or overwrites. The report has a row per kernel (gnomon) or op
(torch-eager), totals, the predicted end-to-end and device-active times, a roofline plot and a Chrome trace.

With a device file from datasheets (`calibrated = false`) every figure is analytical; `gnomon calibrate` measures
this machine into the `local` device.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, TensorType, f32
from xdsl.ir import Operation, SSAValue

from gnomon.devices import Device, MemoryLevel, load_device
from gnomon.dialects import kernel, rt
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.elementwise import PowOp
from gnomon.dialects.graph.nn import AdaptivePoolOp, AvgPoolOp, MaxPoolOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.errors import GnomonError
from gnomon.locations import location_name
from gnomon.passes.cost import Bound, OpCost, efficiency, group_cost, op_cost
from gnomon.passes.cost.critical_path import Task, Timeline, schedule
from gnomon.passes.cost.roofline import VIEW_OPS, nbytes, static_shape, storage
from gnomon.trace import DISPATCH, KERNEL, TraceEvent, trace_json

__all__ = [
    "GPU_STREAMS",
    "TARGETS",
    "OpRecord",
    "Report",
    "analyze",
    "analyze_eager",
    "analyze_program",
    "eager_steps",
    "generated_threads",
    "gnomon_steps",
    "kernel_cost",
    "onnx_batch_shapes",
    "plot_roofline",
    "same_library_function",
    "warm_call",
    "weights_in_dram",
    "with_libm_calls",
]

TARGETS = ("gnomon", "torch-eager")
GPU_STREAMS = 4
"""Streams gnomon's kernels may spread over on a GPU (eager PyTorch runs on its one default stream)."""


class AnalysisError(GnomonError):
    """A model cannot be analyzed as asked (an unknown target, a batch size the model cannot take)."""


@dataclass(frozen=True)
class OpRecord:
    """One kernel (gnomon) or op (torch-eager) of the predicted schedule."""

    name: str
    """The kernel's symbol (gnomon), or the op's name (torch-eager)."""
    op: str
    """The graph ops it runs, `conv+relu`; `copy` for the runtime's input and output copies."""
    kind: str
    """`generated` or the library call (gnomon), `torch` (torch-eager), `runtime` (a copy)."""
    location: str
    shapes: tuple[tuple[int, ...], ...]
    """Result shapes."""
    flops: int
    bytes: int
    """The least bytes it moves (a fused kernel: only those crossing its boundary)."""
    bound: Bound
    model: str
    """The cost model that priced it (gemm, conv, stream, fused, ...)."""
    overhead_s: float
    """Host time to dispatch it: the runtime's launch overhead, or PyTorch's dispatch."""
    kernel_s: float
    """Its kernel's predicted time on the device; 0 for a view."""
    start_s: float
    """When it starts in the predicted timeline (its dispatch)."""
    end_s: float
    critical: bool
    """Whether it lies on the timeline's critical path."""

    @property
    def predicted_s(self) -> float:
        """Its time run alone: dispatch, then kernel (what a profile measures per launch on a CPU)."""
        return self.overhead_s + self.kernel_s

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def is_kernel(self) -> bool:
        """A launch of a kernel (not a copy of the runtime, not a view)."""
        return self.kind != "runtime" and self.kernel_s > 0


@dataclass(frozen=True)
class Report:
    """A model's predicted cost on one device for one target."""

    model: str
    target: str
    device: Device
    records: tuple[OpRecord, ...]
    timeline: Timeline
    parameters: int
    """Elements of the model's constants (weights)."""
    parameter_bytes: int
    activation_bytes: int
    """Peak bytes of intermediate and output tensors live at once (gnomon: its memory plan's lower bound)."""

    @property
    def total_flops(self) -> int:
        return sum(r.flops for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.records)

    @property
    def predicted_e2e_s(self) -> float:
        return self.timeline.e2e_s

    @property
    def predicted_active_s(self) -> float:
        return self.timeline.active_s

    @property
    def kernels(self) -> int:
        return sum(1 for r in self.records if r.is_kernel)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "target": self.target,
            "device": {
                "name": self.device.name,
                "kind": self.device.kind,
                "calibrated": self.device.calibrated,
                "provenance": self.device.provenance,
            },
            "totals": {
                "flops": self.total_flops,
                "bytes": self.total_bytes,
                "parameters": self.parameters,
                "parameter_bytes": self.parameter_bytes,
                "activation_bytes": self.activation_bytes,
                "kernels": self.kernels,
                "predicted_e2e_s": self.predicted_e2e_s,
                "predicted_active_s": self.predicted_active_s,
            },
            "ops": [
                {
                    "name": r.name,
                    "op": r.op,
                    "kind": r.kind,
                    "location": r.location,
                    "shapes": [list(s) for s in r.shapes],
                    "flops": r.flops,
                    "bytes": r.bytes,
                    "intensity": r.intensity,
                    "bound": r.bound,
                    "model": r.model,
                    "overhead_s": r.overhead_s,
                    "kernel_s": r.kernel_s,
                    "predicted_s": r.predicted_s,
                    "start_s": r.start_s,
                    "end_s": r.end_s,
                    "critical": r.critical,
                }
                for r in self.records
            ],
        }

    def to_json(self) -> str:
        """What `gnomon analyze --json` prints."""
        return json.dumps(self.to_dict(), indent=2)

    def render(self) -> str:
        """The per-op table and the totals, as `gnomon analyze` prints them."""
        total = sum(r.predicted_s for r in self.records) or 1e-30
        lines = [
            f"{self.model}: target {self.target}, device {self.device.provenance}",
            f"{'#':>4} {'location':<24} {'op':<28} {'shape':<20} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} "
            f"{'bound':<7} {'time':>10} {'share':>6}",
        ]
        for index, r in enumerate(self.records):
            shape = "x".join(map(str, r.shapes[0])) if r.shapes else ""
            lines.append(
                f"{index:>4} {r.location[:24]:<24} {r.op[:28]:<28} {shape[:20]:<20} {_si(r.flops):>9} "
                f"{_si(r.bytes):>9} {r.intensity:>7.1f} {r.bound:<7} {_time(r.predicted_s):>10} "
                f"{r.predicted_s / total:>6.1%}"
            )
        lines += [
            f"totals: {_si(self.total_flops)}FLOP, {self.parameters:,} parameters ({_si(self.parameter_bytes)}B), "
            f"peak activations {_si(self.activation_bytes)}B, {self.kernels} kernels",
            f"predicted: end to end {_time(self.predicted_e2e_s)}, device active {_time(self.predicted_active_s)}",
        ]
        if not self.device.calibrated:
            lines.append(f"note: {self.device.name} figures are analytical, from datasheets; nothing was measured")
        return "\n".join(lines)

    def trace(self) -> dict[str, Any]:
        """The predicted timeline as Chrome trace-event JSON: one `kernel` event per kernel on its stream."""
        events: list[TraceEvent] = []
        for index, r in enumerate(self.records):
            args: dict[str, Any] = {"op": r.op, "kind": r.kind, "location": r.location, "critical": r.critical}
            host = self.timeline.host[index]
            if host.end_s > host.start_s:
                events.append(TraceEvent(r.name, DISPATCH, "host", host.start_s, host.end_s - host.start_s, args))
            span = self.timeline.kernels[index]
            if span is not None:
                args |= {"flops": r.flops, "bytes": r.bytes, "bound": r.bound}
                events.append(TraceEvent(r.name, KERNEL, span.track, span.start_s, span.end_s - span.start_s, args))
        title = f"predicted: {self.model}, {self.target} on {self.device.name}"
        metadata = {"provenance": self.device.provenance, "predicted_e2e_s": self.predicted_e2e_s}
        return trace_json(title, events, metadata)


def _si(value: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}"
    return f"{value:.0f}"


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


# ---- the model in, a report out ----


def analyze(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    device: str | Device = "local",
    target: str = "gnomon",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    batch: int | None = None,
) -> Report:
    """Predict `model`'s cost on `device` (a name, a device file, or `local`: the last `gnomon calibrate`).

    `model` is what `gnomon.load` takes; `batch` rebinds the inputs' first dim (files: through `input_shapes`;
    gnomon's own models: through their `example_inputs(batch)`).
    """
    from gnomon.pipeline import load

    if target not in TARGETS:
        raise AnalysisError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    resolved = load_device(device) if isinstance(device, str) else device
    name = str(model) if isinstance(model, str | Path) else type(model).__name__
    if batch is not None:
        example_inputs, input_shapes = _rebatched(model, batch, example_inputs, input_shapes)
    try:
        module = load(model, example_inputs, input_shapes)
    except GnomonError as error:
        if batch is None:
            raise
        raise AnalysisError(f"--batch {batch}: {error}") from error
    if target == "torch-eager":
        return analyze_eager(module, resolved, name)
    from gnomon.executable import lower

    return analyze_program(lower(module, name), resolved, name, _parameters(module))


def analyze_eager(module: ModuleOp, device: Device, name: str = "the program") -> Report:
    """The `torch-eager` target of an imported graph (`gnomon.load`'s module): its ops one by one, as eager runs
    them."""
    steps = eager_steps(module, device)
    return _report(name, "torch-eager", device, steps, 1, _parameters(module), _peak_live_bytes(module))


def analyze_program(
    module: ModuleOp, device: Device, name: str = "the program", parameters: tuple[int, int] | None = None
) -> Report:
    """The `gnomon` target of a module already lowered to rt (`Executable.module`, a `gnomon compile` output);
    `parameters` (count, bytes) default to its constants'."""
    streams = 1 if device.kind == "cpu" else GPU_STREAMS
    steps = gnomon_steps(module, device)
    counted = parameters if parameters is not None else _parameters(module)
    return _report(name, "gnomon", device, steps, streams, counted, _arena_lower_bound(module))


def _report(
    name: str,
    target: str,
    device: Device,
    steps: Sequence[Step],
    streams: int,
    parameters: tuple[int, int],
    activation_bytes: int,
) -> Report:
    timeline = schedule([step.task for step in steps], streams, synchronous=device.kind == "cpu")
    records = tuple(
        OpRecord(
            name=step.task.name,
            op=step.op,
            kind=step.kind,
            location=step.location,
            shapes=step.shapes,
            flops=step.cost.flops if step.cost is not None else 0,
            bytes=step.cost.bytes if step.cost is not None else step.copied_bytes,
            bound=step.cost.bound if step.cost is not None else "memory",
            model=step.cost.model if step.cost is not None else "copy",
            overhead_s=step.task.host_s,
            kernel_s=step.task.device_s,
            start_s=timeline.host[index].start_s,
            end_s=max(span.end_s for span in (timeline.host[index], timeline.kernels[index]) if span is not None),
            critical=timeline.on_critical_path(index),
        )
        for index, step in enumerate(steps)
    )
    return Report(name, target, device, records, timeline, parameters[0], parameters[1], activation_bytes)


def _rebatched(
    model: Any, batch: int, example_inputs: Sequence[Any] | None, input_shapes: Mapping[str, Sequence[int]] | None
) -> tuple[Sequence[Any] | None, Mapping[str, Sequence[int]] | None]:
    """Example inputs or input shapes whose first dim is `batch`."""
    if batch < 1:
        raise AnalysisError(f"--batch must be at least 1, got {batch}")
    if input_shapes:
        return example_inputs, {name: [batch, *dims[1:]] for name, dims in input_shapes.items()}
    if not isinstance(model, str | Path):
        make: Any = getattr(model, "example_inputs", None)  # gnomon.models' modules make inputs at any batch
        if example_inputs is not None or make is None:
            raise AnalysisError("batch: give a torch module's example inputs at the batch size you want instead")
        return make(batch), None
    path = Path(model)
    if path.suffix.lower() != ".onnx":
        raise AnalysisError(f"--batch with {path.name}: give the input shapes (--input-shape NAME=DIMS) instead")
    return None, onnx_batch_shapes(path, batch)


def onnx_batch_shapes(path: Path, batch: int) -> dict[str, list[int]]:
    """The shapes of an ONNX model's inputs with their first dim bound to `batch`."""
    import onnx

    if not path.is_file():
        raise AnalysisError(f"no such file: {path}")
    graph = onnx.load(path, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    shapes: dict[str, list[int]] = {}
    for value in graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        rest = [d.dim_value for d in dims[1:]]
        if not dims or any(d <= 0 for d in rest):
            raise AnalysisError(
                f"--batch: input '{value.name}' of {path.name} has no batch dim or other dynamic dims; "
                "give its shape with --input-shape"
            )
        shapes[value.name] = [batch, *rest]
    return shapes


def _parameters(module: ModuleOp) -> tuple[int, int]:
    """Elements and bytes of the module's constants (graph constants, or an rt program's)."""
    count, size = 0, 0
    for op in module.walk():
        if isinstance(op, ConstantOp):
            count += math.prod(op.result.type.get_shape())
            size += nbytes(op.result)
        elif isinstance(op, rt.ConstantOp):
            count += math.prod(_memref_shape(op.result.type))
            size += _memref_bytes(op.result.type)
    return count, size


def _arena_lower_bound(module: ModuleOp) -> int:
    function = _function(module)
    bound = function.attributes.get(rt.ARENA_LOWER_BOUND, function.attributes.get(rt.ARENA_SIZE))
    return bound.value.data if isinstance(bound, IntegerAttr) else 0


def _function(module: ModuleOp) -> func.FuncOp:
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise AnalysisError(f"expected one function in the model's module, found {len(functions)}")
    return functions[0]


def _peak_live_bytes(module: ModuleOp) -> int:
    """The most bytes of op results live at once in program order; a view keeps its storage alive."""
    block = _function(module).body.block
    ops = [op for op in block.ops if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp)]
    last_use: dict[SSAValue, int] = {}
    for step, op in enumerate(ops):
        for operand in op.operands:
            last_use[storage(operand)] = step
    returned = block.last_op
    for operand in returned.operands if isinstance(returned, func.ReturnOp) else ():
        last_use[storage(operand)] = len(ops)
    live, peak = 0, 0
    dying: dict[int, int] = {}
    for step, op in enumerate(ops):
        if not isinstance(op, VIEW_OPS):
            for result in op.results:
                live += nbytes(result)
                end = last_use.get(result, step)
                dying[end] = dying.get(end, 0) + nbytes(result)
        peak = max(peak, live)
        live -= dying.pop(step, 0)
    return peak


# ---- the two targets' schedules ----


@dataclass(frozen=True)
class Step:
    """One task of a target's schedule, with what the report shows of it."""

    task: Task
    op: str
    kind: str
    location: str
    shapes: tuple[tuple[int, ...], ...]
    cost: OpCost | None
    """None for the runtime's copies."""
    copied_bytes: int = 0


def kernel_cost(
    kernel_func: kernel.FuncOp, device: Device, *, weights_in_dram: bool = False, warm_call: bool = False
) -> OpCost:
    """What one launch of a kernel costs: its body as one fused group, or its one op's own model; `weights_in_dram`
    says that the program's weights do not fit the caches together (see `weights_in_dram()`); `warm_call`, that a
    library kernel's call follows a small one of the same function (see `warm_call()`)."""
    ops = [op for op in kernel_func.body.block.ops if isinstance(op, GraphOperation)]
    # The runtime runs a 1x1 convolution as a BLAS product (its library call is then `aten.mm`).
    as_gemm = kernel_func.callee is not None and kernel_func.callee.data.startswith("aten.mm")
    library = not kernel_func.is_generated
    cores = None
    if device.kind == "cpu":
        cores = library_threads(ops, device) if library else generated_threads(kernel_func, device)
    if len(ops) == 1:
        cost = op_cost(
            ops[0], device, conv_as_gemm=as_gemm, library=library, weights_in_dram=weights_in_dram, cores=cores
        )
    else:
        cost = group_cost(
            ops, device, conv_as_gemm=as_gemm, library=library, weights_in_dram=weights_in_dram, cores=cores
        )
    if warm_call and library:
        eff = efficiency(device)
        cost = replace(cost, launch_s=cost.launch_s - eff.library_call_s + eff.library_call_warm_s)
    return with_libm_calls(cost, ops, device, cores)


def with_libm_calls(cost: OpCost, ops: Sequence[GraphOperation], device: Device, cores: int | None) -> OpCost:
    """`cost` with the libm calls of `ops` on a CPU, split over `cores` (default: all)."""
    calls = libm_calls(ops) if device.kind == "cpu" else 0
    if calls == 0:
        return cost
    libm_s = calls * efficiency(device).libm_call_s / (cores or device.cores)
    return replace(cost, compute_s=cost.compute_s + libm_s)


def warm_call(previous: tuple[kernel.FuncOp, OpCost] | None, kernel_func: kernel.FuncOp, device: Device) -> bool:
    """Whether a launch of `kernel_func` finds its library function's code and bookkeeping in cache: the launch
    before it (`previous`, with its cost) called the same function (`aten.linear` of `aten.linear+relu`) and moved no
    more than one core's caches hold, so that its traffic evicted none of it. Only CPUs are modelled so."""
    if device.kind != "cpu" or previous is None or not same_library_function(previous[0], kernel_func):
        return False
    return within_core_caches(previous[1], device)


def within_core_caches(cost: OpCost, device: Device) -> bool:
    """Whether a kernel moved no more than one core's caches hold, so that it evicted nothing of the code and
    bookkeeping of the call before it."""
    return cost.bytes <= sum(level.capacity_bytes for level in device.memory[:-1] if level.per_core)


def same_library_function(before: kernel.FuncOp, kernel_func: kernel.FuncOp) -> bool:
    """Whether two library kernels call the same ATen function first (`aten.linear` of `aten.linear+relu`)."""
    if before.is_generated or kernel_func.is_generated or before.callee is None or kernel_func.callee is None:
        return False
    return before.callee.data.split("+")[0] == kernel_func.callee.data.split("+")[0]


def libm_calls(ops: Sequence[GraphOperation]) -> int:
    """The libm calls a CPU kernel of `ops` makes per call: one per result element of an f32 pow. gnomon's code
    generator leaves it to libm's `powf` (its own exp, log, tanh and erf are vectorizable arith ops), and ATen's CPU
    pow calls it per element too: `torch.pow(x, 0.75)` took 8.7 ns an element here on one thread, a multiply 0.2."""
    calls = 0
    for op in ops:
        result = op.results[0].type
        if isinstance(op, PowOp) and isinstance(result, TensorType) and result.element_type == f32:
            calls += math.prod(result.get_shape())
    return calls


def generated_threads(kernel_func: kernel.FuncOp, device: Device) -> int:
    """The threads a call of a generated kernel splits over on a CPU, as the runtime splits it
    (`gnomon.runtime.codegen.threads.parts_for`): one per `PART_WORK` results, up to its schedule's threads. The
    results are counted as the elements of its largest array (a reduction's work is its input's)."""
    from gnomon.runtime.codegen.threads import PART_WORK

    schedule = kernel_func.schedule
    most = schedule.threads.data if schedule is not None else device.cores
    function_type = kernel_func.function_type
    largest = 0
    for array in (*function_type.inputs.data, *function_type.outputs.data):
        if isinstance(array, TensorType | MemRefType):
            largest = max(largest, math.prod(array.get_shape()))
    return max(1, min(most, device.cores, largest // PART_WORK))


def library_threads(ops: Sequence[GraphOperation], device: Device) -> int | None:
    """The threads a library kernel runs on a CPU, where it uses fewer than all (None: all). ATen's CPU pooling
    splits over its input's planes, batch x channels: a local response norm's channel pool (one plane per image,
    as torch-mlir lowers it) ran single-threaded at batch 1, and in about the same time at batch 2 on two threads."""
    if len(ops) != 1 or not isinstance(ops[0], MaxPoolOp | AvgPoolOp | AdaptivePoolOp):
        return None
    batch, channels = (*static_shape(ops[0].operands[0]), 1, 1)[:2]
    return max(1, min(device.cores, batch * channels))


def weights_in_dram(module: ModuleOp, device: Device) -> bool:
    """Whether the module's constants (weights, tables) together take more than half the device's last cache level:
    then no kernel finds its weights in cache from the previous run, since the activations, the runtime and (on a
    shared host) other tenants use that cache too."""
    last_cache = device.memory[max(len(device.memory) - 2, 0)]  # the level inside DRAM
    capacity = last_cache.capacity_bytes * (device.cores if last_cache.per_core else 1)
    return _parameters(module)[1] > capacity / 2


def gnomon_steps(module: ModuleOp, device: Device) -> list[Step]:
    """A lowered module's schedule: its input copies, one task per `rt.launch`, its result copies."""
    function = _function(module)
    if rt.ARENA_SIZE not in function.attributes:
        raise AnalysisError("the module is not an rt program (lower it with gnomon.executable.lower first)")
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, kernel.FuncOp)}
    costs: dict[tuple[str, bool], OpCost] = {}
    cold_weights = weights_in_dram(module, device)
    previous: tuple[kernel.FuncOp, OpCost] | None = None
    block = function.body.block
    steps: list[Step] = []
    if device.kind == "cpu":
        steps += [_copy_step(f"copy input {i}", "input", arg, device) for i, arg in enumerate(block.args)]
    ranges: dict[SSAValue, tuple[int, int]] = {}
    """The arena bytes each buffer (or view of one) occupies."""
    touched: list[tuple[int, tuple[int, int]]] = []
    """(task, arena range) of every buffer a launch so far read or wrote: a later writer of those bytes waits."""
    written: list[tuple[int, tuple[int, int]]] = []
    """(task, arena range) of every buffer a launch so far wrote: a later reader of those bytes waits."""
    for op in block.ops:
        if isinstance(op, rt.BufferOp):
            size = _memref_bytes(op.result.type)
            ranges[op.result] = (op.offset.value.data, op.offset.value.data + size)
        elif isinstance(op, rt.ViewOp) and op.source in ranges:
            # A reshape covers its source; a concat slot, a window of it.
            start = ranges[op.source][0] + op.element_offset * _element_bytes(op.result.type)
            ranges[op.result] = (start, start + _memref_bytes(op.result.type))
        elif isinstance(op, rt.LaunchOp):
            index = len(steps)
            kernel_func = kernels[op.callee.string_value()]
            name = kernel_func.sym_name.data
            warm = warm_call(previous, kernel_func, device)
            if (name, warm) not in costs:  # launches of one kernel.func in one context cost the same
                costs[name, warm] = kernel_cost(kernel_func, device, weights_in_dram=cold_weights, warm_call=warm)
            cost = costs[name, warm]
            previous = (kernel_func, cost)
            read = [ranges[v] for v in op.ins if v in ranges]
            depends = {task for task, span in written if any(_overlap(span, r) for r in read)}
            for out in op.outs:
                depends |= {task for task, span in touched if _overlap(span, ranges[out])}
            touched += [(index, ranges[v]) for v in (*op.ins, *op.outs) if v in ranges]
            written += [(index, ranges[v]) for v in op.outs]
            task = Task(name, cost.launch_s, cost.kernel_s, tuple(sorted(depends)))
            ops = [inner.name.removeprefix("graph.") for inner in kernel_func.body.block.ops]
            shapes = tuple(_memref_shape(v.type) for v in op.outs)
            kind = "generated" if kernel_func.is_generated else (kernel_func.callee.data if kernel_func.callee else "")
            op_label = "+".join(n for n in ops if n != "kernel.yield")
            steps.append(Step(task, op_label, kind, location_name(op.location), shapes, cost))
        elif isinstance(op, func.ReturnOp) and device.kind == "cpu":
            steps += [_copy_step(f"copy output {i}", "output", v, device) for i, v in enumerate(op.operands)]
    return steps


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _memref_shape(memref: Any) -> tuple[int, ...]:
    assert isinstance(memref, MemRefType)
    return tuple(memref.get_shape())


def _element_bytes(memref: Any) -> int:
    assert isinstance(memref, MemRefType)
    width = getattr(memref.element_type, "width", None)
    bits = width.data if width is not None else 32
    return max(1, (bits + 7) // 8)


def _memref_bytes(memref: Any) -> int:
    assert isinstance(memref, MemRefType)
    return math.prod(memref.get_shape()) * _element_bytes(memref)


def _copy_step(name: str, what: str, value: SSAValue, device: Device) -> Step:
    """The runtime copies each input into its buffer and each result out: a read and a write of the array."""
    size = _memref_bytes(value.type)
    level = _resident(device, 2 * size)
    seconds = device.launch_overhead_s + 2 * size / (level.bandwidth_bytes_per_s * efficiency(device).stream)
    task = Task(name, seconds, 0.0)
    return Step(task, "copy", "runtime", what, (_memref_shape(value.type),), None, 2 * size)


def _resident(device: Device, working_set: int) -> MemoryLevel:
    """The innermost level that holds `working_set` bytes, as the cost service places streaming kernels."""
    for level in device.memory[:-1]:
        if working_set <= level.capacity_bytes * (device.cores if level.per_core else 1):
            return level
    return device.dram


EAGER_LIBRARY_MODELS = frozenset({"conv", "depthwise-conv", "gemm", "pool", "embedding", "attention"})
"""The cost models of the ops whose eager ATen call is a library call, as gnomon's runtime makes it (oneDNN's and
BLAS's primitives, ATen's pooling and embedding-bag kernels), so it pays the runtime's `library_call_s`; eager's
elementwise ops, copies and norms pay only the dispatch that the calibration measures on tiny ops. Against stop
10's three measured bench runs, eager end to end came to 5.4, 5.4 and 5.3% so; 8.8, 8.6 and 5.1% with dispatch
alone; 10.2, 6.8 and 5.6% charging, cold, every op gnomon does not generate code for (norms and copies too)."""


def eager_call_s(name: str, cost: OpCost, previous: tuple[str, OpCost] | None, device: Device) -> float:
    """What the ATen call of an eager op (`name`, `cost`) takes beyond dispatch: a library op
    (`EAGER_LIBRARY_MODELS`) pays `library_call_s`, or `library_call_warm_s` where the library op before it
    (`previous`, name and cost) was the same op and small, as `warm_call()` has it for gnomon's runtime; any other
    op, nothing."""
    if cost.model not in EAGER_LIBRARY_MODELS:
        return 0.0
    eff = efficiency(device)
    if device.kind == "cpu" and previous is not None:
        name_before, cost_before = previous
        if name_before == name and within_core_caches(cost_before, device):
            return eff.library_call_warm_s
    return eff.library_call_s


def eager_steps(module: ModuleOp, device: Device) -> list[Step]:
    """An imported graph's schedule as PyTorch eager runs it: every op but constants, dispatched and run alone."""
    block = _function(module).body.block
    steps: list[Step] = []
    producer: dict[Operation, int] = {}
    cold_weights = weights_in_dram(module, device)
    previous: tuple[str, OpCost] | None = None  # the last library op's name and cost
    for op in block.ops:
        if not isinstance(op, GraphOperation) or isinstance(op, ConstantOp):
            continue
        # Eager calls the ATen kernels gnomon's runtime calls, on as many threads.
        cores = library_threads([op], device) if device.kind == "cpu" else None
        cost = with_libm_calls(op_cost(op, device, weights_in_dram=cold_weights, cores=cores), [op], device, cores)
        call_s = eager_call_s(op.name, cost, previous, device)
        if cost.model in EAGER_LIBRARY_MODELS:
            previous = (op.name, cost)
        owners = (storage(v).owner for v in op.operands)
        depends = tuple(sorted({producer[o] for o in owners if isinstance(o, Operation) and o in producer}))
        producer[op] = len(steps)
        task = Task(op.name, device.dispatch_overhead_s + call_s, cost.kernel_s, depends)
        shapes = tuple(tuple(r.type.get_shape()) if isinstance(r.type, TensorType) else () for r in op.results)
        steps.append(Step(task, op.name.removeprefix("graph."), "torch", location_name(op.location), shapes, cost))
    return steps


# ---- the roofline plot ----


def plot_roofline(report: Report, path: Path) -> None:
    """The device's roofline (compute peak and every memory level's slope, the DRAM ridge point marked) with each
    kernel as a point at (intensity, FLOPs / predicted kernel time); PNG, SVG or PDF by the file's extension."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise AnalysisError(f"--plot {path}: the plot is written as .png, .svg or .pdf")
    device = report.device
    peak = device.peak("fp32")
    points = [r for r in report.records if r.flops > 0 and r.bytes > 0 and r.kernel_s > 0]
    lowest = min([r.intensity for r in points] + [0.01])
    highest = max([r.intensity for r in points] + [peak / device.dram.bandwidth_bytes_per_s * 100])
    xs = [lowest / 2 * (highest * 4 / lowest) ** (i / 200) for i in range(201)]
    figure, axes = plt.subplots(figsize=(9, 6))
    for level in device.memory:
        bandwidth = level.bandwidth_bytes_per_s
        style = "-" if level is device.dram else ":"
        axes.plot(xs, [min(peak, x * bandwidth) for x in xs], style, label=f"{level.name} {bandwidth / 1e9:.0f} GB/s")
    ridge = peak / device.dram.bandwidth_bytes_per_s
    axes.axvline(ridge, color="grey", linestyle="--", linewidth=0.8)
    axes.annotate(f"ridge {ridge:.1f} FLOP/B", (ridge, peak), textcoords="offset points", xytext=(5, -15))
    total = sum(r.kernel_s for r in points) or 1.0
    for bound, color in (("compute", "tab:red"), ("memory", "tab:blue")):
        chosen = [r for r in points if r.bound == bound]
        axes.scatter(
            [r.intensity for r in chosen],
            [r.flops / r.kernel_s for r in chosen],
            s=[10 + 400 * r.kernel_s / total for r in chosen],
            color=color,
            alpha=0.6,
            label=f"{bound}-bound kernels",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("attained FLOP/s (predicted)")
    source = "calibrated" if device.calibrated else "datasheet, analytical"
    axes.set_title(f"{Path(report.model).name}: {report.target} on {device.name} ({source}), fp32 peak {peak:.3g}")
    axes.legend(loc="lower right", fontsize="small")
    try:
        figure.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as error:
        raise AnalysisError(f"cannot write the plot {path}: {error.strerror or error}") from error
    finally:
        plt.close(figure)
