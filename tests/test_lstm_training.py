"""LSTM layers in training steps: the NumPy backward through time (`gnomon.reference.recurrent_train`) against
autograd through `nn.LSTM`, and whole training steps with LSTMs (oneDNN's layer kernels, `graph.lstm_train` and
`graph.lstm_grad`) against autograd, torch.optim and FlopCounterMode."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import gnomon
from gnomon.cost.analytical import GEMM_OPS
from gnomon.cost.graph import graph_ops
from gnomon.cost.roofline import gemm_shapes
from gnomon.dialects.graph.recurrent_train import LstmGradOp, LstmTrainOp
from gnomon.frontends.torch_training import import_torch_training
from gnomon.models import LSTMClassifier
from gnomon.pipeline import to_graph
from gnomon.reference import run_reference
from gnomon.reference.recurrent_train import lstm_layer_grad

Array = np.ndarray[Any, np.dtype[Any]]

NAMES = ("dx", "dw_ih", "dw_hh", "db", "dh0", "dc0")


def torch_grads(
    x: Array, weights: tuple[Array, ...], h0: Array, c0: Array, grads: tuple[Array | None, ...], reverse: bool
) -> dict[str, Array]:
    """Autograd's gradients of sum(y*grad_y) + sum(h_n*grad_h_n) + sum(c_n*grad_c_n), with None terms left out.

    A reverse single direction is a forward run over the flipped sequence, its y flipped back."""
    dtype = torch.float64 if x.dtype == np.float64 else torch.float32
    lstm = nn.LSTM(x.shape[-1], h0.shape[-1], num_layers=1, dtype=dtype)
    params = (lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
    with torch.no_grad():
        for param, value in zip(params, weights, strict=True):
            param.copy_(torch.from_numpy(value))
    xt, h0t, c0t = (torch.from_numpy(a).requires_grad_() for a in (x, h0, c0))
    y, (h_n, c_n) = lstm(xt.flip(0) if reverse else xt, (h0t[None], c0t[None]))
    y = y.flip(0) if reverse else y
    loss = sum(
        ((out * torch.from_numpy(g)).sum() for out, g in zip((y, h_n[0], c_n[0]), grads, strict=True) if g is not None),
        torch.zeros((), dtype=dtype),
    )
    dx, dw_ih, dw_hh, db_ih, db_hh, dh0, dc0 = torch.autograd.grad(loss, (xt, *params, h0t, c0t))
    # b_ih and b_hh are summed into the gates, so their gradients must agree: the NumPy side returns one.
    torch.testing.assert_close(db_ih, db_hh)
    values = (dx, dw_ih, dw_hh, db_ih, dh0, dc0)
    return {name: v.detach().numpy() for name, v in zip(NAMES, values, strict=True)}


def relative_error(actual: Array, expected: Array) -> float:
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


CASES = {
    # name: (seq, batch, input, hidden, which of grad_y / grad_h_n / grad_c_n are given, dtype, tolerance)
    "y_only": (5, 3, 7, 6, (True, False, False), np.float64, 1e-5),
    "all_grads": (5, 3, 7, 6, (True, True, True), np.float64, 1e-5),
    "final_states_only": (5, 3, 7, 6, (False, True, True), np.float64, 1e-5),
    "seq1": (1, 3, 7, 6, (True, True, True), np.float64, 1e-5),
    "float32": (5, 3, 7, 6, (True, True, True), np.float32, 1e-4),
}


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("case", list(CASES))
def test_lstm_layer_grad_matches_autograd(case: str, reverse: bool) -> None:
    seq, batch, inputs, hidden, given, dtype, tolerance = CASES[case]
    rng = np.random.default_rng(0)

    def rand(*shape: int) -> Array:
        return rng.standard_normal(shape).astype(dtype)

    x, h0, c0 = rand(seq, batch, inputs), rand(batch, hidden), rand(batch, hidden)
    weights = (rand(4 * hidden, inputs), rand(4 * hidden, hidden), rand(4 * hidden), rand(4 * hidden))
    shapes = ((seq, batch, hidden), (batch, hidden), (batch, hidden))
    grads = tuple(rand(*shape) if on else None for shape, on in zip(shapes, given, strict=True))

    actual = lstm_layer_grad(x, *weights, h0, c0, *grads, reverse=reverse)
    expected = torch_grads(x, weights, h0, c0, grads, reverse)

    for name, value in zip(NAMES, actual, strict=True):
        assert value.dtype == dtype, name
        assert value.shape == expected[name].shape, name
        assert np.linalg.norm(expected[name]) > 0, name  # a vanishing reference would make the check vacuous
        assert relative_error(value, expected[name]) <= tolerance, (name, relative_error(value, expected[name]))


def test_reverse_differs_from_forward() -> None:
    """Direction matters: with a gradient on y only, the first step's dx differs between the two orders."""
    rng = np.random.default_rng(1)
    x, h0, c0 = rng.standard_normal((4, 2, 3)), rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    weights = (rng.standard_normal((20, 3)), rng.standard_normal((20, 5)), np.zeros(20), np.zeros(20))
    grad_y = rng.standard_normal((4, 2, 5))
    forward = lstm_layer_grad(x, *weights, h0, c0, grad_y, None, None, reverse=False)
    backward = lstm_layer_grad(x, *weights, h0, c0, grad_y, None, None, reverse=True)
    assert relative_error(forward[0], backward[0]) > 1e-2


# ---- whole training steps ----


class Recurrent(nn.Module):
    """A linear layer into a stacked LSTM (so its input has a gradient too), every knob of nn.LSTM that oneDNN's
    layer kernels take, and a loss over the outputs and both final states."""

    def __init__(self, bidirectional: bool, batch_first: bool, bias: bool, initial: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(5, 6)
        self.lstm = nn.LSTM(6, 7, 2, bias=bias, batch_first=batch_first, bidirectional=bidirectional)
        directions = 2 if bidirectional else 1
        states = (torch.randn(2 * directions, 3, 7) * 0.5 for _ in range(2))
        self.initial = nn.ParameterList(nn.Parameter(s) for s in states) if initial else None
        self.head = nn.Linear(7 * directions, 2)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        states = (self.initial[0], self.initial[1]) if self.initial is not None else None
        y, (h_n, c_n) = self.lstm(torch.tanh(self.embed(x)), states)
        out = self.head(y).square().mean()
        return F.mse_loss(out + h_n.sum() * 0.1 + c_n.square().mean(), target)


CONFIGS = [
    pytest.param(False, False, True, False, id="plain"),
    pytest.param(True, True, True, True, id="bidirectional-batch-first-initial-states"),
    pytest.param(False, True, False, True, id="no-bias-initial-states"),
]


def _batch(batch_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn((3, 4, 5) if batch_first else (4, 3, 5)), torch.tensor(0.5)


@pytest.mark.parametrize(("bidirectional", "batch_first", "bias", "initial"), CONFIGS)
def test_lstm_training_step_gradients_match_autograd(
    bidirectional: bool, batch_first: bool, bias: bool, initial: bool
) -> None:
    """Every parameter's gradient, the initial states' included, from the runtime (oneDNN's kernels) and from the
    reference interpreter (NumPy backward through time), against float64 autograd."""
    model = Recurrent(bidirectional, batch_first, bias, initial)
    batch = _batch(batch_first)
    exact = copy.deepcopy(model).double()
    exact(batch[0].double(), batch[1].double()).backward()
    truth = {name: p.grad.numpy() for name, p in exact.named_parameters() if p.grad is not None}
    step = gnomon.compile(copy.deepcopy(model), batch, train=gnomon.SGD(lr=0.01))
    loss = step.step(*(x.numpy() for x in batch))
    assert loss == pytest.approx(model(*batch).item(), rel=1e-5)
    module = to_graph(import_torch_training(copy.deepcopy(model), batch, "Recurrent"))
    names = [n for op in graph_ops(module) for n in [op.name]]
    layers = 2 * (2 if bidirectional else 1)
    assert names.count("graph.lstm_train") == layers
    assert names.count("graph.lstm_grad") == layers
    assert "graph.sigmoid" not in names  # no step decomposed into its gate arithmetic
    parameters = [p.detach().numpy() for p in model.parameters()]
    reference = run_reference(module, [*parameters, *(x.numpy() for x in batch)])
    assert set(step.gradients()) == set(truth)
    for index, (name, _) in enumerate(model.named_parameters()):
        assert relative_error(step.gradients()[name], truth[name]) <= 1e-4, name
        assert relative_error(reference[1 + index], truth[name]) <= 1e-4, name


def test_twenty_adam_steps_of_an_lstm_track_torch() -> None:
    model = LSTMClassifier(features=8, hidden=16, layers=2, classes=4, steps=5)
    torch.manual_seed(2)
    batch = (*model.example_inputs(3), torch.randint(0, 4, (3,)))
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "cross_entropy"), batch, train=gnomon.Adam(lr=1e-2))
    reference = gnomon.with_loss(copy.deepcopy(model), "cross_entropy").train()
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2, foreach=True)
    for _ in range(20):
        ours = step.step(*(x.numpy() for x in batch))
        optimizer.zero_grad()
        theirs = reference(*batch)
        theirs.backward()
        optimizer.step()
        assert ours == pytest.approx(theirs.item(), rel=1e-4)
    state = step.state_dict()
    for key, value in reference.model.state_dict().items():
        assert relative_error(state[key], value.numpy()) <= 1e-4, key


@pytest.mark.filterwarnings("ignore:TF32 acceleration")
def test_lstm_training_flops_equal_flop_counter_mode() -> None:
    """The step's products (forward and backward through time) count FlopCounterMode's FLOPs for torch's step
    with its LSTM decomposed (oneDNN off: FlopCounterMode has no count for oneDNN's layer kernels)."""
    model = Recurrent(bidirectional=True, batch_first=False, bias=True, initial=True)
    batch = _batch(False)
    module = to_graph(import_torch_training(copy.deepcopy(model), batch, "Recurrent"))
    products = (*GEMM_OPS, LstmTrainOp, LstmGradOp)
    ours = sum(s.flops for op in graph_ops(module) if isinstance(op, products) for s in gemm_shapes(op))
    with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter:
        model(*batch).backward()
    assert ours == counter.get_total_flops()
