"""Reference semantics of an LSTM layer's training ops (`graph.lstm_train`, `graph.lstm_grad`) in NumPy.

Semantics are torch's `nn.LSTM` (one layer, one direction, gate order i, f, g, o). The workspace is the runtime
kernel's own layout, so the reference leaves it zero, and its backward reruns the forward, keeping every step's
gates and states, then walks the steps backwards (backpropagation through time).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph.recurrent_train import LstmGradOp, LstmTrainOp
from gnomon.reference.base import Array, typed


def _sigmoid(x: Array) -> Array:
    # `1 / ...` with a Python int keeps x's dtype (float32 stays float32).
    return 1 / (1 + np.exp(-x))


class _Steps(NamedTuple):
    """The forward pass, indexed by input position t: the state each step starts from, its activated gates and its
    new cell; then the results (every step's hidden state, the final states)."""

    h_prev: Array
    c_prev: Array
    acts: Array
    c_new: Array
    y: Array
    h_n: Array
    c_n: Array


def _forward(
    x: Array, w_ih: Array, w_hh: Array, b_ih: Array, b_hh: Array, h0: Array, c0: Array, reverse: bool
) -> _Steps:
    seq, batch = x.shape[:2]
    hidden = h0.shape[-1]
    dtype = x.dtype
    h_prev = np.zeros((seq, batch, hidden), dtype)
    c_prev = np.zeros((seq, batch, hidden), dtype)
    acts = np.zeros((seq, batch, 4 * hidden), dtype)
    c_new = np.zeros((seq, batch, hidden), dtype)
    y = np.zeros((seq, batch, hidden), dtype)
    h, c = h0.astype(dtype), c0.astype(dtype)
    for t in range(seq - 1, -1, -1) if reverse else range(seq):
        h_prev[t], c_prev[t] = h, c
        a = x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = np.split(a, 4, axis=-1)
        i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        c = f * c + i * g
        h = o * np.tanh(c)
        acts[t] = np.concatenate([i, f, g, o], axis=-1)
        c_new[t] = c
        y[t] = h
    return _Steps(h_prev, c_prev, acts, c_new, y, h, c)


def lstm_layer_grad(
    x: Array,
    w_ih: Array,
    w_hh: Array,
    b_ih: Array,
    b_hh: Array,
    h0: Array,
    c0: Array,
    grad_y: Array | None,
    grad_h_n: Array | None,
    grad_c_n: Array | None,
    reverse: bool,
) -> tuple[Array, Array, Array, Array, Array, Array]:
    """Gradients (dx, dw_ih, dw_hh, db, dh0, dc0) of an LSTM layer, given those of its outputs (y, h_n, c_n).

    x is (seq, batch, input), w_ih (4H, input), w_hh (4H, H), b_ih and b_hh (4H,), h0 and c0 (batch, H). With
    `reverse` the steps run from the last to the first, but y stays in input order. A `None` output gradient
    means zeros. `db` is the gradient of b_ih, which is also that of b_hh: both enter the gates as the same sum.
    """
    seq, batch = x.shape[:2]
    hidden = h0.shape[-1]
    dtype = x.dtype
    order = range(seq - 1, -1, -1) if reverse else range(seq)
    steps = _forward(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse)
    h_prev, c_prev, acts, c_new = steps.h_prev, steps.c_prev, steps.acts, steps.c_new

    # Backward: dh and dc carry the gradient reaching the state between steps; the final states' gradients seed them.
    zeros = np.zeros((batch, hidden), dtype)
    dh = zeros.copy() if grad_h_n is None else grad_h_n.astype(dtype)
    dc = zeros.copy() if grad_c_n is None else grad_c_n.astype(dtype)
    d_pre = np.zeros((seq, batch, 4 * hidden), dtype)  # gradient of each step's pre-activation gates
    for t in reversed(order):
        if grad_y is not None:
            dh = dh + grad_y[t]  # y[t] is this step's h, so its gradient joins the recurrent one
        i, f, g, o = np.split(acts[t], 4, axis=-1)
        tanh_c = np.tanh(c_new[t])
        dc = dc + dh * o * (1 - tanh_c * tanh_c)
        # Through each nonlinearity: sigmoid' = s(1-s), tanh' = 1-t^2.
        d_i = dc * g * i * (1 - i)
        d_f = dc * c_prev[t] * f * (1 - f)
        d_g = dc * i * (1 - g * g)
        d_o = dh * tanh_c * o * (1 - o)
        d_pre[t] = np.concatenate([d_i, d_f, d_g, d_o], axis=-1)
        dh = d_pre[t] @ w_hh
        dc = dc * f

    # The weights are shared by every step, so their gradients sum over (seq, batch): one matmul each.
    flat = d_pre.reshape(seq * batch, 4 * hidden)
    dx = d_pre @ w_ih
    dw_ih = flat.T @ x.reshape(seq * batch, -1)
    dw_hh = flat.T @ h_prev.reshape(seq * batch, hidden)
    db = flat.sum(axis=0)
    return dx, dw_ih, dw_hh, db, dh, dc


@register_impls
class GraphRecurrentTrainFunctions(InterpreterFunctions):
    @impl(LstmTrainOp)
    def run_lstm_train(self, interpreter: Interpreter, op: LstmTrainOp, args: PythonValues) -> PythonValues:
        x, w_ih, w_hh, b_ih, b_hh, h0, c0 = (np.asarray(a) for a in args)
        steps = _forward(x, w_ih, w_hh, b_ih, b_hh, h0, c0, op.is_reverse())
        workspace = np.zeros(op.workspace.type.get_shape(), np.uint8)  # pyright: ignore[reportAttributeAccessIssue]
        results = (steps.y, steps.h_n, steps.c_n, workspace)
        return tuple(typed(r, v) for r, v in zip(op.results, results, strict=True))

    @impl(LstmGradOp)
    def run_lstm_grad(self, interpreter: Interpreter, op: LstmGradOp, args: PythonValues) -> PythonValues:
        x, w_ih, w_hh, b_ih, b_hh, h0, c0, _y, _h_n, _c_n, dy, dh_n, dc_n, _workspace = (np.asarray(a) for a in args)
        grads = lstm_layer_grad(x, w_ih, w_hh, b_ih, b_hh, h0, c0, dy, dh_n, dc_n, op.is_reverse())
        return tuple(typed(r, v) for r, v in zip(op.results, grads, strict=True))
