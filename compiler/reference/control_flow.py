"""Reference semantics of `graph.if` and `graph.while`: the regions run by the interpreter, as Python's if and while."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)

from gnomon.dialects.graph import control_flow as cf
from gnomon.reference.base import typed


def truth(predicate: object) -> bool:
    """A one-element i1 tensor as a Python bool."""
    return bool(np.asarray(predicate).reshape(-1)[0])


@register_impls
class GraphControlFlowFunctions(InterpreterFunctions):
    @impl(cf.IfOp)
    def run_if(self, interpreter: Interpreter, op: cf.IfOp, args: PythonValues) -> PythonValues:
        region = op.then_region if truth(args[0]) else op.else_region
        values = interpreter.run_ssacfg_region(region, (), "graph.if")
        return tuple(typed(r, v) for r, v in zip(op.outputs, values, strict=True))

    @impl(cf.WhileOp)
    def run_while(self, interpreter: Interpreter, op: cf.WhileOp, args: PythonValues) -> PythonValues:
        carried = tuple(args)
        while truth(interpreter.run_ssacfg_region(op.cond_region, carried, "graph.while cond")[0]):
            carried = tuple(interpreter.run_ssacfg_region(op.body_region, carried, "graph.while do"))
        return tuple(typed(r, v) for r, v in zip(op.outputs, carried, strict=True))

    @impl_terminator(cf.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: cf.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()
