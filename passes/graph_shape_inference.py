"""`graph-shape-inference`: refine `?` dims of op results from each op's shape rule, sizes and names.

The rules are the ops' own (`infer_result_types`, which the verifier also checks), so there is
one source of truth per op. Results are refined in program order (a `graph.if` or `graph.while` after its
regions), and the function signature
follows the refined return values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from gnomon.dialects.graph.base import GraphOperation, SymbolicDim, dim_names, tensor_of
from gnomon.dialects.graph.control_flow import IfOp, WhileOp


def _refined(current: Attribute, inferred: Attribute) -> TensorType | None:
    """`current` with each `?` that `inferred` knows filled in (a size, or a name), or None if nothing changes."""
    if not isinstance(current, TensorType) or not isinstance(inferred, TensorType):
        return None
    a, b = current.get_shape(), inferred.get_shape()
    if len(a) != len(b) or current.get_element_type() != inferred.get_element_type():
        return None
    merged: list[int] = []
    for x, y, name, inferred_name in zip(a, b, dim_names(current), dim_names(inferred), strict=True):
        if x != DYNAMIC_INDEX:
            merged.append(x)
        elif y != DYNAMIC_INDEX:
            merged.append(y)  # a size beats a name
        else:
            merged.append(SymbolicDim(name or inferred_name) if name or inferred_name else x)
    refined = tensor_of(current.get_element_type(), merged)
    return None if refined == current else refined


def _post_order(root: Operation) -> list[GraphOperation | IfOp | WhileOp]:
    """The ops with shape rules in program order, a control-flow op after the ops of its regions (its results
    follow from what they yield)."""
    return [op for op in root.walk(region_first=True) if isinstance(op, GraphOperation | IfOp | WhileOp)]


@dataclass(frozen=True)
class GraphShapeInferencePass(ModulePass):
    """Refine dynamic result dims wherever the operands determine them."""

    name = "graph-shape-inference"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph_op in _post_order(op):
            for index, (result, inferred) in enumerate(zip(list(graph_op.results), graph_op.infer_result_types())):
                if (refined := _refined(result.type, inferred)) is None:
                    continue
                Rewriter.replace_value_with_new_type(result, refined)
                if isinstance(graph_op, WhileOp):  # the regions see the carried values as the results do
                    for region in graph_op.regions:
                        Rewriter.replace_value_with_new_type(region.block.args[index], refined)
        for function in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            returns = [o for o in function.walk() if isinstance(o, func.ReturnOp)]
            if returns:
                inputs = function.function_type.inputs.data
                function.function_type = FunctionType.from_lists(list(inputs), [v.type for v in returns[0].operands])
