"""gnomon as an ONNX backend (`onnx.backend.base.Backend`), so that ONNX's own test runner
(`onnx.backend.test.BackendTest`) and conformance scripts drive gnomon like any other backend.

`GnomonBackend.prepare(model)` compiles a `ModelProto` with `gnomon.compile` for the native runtime; the
returned `GnomonBackendRep.run(inputs)` takes one array per graph input (a list in graph order, or a dict by
name) and returns one NumPy array per graph output. gnomon's frontend reads model files, so the model is
written to a temporary file named after its graph: error messages name that graph.
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


class GnomonBackendRep(BackendRep):
    """A model compiled by gnomon; `run` takes the graph's inputs and returns its outputs, in graph order."""

    def __init__(self, executable: Executable, input_names: Sequence[str]):
        self.executable = executable
        self.input_names = list(input_names)
        """The graph's inputs (initializers excluded), in order."""

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
        return self.executable.run([_as_array(value) for value in values])


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
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", model.graph.name) or "model"
        with tempfile.TemporaryDirectory(prefix="gnomon-onnx-") as directory:
            path = Path(directory) / f"{stem}.onnx"
            onnx.save(model, path)
            executable = compile_model(path)
        return GnomonBackendRep(executable, input_names)

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
