"""`graph-shape-inference`: refine `?` dims of op results from each op's shape rule.

The rules are the ops' own (`infer_result_types`, which the verifier also checks), so there is
one source of truth per op. Results are refined in program order, and the function signature
follows the refined return values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from gnomon.dialects.graph.base import GraphOperation


def _more_precise(current: Attribute, inferred: Attribute) -> bool:
    """Whether `inferred` fills a `?` of `current` (same rank and element type)."""
    if not isinstance(current, TensorType) or not isinstance(inferred, TensorType):
        return False
    a, b = current.get_shape(), inferred.get_shape()
    if len(a) != len(b) or current.get_element_type() != inferred.get_element_type():
        return False
    return any(x == DYNAMIC_INDEX and y != DYNAMIC_INDEX for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class GraphShapeInferencePass(ModulePass):
    """Refine dynamic result dims wherever the operands determine them."""

    name = "graph-shape-inference"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph_op in [o for o in op.walk() if isinstance(o, GraphOperation)]:
            for result, inferred in zip(list(graph_op.results), graph_op.infer_result_types(), strict=True):
                if _more_precise(result.type, inferred):
                    Rewriter.replace_value_with_new_type(result, inferred)
        for function in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            returns = [o for o in function.walk() if isinstance(o, func.ReturnOp)]
            if returns:
                inputs = function.function_type.inputs.data
                function.function_type = FunctionType.from_lists(list(inputs), [v.type for v in returns[0].operands])
