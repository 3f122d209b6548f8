"""Reference semantics of the graph dialect's matrix products, in NumPy."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import linalg
from gnomon.reference.base import typed


@register_impls
class GraphLinalgFunctions(InterpreterFunctions):
    @impl(linalg.MatmulOp)
    def run_matmul(self, interpreter: Interpreter, op: linalg.MatmulOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.matmul(args[0], args[1])),)

    @impl(linalg.LinearOp)
    def run_linear(self, interpreter: Interpreter, op: linalg.LinearOp, args: PythonValues) -> PythonValues:
        x, weight, *bias = args
        y = x @ np.swapaxes(weight, -1, -2)
        return (typed(op.result, y + bias[0] if bias else y),)
