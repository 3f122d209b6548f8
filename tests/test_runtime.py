"""The native runtime end to end: compiled models against ONNX's recorded outputs, onnxruntime and
torch eager; the memory plan of every program; the API's input checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from test_inference_rewrites import random_input, randomize_weights
from test_reference import BACKEND_MODELS, read_tensors, relative_l2
from xdsl.dialects.builtin import IntegerAttr

import gnomon
from gnomon import models
from gnomon.bundled import light_models, model_path
from gnomon.dialects import rt
from gnomon.executable import Executable, InputError, lower
from gnomon.passes.kernel_to_rt import rt_functions, verify_plan
from gnomon.runtime.memory_plan import MemoryPlanError
from gnomon.runtime.reference import run_reference


def arena(executable: Executable) -> tuple[int, int]:
    function = rt_functions(executable.module)[0]
    size, bound = function.attributes[rt.ARENA_SIZE], function.attributes[rt.ARENA_LOWER_BOUND]
    assert isinstance(size, IntegerAttr)
    assert isinstance(bound, IntegerAttr)
    return size.value.data, bound.value.data


@pytest.mark.parametrize("model_dir", BACKEND_MODELS, ids=[d.name for d in BACKEND_MODELS])
def test_backend_model_matches_recorded_outputs(model_dir: Path) -> None:
    data = model_dir / "test_data_set_0"
    executable = gnomon.compile(model_dir / "model.onnx")
    outputs = executable(*read_tensors(data, "input"))
    expected = read_tensors(data, "output")
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert actual.shape == want.shape
        assert actual.dtype == want.dtype
        np.testing.assert_allclose(actual, want, rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("path", light_models(), ids=[p.stem for p in light_models()])
def test_light_network_matches_onnxruntime(path: Path) -> None:
    executable = gnomon.compile(path)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in executable.input_shapes]
    model = onnx.load(path)
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, dict(zip(names, inputs, strict=True)))
    outputs = executable(*inputs)
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert relative_l2(actual, np.asarray(want)) <= 1e-4
    size, bound = arena(executable)
    assert bound <= size <= 1.05 * bound


@pytest.mark.parametrize("model_class", [models.DLRM, models.MLP, models.SmallCNN, models.TransformerBlock])
def test_torch_model_matches_eager(model_class: type[torch.nn.Module]) -> None:
    model = model_class().eval()
    inputs = model.example_inputs(4)  # pyright: ignore[reportCallIssue]
    executable = gnomon.compile(model, example_inputs=inputs)
    with torch.no_grad():
        expected = model(*inputs)
    (actual,) = executable(*inputs)  # torch tensors are accepted as inputs
    assert relative_l2(actual, expected.numpy()) <= 1e-5


def test_torchscript_file_matches_eager(tmp_path: Path) -> None:
    model = models.SmallCNN().eval()
    inputs = model.example_inputs(2)
    path = tmp_path / "cnn.pt"
    torch.jit.trace(model, inputs).save(str(path))
    executable = gnomon.compile(path, input_shapes={"x": list(inputs[0].shape)})
    with torch.no_grad():
        expected = model(*inputs).numpy()
    assert relative_l2(executable(*inputs)[0], expected) <= 1e-5


def test_compiled_program_runs_without_reimport(tmp_path: Path) -> None:
    model = models.MLP().eval()
    inputs = model.example_inputs(3)
    executable = gnomon.compile(model, example_inputs=inputs)
    executable.save(tmp_path / "mlp.mlir")
    reloaded = gnomon.executable.load_compiled(tmp_path / "mlp.mlir")
    np.testing.assert_array_equal(reloaded(*inputs)[0], executable(*inputs)[0])
    assert reloaded.input_names == executable.input_names


def test_profile_names_every_kernel() -> None:
    model = models.SmallCNN().eval()
    inputs = model.example_inputs(2)
    executable = gnomon.compile(model, example_inputs=inputs)
    executable.run(inputs, profile=True)
    profile = executable.profile()
    launches = [op for op in rt_functions(executable.module)[0].body.block.ops if isinstance(op, rt.LaunchOp)]
    assert [t.kernel for t in profile.timings] == [op.callee.string_value() for op in launches]
    assert all(t.seconds > 0 and t.source_ops for t in profile.timings)
    # Batch norm is folded into the convolutions: no kernel runs it.
    assert not any("graph.batch_norm" in t.source_ops for t in profile.timings)


def test_memory_plan_verifier_rejects_overlap() -> None:
    model = models.MLP().eval()
    executable = gnomon.compile(model, example_inputs=model.example_inputs(2))
    function = rt_functions(executable.module)[0]
    buffers = [op for op in function.body.block.ops if isinstance(op, rt.BufferOp)]
    # The first and second buffers are both live when the second is written: forcing one offset overlaps them.
    buffers[1].offset = buffers[0].offset
    with pytest.raises(MemoryPlanError, match="overlap"):
        verify_plan(function)


class DenseBlock(torch.nn.Module):
    """Two DenseNet layers: each concatenates its input with a new conv's features, so the concats nest."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Conv2d(4, 3, 3, padding=1)
        self.second = torch.nn.Conv2d(7, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        x = torch.cat([x, torch.relu(self.first(x))], dim=1)
        return torch.cat([x, torch.relu(self.second(x))], dim=1)


def test_nested_concats_are_written_in_place_and_match_eager() -> None:
    model = DenseBlock().eval()
    inputs = (torch.randn(1, 4, 8, 8),)
    executable = gnomon.compile(model, example_inputs=inputs)
    ops = list(rt_functions(executable.module)[0].body.block.ops)
    launched = [op.callee.string_value() for op in ops if isinstance(op, rt.LaunchOp)]
    windows = [op for op in ops if isinstance(op, rt.ViewOp) and op.offset is not None]
    assert not any(name.startswith("concat") for name in launched)
    assert len(windows) == 4  # relu(x), the two convs' outputs, and the first concat inside the second
    with torch.no_grad():
        expected = model(*inputs).numpy()
    assert relative_l2(executable(*inputs)[0], expected) <= 1e-6
    size, bound = arena(executable)
    assert size <= 1.05 * bound


def test_memory_plan_verifier_rejects_overlapping_concat_slots() -> None:
    executable = gnomon.compile(DenseBlock().eval(), example_inputs=(torch.randn(1, 4, 8, 8),))
    function = rt_functions(executable.module)[0]
    relu_slot, conv_slot = [op for op in function.body.block.ops if isinstance(op, rt.ViewOp)][:2]
    assert relu_slot.element_offset == 0
    assert conv_slot.element_offset == 4 * 8 * 8
    conv_slot.offset = IntegerAttr(128, 64)  # half over relu(x)'s slot
    with pytest.raises(MemoryPlanError, match=r"windows overlap: @conv_relu_\d+ writes elements 128..320"):
        verify_plan(function)


class TestInputChecks:
    @pytest.fixture(scope="class")
    def executable(self) -> Executable:
        model = models.MLP().eval()
        return gnomon.compile(model, example_inputs=model.example_inputs(2))

    def test_wrong_count(self, executable: Executable) -> None:
        with pytest.raises(InputError, match=r"^expected 1 inputs \(x\), got 2$"):
            executable(np.zeros((2, 64), np.float32), np.zeros((2, 64), np.float32))

    def test_wrong_shape(self, executable: Executable) -> None:
        with pytest.raises(
            InputError, match=r"^input 'x': expected float32 of shape \[2, 64\], got float32 of shape \[3, 64\]$"
        ):
            executable(np.zeros((3, 64), np.float32))

    def test_wrong_dtype(self, executable: Executable) -> None:
        with pytest.raises(
            InputError, match=r"^input 'x': expected float32 of shape \[2, 64\], got float64 of shape \[2, 64\]$"
        ):
            executable(np.zeros((2, 64), np.float64))


@pytest.mark.parametrize("name", ["light_resnet50", "light_densenet121", "light_inception_v2", "light_shufflenet"])
def test_light_network_with_random_weights_matches_reference(name: str) -> None:
    # The shipped weights are splats, which make outputs nearly uniform; random weights make every
    # kernel's numbers matter. The native program must match the reference semantics of the graph.
    module = gnomon.load(model_path(name))
    randomize_weights(module)
    x = random_input(module)
    expected = run_reference(module, [x])[0]
    executable = Executable(lower(module))
    (actual,) = executable(x)
    assert np.ptp(expected) > 1e-5  # not the uniform output of the splat weights
    assert relative_l2(actual, expected) <= 1e-4
