"""Reference semantics of the graph dialect's matrix products and determinants, in NumPy."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import linalg
from gnomon.reference.base import Array, typed


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

    @impl(linalg.DetOp)
    def run_det(self, interpreter: Interpreter, op: linalg.DetOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        # NumPy's LAPACK routines take f32 and f64 only: half precision computes in f32 and rounds once.
        return (typed(op.result, np.linalg.det(x.astype(np.promote_types(x.dtype, np.float32)))),)
