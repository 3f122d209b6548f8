"""Torch implementations of the recurrent graph ops: ATen's own LSTM, GRU and RNN kernels.

ATen runs the whole recurrence in C++ (the input projection of every step as one GEMM, then a GEMM and the
gate arithmetic per step), which a kernel of ours could not beat without a loop construct to generate. It
has no reverse-only direction, so a reverse op runs forward on the flipped sequence; and it knows none of
ONNX's extras (clip, peepholes, a coupled forget gate, GRU's reset gate before the recurrent product): ops
with one run the same steps as torch ops from Python, one step at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from gnomon.dialects.graph import recurrent as rnn
from gnomon.dialects.graph import recurrent_train as rnn_train
from gnomon.runtime.library.base import TorchImpl, torch_impl

Cell = Callable[[torch.Tensor, tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]]
"""One step: (the step's input projection x W_ih^T + b_ih, the states) -> the new states, hidden first."""

AtenRecurrence = Callable[..., tuple[torch.Tensor, ...]]
"""`torch.lstm`, `torch.gru`, `torch.rnn_tanh` or `torch.rnn_relu`, input-first overload."""


def _aten(recurrence: AtenRecurrence, reverse: bool) -> Callable[..., tuple[torch.Tensor, ...]]:
    """One layer of ATen's kernel: (x, w_ih, w_hh, b_ih, b_hh, *states) -> (y, *final states)."""

    def run(x: torch.Tensor, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        weights, states = list(args[:4]), [state.unsqueeze(0) for state in args[4:]]
        hx = states if len(states) > 1 else states[0]
        # has_biases, one layer, no dropout, inference, one direction, seq-first
        y, *final = recurrence(x.flip(0) if reverse else x, hx, weights, True, 1, 0.0, False, False, False)
        return (y.flip(0) if reverse else y, *(state.squeeze(0) for state in final))

    return run


def _steps(
    x: torch.Tensor, w_ih: torch.Tensor, b_ih: torch.Tensor, states: tuple[torch.Tensor, ...], cell: Cell, reverse: bool
) -> tuple[torch.Tensor, ...]:
    """The steps one by one: every step's hidden state (in input order) and the final states."""
    projected = F.linear(x, w_ih, b_ih)
    outputs = x.new_empty((*x.shape[:2], states[0].shape[-1]))
    for t in range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0]):
        states = cell(projected[t], states)
        outputs[t] = states[0]
    return (outputs, *states)


def _clipped(clip: float | None) -> Callable[[torch.Tensor], torch.Tensor]:
    return (lambda x: x) if clip is None else (lambda x: x.clamp(-clip, clip))


@torch_impl(rnn.LstmOp)
def lstm(op: rnn.LstmOp) -> TorchImpl:
    reverse, clip, coupled = op.is_reverse(), op.clip_value(), bool(op.input_forget.value.data)
    if clip is None and op.peepholes is None and not coupled:
        return TorchImpl(_aten(torch.lstm, reverse))
    bound = _clipped(clip)

    def run(
        x: torch.Tensor,
        w_ih: torch.Tensor,
        w_hh: torch.Tensor,
        b_ih: torch.Tensor,
        b_hh: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor,
        *peepholes: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        p_i, p_f, p_o = peepholes[0].chunk(3) if peepholes else (torch.zeros_like(b_ih[: h0.shape[-1]]),) * 3

        def cell(projected: torch.Tensor, states: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            h, c = states
            i, f, g, o = (projected + F.linear(h, w_hh, b_hh)).chunk(4, -1)
            i = torch.sigmoid(bound(i + p_i * c))
            f = 1 - i if coupled else torch.sigmoid(bound(f + p_f * c))
            c = f * c + i * torch.tanh(bound(g))
            return torch.sigmoid(bound(o + p_o * c)) * torch.tanh(c), c

        return _steps(x, w_ih, b_ih, (h0, c0), cell, reverse)

    return TorchImpl(run)


@torch_impl(rnn.GruOp)
def gru(op: rnn.GruOp) -> TorchImpl:
    reverse, clip, linear_before_reset = op.is_reverse(), op.clip_value(), bool(op.linear_before_reset.value.data)
    if clip is None and linear_before_reset:
        return TorchImpl(_aten(torch.gru, reverse))
    bound = _clipped(clip)

    def run(
        x: torch.Tensor,
        w_ih: torch.Tensor,
        w_hh: torch.Tensor,
        b_ih: torch.Tensor,
        b_hh: torch.Tensor,
        h0: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        hidden = h0.shape[-1]
        w_hrz, b_hrz, w_hn, b_hn = w_hh[: 2 * hidden], b_hh[: 2 * hidden], w_hh[2 * hidden :], b_hh[2 * hidden :]

        def cell(projected: torch.Tensor, states: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            (h,) = states
            x_r, x_z, x_n = projected.chunk(3, -1)
            h_r, h_z = F.linear(h, w_hrz, b_hrz).chunk(2, -1)
            r, z = torch.sigmoid(bound(x_r + h_r)), torch.sigmoid(bound(x_z + h_z))
            recurrent = r * F.linear(h, w_hn, b_hn) if linear_before_reset else F.linear(r * h, w_hn, b_hn)
            n = torch.tanh(bound(x_n + recurrent))
            return ((1 - z) * n + z * h,)

        return _steps(x, w_ih, b_ih, (h0,), cell, reverse)

    return TorchImpl(run)


@torch_impl(rnn.RnnOp)
def simple_rnn(op: rnn.RnnOp) -> TorchImpl:
    reverse, clip, tanh = op.is_reverse(), op.clip_value(), op.nonlinearity.data == "tanh"
    if clip is None:
        return TorchImpl(_aten(torch.rnn_tanh if tanh else torch.rnn_relu, reverse))
    bound, activation = _clipped(clip), torch.tanh if tanh else torch.relu

    def run(
        x: torch.Tensor,
        w_ih: torch.Tensor,
        w_hh: torch.Tensor,
        b_ih: torch.Tensor,
        b_hh: torch.Tensor,
        h0: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        def cell(projected: torch.Tensor, states: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            return (activation(bound(projected + F.linear(states[0], w_hh, b_hh))),)

        return _steps(x, w_ih, b_ih, (h0,), cell, reverse)

    return TorchImpl(run)


# ---- training: oneDNN's LSTM layer kernels, as eager's autograd runs them on a CPU ----

_ONEDNN_LSTM = 2
"""ideep's rnn_kind::LSTM."""


@torch_impl(rnn_train.LstmTrainOp)
def lstm_train(op: rnn_train.LstmTrainOp) -> TorchImpl:
    reverse, hidden = op.is_reverse(), op.hidden_size()

    def run(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor,
            h0: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, ...]:  # fmt: skip
        y, h_n, c_n, workspace = torch.ops.aten.mkldnn_rnn_layer(
            x, w_ih, w_hh, b_ih, b_hh, h0.unsqueeze(0), c0.unsqueeze(0),
            reverse, [], _ONEDNN_LSTM, hidden, 1, True, False, False, True,
        )  # fmt: skip
        return y, h_n.squeeze(0), c_n.squeeze(0), workspace

    return TorchImpl(run)


@torch_impl(rnn_train.LstmGradOp)
def lstm_grad(op: rnn_train.LstmGradOp) -> TorchImpl:
    reverse, hidden = op.is_reverse(), op.hidden_size()

    def run(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor,
            h0: torch.Tensor, c0: torch.Tensor, y: torch.Tensor, h_n: torch.Tensor, c_n: torch.Tensor,
            dy: torch.Tensor, dh_n: torch.Tensor, dc_n: torch.Tensor, workspace: torch.Tensor,
            ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        states = [s.unsqueeze(0) for s in (h0, c0)]
        finals = [s.unsqueeze(0) for s in (h_n, c_n, dh_n, dc_n)]
        dx, dw_ih, dw_hh, db, _, dh0, dc0 = torch.ops.aten.mkldnn_rnn_layer_backward(
            x, w_ih, w_hh, b_ih, b_hh, *states, y, finals[0], finals[1], dy, finals[2], finals[3],
            reverse, _ONEDNN_LSTM, hidden, 1, True, True, False, [], False, workspace,
        )  # fmt: skip
        return dx, dw_ih, dw_hh, db, dh0.squeeze(0), dc0.squeeze(0)

    return TorchImpl(run)
