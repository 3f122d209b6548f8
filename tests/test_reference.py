"""The reference interpreter against ONNX's recorded outputs, onnxruntime and torch eager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnx import numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32

from gnomon import load, models
from gnomon.bundled import light_models, onnx_test_data_dir
from gnomon.dialects.graph.base import f64_attr
from gnomon.dialects.graph.nn import BatchNormTrainOp
from gnomon.pipeline import load as load_path
from gnomon.runtime.reference import ReferenceRunError, run_reference

BACKEND_MODELS = sorted(
    path.parent
    for suite in ("pytorch-converted", "pytorch-operator")
    for path in (onnx_test_data_dir() / suite).glob("*/model.onnx")
)


def read_tensors(folder: Path, prefix: str) -> list[np.ndarray]:
    count = len(list(folder.glob(f"{prefix}_*.pb")))
    return [numpy_helper.to_array(onnx.load_tensor(str(folder / f"{prefix}_{i}.pb"))) for i in range(count)]


def relative_l2(actual: np.ndarray, expected: np.ndarray) -> float:
    expected64 = expected.astype(np.float64)
    return float(np.linalg.norm(actual.astype(np.float64) - expected64) / max(np.linalg.norm(expected64), 1e-30))


def test_all_backend_models_are_collected() -> None:
    assert len(BACKEND_MODELS) == 117


@pytest.mark.parametrize("model_dir", BACKEND_MODELS, ids=[d.name for d in BACKEND_MODELS])
def test_backend_model_matches_recorded_outputs(model_dir: Path) -> None:
    # ONNX's own backend tests compare with rtol=1e-3, atol=1e-7; every model passes at those.
    data = model_dir / "test_data_set_0"
    outputs = run_reference(load_path(model_dir / "model.onnx"), read_tensors(data, "input"))
    expected = read_tensors(data, "output")
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert actual.shape == want.shape
        assert actual.dtype == want.dtype
        np.testing.assert_allclose(actual, want, rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("path", light_models(), ids=[p.stem for p in light_models()])
def test_light_network_matches_onnxruntime(path: Path) -> None:
    # All nine run in about 20 s on two cores (reference and onnxruntime together), so none is marked slow.
    model = onnx.load(path)
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    rng = np.random.default_rng(0)
    inputs = [
        rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in graph_inputs
    ]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, {i.name: x for i, x in zip(graph_inputs, inputs, strict=True)})
    outputs = run_reference(load_path(path), inputs)
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert actual.shape == want.shape
        assert relative_l2(actual, np.asarray(want)) <= 1e-4


@pytest.mark.parametrize("model_class", [models.DLRM, models.MLP, models.SmallCNN, models.TransformerBlock])
def test_torch_model_matches_eager(model_class: type[torch.nn.Module]) -> None:
    model = model_class().eval()
    inputs = model.example_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    outputs = run_reference(load(model, example_inputs=inputs), [x.numpy() for x in inputs])
    assert len(outputs) == 1
    assert outputs[0].shape == tuple(expected.shape)
    assert relative_l2(outputs[0], expected.numpy()) <= 1e-5


def test_op_without_semantics_is_named() -> None:
    x = TensorType(f32, [2, 3, 4])
    c = TensorType(f32, [3])
    function = func.FuncOp("main", ((x, c, c), (x,)))
    block = function.body.blocks.first
    assert block is not None
    train = BatchNormTrainOp.build(
        operands=list(block.args),
        result_types=[x, c, c],
        properties={"epsilon": f64_attr(1e-5), "momentum": f64_attr(0.1)},
    )
    block.add_ops([train, func.ReturnOp(train.results[0])])
    with pytest.raises(ReferenceRunError, match=r"no reference semantics for graph\.batch_norm_train"):
        run_reference(
            ModuleOp([function]), [np.zeros((2, 3, 4), np.float32), np.ones(3, np.float32), np.ones(3, np.float32)]
        )


def test_input_count_is_checked() -> None:
    model = models.MLP().eval()
    module = load(model, example_inputs=model.example_inputs())
    with pytest.raises(ReferenceRunError, match="takes 1 inputs, got 0"):
        run_reference(module, [])
