"""Reference semantics of the graph dialect's reductions and scans, in NumPy."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import reduce as red
from gnomon.dialects.graph.base import ints
from gnomon.reference.base import Array, typed


def _axes(op: red.ReduceOp) -> tuple[int, ...] | None:
    """The reduced axes; none listed means all of them."""
    return ints(op.axes) or None


def _keepdims(op: red.ReduceOp | red.ArgReduceOp) -> bool:
    return bool(op.keepdims.value.data)


def _scan(op: red.ScanOp, x: Array, running: np.ufunc) -> Array:
    """`running.accumulate` along the op's axis, flipped around it for `reverse`, shifted by one (the
    identity first) for `exclusive`."""
    axis = op.scan_axis()
    if op.reverse.value.data:
        x = np.flip(x, axis)
    y = running.accumulate(x, axis=axis, dtype=x.dtype)
    if op.exclusive.value.data:
        identity = np.full_like(np.take(y, [0], axis=axis), running.identity)
        y = np.concatenate([identity, np.take(y, range(y.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(y, axis) if op.reverse.value.data else y


@register_impls
class GraphReduceFunctions(InterpreterFunctions):
    @impl(red.ReduceSumOp)
    def run_reduce_sum(self, interpreter: Interpreter, op: red.ReduceOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.sum(args[0], axis=_axes(op), keepdims=_keepdims(op))),)

    @impl(red.ReduceMeanOp)
    def run_reduce_mean(self, interpreter: Interpreter, op: red.ReduceOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.mean(args[0], axis=_axes(op), keepdims=_keepdims(op))),)

    @impl(red.ReduceMaxOp)
    def run_reduce_max(self, interpreter: Interpreter, op: red.ReduceOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.max(args[0], axis=_axes(op), keepdims=_keepdims(op))),)

    @impl(red.ReduceMinOp)
    def run_reduce_min(self, interpreter: Interpreter, op: red.ReduceOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.min(args[0], axis=_axes(op), keepdims=_keepdims(op))),)

    @impl(red.ReduceProdOp)
    def run_reduce_prod(self, interpreter: Interpreter, op: red.ReduceOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.prod(args[0], axis=_axes(op), keepdims=_keepdims(op))),)

    @impl(red.ArgmaxOp)
    def run_argmax(self, interpreter: Interpreter, op: red.ArgmaxOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        return (typed(op.result, np.argmax(x, axis=op.axis.value.data, keepdims=_keepdims(op))),)

    @impl(red.ArgminOp)
    def run_argmin(self, interpreter: Interpreter, op: red.ArgminOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        return (typed(op.result, np.argmin(x, axis=op.axis.value.data, keepdims=_keepdims(op))),)

    @impl(red.TopKOp)
    def run_topk(self, interpreter: Interpreter, op: red.TopKOp, args: PythonValues) -> PythonValues:
        x, axis, k = np.asarray(args[0]), op.topk_axis(), op.k.value.data
        # A stable sort keeps equal values in index order; the largest first by sorting the reversed axis.
        if op.largest.value.data:
            order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
            order = x.shape[axis] - 1 - order
        else:
            order = np.argsort(x, axis=axis, kind="stable")
        indices = np.take(order, np.arange(k), axis=axis)
        return typed(op.values, np.take_along_axis(x, indices, axis)), typed(op.indices, indices)

    @impl(red.CumsumOp)
    def run_cumsum(self, interpreter: Interpreter, op: red.ScanOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, _scan(op, np.asarray(args[0]), np.add)),)

    @impl(red.CumprodOp)
    def run_cumprod(self, interpreter: Interpreter, op: red.ScanOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, _scan(op, np.asarray(args[0]), np.multiply)),)
