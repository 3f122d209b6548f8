"""The native runtime end to end: compiled light networks with random weights against the reference, a
TorchScript file, saved programs, the profile, the memory plan of every program, the API's input checks.
Its outputs against ONNX's recorded outputs, onnxruntime and torch eager are checked in test_backends."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ModelCache, by_model, relative_l2
from xdsl.dialects.builtin import IntegerAttr

import gnomon
from gnomon import models
from gnomon.bundled import model_path
from gnomon.dialects import rt
from gnomon.errors import GnomonError
from gnomon.executable import Executable, InputError, lower
from gnomon.passes.kernel_to_rt import rt_functions, verify_plan
from gnomon.passes.kernel_to_rt.memory_plan import MemoryPlanError


def arena(executable: Executable) -> tuple[int, int]:
    function = rt_functions(executable.module)[0]
    size, bound = function.attributes[rt.ARENA_SIZE], function.attributes[rt.ARENA_LOWER_BOUND]
    assert isinstance(size, IntegerAttr)
    assert isinstance(bound, IntegerAttr)
    return size.value.data, bound.value.data


def test_torchscript_file_matches_eager(tmp_path: Path) -> None:
    model = models.SmallCNN().eval()
    inputs = model.example_inputs(2)
    path = tmp_path / "cnn.pt"
    torch.jit.trace(model, inputs).save(str(path))
    executable = gnomon.compile(path, input_shapes={"x": list(inputs[0].shape)})
    with torch.no_grad():
        expected = model(*inputs).numpy()
    assert relative_l2(executable(*inputs)[0], expected) <= 1e-5


@pytest.mark.xdist_group("MLP")
def test_compiled_program_runs_without_reimport(model_cache: ModelCache, tmp_path: Path) -> None:
    _, inputs = model_cache.torch_model("MLP")
    executable = model_cache.executable("MLP")
    executable.save(tmp_path / "mlp.mlir")
    reloaded = gnomon.executable.load_compiled(tmp_path / "mlp.mlir")
    np.testing.assert_array_equal(reloaded(*inputs)[0], executable(*inputs)[0])
    assert reloaded.input_names == executable.input_names


@pytest.mark.xdist_group("SmallCNN")
def test_profile_names_every_kernel(model_cache: ModelCache) -> None:
    _, inputs = model_cache.torch_model("SmallCNN")
    executable = model_cache.executable("SmallCNN")
    executable.run(inputs, profile=True)
    profile = executable.profile()
    launches = [op for op in rt_functions(executable.module)[0].body.block.ops if isinstance(op, rt.LaunchOp)]
    assert [t.kernel for t in profile.timings] == [op.callee.string_value() for op in launches]
    assert all(t.seconds > 0 and t.source_ops for t in profile.timings)
    # Batch norm is folded into the convolutions: no kernel runs it.
    assert not any("graph.batch_norm" in t.source_ops for t in profile.timings)


@pytest.mark.xdist_group("MLP")
def test_memory_plan_verifier_rejects_overlap(model_cache: ModelCache) -> None:
    function = rt_functions(model_cache.executable("MLP").module.clone())[0]
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
    """Channels-first, where a concatenation's operands are contiguous slices of it (channels-last, they are not)."""
    model = DenseBlock().eval()
    inputs = (torch.randn(1, 4, 8, 8),)
    executable = gnomon.compile(model, example_inputs=inputs, layout="nchw")
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
    executable = gnomon.compile(DenseBlock().eval(), example_inputs=(torch.randn(1, 4, 8, 8),), layout="nchw")
    function = rt_functions(executable.module)[0]
    relu_slot, conv_slot = [op for op in function.body.block.ops if isinstance(op, rt.ViewOp)][:2]
    assert relu_slot.element_offset == 0
    assert conv_slot.element_offset == 4 * 8 * 8
    conv_slot.offset = IntegerAttr(128, 64)  # half over relu(x)'s slot
    with pytest.raises(MemoryPlanError, match=r"windows overlap: @conv_relu_\d+ writes elements 128..320"):
        verify_plan(function)


@pytest.mark.xdist_group("MLP")
class TestInputChecks:
    def test_wrong_count(self, model_cache: ModelCache) -> None:
        with pytest.raises(InputError, match=r"^expected 1 inputs \(x\), got 2$"):
            model_cache.executable("MLP")(np.zeros((4, 64), np.float32), np.zeros((4, 64), np.float32))

    def test_wrong_shape(self, model_cache: ModelCache) -> None:
        with pytest.raises(
            InputError, match=r"^input 'x': expected float32 of shape \[4, 64\], got float32 of shape \[3, 64\]$"
        ):
            model_cache.executable("MLP")(np.zeros((3, 64), np.float32))

    def test_wrong_dtype(self, model_cache: ModelCache) -> None:
        with pytest.raises(
            InputError, match=r"^input 'x': expected float32 of shape \[4, 64\], got float64 of shape \[4, 64\]$"
        ):
            model_cache.executable("MLP")(np.zeros((4, 64), np.float64))


RANDOM_WEIGHTS = ["light_resnet50", "light_densenet121", "light_inception_v2", "light_shufflenet"]


@pytest.mark.parametrize("model", by_model(model_path(name) for name in RANDOM_WEIGHTS))
def test_light_network_with_random_weights_matches_reference(model_cache: ModelCache, model: Path) -> None:
    # The shipped weights are splats, which make outputs nearly uniform; random weights make every
    # kernel's numbers matter. The native program must match the reference semantics of the graph.
    module, x, expected = model_cache.random_weights(model)
    executable = Executable(lower(module.clone()))
    (actual,) = executable(x)
    assert np.ptp(expected) > 1e-5  # not the uniform output of the splat weights
    assert relative_l2(actual, expected) <= 1e-4


def test_library_temporaries_reuse_freed_memory_instead_of_faulting_in_pages_each_call() -> None:
    """oneDNN's blocked copies of a 1 MiB depthwise convolution's input and output are allocated on every call:
    with glibc's adaptive mmap threshold each was a fresh mapping, hundreds of page faults a call
    (`gnomon.runtime.malloc`)."""
    import resource

    from gnomon.runtime.malloc import keep_freed_memory

    model = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32).eval()
    x = torch.randn(8, 32, 32, 32)
    executable = gnomon.compile(model, example_inputs=(x,))
    assert keep_freed_memory()
    inputs = [x.numpy()]
    # The importer's fork left every heap page copy-on-write: a page the parent writes faults once, a few dozen a
    # call at first, wherever malloc places that call's blocks. The warm-up touches them all.
    for _ in range(200):
        executable.run(inputs)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        executable.run(inputs)
    # Without the thresholds: 736 faults a call. In the whole suite's process a stray few remain (25 in 20 calls
    # once: other tests' heap pages), so the bound is a few a call, far below a fresh mapping's hundreds.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 20 * 5


class Lookup(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids)


def test_data_a_kernel_rejects_is_one_error_naming_the_kernel_and_layer() -> None:
    """An index past its table: the library call's own check, as one GnomonError naming where, not a traceback;
    the program runs again on good data."""
    executable = gnomon.compile(Lookup(), (torch.tensor([1, 2, 3]),))
    with pytest.raises(
        GnomonError, match=re.escape("kernel @embedding_0 (table) failed on its data: index out of range in self")
    ):
        executable.run([np.array([1, 2, 30])])
    np.testing.assert_array_equal(executable.run([np.array([0, 9, 2])])[0].shape, (3, 4))
