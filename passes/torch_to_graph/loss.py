"""Converters for classification losses: negative log likelihood and cross entropy over class indices (ONNX's
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss lower to them), composed from gathers, masks and sums.

For input x of shape [N, C, d...] (or [C]) and targets t of shape [N, d...] (or []), the class axis is 1 (0):
    w = weight[t] where t != ignore_index, else 0     (weight defaults to ones)
    loss = -x[t] * w        reduced: none -> loss, sum -> sum(loss), mean -> sum(loss) / sum(w)
and total_weight is sum(w). An ignored target may be out of range, so it is gathered as class 0 and masked.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerType, TensorType, i1, i64
from xdsl.ir import SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import bool_attr, i64_array, i64_attr
from gnomon.dialects.graph.nn import LogSoftmaxOp
from gnomon.dialects.graph.reduce import ReduceSumOp
from gnomon.dialects.graph.tensor import GatherElementsOp, GatherOp, ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _sum_all(a: AtenArgs, x: SSAValue) -> SSAValue:
    x_type = tensor_type(x)
    props = {"axes": i64_array(list(range(len(x_type.get_shape())))), "keepdims": bool_attr(False)}
    return a.value(
        ReduceSumOp.build(operands=[x], properties=props, result_types=[TensorType(x_type.element_type, [])])
    )


def _nll(a: AtenArgs, log_probs: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(loss, total weight) of the log probabilities `log_probs` at the targets (see the module's doc)."""
    x_type = tensor_type(log_probs)
    element, shape = x_type.get_element_type(), list(x_type.get_shape())
    axis = 1 if len(shape) >= 2 else 0
    target = a.tensor_as("target", i64)
    target_shape = list(tensor_type(target).get_shape())
    if target_shape != shape[:axis] + shape[axis + 1 :]:
        raise NotConvertible(f"class-index targets of shape {target_shape} for scores of shape {shape}")
    reduction = _REDUCTIONS.get(a.int("reduction"))
    if reduction is None:
        raise NotConvertible(f"reduction {a.int('reduction')}")
    per_target = TensorType(element, target_shape)
    ignore_index = a.scalar_tensor(a.int("ignore_index"), i64)
    ignored = a.value(ew.EqOp.build(operands=[target, ignore_index], result_types=[TensorType(i1, target_shape)]))
    safe = a.value(ew.WhereOp.build(operands=[ignored, a.scalar_tensor(0, i64), target], result_types=[target.type]))
    picked_shape = [*target_shape[:axis], 1, *target_shape[axis:]]
    index = a.value(ReshapeOp.build(operands=[safe], result_types=[TensorType(i64, picked_shape)]))
    picked = a.value(
        GatherElementsOp.build(
            operands=[log_probs, index],
            properties={"axis": i64_attr(axis)},
            result_types=[TensorType(element, picked_shape)],
        )
    )
    picked = a.value(ReshapeOp.build(operands=[picked], result_types=[per_target]))
    weight = a.optional_tensor("weight")
    if weight is None:
        class_weight = a.splat_tensor(1.0, element, target_shape)
    else:
        weight = a.cast(weight, element)
        class_weight = a.value(
            GatherOp.build(
                operands=[weight, safe],
                properties={"axis": i64_attr(0)},
                result_types=[per_target],
            )
        )
    zero = a.splat_tensor(0.0, element, [])
    weights = a.value(ew.WhereOp.build(operands=[ignored, zero, class_weight], result_types=[per_target]))
    weighted = a.value(ew.MulOp.build(operands=[picked, weights], result_types=[per_target]))
    losses = a.value(ew.NegOp.build(operands=[weighted], result_types=[per_target]))
    total_weight = _sum_all(a, weights)
    if reduction == "none":
        return losses, total_weight
    total = _sum_all(a, losses)
    if reduction == "sum":
        return total, total_weight
    mean = a.value(ew.DivOp.build(operands=[total, total_weight], result_types=[TensorType(element, [])]))
    return mean, total_weight


@converts(
    "torch.aten.nll_loss_forward", "torch.aten.nll_loss2d_forward", args="self target weight reduction ignore_index"
)
def nll_loss_forward(a: AtenArgs) -> list[SSAValue]:
    """The loss and the total weight."""
    return list(_nll(a, a.tensor_as("self", a.result_dtype())))


@converts("torch.aten.nll_loss", "torch.aten.nll_loss_nd", args="self target weight reduction ignore_index")
def nll_loss(a: AtenArgs) -> SSAValue:
    return _nll(a, a.tensor_as("self", a.result_dtype()))[0]


@converts("torch.aten.cross_entropy_loss", args="self target weight reduction ignore_index label_smoothing")
def cross_entropy_loss(a: AtenArgs) -> SSAValue:
    """nll_loss(log_softmax(x) over the class axis), for class-index targets without label smoothing."""
    if a.float("label_smoothing") != 0.0:
        raise NotConvertible("cross entropy with label smoothing")
    if not isinstance(tensor_type(a.tensor("target")).get_element_type(), IntegerType):
        raise NotConvertible("cross entropy with class probabilities as targets")
    x = a.tensor_as("self", a.result_dtype())
    x_type = tensor_type(x)
    axis = 1 if len(x_type.get_shape()) >= 2 else 0
    log_probs = a.value(LogSoftmaxOp.build(operands=[x], properties={"axis": i64_attr(axis)}, result_types=[x_type]))
    return _nll(a, log_probs)[0]
