"""Reference semantics of the recurrent graph ops: each step as its equations say, in NumPy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import recurrent as rnn
from gnomon.reference.base import Array, typed

Cell = Callable[[Array, tuple[Array, ...]], tuple[Array, ...]]
"""One step: (the step's input projection x W_ih^T + b_ih, the states) -> the new states, hidden first."""


def _sigmoid(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


def _clipped(clip: float | None) -> Callable[[Array], Array]:
    """Bounds a gate activation's input to [-clip, clip] (no bound without a clip)."""
    return (lambda x: x) if clip is None else (lambda x: np.clip(x, -clip, clip))


def _run(op: rnn.Recurrent, x: Array, w_ih: Array, states: tuple[Array, ...], cell: Cell) -> tuple[Array, ...]:
    """The outputs of every step (in input order) and the final states."""
    projected = x @ w_ih.T
    order = range(x.shape[0] - 1, -1, -1) if op.is_reverse() else range(x.shape[0])
    outputs = np.zeros((*x.shape[:2], states[0].shape[-1]), x.dtype)
    for t in order:
        states = cell(projected[t], states)
        outputs[t] = states[0]
    return (outputs, *states)


@register_impls
class GraphRecurrentFunctions(InterpreterFunctions):
    @impl(rnn.LstmOp)
    def run_lstm(self, interpreter: Interpreter, op: rnn.LstmOp, args: PythonValues) -> PythonValues:
        x, w_ih, w_hh, b_ih, b_hh, h0, c0, *peepholes = (np.asarray(a) for a in args)
        clip, hidden = _clipped(op.clip_value()), h0.shape[-1]
        p_i, p_f, p_o = np.split(peepholes[0], 3) if peepholes else (np.zeros(hidden, x.dtype),) * 3
        coupled = bool(op.input_forget.value.data)

        def cell(projected: Array, states: tuple[Array, ...]) -> tuple[Array, ...]:
            h, c = states
            i, f, g, o = np.split(projected + b_ih + h @ w_hh.T + b_hh, 4, axis=-1)
            i = _sigmoid(clip(i + p_i * c))
            f = 1 - i if coupled else _sigmoid(clip(f + p_f * c))
            c = f * c + i * np.tanh(clip(g))
            return _sigmoid(clip(o + p_o * c)) * np.tanh(c), c

        return tuple(typed(r, v) for r, v in zip(op.results, _run(op, x, w_ih, (h0, c0), cell), strict=True))

    @impl(rnn.GruOp)
    def run_gru(self, interpreter: Interpreter, op: rnn.GruOp, args: PythonValues) -> PythonValues:
        x, w_ih, w_hh, b_ih, b_hh, h0 = (np.asarray(a) for a in args)
        clip, hidden = _clipped(op.clip_value()), h0.shape[-1]
        linear_before_reset = bool(op.linear_before_reset.value.data)

        def cell(projected: Array, states: tuple[Array, ...]) -> tuple[Array, ...]:
            (h,) = states
            x_r, x_z, x_n = np.split(projected + b_ih, 3, axis=-1)
            h_r, h_z, _ = np.split(h @ w_hh.T + b_hh, 3, axis=-1)
            r, z = _sigmoid(clip(x_r + h_r)), _sigmoid(clip(x_z + h_z))
            w_hn, b_hn = w_hh[2 * hidden :], b_hh[2 * hidden :]
            recurrent = r * (h @ w_hn.T + b_hn) if linear_before_reset else (r * h) @ w_hn.T + b_hn
            n = np.tanh(clip(x_n + recurrent))
            return ((1 - z) * n + z * h,)

        return tuple(typed(r, v) for r, v in zip(op.results, _run(op, x, w_ih, (h0,), cell), strict=True))

    @impl(rnn.RnnOp)
    def run_rnn(self, interpreter: Interpreter, op: rnn.RnnOp, args: PythonValues) -> PythonValues:
        x, w_ih, w_hh, b_ih, b_hh, h0 = (np.asarray(a) for a in args)
        clip = _clipped(op.clip_value())
        tanh = op.nonlinearity.data == "tanh"

        def activation(v: Array) -> Array:
            return np.tanh(v) if tanh else np.maximum(v, 0)

        def cell(projected: Array, states: tuple[Array, ...]) -> tuple[Array, ...]:
            (h,) = states
            return (activation(clip(projected + b_ih + h @ w_hh.T + b_hh)),)

        return tuple(typed(r, v) for r, v in zip(op.results, _run(op, x, w_ih, (h0,), cell), strict=True))
