"""Compile generated kernels to machine code with MLIR and LLVM, and call them through ctypes.

`compile_kernel` lowers a `kernel.func` with `kernel-to-linalg`, prints the upstream module and
parses it into torch-mlir's MLIR, runs the pipeline below down to the LLVM dialect, and has
MLIR's ExecutionEngine (LLVM at -O3, for the host CPU) emit an object file, which `cc` links
into a shared library in the disk cache. Every kernel, compiled now or found in the cache, is
loaded from that library with ctypes, so a process that finds its kernels cached imports no MLIR
at all; a cached library is loaded only once its checksum holds (`gnomon.runtime.codegen.cache`).
Identical kernels compile once per process (the library is memoized by its path).

A kernel with `?` dims is compiled once for every size: a call binds arrays of any size there, each memref
descriptor takes its array's sizes, and the parts a call splits into are counted from them (`PartsRule`).
"""

# torch-mlir's MLIR bindings are a C extension without type stubs: pyright cannot see their names.
# pyright: reportAttributeAccessIssue=false

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, ModuleOp, StringAttr

from gnomon.cost.threads import parts_for
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import shape_str
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.passes.kernel_to_linalg import CodegenError, lower_kernel
from gnomon.passes.kernel_to_linalg.conv import Packing
from gnomon.passes.kernel_to_linalg.lowering import PartsRule
from gnomon.runtime.codegen.cache import cache_directory, cache_key, verified_entry, write_entry
from gnomon.runtime.codegen.threads import ParallelCall, cpu_count

SYMBOL = "gnomon_kernel"
"""Every kernel's function is compiled under this name, so kernels that differ only in name share code."""

PIPELINE = (
    "builtin.module("
    "canonicalize,cse,"
    "func.func(convert-linalg-to-loops),"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-vector-to-llvm,convert-math-to-llvm,convert-math-to-libm,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
    "reconcile-unrealized-casts)"
)
"""Upstream MLIR passes from linalg, scf, vector, arith and math on memrefs to the LLVM dialect.

convert-math-to-llvm runs first so that what LLVM has intrinsics for (sqrt, floor, fabs...) stays
vectorizable; convert-math-to-libm takes the rest (erf, f64 tanh) as libm calls.
"""

OPT_LEVEL = 3
"""LLVM's -O3: its loop vectorizer vectorizes the elementwise loops (8 f32 lanes with AVX2)."""

_compilations = 0


def compilation_count() -> int:
    """How many kernels this process has compiled with MLIR and LLVM (cache hits do not count)."""
    return _compilations


@cache
def _compiler() -> str:
    found = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if found is None:
        raise CodegenError("no C compiler to link generated kernels: install gcc or set CC")
    return found


def _link_command() -> list[str]:
    # The JIT's objects use the large code model, not PIC, so the library has text relocations;
    # -Bsymbolic binds the kernel's internal calls to its own copy of the symbol.
    return [_compiler(), "-shared", "-Wl,-z,notext", "-Wl,-Bsymbolic", "-lm"]


def _compile(mlir_text: str, library: Path, kernel: str) -> None:
    """MLIR text to a shared library at `library` (written atomically); `kernel` names it in errors."""
    from torch_mlir import ir, passmanager
    from torch_mlir.execution_engine import ExecutionEngine

    global _compilations
    with ir.Context() as context:
        try:
            module = ir.Module.parse(mlir_text)
            passmanager.PassManager.parse(PIPELINE, context).run(module.operation)
            engine = ExecutionEngine(module, opt_level=OPT_LEVEL)
        except (ir.MLIRError, RuntimeError) as error:  # a code generator bug: the user sees one line
            diagnostics = getattr(error, "error_diagnostics", None)
            detail = diagnostics[0].message if diagnostics else str(error)
            first = next((line.strip() for line in detail.splitlines() if line.strip()), type(error).__name__)
            raise CodegenError(f"internal error: MLIR rejected the generated kernel @{kernel}: {first}") from error
        with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
            obj, shared = Path(scratch, "kernel.o"), Path(scratch, "kernel.so")
            engine.dump_to_object_file(str(obj))
            command = _link_command()
            linked = subprocess.run([*command[:2], "-o", str(shared), str(obj), *command[2:]], capture_output=True)
            if linked.returncode != 0:
                raise CodegenError(f"linking a generated kernel failed: {linked.stderr.decode(errors='replace')}")
            write_entry(library, shared.read_bytes())
    _compilations += 1


@dataclass(frozen=True)
class _Library:
    handle: ctypes.CDLL
    function: Any
    """The C-interface entry point: (memref descriptor pointers..., part, parts)."""
    packed: int
    """The address of its packed form, `void (void **args)`, which the thread pool calls."""


_loaded: dict[Path, _Library] = {}


def _load(path: Path, arity: int) -> _Library:
    try:
        handle = ctypes.CDLL(str(path))
    except OSError as error:  # e.g. a cache on a file system mounted noexec
        raise CodegenError(f"cannot load the kernel library {path}: {error}") from error
    function = getattr(handle, f"_mlir_ciface_{SYMBOL}")
    function.argtypes = [ctypes.c_void_p] * arity + [ctypes.c_int64, ctypes.c_int64]
    function.restype = None
    packed = ctypes.cast(getattr(handle, f"_mlir__mlir_ciface_{SYMBOL}"), ctypes.c_void_p).value
    assert packed is not None
    return _Library(handle, function, packed)


class Descriptor(ctypes.Structure):
    """MLIR's ranked memref descriptor (fields per rank, in `_descriptor`); `array` keeps its memory alive."""

    array: np.ndarray
    allocated: int | None
    aligned: int | None
    """ctypes reads a null pointer (an empty array's) as None."""
    offset: int
    sizes: Any
    strides: Any


@cache
def _descriptor(rank: int) -> type[Descriptor]:
    """The descriptor of rank `rank`: allocated and aligned pointers, offset, sizes, strides."""
    fields: list[tuple[str, Any]] = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (Descriptor,), {"_fields_": fields})


@dataclass(frozen=True)
class CompiledKernel:
    """A generated kernel ready to run on NumPy arrays."""

    name: str
    from_cache: bool
    """Whether it was loaded without compiling (from the disk cache or this process's memo)."""
    compile_seconds: float
    """Seconds spent compiling it (MLIR, LLVM and the link); 0 when it came from the cache."""
    threads: int
    """Threads its calls split over, from the schedule."""
    parts: int
    """The most slices its outer loop splits into (with `parts_rule`, at least so many)."""
    work: int
    """Scalar results per call (multiply-adds for a matmul); DYNAMIC_INDEX when a call's arrays tell (their largest)."""
    signature: tuple[tuple[tuple[int, ...], np.dtype[Any]], ...]
    """Shape and dtype of each argument: inputs, then outputs; a `?` dim (DYNAMIC_INDEX) takes any size."""
    inputs: int
    _library: _Library = field(repr=False)
    in_place: int | None = None
    """The input its result is written over (see `lower_kernel`): a call must pass that array as the output."""
    parts_rule: PartsRule | None = None
    """How a call counts its parts from its arrays, where loop 0 has `?` dims."""
    packing: Packing | None = None
    """Where it takes its convolution's weights packed: `bind` packs them once, from the weight it is given."""

    def bind(
        self, args: Sequence[np.ndarray], results: Sequence[np.ndarray], threads: int | None = None
    ) -> Callable[[], None]:
        """A closure that runs the kernel on `args` into `results` (C-contiguous, of the kernel's shapes and dtypes:
        any size for a `?` dim).

        The memref descriptors are built here, once; a call of the closure is one ctypes call. The
        closure keeps the arrays alive. It splits over the schedule's threads where each gets at
        least `PART_WORK` results; an explicit `threads` splits over that many regardless of size.
        """
        return self.bound(args, results, threads)[0]

    def bound(
        self, args: Sequence[np.ndarray], results: Sequence[np.ndarray], threads: int | None = None
    ) -> tuple[Callable[[], None], list[Descriptor]]:
        """`bind`'s closure and the descriptors it calls with: setting a descriptor's pointers makes later calls
        read or write elsewhere (`gnomon.runtime.direct`)."""
        arrays = [*args, *results]
        if self.packing is not None and len(args) == self.inputs:
            arrays.append(packed_weights(args[self.packing.weight], self.packing))
        if len(args) != self.inputs or len(arrays) != len(self.signature):
            raise CodegenError(
                f"kernel @{self.name}: takes {self.inputs} inputs and {len(self.signature) - self.inputs} outputs, "
                f"got {len(args)} and {len(results)}"
            )
        if self.in_place is not None and results[0].ctypes.data != args[self.in_place].ctypes.data:
            raise CodegenError(f"kernel @{self.name}: compiled in place, its output must be input {self.in_place}")
        descriptors: list[Descriptor] = []
        for position, (array, (shape, dtype)) in enumerate(zip(arrays, self.signature, strict=True)):
            fits = len(array.shape) == len(shape) and all(d in (n, DYNAMIC_INDEX) for n, d in zip(array.shape, shape))
            if not fits or array.dtype != dtype:
                raise CodegenError(
                    f"kernel @{self.name}: argument {position} must be a {dtype} array of shape {shape_str(shape)}, "
                    f"got {array.dtype} {array.shape}"
                )
            if not array.flags.c_contiguous:
                raise CodegenError(f"kernel @{self.name}: argument {position} is not C-contiguous")
            descriptor = _descriptor(len(shape))()
            descriptor.allocated = descriptor.aligned = array.ctypes.data
            descriptor.offset = 0
            if shape:
                descriptor.sizes[:] = list(array.shape)
                descriptor.strides[:] = [stride // array.itemsize for stride in array.strides]
            descriptor.array = array
            descriptors.append(descriptor)
        most, work = self.parts, self.work
        if self.parts_rule is not None:
            most = max(most, self.parts_rule.parts([a.shape for a in arrays]))
        if work == DYNAMIC_INDEX:
            work = max(a.size for a in arrays)
        parts = max(1, min(most, threads)) if threads is not None else parts_for(work, most, self.threads)
        if parts == 1:
            return partial(self._library.function, *(ctypes.byref(d) for d in descriptors), 0, 1), descriptors
        return ParallelCall(_compiler(), self._library.packed, descriptors, parts, parts), descriptors


def packed_weights(weight: np.ndarray, layout: Packing) -> np.ndarray:
    """A convolution's weights `[channels][in channels][kh][kw]` packed for every channel block, as `layout` says
    (`gnomon.passes.kernel_to_linalg.conv.Packing`)."""
    blocks, reduction, block = layout.shape
    rows = weight.reshape(weight.shape[0], reduction)
    per_group = weight.shape[0] // layout.groups
    per_block = (
        np.arange(blocks * block) // block % (blocks // layout.groups) * block + np.arange(blocks * block) % block
    )
    group = np.arange(blocks * block) // block // (blocks // layout.groups)
    channels = group * per_group + np.minimum(per_block, per_group - 1)
    return np.ascontiguousarray(rows[channels].reshape(blocks, block, reduction).transpose(0, 2, 1), np.float32)


def compile_kernel(kernel_op: kernel.FuncOp, in_place: int | None = None, prepacked: bool = False) -> CompiledKernel:
    """Compile a generated kernel, or load it from the disk cache; raises CodegenError if it cannot be generated.
    `in_place`: the input that its calls also pass as the output (`lower_kernel`); `prepacked`: a convolution
    kernel takes its weights packed once, when a call is bound, not on every call (for weights that never change:
    a binding packs the values its weight holds then)."""
    if not kernel_op.is_generated:
        raise CodegenError(f"kernel @{kernel_op.sym_name.data} is a library kernel, not a generated one")
    lowered = lower_kernel(kernel_op, in_place, prepacked)
    function = lowered.function
    function.sym_name = StringAttr(SYMBOL)
    mlir_text = str(ModuleOp([function]))
    key = cache_key(mlir_text, " ".join(_link_command()))
    arity = len(function.function_type.inputs) - 2
    path = cache_directory() / f"{key}.so"
    library = _loaded.get(path)
    from_cache = library is not None or verified_entry(path)
    start = time.perf_counter()
    if not from_cache:
        _compile(mlir_text, path, kernel_op.sym_name.data)
    if library is None:
        library = _loaded[path] = _load(path, arity)
    seconds = 0.0 if from_cache else time.perf_counter() - start
    signature: list[tuple[tuple[int, ...], np.dtype[Any]]] = []
    for memref_type in function.function_type.inputs.data[:arity]:
        assert isinstance(memref_type, MemRefType)
        dtype = numpy_dtype(memref_type.element_type)
        assert dtype is not None
        signature.append((tuple(memref_type.get_shape()), dtype))
    schedule = kernel_op.schedule
    threads = schedule.threads.data if schedule is not None else cpu_count()
    return CompiledKernel(
        kernel_op.sym_name.data,
        from_cache,
        seconds,
        threads,
        lowered.parts,
        lowered.work,
        tuple(signature),
        len(kernel_op.function_type.inputs),
        library,
        in_place,
        lowered.parts_rule,
        lowered.packing,
    )
