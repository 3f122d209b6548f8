"""Converters for elementwise torch ops: unary maps, arithmetic with scalars and alpha, comparisons."""

from __future__ import annotations

import math

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import f64_attr, str_attr
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.dialects.torch import ValueTensorType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts
from xdsl.dialects.builtin import IntegerType, TensorType, i1
from xdsl.ir import Attribute, SSAValue

_UNARY: dict[str, type[ew.UnaryOp]] = {
    "abs": ew.AbsOp, "ceil": ew.CeilOp, "cos": ew.CosOp, "erf": ew.ErfOp, "exp": ew.ExpOp, "floor": ew.FloorOp,
    "hardswish": ew.HardSwishOp, "log": ew.LogOp, "neg": ew.NegOp, "reciprocal": ew.ReciprocalOp, "relu": ew.ReluOp,
    "round": ew.RoundOp, "rsqrt": ew.RsqrtOp, "selu": ew.SeluOp, "sigmoid": ew.SigmoidOp, "sign": ew.SignOp,
    "silu": ew.SiluOp, "sin": ew.SinOp, "sqrt": ew.SqrtOp, "tanh": ew.TanhOp,
}  # fmt: skip


def _unary_converter(op_class: type[ew.UnaryOp]):
    def convert(a: AtenArgs) -> SSAValue:
        x = a.tensor_as("self", a.result_dtype())
        return a.value(op_class.build(operands=[x], result_types=[a.result_type()]))

    return convert


for _name, _op in _UNARY.items():
    converts(f"torch.aten.{_name}", args="self")(_unary_converter(_op))


@converts("torch.aten.bitwise_not", "torch.aten.logical_not", args="self")
def logical_not(a: AtenArgs) -> SSAValue:
    if a.result_dtype() != i1:
        raise NotConvertible("bitwise not of integers")
    return a.value(ew.NotOp.build(operands=[a.tensor_as("self", i1)], result_types=[a.result_type()]))


@converts("torch.aten.gelu", args="self approximate")
def gelu(a: AtenArgs) -> SSAValue:
    return a.value(
        ew.GeluOp.build(
            operands=[a.tensor("self")],
            properties={"approximate": str_attr(a.str("approximate"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.leaky_relu", args="self negative_slope")
def leaky_relu(a: AtenArgs) -> SSAValue:
    return a.value(
        ew.LeakyReluOp.build(
            operands=[a.tensor("self")],
            properties={"alpha": f64_attr(a.float("negative_slope"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.elu", args="self alpha scale input_scale")
def elu(a: AtenArgs) -> SSAValue:
    if a.float("scale") != 1.0 or a.float("input_scale") != 1.0:
        raise NotConvertible("elu with scale or input_scale other than 1")
    return a.value(
        ew.EluOp.build(
            operands=[a.tensor("self")], properties={"alpha": f64_attr(a.float("alpha"))}, result_types=[a.result_type()]
        )
    )


@converts("torch.aten.softplus", args="self beta threshold")
def softplus(a: AtenArgs) -> SSAValue:
    return a.value(
        ew.SoftplusOp.build(
            operands=[a.tensor("self")],
            properties={"beta": f64_attr(a.float("beta")), "threshold": f64_attr(a.float("threshold"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.hardsigmoid", args="self")
def hardsigmoid(a: AtenArgs) -> SSAValue:
    props = {"alpha": f64_attr(1.0 / 6.0), "beta": f64_attr(0.5)}
    return a.value(ew.HardSigmoidOp.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type()]))


def _clip(a: AtenArgs, low: float | None, high: float | None) -> SSAValue:
    props = {"min": f64_attr(-math.inf if low is None else low), "max": f64_attr(math.inf if high is None else high)}
    return a.value(ew.ClipOp.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type()]))


@converts("torch.aten.clamp", args="self min max")
def clamp(a: AtenArgs) -> SSAValue:
    return _clip(a, a.optional_float("min"), a.optional_float("max"))


@converts("torch.aten.hardtanh", args="self min_val max_val")
def hardtanh(a: AtenArgs) -> SSAValue:
    return _clip(a, a.float("min_val"), a.float("max_val"))


@converts("torch.aten.relu6", args="self")
def relu6(a: AtenArgs) -> SSAValue:
    return _clip(a, 0.0, 6.0)


@converts("torch.aten.dropout", "torch.aten.feature_dropout", args="input p train")
def dropout(a: AtenArgs) -> SSAValue:
    if a.bool("train"):
        raise NotConvertible("dropout in training mode")
    return a.tensor("input")


@converts("torch.aten.native_dropout", args="input p train")
def native_dropout(a: AtenArgs) -> list[SSAValue]:
    if a.bool("train") or a.op.results[1].uses:
        raise NotConvertible("dropout in training mode")
    x = a.tensor("input")
    return [x, x]


# ---- binary ops ----


def _operand(a: AtenArgs, name: str, element_type: Attribute) -> SSAValue:
    """A tensor operand, or a scalar argument as a 0-d constant, in the result's element type."""
    value = a.values[name]
    if isinstance(value.type, TensorType | ValueTensorType):
        return a.tensor_as(name, element_type)
    return a.scalar_tensor(a.float(name), element_type)


def _binary(a: AtenArgs, op_class: type[ew.BinaryOp], lhs: str = "self", rhs: str = "other") -> SSAValue:
    result = a.result_type()
    element = result.get_element_type()
    if issubclass(op_class, ew.CompareOp):
        element = _common_type(a, lhs, rhs)
    x, y = _operand(a, lhs, element), _operand(a, rhs, element)
    return a.value(op_class.build(operands=[x, y], result_types=[result]))


def _common_type(a: AtenArgs, lhs: str, rhs: str) -> Attribute:
    """Comparisons return i1; compare in the wider of the operands' element types."""
    types = [
        tensor_type(a.tensor(name)).get_element_type()
        for name in (lhs, rhs)
        if isinstance(a.values[name].type, TensorType | ValueTensorType)
    ]
    floats = [t for t in types if not isinstance(t, IntegerType)]
    return floats[0] if floats else types[0]


def _scaled(a: AtenArgs, name: str, element_type: Attribute) -> SSAValue:
    """`other * alpha`, as add and sub take it."""
    y = _operand(a, name, element_type)
    alpha = a.float("alpha")
    if alpha == 1.0:
        return y
    scale = a.scalar_tensor(alpha, element_type)
    return a.value(ew.MulOp.build(operands=[y, scale], result_types=[tensor_type(y)]))


def _add_sub(a: AtenArgs, op_class: type[ew.BinaryOp]) -> SSAValue:
    element = a.result_dtype()
    x = _operand(a, "self", element)
    return a.value(op_class.build(operands=[x, _scaled(a, "other", element)], result_types=[a.result_type()]))


@converts("torch.aten.add.Tensor", "torch.aten.add.Scalar", args="self other alpha")
def add(a: AtenArgs) -> SSAValue:
    return _add_sub(a, ew.AddOp)


@converts("torch.aten.sub.Tensor", "torch.aten.sub.Scalar", args="self other alpha")
def sub(a: AtenArgs) -> SSAValue:
    return _add_sub(a, ew.SubOp)


@converts("torch.aten.rsub.Scalar", "torch.aten.rsub.Tensor", args="self other alpha")
def rsub(a: AtenArgs) -> SSAValue:
    """other - self * alpha."""
    element = a.result_dtype()
    scaled_self = _scaled(a, "self", element)
    other = _operand(a, "other", element)
    return a.value(ew.SubOp.build(operands=[other, scaled_self], result_types=[a.result_type()]))


_BINARY: dict[str, type[ew.BinaryOp]] = {
    "mul.Tensor": ew.MulOp, "mul.Scalar": ew.MulOp, "div.Tensor": ew.DivOp, "div.Scalar": ew.DivOp,
    "pow.Tensor_Tensor": ew.PowOp, "pow.Tensor_Scalar": ew.PowOp, "maximum": ew.MaxOp, "minimum": ew.MinOp,
    "remainder.Tensor": ew.RemOp, "remainder.Scalar": ew.RemOp, "logical_and": ew.AndOp, "logical_or": ew.OrOp,
    "eq.Tensor": ew.EqOp, "eq.Scalar": ew.EqOp, "ne.Tensor": ew.NeOp, "ne.Scalar": ew.NeOp,
    "lt.Tensor": ew.LtOp, "lt.Scalar": ew.LtOp, "le.Tensor": ew.LeOp, "le.Scalar": ew.LeOp,
    "gt.Tensor": ew.GtOp, "gt.Scalar": ew.GtOp, "ge.Tensor": ew.GeOp, "ge.Scalar": ew.GeOp,
}  # fmt: skip


def _binary_converter(op_class: type[ew.BinaryOp]):
    def convert(a: AtenArgs) -> SSAValue:
        return _binary(a, op_class)

    return convert


for _name, _op in _BINARY.items():
    converts(f"torch.aten.{_name}", args="self other")(_binary_converter(_op))


@converts("torch.aten.pow.Scalar", args="self exponent")
def pow_scalar_base(a: AtenArgs) -> SSAValue:
    return _binary(a, ew.PowOp, "self", "exponent")


@converts("torch.aten.prelu", args="self weight")
def prelu(a: AtenArgs) -> SSAValue:
    """torch's slope vector runs along the channel dim (1), not the last dim as NumPy broadcasting would."""
    x, slope = a.tensor("self"), a.tensor("weight")
    rank = len(a.result_type().get_shape())
    slope_shape = tensor_type(slope).get_shape()
    if len(slope_shape) == 1 and rank >= 2:
        shaped = TensorType(tensor_type(slope).get_element_type(), [slope_shape[0], *([1] * (rank - 2))])
        slope = a.value(ReshapeOp.build(operands=[slope], result_types=[shaped]))
    return a.value(ew.PreluOp.build(operands=[x, slope], result_types=[a.result_type()]))


@converts("torch.aten.where.self", "torch.aten.where.ScalarOther", "torch.aten.where.ScalarSelf",
          "torch.aten.where.Scalar", args="condition self other")  # fmt: skip
def where(a: AtenArgs) -> SSAValue:
    element = a.result_dtype()
    condition = a.tensor_as("condition", i1)
    return a.value(
        ew.WhereOp.build(
            operands=[condition, _operand(a, "self", element), _operand(a, "other", element)],
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.masked_fill.Scalar", "torch.aten.masked_fill.Tensor", args="self mask value")
def masked_fill(a: AtenArgs) -> SSAValue:
    element = a.result_dtype()
    fill = _operand(a, "value", element)
    return a.value(
        ew.WhereOp.build(
            operands=[a.tensor_as("mask", i1), fill, a.tensor_as("self", element)], result_types=[a.result_type()]
        )
    )


def _cast(a: AtenArgs) -> SSAValue:
    return a.cast(a.tensor("self"), a.result_dtype())


@converts("torch.aten.to.dtype", args="self dtype non_blocking copy memory_format")
def to_dtype(a: AtenArgs) -> SSAValue:
    return _cast(a)


@converts("torch.aten._to_copy", args="self dtype layout device pin_memory non_blocking memory_format")
def to_copy(a: AtenArgs) -> SSAValue:
    return _cast(a)


@converts("torch.aten.type_as", args="self other")
def type_as(a: AtenArgs) -> SSAValue:
    return _cast(a)
