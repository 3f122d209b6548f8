"""The native runtime: load an rt program, bind its buffers once, run its launches in order.

Loading does all the work that does not depend on the inputs: it checks the program
(`verify_program`: where it writes, its constants' data, its memory plan), carves every
`rt.buffer` out of one arena as a NumPy view, turns constants into arrays, compiles (or
fetches from the disk cache) each generated `kernel.func`, and binds every `rt.launch` to a
zero-argument closure over its buffers. Running copies the inputs into their buffers, calls
the closures, and copies the results out (the arena is reused by the next run). With
profiling on, each launch is timed with `perf_counter_ns`.

A program with `?` dims (`rt.dim_ranges`) is planned at the largest sizes and bound per shape: the sizes of
its symbols, read from the inputs, key a binding (input arrays, every buffer as a view of its actual size at
its planned offset, views, launches), made on the first run at that shape and kept in an LRU cache of
`BINDINGS`. Loading binds the largest shape, which compiles every kernel once: a generated kernel with `?`
dims serves every size. A static program has one binding, made at load.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, DenseResourceAttr, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from gnomon.cost.direct_io import direct_io
from gnomon.dialects import kernel, rt
from gnomon.dialects.graph.base import dim_symbols, ints
from gnomon.dialects.graph.constant_values import constant_to_numpy, element_bytes, numpy_dtype, resource_storage
from gnomon.errors import GnomonError
from gnomon.locations import location_name
from gnomon.passes.kernel_to_rt import ALIGNMENT, rt_functions, verify_plan
from gnomon.passes.kernel_tuned_schedules import TUNED_ATTR
from gnomon.runtime.direct import Redirect, fits
from gnomon.runtime.malloc import keep_freed_memory

if TYPE_CHECKING:
    import torch

    from gnomon.runtime.codegen.jit import Descriptor

__all__ = ["BINDINGS", "KernelTiming", "Launch", "Profile", "Program", "ProgramError", "verify_program"]

BINDINGS = 64
"""Shapes whose bindings a program with `?` dims keeps (least recently run first out): binding one costs about
0.1-0.2 ms a launch (TinyAttn's 14 launches: about 2 ms)."""


class ProgramError(GnomonError):
    """An rt program cannot be loaded or run."""


@dataclass(frozen=True)
class KernelTiming:
    """One launch of a profiled run."""

    kernel: str
    """The `kernel.func` symbol."""
    kind: str
    """`generated`, or the library call and the ops it fuses (`aten.convolution+relu`, `numpy.gather_elements`)."""
    source_ops: tuple[str, ...]
    """The graph ops the kernel runs."""
    location: str
    """The source node or module path of the kernel's first op."""
    seconds: float


@dataclass
class Profile:
    """The kernels of the last profiled run, how the program was compiled, and its memory plan."""

    timings: list[KernelTiming] = field(default_factory=list[KernelTiming])
    run_seconds: float = 0.0
    arena_bytes: int = 0
    arena_lower_bound: int = 0
    kernels_compiled: int = 0
    kernels_from_cache: int = 0
    compile_seconds: float = 0.0
    kernels_tuned: int = 0
    """Generated kernels that run a schedule from the tuning database (`kernel-tuned-schedules`)."""
    kernels_generated: int = 0
    """Generated kernels loaded (compiled or from the disk cache), each in-place variant counted apart."""
    shapes_bound: int = 0
    """Bindings made: 1 for a static program; with `?` dims, one at load (the largest shape) and one per new shape
    run (again after its binding left the cache)."""


@dataclass(frozen=True)
class Launch:
    """One `rt.launch`, bound: its kernel, the arrays it reads and writes (views of the arena, constants, inputs)
    and the closure that runs it."""

    kernel: kernel.FuncOp
    location: str
    run: Callable[[], None]
    args: tuple[np.ndarray, ...]
    results: tuple[np.ndarray, ...]
    constants: tuple[bool, ...] = ()
    """Per arg: whether it holds the program's constant values (a weight), which no launch writes."""
    descriptors: tuple[Descriptor, ...] = ()
    """A generated kernel's memref descriptors, which `Redirect` points at the caller's arrays for a run."""


def _aligned_arena(size: int) -> np.ndarray:
    raw = np.zeros(size + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start : start + size]


def _aligned_like(array: np.ndarray) -> np.ndarray:
    """An uninitialized array of `array`'s shape and dtype, aligned as the arena's buffers are."""
    raw = np.empty(array.nbytes + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)


@dataclass(frozen=True)
class _Binding:
    """A program bound at one shape: its input arrays, launches and results, and the inputs and results a run
    binds to the caller's memory (`gnomon.cost.direct_io`), by index."""

    inputs: list[np.ndarray]
    launches: list[Launch]
    results: list[np.ndarray]
    direct_inputs: dict[int, Redirect] = field(default_factory=dict[int, Redirect])
    direct_results: dict[int, Redirect] = field(default_factory=dict[int, Redirect])


def _reference_kernel(kernel_func: kernel.FuncOp) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
    """Run a kernel's body with the reference semantics (the NumPy fallback for ops without a library call)."""
    from gnomon.reference import run_reference

    body = kernel_func.body.clone()
    terminator = body.block.last_op
    assert isinstance(terminator, kernel.YieldOp)
    Rewriter.replace_op(terminator, func.ReturnOp(*terminator.values))
    module = ModuleOp([func.FuncOp(kernel_func.sym_name.data, kernel_func.function_type, body)])
    return lambda args: run_reference(module, args)


def _bind_numpy(kernel_func: kernel.FuncOp, args: Sequence[np.ndarray], results: Sequence[np.ndarray]):
    reference = _reference_kernel(kernel_func)

    def run() -> None:
        for result, value in zip(results, reference(args), strict=True):
            np.copyto(result, value, casting="unsafe")

    return run


def _in_place_input(args: Sequence[np.ndarray], results: Sequence[np.ndarray]) -> int | None:
    """The input whose memory the memory plan gave the launch's one result (an in-place pointwise kernel)."""
    if len(results) != 1:
        return None
    result = results[0]
    for position, arg in enumerate(args):
        if arg.ctypes.data == result.ctypes.data and arg.shape == result.shape and arg.dtype == result.dtype:
            return position
    return None


def _constant_name(op: rt.ConstantOp) -> str:
    value = op.value
    if isinstance(value, DenseResourceAttr):
        return f"the constant dense_resource<{value.resource_handle.data}>"
    return f"an inline constant {op.result.type}"


def _check_writes(function: func.FuncOp) -> None:
    """Launches write only into the arena: never into an input (the caller's data) or a constant (the weights), but
    into the inputs the function updates (`rt.UPDATES`: a training step's state)."""
    block = function.body.block
    updates = function.attributes.get(rt.UPDATES)
    updated = {index for index in ints(updates) if index >= 0} if isinstance(updates, DenseArrayBase) else set()
    protected: dict[SSAValue, str] = {arg: f"input {arg.index}" for arg in block.args if arg.index not in updated}
    for op in block.ops:
        if isinstance(op, rt.ConstantOp):
            protected[op.result] = _constant_name(op)
        elif isinstance(op, rt.ViewOp) and op.source in protected:
            protected[op.result] = f"a view of {protected[op.source]}"
        elif isinstance(op, rt.LaunchOp):
            for position, out in enumerate(op.outs):
                if out in protected:
                    raise ProgramError(
                        f"rt.launch @{op.callee.string_value()} writes its output {position} into {protected[out]}"
                    )


def _check_blob(op: rt.ConstantOp) -> None:
    """A dense_resource constant's blob holds exactly its type's bytes (after the 4-byte alignment header)."""
    value = op.value
    if not isinstance(value, DenseResourceAttr):
        return  # the parser checked an inline constant's elements against its type
    memref = op.result.type
    assert isinstance(memref, MemRefType)
    size = element_bytes(memref.element_type)
    blob = resource_storage().lookup(value.resource_handle.data)
    if size is None or not blob:
        raise ProgramError(f"{_constant_name(op)} has no data of type {memref}")
    expected = prod(memref.get_shape()) * size
    digits = len(blob) - len("0x") - 8
    if digits != 2 * expected:
        raise ProgramError(f"{_constant_name(op)} holds {max(digits, 0) // 2} bytes, {memref} needs {expected}")


def verify_program(module: ModuleOp) -> func.FuncOp:
    """The module's one rt program, once checked for what loading and running it rely on: launches write only
    into the arena, constants hold their types' bytes, and the memory plan keeps live buffers apart inside the
    arena (`verify_plan`). The module itself is assumed verified (`module.verify()`). Raises ProgramError, or
    `verify_plan`'s MemoryPlanError (LoweringError for a buffer that no launch writes)."""
    functions = rt_functions(module)
    if len(functions) != 1:
        raise ProgramError(f"expected one rt program in the module, found {len(functions)}")
    function = functions[0]
    _check_writes(function)
    for op in function.body.block.ops:
        if isinstance(op, rt.ConstantOp):
            _check_blob(op)
    verify_plan(function)
    return function


def _constant(op: rt.ConstantOp) -> np.ndarray:
    try:
        return constant_to_numpy(op.value)
    except ValueError as error:  # a blob that is not hexadecimal
        raise ProgramError(f"{_constant_name(op)} does not hold valid data: {error}") from error


def _symbol_dims(args: Sequence[SSAValue], ranges: Mapping[str, tuple[int, int]]) -> list[tuple[int, int, str]]:
    """The inputs' `?` dims, (input, axis, name); a ProgramError unless each symbol is some input dim's whole name
    (its size is read there) and has a range."""
    found = [(index, axis, name) for index, arg in enumerate(args) for axis, name in enumerate(rt.dims_of(arg)) if name]
    read = {name for _, _, name in found}
    for index, axis, name in found:
        for symbol in dim_symbols(name):
            if symbol not in read or symbol not in ranges:
                why = "no input dim is it alone" if symbol not in read else f"{rt.DIM_RANGES} has no range for it"
                raise ProgramError(f"input {index}: dim {axis} ({name}): the size of {symbol} is unknown ({why})")
    return found


def _tensor_over(array: np.ndarray) -> torch.Tensor:
    """A torch tensor over the array's own memory (a library call writes its results through it); ml_dtypes'
    bfloat16, which torch cannot take from NumPy, is reinterpreted from its bits."""
    import torch

    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(array)


class Program:
    """An rt program, loaded and ready to run."""

    inputs: list[np.ndarray]
    """The input arrays of the current binding (the last shape run)."""
    launches: list[Launch]

    def __init__(self, module: ModuleOp, arena: np.ndarray | None = None):
        """`arena`, when given, is the memory to carve the buffers from instead of an arena of the program's own:
        programs that run one at a time, copying their results out, share it (`gnomon.runtime.host`)."""
        self.function = function = verify_program(module)
        keep_freed_memory()  # before the first library call allocates: see gnomon.runtime.malloc
        self._kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, kernel.FuncOp)}
        arena_size = function.attributes[rt.ARENA_SIZE]
        assert isinstance(arena_size, IntegerAttr)
        if arena is not None and arena.nbytes < arena_size.value.data:
            raise ProgramError(
                f"the shared arena holds {arena.nbytes} bytes, the program needs {arena_size.value.data}"
            )
        self.arena = _aligned_arena(arena_size.value.data) if arena is None else arena
        lower_bound = function.attributes.get(rt.ARENA_LOWER_BOUND)
        self.profile = Profile(
            arena_bytes=arena_size.value.data,
            arena_lower_bound=lower_bound.value.data if isinstance(lower_bound, IntegerAttr) else 0,
        )
        block = function.body.block
        self._compiled: dict[str, object] = {}
        self._constants: dict[SSAValue, np.ndarray] = {}
        self._ranges = rt.dim_ranges(function)
        self._direct = direct_io(function, self._kernels)
        self._symbols = _symbol_dims(block.args, self._ranges)
        """Where each input's `?` dims are: (input, axis, name); their sizes are a shape's key."""
        self._bindings: OrderedDict[tuple[int, ...], _Binding] = OrderedDict()
        largest = {symbol: high for symbol, (_, high) in self._ranges.items()}
        self._key = tuple(rt.dim_size(name, largest) for _, _, name in self._symbols)
        """The shape of the current binding."""
        self._bindings[self._key] = binding = self._bind(largest)
        self._use(binding)

    @property
    def results(self) -> list[np.ndarray]:
        """The result arrays of the current binding: views of the arena, what the last `run_in_place` left there
        (`run` may write a result straight into the array it returns instead)."""
        return list(self._results)

    def _use(self, binding: _Binding) -> None:
        self._binding = binding
        self.inputs, self.launches, self._results = binding.inputs, binding.launches, binding.results

    def _select(self, inputs: Sequence[np.ndarray]) -> None:
        """Use the binding of the inputs' shape (made now if it is new): a program with `?` dims."""
        key = tuple(inputs[index].shape[axis] for index, axis, _ in self._symbols)
        if key == self._key:
            return
        binding = self._bindings.get(key)
        if binding is None:
            binding = self._bindings[key] = self._bind(self._sizes(inputs))
            if len(self._bindings) > BINDINGS:
                self._bindings.popitem(last=False)
        else:
            self._bindings.move_to_end(key)
        self._key = key
        self._use(binding)

    def _sizes(self, inputs: Sequence[np.ndarray]) -> dict[str, int]:
        """Each symbol's size, read from the inputs and checked against its range (and against its other dims)."""
        sizes: dict[str, int] = {}
        for index, axis, name in self._symbols:
            size = inputs[index].shape[axis]
            if name in self._ranges:
                low, high = self._ranges[name]
                if not low <= size <= high:
                    raise ProgramError(f"input {index}: dim {axis} ({name}) is {size}, outside its range {low}..{high}")
                sizes.setdefault(name, size)
        for index, axis, name in self._symbols:
            if inputs[index].shape[axis] != rt.dim_size(name, sizes):
                raise ProgramError(
                    f"input {index}: dim {axis} ({name}) is {inputs[index].shape[axis]}, other inputs give "
                    f"{name} = {rt.dim_size(name, sizes)}"
                )
        return sizes

    def _bind(self, sizes: Mapping[str, int]) -> _Binding:
        """Input arrays, buffers, views and launches at the shape where each symbol has its size in `sizes`."""
        self.profile.shapes_bound += 1
        block = self.function.body.block
        arrays: dict[SSAValue, np.ndarray] = {}
        inputs: list[np.ndarray] = []
        for arg in block.args:
            memref = arg.type
            assert isinstance(memref, MemRefType)
            arrays[arg] = np.zeros(rt.shape_at(memref, rt.dims_of(arg), sizes), numpy_dtype(memref.element_type))
            inputs.append(arrays[arg])
        launches: list[Launch] = []
        results: list[np.ndarray] = []
        constants: set[SSAValue] = set()  # the weights and their views: no launch writes them (`verify_program`)
        for op in block.ops:
            if isinstance(op, rt.BufferOp):
                arrays[op.result] = self._buffer(op, sizes)
            elif isinstance(op, rt.ConstantOp):
                if op.result not in self._constants:
                    self._constants[op.result] = _constant(op)
                arrays[op.result] = self._constants[op.result]
                constants.add(op.result)
            elif isinstance(op, rt.ViewOp):
                memref = op.result.type
                assert isinstance(memref, MemRefType)
                shape = rt.shape_at(memref, rt.dims_of(op.result), sizes)
                start = op.element_offset
                window = arrays[op.source].reshape(-1)[start : start + prod(shape)]  # views, never copies
                arrays[op.result] = window.reshape(shape)
                if op.source in constants:
                    constants.add(op.result)
            elif isinstance(op, rt.LaunchOp):
                kernel_func = self._kernels[op.callee.string_value()]
                args, outs = [arrays[v] for v in op.ins], [arrays[v] for v in op.outs]
                constant = tuple(v in constants for v in op.ins)
                run, descriptors = self._bind_launch(kernel_func, args, outs, constant)
                location = location_name(op.location)
                launches.append(
                    Launch(kernel_func, location, run, tuple(args), tuple(outs), constant, tuple(descriptors))
                )
            elif isinstance(op, func.ReturnOp):
                results = [arrays[v] for v in op.operands]
        descriptors = [d for launch in launches for d in launch.descriptors]
        return _Binding(
            inputs,
            launches,
            results,
            {i: Redirect(inputs[i], descriptors) for i in self._direct.inputs},
            {i: Redirect(results[i], descriptors) for i in self._direct.results},
        )

    def _buffer(self, op: rt.BufferOp, sizes: Mapping[str, int]) -> np.ndarray:
        memref = op.result.type
        assert isinstance(memref, MemRefType)
        dtype = np.dtype(numpy_dtype(memref.element_type))
        shape = rt.shape_at(memref, rt.dims_of(op.result), sizes)
        offset = op.offset.value.data
        return self.arena[offset : offset + prod(shape) * dtype.itemsize].view(dtype).reshape(shape)

    def _bind_launch(
        self,
        kernel_func: kernel.FuncOp,
        args: Sequence[np.ndarray],
        results: Sequence[np.ndarray],
        constants: Sequence[bool],
    ) -> tuple[Callable[[], None], list[Descriptor]]:
        """The launch's closure, and a generated kernel's descriptors."""
        compiled = self._compiled
        if kernel_func.is_generated:
            from gnomon.passes.kernel_to_linalg.conv import packing
            from gnomon.runtime.codegen import compile_kernel

            in_place = _in_place_input(args, results)
            # A convolution's weights that no launch writes are packed once, when the launch is bound.
            layout = packing(kernel_func)
            prepacked = layout is not None and constants[layout.weight]
            key = f"{kernel_func.sym_name.data}/{in_place}/{prepacked}"
            if key not in compiled:
                compiled[key] = compiled_kernel = compile_kernel(kernel_func, in_place, prepacked)
                self.profile.kernels_generated += 1
                self.profile.kernels_tuned += TUNED_ATTR in kernel_func.attributes
                self.profile.compile_seconds += compiled_kernel.compile_seconds
                if compiled_kernel.from_cache:
                    self.profile.kernels_from_cache += 1
                else:
                    self.profile.kernels_compiled += 1
            return compiled[key].bound(args, results)  # pyright: ignore[reportAttributeAccessIssue]
        call = kernel_func.call
        assert call is not None
        if call.callee.startswith("numpy."):
            return _bind_numpy(kernel_func, args, results), []

        from gnomon.runtime.library import bind_call

        library = bind_call(call, kernel_func.body.block)
        if library is None:
            raise ProgramError(f"kernel @{kernel_func.sym_name.data}: no library call {kernel_func.profile_name}")
        return library.bind([_tensor_over(a) for a in args], [_tensor_over(r) for r in results], constants), []

    def run(self, inputs: Sequence[np.ndarray], profile: bool = False) -> list[np.ndarray]:
        """Run on `inputs` (already checked: one contiguous array per input, right shape and dtype; a `?` dim in
        its range, which a new shape checks again). Each input is copied into its array, or read where it lies
        (`gnomon.cost.direct_io`); each result is copied out of the arena, or written straight into the array
        returned. The launches point back at the program's own arrays after the run."""
        if self._symbols:
            self._select(inputs)
        binding = self._binding
        redirected: list[Redirect] = []
        try:
            for index, (buffer, value) in enumerate(zip(self.inputs, inputs, strict=True)):
                redirect = binding.direct_inputs.get(index)
                # An array in the arena itself (a result of `run_in_place` fed back) is copied: launches write there.
                if redirect is not None and fits(value, buffer) and not np.may_share_memory(value, self.arena):
                    redirect.point_at(value)
                    redirected.append(redirect)
                else:
                    np.copyto(buffer, value)
            fresh: dict[int, np.ndarray] = {}
            for index, redirect in binding.direct_results.items():
                fresh[index] = _aligned_like(redirect.home)
                redirect.point_at(fresh[index])
                redirected.append(redirect)
            results = self.run_in_place(profile)
        finally:
            for redirect in redirected:
                redirect.restore()
        return [fresh[i] if i in fresh else np.array(result) for i, result in enumerate(results)]

    def load(self, inputs: Sequence[np.ndarray]) -> None:
        """Copy `inputs` (checked as for `run`) into the input arrays, which `run_in_place` and `run_launches`
        read; `run` may read the caller's arrays where they lie instead, leaving the input arrays as they were."""
        if self._symbols:
            self._select(inputs)
        for buffer, value in zip(self.inputs, inputs, strict=True):
            np.copyto(buffer, value)

    def run_in_place(self, profile: bool = False) -> list[np.ndarray]:
        """Run on what the input arrays (`self.inputs`) hold now; the results are views of the arena, valid until
        the next run (a training step keeps its state in the input arrays, and copies out only what it needs)."""
        if profile:
            self._run_profiled()
        else:
            self._run_launches(len(self.launches))
        return list(self._results)

    def _run_launches(self, stop: int) -> None:
        launches = self.launches if stop == len(self.launches) else self.launches[:stop]
        index = 0
        try:
            for index, launch in enumerate(launches):
                launch.run()
        except (RuntimeError, IndexError, ValueError) as error:  # a library call rejecting its data
            raise self._failed(index, error) from error

    def _failed(self, index: int, error: Exception) -> ProgramError:
        """A launch's failure (an embedding index past its table, bag offsets out of order), in one line naming
        its kernel and layer."""
        launch = self.launches[index]
        lines = str(error).strip().splitlines()
        message = lines[0].split("  (Could this error message be improved?")[0] if lines else type(error).__name__
        return ProgramError(f"kernel @{launch.kernel.sym_name.data} ({launch.location}) failed on its data: {message}")

    def run_launches(self, stop: int) -> None:
        """Run launches 0..stop-1 on the input arrays (`load`): what launch `stop` reads is then in place."""
        self._run_launches(stop)

    def _run_profiled(self) -> None:
        # Only clock reads between launches: building the timings in the loop took more time than a small launch,
        # and left it slower than in an unprofiled run.
        clock = time.perf_counter_ns
        stamps = [0] * (len(self.launches) + 1)
        stamps[0] = clock()
        index = 0
        try:
            for index, launch in enumerate(self.launches):
                launch.run()
                stamps[index + 1] = clock()
        except (RuntimeError, IndexError, ValueError) as error:
            raise self._failed(index, error) from error
        timings: list[KernelTiming] = []
        for index, launch in enumerate(self.launches):
            kernel_func = launch.kernel
            kind = kernel_func.profile_name
            ops = tuple(op.name for op in kernel_func.body.block.ops if not isinstance(op, kernel.YieldOp))
            seconds = (stamps[index + 1] - stamps[index]) * 1e-9
            timings.append(KernelTiming(kernel_func.sym_name.data, kind, ops, launch.location, seconds))
        self.profile.run_seconds = (stamps[-1] - stamps[0]) * 1e-9
        self.profile.timings = timings
