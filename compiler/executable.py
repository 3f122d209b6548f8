"""`gnomon.compile` (this module's `compile_model`): a model in, an executable out.

After import, two of `gnomon.pipeline`'s pipelines: `inference` (drop dropout, fold batch norm into
the convolution before it, fold constants, canonicalize), then `lowering` (`graph-to-kernel`
partitions into generated and library kernels, `kernel-to-rt` makes a flat schedule over a planned
arena). `Executable` checks its inputs against the program's signature before any kernel runs and
returns NumPy arrays in the model's output order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, MemRefType, ModuleOp, StringAttr, TensorType

from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.errors import GnomonError
from gnomon.passes.kernel_to_rt import rt_functions
from gnomon.pipeline import INPUT_NAMES_ATTR, OUTPUT_NAMES_ATTR, load, run_pipeline

__all__ = ["BACKENDS", "Executable", "InputError", "compile_model", "load_compiled", "lower"]

BACKENDS = ("native", "reference")


class InputError(GnomonError):
    """The inputs given to a compiled model do not match its signature."""


def lower(
    module: ModuleOp, source: str = "the model", *, verify_each: bool = False, dump_ir: str | Path | None = None
) -> ModuleOp:
    """Run the inference rewrites and the lowering to rt on a graph module, in place.

    `verify_each` and `dump_ir` are `gnomon.pipeline.load`'s."""
    run_pipeline(module, "inference", source, verify_each=verify_each, dump_ir=dump_ir)
    return run_pipeline(module, "lowering", source, verify_each=verify_each, dump_ir=dump_ir)


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


def _as_array(value: Any) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


class Executable:
    """A compiled model: call it with one array (or torch tensor) per input, in input order."""

    def __init__(self, module: ModuleOp, backend: str = "native"):
        if backend not in BACKENDS:
            raise GnomonError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        self.module = module
        self.backend = backend
        functions = (
            rt_functions(module) if backend == "native" else [op for op in module.ops if isinstance(op, func.FuncOp)]
        )
        if len(functions) != 1:
            raise GnomonError(f"expected one program in the module, found {len(functions)}")
        self._function = functions[0]
        self._signature = _signature(self._function)
        self.input_names = _names(module, INPUT_NAMES_ATTR, len(self._signature), "input")
        self.output_names = _names(module, OUTPUT_NAMES_ATTR, len(self._function.function_type.outputs), "output")
        self._program = None
        if backend == "native":
            from gnomon.runtime.executor import Program

            self._program = Program(module)

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        return [shape for shape, _ in self._signature]

    @property
    def input_dtypes(self) -> list[np.dtype[Any]]:
        return [dtype for _, dtype in self._signature]

    def check_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """The inputs as contiguous arrays, or an InputError naming the first one that does not fit."""
        if len(inputs) != len(self._signature):
            names = ", ".join(self.input_names)
            raise InputError(f"expected {len(self._signature)} inputs ({names}), got {len(inputs)}")
        arrays: list[np.ndarray] = []
        for name, value, (shape, dtype) in zip(self.input_names, inputs, self._signature, strict=True):
            array = _as_array(value)
            if array.shape != shape or array.dtype != dtype:
                raise InputError(
                    f"input '{name}': expected {dtype} of shape {list(shape)}, "
                    f"got {array.dtype} of shape {list(array.shape)}"
                )
            arrays.append(np.ascontiguousarray(array))
        return arrays

    def run(self, inputs: Sequence[Any], profile: bool = False) -> tuple[np.ndarray, ...]:
        arrays = self.check_inputs(inputs)
        if self._program is None:
            from gnomon.reference import run_reference

            return tuple(run_reference(self.module, arrays))
        return tuple(self._program.run(arrays, profile=profile))

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        return self.run(inputs)

    def profile(self):
        """The last profiled run's per-kernel timings, the compile statistics and the arena size."""
        if self._program is None:
            raise GnomonError("the reference backend has no profile; use backend='native'")
        return self._program.profile

    def save(self, path: str | Path) -> None:
        """Write the lowered program (weights included) so that `load_compiled` runs it without re-importing."""
        from gnomon.printing import print_module

        with open(path, "w") as stream:
            print_module(self.module, stream)


def compile_model(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    backend: str = "native",
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
) -> Executable:
    """Import, rewrite and lower a model; the reference backend interprets the graph program instead.

    `verify_each` and `dump_ir` are `gnomon.pipeline.load`'s."""
    if backend not in BACKENDS:
        raise GnomonError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    module = load(model, example_inputs, input_shapes, verify_each=verify_each, dump_ir=dump_ir)
    if backend == "native":
        source = str(model) if isinstance(model, str | Path) else type(model).__name__
        lower(module, source, verify_each=verify_each, dump_ir=dump_ir)
    return Executable(module, backend)


def load_compiled(path: str | Path) -> Executable:
    """An executable from a file `gnomon compile` wrote."""
    from xdsl.dialects.func import Func

    from gnomon.dialects.graph.constant_values import parse_with_resources
    from gnomon.registry import DIALECTS

    path = Path(path)
    if not path.is_file():
        raise GnomonError(f"no such file: {path}")
    try:
        module = parse_with_resources(path.read_text(), {"func": lambda: Func, **DIALECTS}, str(path))
    except Exception as error:  # xDSL raises several types for malformed text
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise GnomonError(f"{path} is not a gnomon program: {first}") from error
    if not rt_functions(module):
        raise GnomonError(f"{path} holds no compiled program (write one with `gnomon compile`)")
    return Executable(module, "native")
