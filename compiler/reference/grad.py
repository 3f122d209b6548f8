"""Reference semantics of the graph dialect's gradient ops, in NumPy: each window offset's view of the padded
input, as the forward op reads it, multiplied or routed to; written out rather than borrowed from torch's
autograd, which the tests compare against.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import grad
from gnomon.dialects.graph.base import ints
from gnomon.reference.base import Array, typed


def _padded(x: Array, pads: Sequence[int], out: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
            dilations: Sequence[int], value: float) -> Array:  # fmt: skip
    """`x` padded by `pads` (all begins, then all ends), and at the end where the last window (ceil mode) reaches
    past the padding."""
    n = len(kernel)
    widths = [(0, 0), (0, 0)]
    for i in range(n):
        reach = (out[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
        end = max(pads[i + n], reach - x.shape[2 + i] - pads[i])
        widths.append((pads[i], end))
    return np.pad(x, widths, constant_values=value)


def _window(offset: Sequence[int], out: Sequence[int], strides: Sequence[int], dilations: Sequence[int]):
    """The slices of the padded input that kernel position `offset` reads for every output position."""
    return (slice(None), slice(None), *(
        slice(k * d, k * d + s * (o - 1) + 1, s) for k, o, s, d in zip(offset, out, strides, dilations, strict=True)
    ))  # fmt: skip


@register_impls
class GraphGradFunctions(InterpreterFunctions):
    @impl(grad.ConvWeightGradOp)
    def run_conv_weight_grad(
        self, interpreter: Interpreter, op: grad.ConvWeightGradOp, args: PythonValues
    ) -> PythonValues:
        x, dy = np.asarray(args[0], np.float64), np.asarray(args[1], np.float64)
        kernel, strides, dilations, pads = ints(op.kernel), ints(op.strides), ints(op.dilations), ints(op.pads)
        groups = op.groups.value.data
        out = dy.shape[2:]
        padded = _padded(x, pads, out, kernel, strides, dilations, 0.0)
        images, channels = x.shape[:2]
        per_in, per_out = channels // groups, dy.shape[1] // groups
        dw = np.zeros((dy.shape[1], per_in, *kernel))
        for offset in itertools.product(*(range(k) for k in kernel)):
            view = padded[_window(offset, out, strides, dilations)].reshape(images, groups, per_in, -1)
            gradient = dy.reshape(images, groups, per_out, -1)
            dw[(slice(None), slice(None), *offset)] = np.einsum("ngop,ngip->goi", gradient, view).reshape(-1, per_in)
        return (typed(op.result, dw),)

    @impl(grad.MaxPoolGradOp)
    def run_max_pool_grad(self, interpreter: Interpreter, op: grad.MaxPoolGradOp, args: PythonValues) -> PythonValues:
        dy, x = np.asarray(args[0]), np.asarray(args[1])
        kernel, strides, dilations, pads = ints(op.kernel), ints(op.strides), ints(op.dilations), ints(op.pads)
        out = dy.shape[2:]
        padded = _padded(x, pads, out, kernel, strides, dilations, -np.inf)
        offsets = list(itertools.product(*(range(k) for k in kernel)))
        views = np.stack([padded[_window(o, out, strides, dilations)] for o in offsets])
        winner = np.argmax(views, axis=0)  # the first max in window order, as torch's kernels keep it
        dx = np.zeros(padded.shape, dy.dtype)
        for index, offset in enumerate(offsets):
            dx[_window(offset, out, strides, dilations)] += np.where(winner == index, dy, 0)
        n = len(kernel)
        crop = (slice(None), slice(None), *(slice(pads[i], pads[i] + x.shape[2 + i]) for i in range(n)))
        return (typed(op.result, dx[crop]),)

    @impl(grad.EmbeddingBagGradOp)
    def run_embedding_bag_grad(
        self, interpreter: Interpreter, op: grad.EmbeddingBagGradOp, args: PythonValues
    ) -> PythonValues:
        dy, *rest = (np.asarray(x) for x in args)
        table = np.zeros((op.rows.value.data, dy.shape[1]), np.float64)
        return (typed(op.result, _add_bag_gradients(table, op.mode.data, 1.0, dy, *rest)),)

    @impl(grad.EmbeddingBagUpdateOp)
    def run_embedding_bag_update(
        self, interpreter: Interpreter, op: grad.EmbeddingBagUpdateOp, args: PythonValues
    ) -> PythonValues:
        table, dy, *rest = (np.asarray(x) for x in args)
        updated = _add_bag_gradients(table.astype(np.float64), op.mode.data, op.scale.value.data, dy, *rest)
        return (typed(op.result, updated),)

    @impl(grad.EmbeddingBagAdamUpdateOp)
    def run_embedding_bag_adam_update(
        self, interpreter: Interpreter, op: grad.EmbeddingBagAdamUpdateOp, args: PythonValues
    ) -> PythonValues:
        table, m, v = (np.array(x, np.float64) for x in args[:3])  # copies: the step updates them in place
        dy, indices, offsets, step_size, *weights = (np.asarray(x) for x in args[3:])
        beta1, beta2, eps = op.beta1.value.data, op.beta2.value.data, op.eps.value.data
        gradient = _add_bag_gradients(np.zeros(table.shape), op.mode.data, 1.0, dy, indices, offsets, *weights)
        # The rows some bag looks up, each once: torch coalesces the sparse gradient before the step, and a row
        # whose lookups' gradients cancel still has its moments decayed.
        positions = [p for bag in _bags(offsets, dy.shape[0], len(indices)) for p in bag]
        rows = np.unique(indices[positions].astype(np.int64))
        g, old_m, old_v = gradient[rows], m[rows], v[rows]
        m[rows] = old_m + (g - old_m) * (1 - beta1)
        v[rows] = old_v + (g * g - old_v) * (1 - beta2)
        table[rows] -= float(step_size) * m[rows] / (np.sqrt(v[rows]) + eps)
        return tuple(typed(r, x) for r, x in zip(op.results, (table, m, v), strict=True))

    @impl(grad.AvgPoolGradOp)
    def run_avg_pool_grad(self, interpreter: Interpreter, op: grad.AvgPoolGradOp, args: PythonValues) -> PythonValues:
        dy, x = np.asarray(args[0]), np.asarray(args[1])
        kernel, strides, pads = ints(op.kernel), ints(op.strides), ints(op.pads)
        n, out = len(kernel), dy.shape[2:]
        ones = [1] * n
        include = bool(op.count_include_pad.value.data)
        # Each window's divisor: its cells inside the input, or inside the input and its padding (torch clips a
        # ceil-mode window that runs past the padding, in either case).
        inside = _padded(np.ones((1, 1, *x.shape[2:])), pads, out, kernel, strides, ones, 0.0)
        padded_area = np.zeros_like(inside)
        padded_area[
            (slice(None), slice(None), *(slice(0, x.shape[2 + i] + pads[i] + pads[i + n]) for i in range(n)))
        ] = 1
        counted = padded_area if include else inside
        offsets = list(itertools.product(*(range(k) for k in kernel)))
        divisor = sum(counted[_window(o, out, strides, ones)] for o in offsets)
        dx = np.zeros(_padded(x, pads, out, kernel, strides, ones, 0.0).shape, np.float64)
        for offset in offsets:
            dx[_window(offset, out, strides, ones)] += dy / divisor
        crop = (slice(None), slice(None), *(slice(pads[i], pads[i] + x.shape[2 + i]) for i in range(n)))
        return (typed(op.result, dx[crop]),)


def _bags(offsets: np.ndarray, bags: int, count: int) -> list[range]:
    """Each bag's positions in the indices: bag b runs to the next bag's offset, the last to `offsets`' final entry
    where it has one more than there are bags (`include_last_offset`), else to the end of the `count` indices."""
    end = int(offsets[bags]) if len(offsets) > bags else count
    return [range(int(offsets[bag]), int(offsets[bag + 1]) if bag + 1 < bags else end) for bag in range(bags)]


def _add_bag_gradients(table: np.ndarray, mode: str, scale: float, dy: np.ndarray, indices: np.ndarray,
                       offsets: np.ndarray, *weights: np.ndarray) -> np.ndarray:  # fmt: skip
    """`table` plus `scale` times each bag's gradient on each of its rows (divided by the bag's size in mean mode,
    times its per-sample weight)."""
    for bag, members in enumerate(_bags(offsets, dy.shape[0], len(indices))):
        for position in members:
            row = dy[bag] / (len(members) if mode == "mean" else 1)
            table[int(indices[position])] += scale * row * (weights[0][position] if weights else 1)
    return table
