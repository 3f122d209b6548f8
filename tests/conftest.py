"""Helpers shared by the test files, and the session cache of imported and compiled models.

Several files check the same models (the 117 ONNX backend models, the nine light networks, gnomon's torch
models) in different ways and on different backends. Importing a light network takes seconds and lowering it
more, so `model_cache` imports each model once per session and builds each backend's program of it once. Under
pytest-xdist a session is one worker: every test of a model carries `xdist_group(<model>)` (`by_model` adds it)
and `make test` runs `--dist loadgroup`, so one worker runs all of a model's tests and no other imports it.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import SSAValue

from gnomon.bundled import light_models, onnx_test_data_dir
from gnomon.dialects.graph.constant_values import dense_to_resource, numpy_to_dense
from gnomon.dialects.graph.linalg import LinearOp
from gnomon.dialects.graph.nn import BatchNormOp, ConvOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
from gnomon.errors import UnsupportedOpsError

if TYPE_CHECKING:  # torch and the runtime load when a test first needs them
    import torch
    from torch import nn

    from gnomon.executable import Executable
    from gnomon.runtime.torch_eager import TorchEagerProgram

# `graph-fuse` decides by this machine's calibration when there is one (`auto`); the tests see none, as CI's fresh
# machine does, so that a developer's `gnomon calibrate` cannot change the kernels they check. Kernels compile
# into the same fresh cache, one per run that pytest-xdist's workers share; the tuning database is fresh too, so
# that a developer's `gnomon tune` cannot change the schedules.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
os.environ["GNOMON_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"gnomon-tests-{_RUN}")
os.environ["GNOMON_TUNING_DIR"] = os.path.join(tempfile.gettempdir(), f"gnomon-tests-{_RUN}-tuning")

BACKEND_MODELS = sorted(
    path
    for suite in ("pytorch-converted", "pytorch-operator")
    for path in (onnx_test_data_dir() / suite).glob("*/model.onnx")
)
"""The `model.onnx` of each of the onnx package's `pytorch-converted` and `pytorch-operator` backend tests; its
folder holds `test_data_set_0` with the recorded inputs and outputs."""

LIGHT_NETWORKS = light_models()

TORCH_MODELS = ["DLRM", "MLP", "SmallCNN", "TransformerBlock"]
"""Classes of `gnomon.models`, imported from a live module with `example_inputs(TORCH_BATCH)`."""

TORCH_BATCH = 4
"""Not the models' default batch of 2, so that no size is right by accident."""

Model = Path | str
"""A model file, or the name of a class in `gnomon.models`."""

Backend = Literal["reference", "torch-eager", "native"]
BACKENDS: tuple[Backend, ...] = ("reference", "torch-eager", "native")

MAKE_ONNX = Path(__file__).parent.parent / "filecheck" / "import" / "Inputs" / "make_onnx.py"


def model_name(model: Model) -> str:
    """A backend model's test name (its folder), a light network's file stem, or a torch model's class name."""
    if isinstance(model, str):
        return model
    return model.parent.name if model.name == "model.onnx" else model.stem


def by_model(models: Iterable[Model]) -> list[pytest.ParameterSet]:
    """One parameter per model, named after it and in its xdist group, so its tests share a worker's cache."""
    return [pytest.param(m, id=model_name(m), marks=pytest.mark.xdist_group(model_name(m))) for m in models]


def read_tensors(folder: Path, prefix: str) -> list[np.ndarray]:
    """The `<prefix>_<i>.pb` tensors of an ONNX test data set, in order."""
    count = len(list(folder.glob(f"{prefix}_*.pb")))
    return [numpy_helper.to_array(onnx.load_tensor(str(folder / f"{prefix}_{i}.pb"))) for i in range(count)]


def relative_l2(actual: np.ndarray, expected: np.ndarray) -> float:
    expected64 = expected.astype(np.float64)
    return float(np.linalg.norm(actual.astype(np.float64) - expected64) / max(np.linalg.norm(expected64), 1e-30))


@cache
def load_script(path: Path) -> ModuleType:
    """A Python script outside the packages (a lit test's model builder, a benchmark), imported as a module. It is
    registered in sys.modules, as an import would, so that its dataclasses can resolve their annotations."""
    name = f"gnomon_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def make_onnx(kind: str, out: Path) -> Path:
    """Save one of the small ONNX models of filecheck/import/Inputs/make_onnx.py (`conv_block`, `dynamic_batch`,
    `unsupported`), built in this process rather than by running the script."""
    onnx.save(getattr(load_script(MAKE_ONNX), kind)(), out)
    return out


def random_input(module: ModuleOp, seed: int = 1) -> np.ndarray:
    """A normal random array for the single input of `module`'s function."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    (input_type,) = function.function_type.inputs.data
    assert isinstance(input_type, TensorType)
    return np.random.default_rng(seed).standard_normal(input_type.get_shape()).astype(np.float32)


def _set_constant(value: SSAValue, array: np.ndarray) -> None:
    owner = value.owner
    assert isinstance(owner, ConstantOp)
    owner.properties["value"] = dense_to_resource(numpy_to_dense(array.astype(np.float32), f32), "random")


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return value.type.get_shape()


def randomize_weights(module: ModuleOp, seed: int = 0) -> None:
    """Random conv/linear weights and batch-norm statistics, scaled to keep activations moderate.

    The bundled light networks' weights are splats (ONNX ConstantOfShape), which would make any
    per-channel mistake invisible and their softmax outputs uniform.
    """
    rng = np.random.default_rng(seed)
    for op in module.walk():
        if isinstance(op, ConvOp | LinearOp):
            weight_shape = _shape(op.weight)
            _set_constant(op.weight, rng.standard_normal(weight_shape) / math.sqrt(math.prod(weight_shape[1:])))
        if isinstance(op, BatchNormOp):
            channels = _shape(op.scale)
            _set_constant(op.scale, rng.uniform(0.5, 1.5, channels))
            _set_constant(op.bias, rng.normal(0.0, 0.1, channels))
            _set_constant(op.mean, rng.normal(0.0, 0.1, channels))
            _set_constant(op.variance, rng.uniform(0.5, 1.5, channels))
        if isinstance(op, ReshapeOp) and isinstance(op.input.owner, ConstantOp):
            _set_constant(op.input, rng.uniform(0.5, 1.5, _shape(op.input)))
    module.verify()


class ModelCache:
    """Models imported and compiled once per session. What it returns is shared: clone a module before changing
    it, and never change an executable's module."""

    def __init__(self) -> None:
        self._torch_models: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]] = {}
        self._imports: dict[Model, ModuleOp | UnsupportedOpsError] = {}
        self._executables: dict[Model, Executable] = {}
        self._eager: dict[Model, TorchEagerProgram] = {}
        self._onnxruntime: dict[Path, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        self._random_weights: dict[Path, tuple[ModuleOp, np.ndarray, np.ndarray]] = {}

    def torch_model(self, name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        """The `gnomon.models` class's instance in eval mode, and its example inputs at `TORCH_BATCH`."""
        if name not in self._torch_models:
            from gnomon import models

            model = getattr(models, name)().eval()
            self._torch_models[name] = (model, model.example_inputs(TORCH_BATCH))
        return self._torch_models[name]

    def import_result(self, model: Model) -> ModuleOp | UnsupportedOpsError:
        """The graph module of `model`, or the error that names the ops it cannot import."""
        if model not in self._imports:
            from gnomon.pipeline import load

            try:
                if isinstance(model, str):
                    module, inputs = self.torch_model(model)
                    self._imports[model] = load(module, example_inputs=inputs)
                else:
                    self._imports[model] = load(model)
            except UnsupportedOpsError as error:
                self._imports[model] = error
        return self._imports[model]

    def imported(self, model: Model) -> ModuleOp:
        result = self.import_result(model)
        assert isinstance(result, ModuleOp), str(result)
        return result

    def executable(self, model: Model) -> Executable:
        """The native executable of `model`, lowered as `gnomon.compile` lowers it."""
        if model not in self._executables:
            from gnomon.executable import Executable, lower

            self._executables[model] = Executable(lower(self.imported(model).clone(), model_name(model)))
        return self._executables[model]

    def eager(self, model: Model) -> TorchEagerProgram:
        if model not in self._eager:
            from gnomon.runtime.torch_eager import TorchEagerProgram

            self._eager[model] = TorchEagerProgram(self.imported(model))
        return self._eager[model]

    def run(self, backend: Backend, model: Model, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """`model` run on `backend`: the reference interpreter, the torch eager baseline or the native runtime."""
        if backend == "reference":
            from gnomon.reference import run_reference

            return run_reference(self.imported(model), inputs)
        if backend == "torch-eager":
            return list(self.eager(model)(*inputs))
        return list(self.executable(model)(*inputs))

    def onnxruntime(self, model: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Normal random inputs (seed 0) for an ONNX model's graph inputs, and onnxruntime's outputs for them."""
        if model not in self._onnxruntime:
            import onnxruntime

            proto = onnx.load(model)
            initializers = {t.name for t in proto.graph.initializer}
            graph_inputs = [i for i in proto.graph.input if i.name not in initializers]
            rng = np.random.default_rng(0)
            inputs = [
                rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
                for i in graph_inputs
            ]
            session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
            outputs = session.run(None, {i.name: x for i, x in zip(graph_inputs, inputs, strict=True)})
            self._onnxruntime[model] = (inputs, [np.asarray(y) for y in outputs])
        return self._onnxruntime[model]

    def random_weights(self, model: Path) -> tuple[ModuleOp, np.ndarray, np.ndarray]:
        """A light network with `randomize_weights`, a `random_input` and the reference's output for it."""
        if model not in self._random_weights:
            from gnomon.reference import run_reference

            module = self.imported(model).clone()
            randomize_weights(module)
            x = random_input(module)
            self._random_weights[model] = (module, x, run_reference(module, [x])[0])
        return self._random_weights[model]


@pytest.fixture(scope="session")
def model_cache() -> ModelCache:
    return ModelCache()
