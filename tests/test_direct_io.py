"""Inputs and results that only generated kernels touch are read from and written into the caller's arrays
(`gnomon.cost.direct_io`, `gnomon.runtime.direct`); everything else is copied, and the cost model prices what
the runtime does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import relative_l2
from torch import nn

import gnomon
from gnomon.cost.devices import load_device
from gnomon.cost.direct_io import DirectIO, direct_io
from gnomon.cost.program import gnomon_steps
from gnomon.dialects import kernel
from gnomon.passes.kernel_to_rt import rt_functions
from gnomon.runtime.executor import Program


class Pointwise(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0 + 1.0


class ConvRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class ReturnsItsInput(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(x) + 1.0, x


class SameResultTwice(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(x) + 1.0
        return y, y


def _program(model: nn.Module, x: torch.Tensor, layout: str = "auto") -> tuple[Program, DirectIO, list[str]]:
    executable = gnomon.compile(model.eval(), example_inputs=(x,), layout=layout)
    program = executable.program
    assert program is not None
    function = rt_functions(executable.module)[0]
    kernels = {op.sym_name.data: op for op in executable.module.ops if isinstance(op, kernel.FuncOp)}
    copies = [s.task.name for s in gnomon_steps(executable.module, load_device("generic-cpu")) if s.kind == "runtime"]
    return program, direct_io(function, kernels), copies


def test_a_generated_kernel_reads_the_callers_input_and_writes_the_returned_array() -> None:
    x = torch.randn(2, 64, 33)
    program, direct, copies = _program(Pointwise(), x)
    assert direct == DirectIO(frozenset({0}), frozenset({0}))
    assert copies == []  # nothing to copy, nothing priced
    first = program.run([x.numpy()])[0]
    np.testing.assert_allclose(first, (torch.relu(x) * 2 + 1).numpy(), rtol=1e-6)
    assert not np.shares_memory(first, program.arena)
    assert not program.inputs[0].any()  # read where it lay, never copied in
    y = torch.randn(2, 64, 33)
    second = program.run([y.numpy()])[0]
    np.testing.assert_allclose(second, (torch.relu(y) * 2 + 1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(first, (torch.relu(x) * 2 + 1).numpy(), rtol=1e-6)  # a fresh array each run
    assert first.ctypes.data % 64 == 0


def test_the_launches_point_back_at_the_programs_arrays_after_a_run() -> None:
    x, y = torch.randn(4, 100), torch.randn(4, 100)
    program, _, _ = _program(Pointwise(), x)
    program.run([x.numpy()])
    program.load([y.numpy()])
    (result,) = program.run_in_place()
    np.testing.assert_allclose(result, (torch.relu(y) * 2 + 1).numpy(), rtol=1e-6)
    assert np.shares_memory(result, program.arena)


def test_an_input_that_does_not_fit_is_copied() -> None:
    x = torch.randn(6, 10)
    program, _, _ = _program(Pointwise(), x)
    transposed = np.asfortranarray(x.numpy())  # the same values, column-major
    np.testing.assert_allclose(program.run([transposed])[0], (torch.relu(x) * 2 + 1).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(program.inputs[0], x.numpy())


def test_what_a_library_call_touches_is_copied() -> None:
    torch.manual_seed(0)
    model = ConvRelu().eval()
    x = torch.randn(1, 8, 12, 12)
    program, direct, copies = _program(model, x, layout="nchw")  # channels-last, generated transposes read them
    assert direct == DirectIO()
    assert copies == ["copy input 0", "copy output 0"]
    with torch.inference_mode():
        assert relative_l2(program.run([x.numpy()])[0], model(x).numpy()) <= 1e-5


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (ReturnsItsInput(), DirectIO(frozenset(), frozenset({0}))),
        (SameResultTwice(), DirectIO(frozenset({0}), frozenset())),
    ],
    ids=["input-returned", "result-returned-twice"],
)
def test_memory_that_two_results_or_a_result_and_an_input_share_is_copied(model: nn.Module, expected: DirectIO) -> None:
    x = torch.randn(3, 40)
    program, direct, _ = _program(model, x)
    assert direct == expected
    got = program.run([x.numpy()])
    want = model(x)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-6)
    assert not np.shares_memory(got[0], got[1])


def test_a_result_of_the_arena_fed_back_as_input_is_right() -> None:
    x = torch.randn(4, 100)
    program, _, _ = _program(Pointwise(), x)
    program.load([x.numpy()])
    (first,) = program.run_in_place()  # a view of the arena, which a run's launches write
    want = (torch.relu(torch.from_numpy(first.copy())) * 2 + 1).numpy()
    np.testing.assert_allclose(program.run([first])[0], want, rtol=1e-6)
