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


def _refined(current: Attribute, inferred: Attribute) -> TensorType | None:
    """`current` with each `?` that `inferred` knows filled in, or None when nothing changes."""
    if not isinstance(current, TensorType) or not isinstance(inferred, TensorType):
        return None
    a, b = current.get_shape(), inferred.get_shape()
    if len(a) != len(b) or current.get_element_type() != inferred.get_element_type():
        return None
    merged = [y if x == DYNAMIC_INDEX else x for x, y in zip(a, b, strict=True)]
    if tuple(merged) == a:
        return None
    return TensorType(current.get_element_type(), merged)


@dataclass(frozen=True)
class GraphShapeInferencePass(ModulePass):
    """Refine dynamic result dims wherever the operands determine them."""

    name = "graph-shape-inference"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph_op in [o for o in op.walk() if isinstance(o, GraphOperation)]:
            for result, inferred in zip(list(graph_op.results), graph_op.infer_result_types(), strict=True):
                if (refined := _refined(result.type, inferred)) is not None:
                    Rewriter.replace_value_with_new_type(result, refined)
        for function in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            returns = [o for o in function.walk() if isinstance(o, func.ReturnOp)]
            if returns:
                inputs = function.function_type.inputs.data
                function.function_type = FunctionType.from_lists(list(inputs), [v.type for v in returns[0].operands])
