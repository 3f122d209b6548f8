"""Reference semantics of the graph dialect's reductions, in NumPy."""

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
