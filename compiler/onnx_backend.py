"""gnomon as an ONNX backend (`onnx.backend.base.Backend`), so that ONNX's own test runner
(`onnx.backend.test.BackendTest`) and conformance scripts drive gnomon like any other backend.

`GnomonBackend.prepare(model)` compiles a `ModelProto` with `gnomon.compile` for the native runtime; the
returned `GnomonBackendRep.run(inputs)` takes one array per graph input (a list in graph order, or a dict by
name) and returns one NumPy array per graph output. gnomon's frontend reads model files, so the model is
written to a temporary file named after its graph: error messages name that graph.

gnomon compiles for static shapes and attributes, and ONNX passes some of them as graph inputs (a reduction's
axes, a pad's widths and fill value, a tile's repeats, a range's bounds, Dropout's training flag). A model that
does not compile with such an input left free is compiled again at `run`, once per distinct value of those inputs,
with the values bound as initializers (`GnomonBackendRep.specialized` says so); a model that compiles as it is
never is, so its small inputs are still computed on as data.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from gnomon.errors import GnomonError
from gnomon.executable import Executable, InputError, compile_model

__all__ = ["GnomonBackend", "GnomonBackendRep"]


def _check_device(device: str) -> None:
    if not GnomonBackend.supports_device(device):
        raise GnomonError(f"gnomon's ONNX backend runs on CPU only, not on device {device!r}")


def _as_array(value: Any) -> np.ndarray:
    """An input as ONNX's test cases give it (an array, a NumPy scalar, or a `TensorProto`) as an array."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


PARAMETER_ELEMENTS = 64
"""The most elements a graph input may have to be taken for a parameter (axes, pads, repeats, bounds)."""


def parameter_inputs(model: onnx.ModelProto, input_names: Sequence[str]) -> list[str]:
    """The graph inputs that may be parameters rather than data: scalars and short vectors of known size (a pad's
    fill value and OneHot's on/off values are floats)."""
    names: list[str] = []
    for value in model.graph.input:
        tensor = value.type.tensor_type
        if value.name not in input_names or not value.type.HasField("tensor_type"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        if tensor.HasField("shape") and len(dims) <= 1 and all(0 <= d <= PARAMETER_ELEMENTS for d in dims):
            names.append(value.name)
    return names


def _compile(model: onnx.ModelProto) -> Executable:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", model.graph.name) or "model"
    with tempfile.TemporaryDirectory(prefix="gnomon-onnx-") as directory:
        path = Path(directory) / f"{stem}.onnx"
        onnx.save(model, path)
        return compile_model(path)


def _bound(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """`model` with the named graph inputs turned into initializers of the given values."""
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    kept = [value for value in bound.graph.input if value.name not in values]
    del bound.graph.input[:]
    bound.graph.input.extend(kept)
    bound.graph.initializer.extend(numpy_helper.from_array(array, name) for name, array in values.items())
    return bound


class GnomonBackendRep(BackendRep):
    """A model compiled by gnomon; `run` takes the graph's inputs and returns its outputs, in graph order."""

    def __init__(
        self,
        executable: Executable | None,
        input_names: Sequence[str],
        model: onnx.ModelProto | None = None,
        parameters: Sequence[str] = (),
    ):
        self.executable = executable
        """None: the model compiles only with its `parameters` bound, at `run`."""
        self.input_names = list(input_names)
        """The graph's inputs (initializers excluded), in order."""
        self.model = model
        self.parameters = list(parameters)
        self.specialized: dict[bytes, Executable] = {}
        """The model compiled for each value of its parameters seen so far."""

    def _executable(self, arrays: Sequence[np.ndarray]) -> tuple[Executable, list[np.ndarray]]:
        """What runs these inputs, and the inputs it takes."""
        if self.executable is not None:
            return self.executable, list(arrays)
        assert self.model is not None
        by_name = dict(zip(self.input_names, arrays, strict=True))
        values = {name: by_name[name] for name in self.parameters}
        key = b"".join(name.encode() + b"\0" + array.tobytes() for name, array in values.items())
        if key not in self.specialized:
            self.specialized[key] = _compile(_bound(self.model, values))
        rest = [array for name, array in by_name.items() if name not in values]
        return self.specialized[key], rest

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, Mapping):
            missing = [name for name in self.input_names if name not in inputs]
            if missing:
                raise InputError(f"missing input(s): {', '.join(missing)}")
            values: list[Any] = [inputs[name] for name in self.input_names]
        elif isinstance(inputs, Sequence | np.ndarray):
            values = list(inputs) if isinstance(inputs, Sequence) else [inputs]
        else:
            values = [inputs]
        arrays = [_as_array(value) for value in values]
        if len(arrays) != len(self.input_names):
            raise InputError(f"the model takes {len(self.input_names)} inputs, got {len(arrays)}")
        executable, arrays = self._executable(arrays)
        return executable.run(arrays)


class GnomonBackend(Backend):
    """gnomon's native runtime behind ONNX's backend interface; CPU only."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> GnomonBackendRep:
        """Compile `model`; keyword arguments other than ONNX's test tolerances (`rtol`, `atol`) are refused."""
        _check_device(device)
        unknown = sorted(set(kwargs) - {"rtol", "atol"})
        if unknown:
            raise GnomonError(f"gnomon's ONNX backend takes no option {', '.join(unknown)}")
        initializers = {tensor.name for tensor in model.graph.initializer}
        input_names = [value.name for value in model.graph.input if value.name not in initializers]
        try:
            return GnomonBackendRep(_compile(model), input_names)
        except GnomonError:
            parameters = parameter_inputs(model, input_names)
            if not parameters:
                raise
        return GnomonBackendRep(None, input_names, model, parameters)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[np.dtype[Any], tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node on `inputs` (one per non-empty input name of the node). The output types are
        `outputs_info`'s (dtype, shape) pairs, else ONNX shape inference's; `opset_version` picks the
        default domain's opset (the current one if absent)."""
        _check_device(device)
        opset: int = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        names = [name for name in node.input if name]
        arrays = [_as_array(value) for value in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        if len(arrays) != len(names):
            raise InputError(f"node {node.op_type} has {len(names)} inputs, got {len(arrays)} values")
        graph_inputs = [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)
            for name, array in zip(names, arrays, strict=True)
        ]
        outputs = [name for name in node.output if name]
        if outputs_info is not None:
            graph_outputs = [
                helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)
                for name, (dtype, shape) in zip(outputs, outputs_info, strict=True)
            ]
        else:
            graph_outputs = [onnx.ValueInfoProto(name=name) for name in outputs]
        graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
        opsets = [helper.make_opsetid("", opset)]
        if node.domain not in ("", "ai.onnx"):
            opsets.append(helper.make_opsetid(node.domain, 1))
        model = helper.make_model(graph, opset_imports=opsets)
        if outputs_info is None:
            model = shape_inference.infer_shapes(model, strict_mode=True)
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except AttributeError:  # a name that is no device type at all
            return False
