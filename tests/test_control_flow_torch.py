"""torch's control flow through the torch frontend: `torch.cond` and `torch.while_loop` in exported programs, and
TorchScript's data-dependent `if`, `for` and `while`.

Each imports into torch-mlir's torch dialect as `torch.prim.If` / `torch.prim.Loop` (checked on the imported
module), and compiled for the reference backend computes what torch eager does on inputs that take each branch
and run a loop 0, 1 and several times.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation

import gnomon
from gnomon.errors import ModelLoadError
from gnomon.frontends.torch import import_torch, import_torchscript

torch.manual_seed(0)
X = torch.rand(3, 8) + 0.1
"""A positive input: its sum is positive (`-X`'s is negative)."""


def scaled(total: float) -> torch.Tensor:
    """`X` scaled so that the sum of its absolute values is `total`."""
    return X / X.abs().sum() * total


class EarlyExit(nn.Module):
    """An early-exit classifier: one head or the other by the sign of the input's sum."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 4), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: self.a(x).relu(), lambda x: self.b(x) * 2.0, (x,))


class CountLoop(nn.Module):
    """`n` steps of a layer: the loop captures the layer's weights and the count `n`."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        def cond_fn(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            return i < n

        def body_fn(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, torch.tanh(self.lin(h))

        i, h = torch.while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))
        return h, i


class NormLoop(nn.Module):
    """Shrinks its input until the sum of its absolute values is at most 1: below 1 no step runs, from 1 to
    about 1.7 one step (each step halves the sum and adds at most 0.24), above that several."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def cond_fn(h: torch.Tensor) -> torch.Tensor:
            return h.abs().sum() > 1.0

        def body_fn(h: torch.Tensor) -> tuple[torch.Tensor]:
            return (h * 0.5 + 0.01 * torch.tanh(self.lin(h)),)

        (h,) = torch.while_loop(cond_fn, body_fn, (x,))
        return h


class BranchingLoop(nn.Module):
    """A loop whose body branches on its state, each branch with its own weights."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def body_fn(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = torch.cond(h.sum() > 0, lambda h: torch.tanh(self.a(h)), lambda h: torch.sigmoid(self.b(h)) - 0.6, (h,))
            return i + 1, h

        _, h = torch.while_loop(lambda i, h: i < 4, body_fn, (torch.zeros((), dtype=torch.int64), x))
        return h


class ScriptedIf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            return self.lin(x).relu()
        return x * 2.0


class ScriptedRowLoop(nn.Module):
    """A loop over the rows: its trip count is a size, which torch's converter does not unroll."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for _ in range(x.size(0)):
            h = torch.tanh(self.lin(h))
        return h


class ScriptedRowSum(nn.Module):
    """A loop that reads its iteration number (as an index)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            h = h + x[i]
        return h


class ScriptedCountLoop(nn.Module):
    """A loop whose trip count is an input's value."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        h = x
        for _ in range(int(n)):
            h = torch.tanh(self.lin(h))
        return h


class ScriptedWhile(nn.Module):
    """`NormLoop` as TorchScript's `while`."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        while bool(h.abs().sum() > 1.0):
            h = h * 0.5 + 0.01 * torch.tanh(self.lin(h))
        return h


def op_name(op: Operation) -> str:
    """The op's name as torch-mlir spells it; unregistered `torch.*` ops included."""
    name = getattr(op, "op_name", None)
    return name.data if isinstance(name, StringAttr) else op.name


def op_counts(module: ModuleOp) -> Counter[str]:
    return Counter(op_name(op) for op in module.walk())


def script(tmp_path: Path, model: nn.Module) -> Path:
    path = tmp_path / f"{type(model).__name__}.pt"
    torch.jit.save(torch.jit.script(model.eval()), path)
    return path


def test_cond_imports_as_prim_if_calling_each_branch_with_the_weights():
    module = import_torch(EarlyExit().eval(), (X,), "EarlyExit").module
    (if_op,) = [op for op in module.walk() if op_name(op) == "torch.prim.If"]
    condition = if_op.operands[0].owner
    assert isinstance(condition, Operation)
    assert op_name(condition) == "torch.aten.Bool.Tensor"
    for region in if_op.regions:
        call, terminator = list(region.block.ops)
        # the input, and each head's weight and bias
        assert (call.name, len(call.operands)) == ("func.call", 5)
        assert op_name(terminator) == "torch.prim.If.yield"


def test_while_loop_carries_its_values_and_reads_captured_ones_from_outside():
    module = import_torch(CountLoop().eval(), (X, torch.tensor(3)), "CountLoop").module
    (loop,) = [op for op in module.walk() if op_name(op) == "torch.prim.Loop"]
    assert len(loop.operands) == 2 + 2  # trip count, condition, then the counter and the state
    assert len(loop.regions[0].block.args) == 1 + 2
    calls = [op for op in loop.regions[0].block.ops if op.name == "func.call"]
    # the two carried values, then `n` and the layer's weight and bias
    assert [len(call.operands) for call in calls] == [5, 5]


@pytest.mark.parametrize(
    ("model", "inputs", "op"),
    [
        (ScriptedIf, (X,), "torch.prim.If"),
        (ScriptedRowLoop, (X,), "torch.prim.Loop"),
        (ScriptedRowSum, (X,), "torch.prim.Loop"),
        (ScriptedCountLoop, (X, torch.tensor(2)), "torch.prim.Loop"),
        (ScriptedWhile, (X,), "torch.prim.Loop"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_scripted_control_flow_imports(tmp_path: Path, model: type[nn.Module], inputs: Sequence[torch.Tensor], op: str):
    imported = import_torchscript(script(tmp_path, model()), example_inputs=inputs)
    assert op_counts(imported.module)[op] == 1


def check(
    compiled: Callable[..., tuple[np.ndarray, ...]],
    eager: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
    cases: Sequence[tuple[torch.Tensor, ...]],
) -> None:
    for inputs in cases:
        expected = eager(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = compiled(*inputs)
        assert len(got) == len(expected)
        for value, reference in zip(got, expected, strict=True):
            np.testing.assert_allclose(value, reference.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("model", "cases"),
    [
        (EarlyExit, [(X,), (-X,)]),
        (CountLoop, [(X, torch.tensor(n)) for n in (0, 1, 3)]),
        (NormLoop, [(scaled(total),) for total in (0.5, 1.5, 40.0)]),
        (BranchingLoop, [(X,), (-X,)]),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_exported_control_flow_computes_what_torch_does(
    model: type[nn.Module], cases: Sequence[tuple[torch.Tensor, ...]]
):
    module = model().eval()
    check(gnomon.compile(module, cases[0], backend="reference"), module, cases)


@pytest.mark.parametrize(
    ("model", "cases"),
    [
        (ScriptedIf, [(X,), (-X,)]),
        (ScriptedRowLoop, [(X,), (-X,)]),
        (ScriptedRowSum, [(X,), (-X,)]),
        (ScriptedCountLoop, [(X, torch.tensor(n)) for n in (0, 1, 4)]),
        (ScriptedWhile, [(scaled(total),) for total in (0.5, 1.5, 40.0)]),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_scripted_control_flow_computes_what_torch_does(
    tmp_path: Path, model: type[nn.Module], cases: Sequence[tuple[torch.Tensor, ...]]
):
    scripted = torch.jit.script(model().eval())
    path = tmp_path / "model.pt"
    torch.jit.save(scripted, path)
    check(gnomon.compile(path, cases[0], backend="reference"), scripted, cases)


class Shrink(nn.Module):
    """A `torch.cond` whose branches return different shapes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: x[:1] * 2.0, lambda x: x * 3.0, (x,))


class CumulativeSum(nn.Module):
    """`scan`, a higher-order op gnomon does not import."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.scan import scan

        def step(carry: torch.Tensor, row: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return carry + row, (carry + row).clone()

        return scan(step, torch.zeros_like(x[0]), x)[1]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            Shrink,
            "Shrink: torch-mlir cannot import the program: torch.cond (node 'cond') whose branches return different "
            "types: (!torch.vtensor<[1,8],f32>) and (!torch.vtensor<[3,8],f32>)",
        ),
        (
            CumulativeSum,
            "CumulativeSum: torch-mlir cannot import the program: higher-order op torch.ops.higher_order.scan "
            "(node 'scan') has no importer",
        ),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_control_flow_gnomon_cannot_import_is_one_line(model: type[nn.Module], message: str):
    with pytest.raises(ModelLoadError) as error:
        import_torch(model().eval(), (X,), model.__name__)
    assert str(error.value) == message


class ScriptedAppend(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows: list[torch.Tensor] = []
        for i in range(x.size(0)):
            rows.append(x[i] * 2.0)
        return torch.stack(rows)


def test_scripted_loop_the_converter_refuses_names_the_cause(tmp_path: Path):
    path = script(tmp_path, ScriptedAppend())
    with pytest.raises(ModelLoadError) as error:
        import_torchscript(path, example_inputs=(X,))
    assert str(error.value) == (
        f"{path}: cannot convert TorchScript to torch.export: TS2EPConverter failed for node prim::Loop: "
        "prim::Loop appends to a list made outside it, which torch.while_loop cannot carry"
    )
