"""`gnomon.compile` (this module's `compile_model`): a model in, an executable out.

After import, two of `gnomon.pipeline`'s pipelines: `inference` (drop dropout, fold batch norm into
the convolution before it, fold constants, canonicalize), then `lowering` (`graph-layout` decides by predicted
time which convolution regions run channels-last, `graph-fuse` which ops share a kernel, `graph-to-kernel`
partitions into those generated and library kernels, `kernel-to-rt` makes a flat schedule over a planned arena).
`Executable` checks its inputs against the program's signature before any kernel runs and returns NumPy arrays in
the model's output order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import BlockArgument

from gnomon.dialects import rt
from gnomon.dialects.graph.base import SymbolicDim, dim_bounds, dim_names, shape_str
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.errors import GnomonError
from gnomon.files import writing
from gnomon.limits import check_fits
from gnomon.passes.graph_fuse import AUTO_DEVICE, FusionDecision, fusion_decisions
from gnomon.passes.graph_layout import LayoutDecision, layout_decisions
from gnomon.passes.graph_predicate import PredicateDecision, predicate_decisions
from gnomon.passes.kernel_to_rt import LoweringError, rt_functions
from gnomon.passes.kernel_to_rt.memory_plan import MemoryPlanError
from gnomon.pipeline import INPUT_NAMES_ATTR, OUTPUT_NAMES_ATTR, PIPELINES, load, run_pipeline

if TYPE_CHECKING:
    from gnomon.runtime.executor import Profile, Program
    from gnomon.runtime.host import HostPlan, HostProgram

__all__ = [
    "BACKENDS",
    "Executable",
    "InputError",
    "compile_model",
    "executable_from_graph",
    "load_compiled",
    "lower",
    "rewrite",
]

BACKENDS = ("native", "reference")

"""The classes (by qualified name, so that torch need not load) of the live models `compile_model` takes."""


HOST_PROGRAM_ATTR = "gnomon.host_program"
"""Marks a saved graph program whose control flow runs on the host: `load_compiled` lowers its segments."""


class InputError(GnomonError):
    """The inputs given to a compiled model do not match its signature."""


def rewrite(
    module: ModuleOp,
    source: str = "the model",
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    device: str = AUTO_DEVICE,
    predicate: str = "auto",
    predications: list[PredicateDecision] | None = None,
) -> ModuleOp:
    """Run the inference rewrites on a graph module, in place: first `graph-predicate` on `device`, in `predicate`
    mode (auto, always, never), whose decisions `predications` receives when given."""

    def after_pass(name: str, module: ModuleOp) -> None:
        if name == "graph-predicate" and predications is not None:
            predications.extend(predicate_decisions(module))

    spec = PIPELINES["inference"]
    if device != AUTO_DEVICE or predicate != "auto":
        spec = spec.replace("graph-predicate", f'graph-predicate{{device="{device}" mode={predicate}}}', 1)
    return run_pipeline(
        module, "inference", source, verify_each=verify_each, dump_ir=dump_ir, spec=spec, after_pass=after_pass
    )


def lower(
    module: ModuleOp,
    source: str = "the model",
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    device: str = AUTO_DEVICE,
    decisions: list[FusionDecision] | None = None,
    layouts: list[LayoutDecision] | None = None,
    tuned: bool = True,
    layout: str = "auto",
    rewrites: bool = True,
    recompute: str | None = None,
) -> ModuleOp:
    """Run the inference rewrites and the lowering to rt on a graph module, in place.

    `verify_each` and `dump_ir` are `gnomon.pipeline.load`'s; `device` is the one whose predicted times decide
    layout and fusion (`graph-layout`'s and `graph-fuse`'s option); `decisions` and `layouts`, when given, receive
    the fusion and layout decisions taken; `layout` is `graph-layout`'s option (`nchw` keeps every op's layout as
    given: the calibration suite's kernels are measured as they are written); `tuned=False`
    keeps every generated kernel's default schedule (no `kernel-tuned-schedules`); `rewrites=False` skips the
    inference rewrites (a training step has had its own); `recompute`, a `graph-recompute{...}` spec, runs that
    pass after `graph-fuse` (a training step under a memory budget)."""
    if rewrites:
        rewrite(module, source, verify_each=verify_each, dump_ir=dump_ir, device=device)

    def after_pass(name: str, module: ModuleOp) -> None:
        if name == "graph-fuse" and decisions is not None:
            decisions.extend(fusion_decisions(module))
        if name == "graph-layout" and layouts is not None:
            layouts.extend(layout_decisions(module))

    spec = PIPELINES["lowering"]
    if device != AUTO_DEVICE or layout != "auto":
        spec = spec.replace("graph-layout", f'graph-layout{{device="{device}" layout={layout}}}', 1)
        spec = spec.replace("graph-fuse", f'graph-fuse{{device="{device}"}}', 1)
    if not tuned:
        spec = spec.replace(",kernel-tuned-schedules", "")
    if recompute is not None:
        spec = spec.replace(",graph-to-kernel", f",{recompute},graph-to-kernel", 1)
    return run_pipeline(
        module, "lowering", source, verify_each=verify_each, dump_ir=dump_ir, spec=spec, after_pass=after_pass
    )


def _names(module: ModuleOp, attr: str, count: int, prefix: str) -> list[str]:
    names = module.attributes.get(attr)
    given = [n.data for n in names.data if isinstance(n, StringAttr)] if isinstance(names, ArrayAttr) else []
    if len(given) != count:
        given = [""] * count
    return [name or f"{prefix}_{index}" for index, name in enumerate(given)]


def _signature(function: func.FuncOp) -> list[tuple[tuple[int, ...], np.dtype[Any]]]:
    signature: list[tuple[tuple[int, ...], np.dtype[Any]]] = []
    for arg_type in function.function_type.inputs.data:
        assert isinstance(arg_type, MemRefType | TensorType)
        signature.append((tuple(arg_type.get_shape()), np.dtype(numpy_dtype(arg_type.element_type))))
    return signature


def _named_shape(arg: BlockArgument) -> tuple[int, ...]:
    """An input's dims, a named `?` as a `SymbolicDim` (a graph tensor's encoding, an rt argument's `rt.dims`)."""
    arg_type = arg.type
    if not isinstance(arg_type, TensorType | MemRefType):
        return ()
    names = dim_names(arg_type) if isinstance(arg_type, TensorType) else rt.dims_of(arg)
    return tuple(SymbolicDim(n) if d == DYNAMIC_INDEX and n else d for d, n in zip(arg_type.get_shape(), names))


def _as_array(value: Any) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


class Executable:
    """A compiled model: call it with one array (or torch tensor) per input, in input order.

    `module` is the lowered rt program on the native backend, the graph program on the reference one. With `host`
    (a function with control flow, split and lowered by `gnomon.host_program.lower_host`), `module` is the graph
    program whose segments the plan runs, on the native backend."""

    def __init__(self, module: ModuleOp, backend: str = "native", host: HostPlan | None = None):
        if backend not in BACKENDS:
            raise GnomonError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if host is not None and backend != "native":
            raise GnomonError("a host plan runs on the native backend; the reference backend interprets the graph")
        self.module = module
        self.backend = backend
        self._host_plan = host
        functions = (
            rt_functions(module)
            if backend == "native" and host is None
            else [op for op in module.ops if isinstance(op, func.FuncOp)]
        )
        if len(functions) != 1:
            raise GnomonError(f"expected one program in the module, found {len(functions)}")
        self._function = functions[0]
        self._signature = _signature(self._function)
        self._dim_bounds = dim_bounds(module)
        self.input_names = _names(module, INPUT_NAMES_ATTR, len(self._signature), "input")
        self.output_names = _names(module, OUTPUT_NAMES_ATTR, len(self._function.function_type.outputs), "output")
        self._check_sizes()
        self._program: Program | None = None
        self._host: HostProgram | None = None
        if host is not None:
            from gnomon.runtime.host import HostProgram

            self._host = HostProgram(host)
        elif backend == "native":
            from gnomon.runtime.executor import Program

            self._program = Program(module)

    def _check_sizes(self) -> None:
        """Each input, and the native program's arena (a host plan's segments': they share the largest), fits in
        memory: a huge shape or a hand-edited `rt.arena_size` fails here, in one line, rather than in NumPy's
        allocation."""
        args = self._function.body.block.args
        for name, (_, dtype), arg in zip(self.input_names, self._signature, args, strict=True):
            shape = _named_shape(arg)
            # A dynamic dim counts at its declared bound; one without is checked against each run's input.
            largest = [self._dim_bounds.get(d.symbol, (0, d))[1] if isinstance(d, SymbolicDim) else d for d in shape]
            static = [d for d in largest if d != DYNAMIC_INDEX]
            check_fits(f"input '{name}' of shape {shape_str(shape)} ({dtype})", math.prod(static) * dtype.itemsize)
        if self.backend != "native":
            return
        functions = [self._function]
        if self._host_plan is not None:
            from gnomon.runtime.host import segments

            functions = [f for segment in segments(self._host_plan.body) for f in rt_functions(segment.module)]
        for function in functions:
            arena = function.attributes.get(rt.ARENA_SIZE)
            if not isinstance(arena, IntegerAttr):
                continue
            size = arena.value.data
            if size < 0:
                raise GnomonError(f"the program's {rt.ARENA_SIZE} = {size} is negative")
            check_fits(f"the program's arena ({rt.ARENA_SIZE} = {size})", size)

    @property
    def program(self) -> Program | None:
        """The loaded native program (`gnomon.runtime.executor.Program`); None on the reference backend. A program
        with control flow has several (`host`): asking for one is an error."""
        if self._host is not None:
            raise GnomonError("the model has control flow: it runs as several rt programs (Executable.host)")
        return self._program

    @property
    def host(self) -> HostProgram | None:
        """The loaded host program (`gnomon.runtime.host.HostProgram`) of a model with control flow, else None."""
        return self._host

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        return [shape for shape, _ in self._signature]

    def largest_input_shapes(self) -> list[tuple[int, ...]]:
        """Each input's shape with its dynamic dims at the top of their declared ranges; an InputError for a
        dynamic dim without one."""
        shapes: list[tuple[int, ...]] = []
        for name, arg in zip(self.input_names, self._function.body.block.args, strict=True):
            dims: list[int] = []
            for axis, dim in enumerate(_named_shape(arg)):
                if dim != DYNAMIC_INDEX:
                    dims.append(dim)
                elif isinstance(dim, SymbolicDim) and dim.symbol in self._dim_bounds:
                    dims.append(self._dim_bounds[dim.symbol][1])
                else:
                    what = f"dim {axis} ({dim.symbol})" if isinstance(dim, SymbolicDim) else f"dim {axis}"
                    raise InputError(
                        f"input '{name}': {what} is dynamic with no declared range (declare one, e.g. --input-shape"
                        f" {dim.symbol if isinstance(dim, SymbolicDim) else 'NAME'}=1..64, or give the inputs)"
                    )
            shapes.append(tuple(dims))
        return shapes

    @property
    def input_dtypes(self) -> list[np.dtype[Any]]:
        return [dtype for _, dtype in self._signature]

    def check_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """The inputs as contiguous arrays, or an InputError naming the first one that does not fit."""
        if len(inputs) != len(self._signature):
            names = ", ".join(self.input_names)
            raise InputError(f"expected {len(self._signature)} inputs ({names}), got {len(inputs)}")
        arrays: list[np.ndarray] = []
        sizes: dict[str, tuple[int, str]] = {}  # a named dim's size, and the input that fixed it
        args = self._function.body.block.args
        for name, value, (shape, dtype), arg in zip(self.input_names, inputs, self._signature, args, strict=True):
            array = _as_array(value)
            fits = len(array.shape) == len(shape) and all(d in (n, DYNAMIC_INDEX) for n, d in zip(array.shape, shape))
            if not fits or array.dtype != dtype:
                raise InputError(
                    f"input '{name}': expected {dtype} of shape {shape_str(_named_shape(arg))}, "
                    f"got {array.dtype} of shape {list(array.shape)}"
                )
            for axis, (size, dim) in enumerate(zip(array.shape, _named_shape(arg), strict=True)):
                if not isinstance(dim, SymbolicDim):
                    continue
                low, high = self._dim_bounds.get(dim.symbol, (0, size))
                if not low <= size <= high:
                    raise InputError(
                        f"input '{name}': dim {axis} ({dim.symbol}) is {size}, outside its declared range {low}..{high}"
                    )
                first = sizes.setdefault(dim.symbol, (size, name))
                if first[0] != size:
                    raise InputError(
                        f"input '{name}': dim {axis} ({dim.symbol}) is {size}, but input '{first[1]}' gives"
                        f" {dim.symbol} = {first[0]}"
                    )
            arrays.append(np.ascontiguousarray(array))
        return arrays

    def run(self, inputs: Sequence[Any], profile: bool = False) -> tuple[np.ndarray, ...]:
        arrays = self.check_inputs(inputs)
        if self._host is not None:
            return tuple(self._host.run(arrays, profile=profile))
        if self._program is None:
            from gnomon.reference import run_reference

            return tuple(run_reference(self.module, arrays))
        return tuple(self._program.run(arrays, profile=profile))

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        return self.run(inputs)

    def profile(self) -> Profile:
        """The last profiled run's per-kernel timings, the compile statistics and the arena size (with control
        flow, a `gnomon.runtime.host.HostProfile`: every segment's launches, and their shared arena)."""
        if self._host is not None:
            return self._host.profile
        if self._program is None:
            raise GnomonError("the reference backend has no profile; use backend='native'")
        return self._program.profile

    def save(self, path: str | Path) -> None:
        """Write the lowered program (weights included) so that `load_compiled` runs it without re-importing. A
        program with control flow on the host is written as its graph program, rewritten (predication decided) and
        marked `HOST_PROGRAM_ATTR`: loading lowers its segments again (their kernels come from the disk cache)."""
        from gnomon.printing import print_module

        if self._host is not None:
            self.module.attributes[HOST_PROGRAM_ATTR] = UnitAttr()
        with writing(path) as stream:
            print_module(self.module, stream)


def compile_model(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    backend: str = "native",
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    device: str = AUTO_DEVICE,
    decisions: list[FusionDecision] | None = None,
    layouts: list[LayoutDecision] | None = None,
    layout: str = "auto",
    tuned: bool = True,
    train: object = None,
    keep_gradients: bool = True,
    memory_budget: int | float | str | None = None,
    recompute: str = "z3",
    recompute_time_limit: float = 10.0,
    predicate: str = "auto",
    predications: list[PredicateDecision] | None = None,
    dynamic_shapes: Any = None,
    dim_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> Any:
    """Import, rewrite and lower a model; the reference backend interprets the graph program instead.

    `verify_each` and `dump_ir` are `gnomon.pipeline.load`'s; `device`, `decisions`, `layouts`, `layout` (auto,
    nchw, nhwc: `graph-layout`'s choice, or every region so) and `tuned` are `lower`'s; `predicate` (auto, always,
    never) is `graph-predicate`'s mode, whose decisions `predications` receives; `dynamic_shapes` (torch.export's,
    for a live module) keeps those dims `?`, named after their `Dim`s and their ranges, which `dim_ranges` (name ->
    (smallest, largest)) declares or narrows. `train` (True, or `gnomon.SGD(...)`, `gnomon.Adam(...)`,
    `gnomon.AdamW(...)`) compiles a training step of a torch module that returns its loss instead: a
    `gnomon.training.TrainingExecutable`, which without `keep_gradients` keeps no gradient past its parameter's
    update, and with `memory_budget` (an int: bytes; a float: a share of the step's arena without recomputation)
    recomputes forward values to fit it, choosing with the `recompute` solver (z3, milp, greedy, sqrt) in at most
    `recompute_time_limit` seconds."""
    if train is not None and train is not False:
        from gnomon.training import compile_training

        if backend != "native":
            raise GnomonError("training runs on the native backend only")
        return compile_training(
            model, example_inputs, train, verify_each=verify_each, dump_ir=dump_ir, device=device, tuned=tuned,
            keep_gradients=keep_gradients, memory_budget=memory_budget, recompute=recompute,
            recompute_time_limit=recompute_time_limit,
        )  # fmt: skip
    if not keep_gradients:
        raise GnomonError("keep_gradients=False is a training step's option: add train=")
    if memory_budget is not None:
        raise GnomonError("memory_budget is a training step's option (it recomputes forward values): add train=")
    if backend not in BACKENDS:
        raise GnomonError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    module = load(
        model, example_inputs, input_shapes, dynamic_shapes, verify_each=verify_each, dump_ir=dump_ir,
        dim_ranges=dim_ranges,
    )  # fmt: skip
    source = str(model) if isinstance(model, str | Path) else type(model).__name__
    return executable_from_graph(
        module, source, backend, verify_each=verify_each, dump_ir=dump_ir, device=device, decisions=decisions,
        layouts=layouts, layout=layout, tuned=tuned, predicate=predicate, predications=predications,
    )  # fmt: skip


def executable_from_graph(
    module: ModuleOp,
    source: str = "the model",
    backend: str = "native",
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    device: str = AUTO_DEVICE,
    decisions: list[FusionDecision] | None = None,
    layouts: list[LayoutDecision] | None = None,
    layout: str = "auto",
    tuned: bool = True,
    predicate: str = "auto",
    predications: list[PredicateDecision] | None = None,
) -> Executable:
    """An executable of a graph module, which the native backend rewrites (`rewrite`'s options) and lowers
    (`lower`'s) in place; a function that still has `graph.if` / `graph.while` after `graph-predicate` becomes a
    host plan (`gnomon.host_program`)."""
    if backend != "native":
        return Executable(module, backend)
    from gnomon.host_program import has_control_flow, lower_host

    rewrite(
        module, source, verify_each=verify_each, dump_ir=dump_ir, device=device, predicate=predicate,
        predications=predications,
    )  # fmt: skip
    options: dict[str, Any] = {
        "device": device, "decisions": decisions, "layouts": layouts, "layout": layout, "tuned": tuned,
    }  # fmt: skip
    if has_control_flow(module):
        plan = lower_host(module, source, verify_each=verify_each, dump_ir=dump_ir, **options)
        return Executable(module, backend, host=plan)
    lower(module, source, verify_each=verify_each, dump_ir=dump_ir, rewrites=False, **options)
    return Executable(module, backend)


def load_compiled(path: str | Path) -> Executable:
    """An executable from a file `gnomon compile` wrote, checked before any kernel is compiled or run: the ops'
    verifiers (as `gnomon-opt` runs them), then the runtime's `verify_program`. A file edited by hand fails with
    an error naming it and the op, kernel or buffer at fault."""
    from xdsl.dialects.func import Func
    from xdsl.utils.exceptions import VerifyException

    from gnomon.dialects.graph.constant_values import parse_with_resources
    from gnomon.registry import DIALECTS
    from gnomon.runtime.executor import ProgramError

    path = Path(path)
    if not path.is_file():
        raise GnomonError(f"no such file: {path}")
    try:
        module = parse_with_resources(path.read_text(), {"func": lambda: Func, **DIALECTS}, str(path))
    except Exception as error:  # xDSL raises several types for malformed text
        raise GnomonError(f"{path} is not a gnomon program: {_first_line(error)}") from error
    host = HOST_PROGRAM_ATTR in module.attributes
    if not rt_functions(module) and not host:
        raise GnomonError(f"{path} holds no compiled program (write one with `gnomon compile`)")
    try:
        module.verify()
        if host:
            from gnomon.host_program import lower_host

            return Executable(module, "native", host=lower_host(module, path.name))
        return Executable(module, "native")  # its Program runs `verify_program` before it compiles a kernel
    except (VerifyException, ProgramError, MemoryPlanError, LoweringError) as error:
        raise ProgramError(f"{path}: {_first_line(error)}") from error


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
