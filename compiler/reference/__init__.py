"""Reference semantics of the graph dialect: an xDSL `Interpreter` over NumPy arrays.

One `@register_impls` class per op family (attention training, control flow, elementwise, embedding, grad, linalg,
nn, recurrent, reduce, tensor), one `@impl` per op; `run_reference` runs a module's `func.func` on NumPy inputs.
The oracle favours obviousness over speed: it is what gnomon's compiled code is checked against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.interpreters.func import FuncFunctions

from gnomon.errors import GnomonError
from gnomon.reference.attention_train import GraphAttentionTrainFunctions
from gnomon.reference.base import Array
from gnomon.reference.control_flow import GraphControlFlowFunctions
from gnomon.reference.elementwise import GraphElementwiseFunctions
from gnomon.reference.embedding import GraphEmbeddingFunctions
from gnomon.reference.grad import GraphGradFunctions
from gnomon.reference.linalg import GraphLinalgFunctions
from gnomon.reference.nn import GraphNNFunctions
from gnomon.reference.recurrent import GraphRecurrentFunctions
from gnomon.reference.recurrent_train import GraphRecurrentTrainFunctions
from gnomon.reference.reduce import GraphReduceFunctions
from gnomon.reference.tensor import GraphTensorFunctions

__all__ = ["ReferenceRunError", "reference_interpreter", "run_reference"]


class ReferenceRunError(GnomonError):
    """The reference interpreter cannot run a module (an op without semantics, a wrong input count)."""


_FUNCTIONS = (
    FuncFunctions,
    GraphAttentionTrainFunctions,
    GraphControlFlowFunctions,
    GraphElementwiseFunctions,
    GraphEmbeddingFunctions,
    GraphGradFunctions,
    GraphLinalgFunctions,
    GraphNNFunctions,
    GraphRecurrentFunctions,
    GraphRecurrentTrainFunctions,
    GraphReduceFunctions,
    GraphTensorFunctions,
)


def reference_interpreter(module: ModuleOp) -> Interpreter:
    """An interpreter over `module` with the func dialect's and every graph family's impls."""
    interpreter = Interpreter(module)
    for functions in _FUNCTIONS:
        interpreter.register_implementations(functions())
    return interpreter


def unsupported_ops(function: func.FuncOp) -> list[str]:
    """The names of the ops in `function` that have no reference semantics, sorted."""
    # xDSL exposes the ops a functions class implements only through `_impls`.
    known = {op_type for functions in _FUNCTIONS for op_type, _ in functions._impls()}  # pyright: ignore[reportPrivateUsage]
    return sorted({op.name for op in function.body.walk() if type(op) not in known})


def run_reference(module: ModuleOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run `module`'s (single) `func.func` on `inputs`; the results in the order it returns them."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise ReferenceRunError(f"run_reference: expected one func.func in the module, found {len(functions)}")
    function = functions[0]
    if missing := unsupported_ops(function):
        raise ReferenceRunError(f"run_reference: no reference semantics for {', '.join(missing)}")
    arity = len(function.function_type.inputs)
    if arity != len(inputs):
        raise ReferenceRunError(f"run_reference: @{function.sym_name.data} takes {arity} inputs, got {len(inputs)}")
    # NaN and inf are IEEE results here, as in the frameworks compared against, not errors to warn about.
    with np.errstate(all="ignore"):
        results: tuple[Array, ...] = reference_interpreter(module).call_op(
            function, tuple(np.asarray(x) for x in inputs)
        )
    return [np.asarray(r) for r in results]
