"""Converters for elementwise torch ops: unary maps, arithmetic with scalars and alpha, comparisons."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import IntegerType, TensorType, f64, i1
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, GraphOperation, broadcast_shapes, f64_attr, str_attr
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.dialects.torch import FloatType, ValueTensorType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.indexing import slice_along
from gnomon.passes.torch_to_graph.registry import converts

_UNARY: dict[str, type[ew.UnaryOp]] = {
    "abs": ew.AbsOp, "acos": ew.AcosOp, "acosh": ew.AcoshOp, "asin": ew.AsinOp, "asinh": ew.AsinhOp,
    "atan": ew.AtanOp, "atanh": ew.AtanhOp, "ceil": ew.CeilOp, "cos": ew.CosOp, "erf": ew.ErfOp, "exp": ew.ExpOp,
    "floor": ew.FloorOp, "hardswish": ew.HardSwishOp, "log": ew.LogOp, "neg": ew.NegOp, "reciprocal": ew.ReciprocalOp,
    "relu": ew.ReluOp, "round": ew.RoundOp, "rsqrt": ew.RsqrtOp, "selu": ew.SeluOp, "sigmoid": ew.SigmoidOp,
    "sign": ew.SignOp, "sgn": ew.SignOp, "silu": ew.SiluOp, "sin": ew.SinOp, "sinh": ew.SinhOp, "sqrt": ew.SqrtOp,
    "tanh": ew.TanhOp,
    # NumPy's names, which torch keeps as aliases
    "arccos": ew.AcosOp, "arccosh": ew.AcoshOp, "arcsin": ew.AsinOp, "arcsinh": ew.AsinhOp, "arctan": ew.AtanOp,
    "arctanh": ew.AtanhOp,
}  # fmt: skip


def _unary_converter(op_class: type[ew.UnaryOp]):
    def convert(a: AtenArgs) -> SSAValue:
        x = a.tensor_as("self", a.result_dtype())
        return a.value(op_class.build(operands=[x], result_types=[a.result_type()]))

    return convert


for _name, _op in _UNARY.items():
    converts(f"torch.aten.{_name}", args="self")(_unary_converter(_op))


@converts("torch.aten.log1p", args="self")
def log1p(a: AtenArgs) -> SSAValue:
    """log(1 + x) without losing small x: log(u) x / (u - 1) for u = 1 + x rounded, which cancels the rounding of u
    (Goldberg's formula; x itself where u rounds to 1). BCE-with-logits' gradient runs through it."""
    t = a.result_type()
    x = a.tensor_as("self", t.get_element_type())
    one = a.scalar_tensor(1.0, t.get_element_type())
    u = a.value(ew.AddOp.build(operands=[x, one], result_types=[t]))
    rounded = a.value(ew.SubOp.build(operands=[u, one], result_types=[t]))
    log = a.value(ew.LogOp.build(operands=[u], result_types=[t]))
    ratio = a.value(ew.DivOp.build(operands=[x, rounded], result_types=[t]))
    corrected = a.value(ew.MulOp.build(operands=[log, ratio], result_types=[t]))
    exact = a.value(ew.EqOp.build(operands=[u, one], result_types=[TensorType(i1, t.get_shape())]))
    return a.value(ew.WhereOp.build(operands=[exact, x, corrected], result_types=[t]))


@converts("torch.aten.bitwise_not", "torch.aten.logical_not", args="self")
def logical_not(a: AtenArgs) -> SSAValue:
    if a.result_dtype() != i1:
        return a.value(ew.BitwiseNotOp.build(operands=[a.tensor("self")], result_types=[a.result_type()]))
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


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


@converts("torch.aten.elu", args="self alpha scale input_scale")
def elu(a: AtenArgs) -> SSAValue:
    """scale * elu(x, alpha); ONNX Selu arrives as elu with SELU's constants, rounded as exporters write them."""
    alpha, scale = a.float("alpha"), a.float("scale")
    if a.float("input_scale") != 1.0:
        raise NotConvertible("elu with an input_scale other than 1")
    x = a.tensor("self")
    if math.isclose(alpha, _SELU_ALPHA, rel_tol=1e-5) and math.isclose(scale, _SELU_SCALE, rel_tol=1e-5):
        return a.value(ew.SeluOp.build(operands=[x], result_types=[a.result_type()]))
    y = a.value(ew.EluOp.build(operands=[x], properties={"alpha": f64_attr(alpha)}, result_types=[a.result_type()]))
    if scale == 1.0:
        return y
    factor = a.scalar_tensor(scale, a.result_dtype())
    return a.value(ew.MulOp.build(operands=[y, factor], result_types=[a.result_type()]))


@converts("torch.aten.celu", args="self alpha")
def celu(a: AtenArgs) -> SSAValue:
    """celu(x, alpha) = elu(x / alpha, 1) * alpha, which for alpha = 1 is elu."""
    if a.float("alpha") != 1.0:
        raise NotConvertible("celu with alpha other than 1")
    props = {"alpha": f64_attr(1.0)}
    return a.value(ew.EluOp.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type()]))


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
    return a.value(
        ew.HardSigmoidOp.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type()])
    )


def _clip(a: AtenArgs, low: float | None, high: float | None) -> SSAValue:
    props = {"min": f64_attr(-math.inf if low is None else low), "max": f64_attr(math.inf if high is None else high)}
    return a.value(ew.ClipOp.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type()]))


@converts("torch.aten.clamp", args="self min max")
def clamp(a: AtenArgs) -> SSAValue:
    return _clip(a, a.optional_float("min"), a.optional_float("max"))


@converts("torch.aten.clamp_min", args="self min")
def clamp_min(a: AtenArgs) -> SSAValue:
    return _clip(a, a.float("min"), None)


@converts("torch.aten.clamp_max", args="self max")
def clamp_max(a: AtenArgs) -> SSAValue:
    return _clip(a, None, a.float("max"))


@converts("torch.aten.clamp.Tensor", args="self min max")
def clamp_tensor(a: AtenArgs) -> SSAValue:
    """Constant scalar bounds (ONNX Clip's inputs) make a clip; tensor bounds a max and a min."""
    bounds = {name: None if a.is_none(name) else a.constant_scalar(name) for name in ("min", "max")}
    if all(a.is_none(name) or bounds[name] is not None for name in bounds):
        return _clip(a, bounds["min"], bounds["max"])
    y = a.tensor_as("self", a.result_dtype())
    for name, op_class in (("min", ew.MaxOp), ("max", ew.MinOp)):
        if not a.is_none(name):
            y = a.value(
                op_class.build(operands=[y, a.tensor_as(name, a.result_dtype())], result_types=[a.result_type()])
            )
    return y


@converts("torch.aten.clamp_min.Tensor", args="self min")
def clamp_min_tensor(a: AtenArgs) -> SSAValue:
    return _binary(a, ew.MaxOp, "self", "min")


@converts("torch.aten.clamp_max.Tensor", args="self max")
def clamp_max_tensor(a: AtenArgs) -> SSAValue:
    return _binary(a, ew.MinOp, "self", "max")


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
    """(output, keep mask): a training step's dropout (`graph.dropout_train`), the identity outside training."""
    x = a.tensor("input")
    if a.bool("train"):
        dropout = ew.DropoutTrainOp.build(
            operands=[x],
            properties={"ratio": f64_attr(a.float("p"))},
            result_types=[a.result_type(0), a.result_type(1)],
        )
        dropout.verify_()
        return list(a.emit(dropout).results)
    if a.op.results[1].uses:
        raise NotConvertible("the keep mask of dropout outside training")
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
    """Comparisons return i1; compare in the operands' float type if either has one (a float
    scalar against an integer tensor compares as f64), else in the tensor's integer type."""
    types = [
        tensor_type(a.tensor(name)).get_element_type()
        for name in (lhs, rhs)
        if isinstance(a.values[name].type, TensorType | ValueTensorType)
    ]
    floats = [t for t in types if not isinstance(t, IntegerType)]
    if floats:
        return floats[0]
    if any(isinstance(a.values[name].type, FloatType) for name in (lhs, rhs)):
        return f64
    widths = [t.width.data if isinstance(t, IntegerType) else 0 for t in types]
    return types[widths.index(max(widths))]


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
    "maximum": ew.MaxOp, "minimum": ew.MinOp,
    "remainder.Tensor": ew.RemOp, "remainder.Scalar": ew.RemOp, "fmod.Tensor": ew.FmodOp, "fmod.Scalar": ew.FmodOp,
    "logical_and": ew.AndOp, "logical_or": ew.OrOp,
    "max.other": ew.MaxOp, "min.other": ew.MinOp,
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


def _emit(a: AtenArgs, op_class: type[GraphOperation], *operands: SSAValue) -> SSAValue:
    """An elementwise op over `operands`, typed by broadcasting them (comparisons give i1)."""
    shapes = [tensor_type(v).get_shape() for v in operands]
    element = tensor_type(operands[-1]).get_element_type()  # where's condition comes first
    if issubclass(op_class, ew.CompareOp):
        element = i1
    shape = broadcast_shapes(shapes, op_class.name)
    return a.value(op_class.build(operands=list(operands), result_types=[TensorType(element, shape)]))


_LOGICAL: dict[str, tuple[type[ew.BinaryOp], type[ew.BinaryOp] | None]] = {
    "logical_xor": (ew.NeOp, None), "bitwise_and.Tensor": (ew.AndOp, ew.BitwiseAndOp),
    "bitwise_or.Tensor": (ew.OrOp, ew.BitwiseOrOp), "bitwise_xor.Tensor": (ew.NeOp, ew.BitwiseXorOp),
    "__and__.Tensor": (ew.AndOp, ew.BitwiseAndOp), "__or__.Tensor": (ew.OrOp, ew.BitwiseOrOp),
}  # fmt: skip
"""Each op's graph op on truth values, and on the bits of integers (None: logical only)."""


def _logical_converter(logical: type[ew.BinaryOp], bitwise: type[ew.BinaryOp] | None):
    def convert(a: AtenArgs) -> SSAValue:
        """Logical ops take any tensors as truth values; bitwise ops on i1 are the logical ones."""
        if a.result_dtype() != i1 and bitwise is not None:
            return _bitwise(a, bitwise)
        x, y = a.tensor_as("self", i1), a.tensor_as("other", i1)
        return a.value(logical.build(operands=[x, y], result_types=[a.result_type()]))

    return convert


for _name, (_logical, _bitwise_op) in _LOGICAL.items():
    converts(f"torch.aten.{_name}", args="self other")(_logical_converter(_logical, _bitwise_op))


def _bitwise(a: AtenArgs, op_class: type[ew.BinaryOp]) -> SSAValue:
    element = a.result_dtype()
    x, y = a.tensor_as("self", element), a.tensor_as("other", element)
    return a.value(op_class.build(operands=[x, y], result_types=[a.result_type()]))


@converts("torch.aten.bitwise_left_shift.Tensor", "torch.aten.__lshift__.Tensor", args="self other")
def shift_left(a: AtenArgs) -> SSAValue:
    return _bitwise(a, ew.ShiftLeftOp)


@converts("torch.aten.bitwise_right_shift.Tensor", "torch.aten.__rshift__.Tensor", args="self other")
def shift_right(a: AtenArgs) -> SSAValue:
    return _bitwise(a, ew.ShiftRightOp)


def _divide(a: AtenArgs, mode: str | None) -> SSAValue:
    """Division rounded as torch's `rounding_mode` says: None (true division), trunc or floor."""
    element = a.result_dtype()
    x, y = _operand(a, "self", element), _operand(a, "other", element)
    if not isinstance(element, IntegerType):
        quotient = _emit(a, ew.DivOp, x, y)
        if mode == "floor":
            return _emit(a, ew.FloorOp, quotient)
        if mode == "trunc":
            return _emit(a, ew.MulOp, _emit(a, ew.SignOp, quotient), _emit(a, ew.FloorOp, _emit(a, ew.AbsOp, quotient)))
        return quotient
    if mode == "floor":  # graph.div truncates integers; x - x % y is a multiple of y, so exact
        return _emit(a, ew.DivOp, _emit(a, ew.SubOp, x, _emit(a, ew.RemOp, x, y)), y)
    return _emit(a, ew.DivOp, x, y)


@converts("torch.aten.div.Tensor_mode", "torch.aten.div.Scalar_mode", args="self other rounding_mode")
def div_mode(a: AtenArgs) -> SSAValue:
    mode = None if a.is_none("rounding_mode") else a.str("rounding_mode")
    if mode not in (None, "trunc", "floor"):
        raise NotConvertible(f"rounding mode {mode!r}")
    return _divide(a, mode)


@converts("torch.aten.floor_divide", "torch.aten.floor_divide.Scalar", args="self other")
def floor_divide(a: AtenArgs) -> SSAValue:
    return _divide(a, "floor")


@converts("torch.aten.trunc", args="self")
def trunc(a: AtenArgs) -> SSAValue:
    x = a.tensor("self")
    if isinstance(tensor_type(x).get_element_type(), IntegerType):
        return x
    return _emit(a, ew.MulOp, _emit(a, ew.SignOp, x), _emit(a, ew.FloorOp, _emit(a, ew.AbsOp, x)))


@converts("torch.aten.square", args="self")
def square(a: AtenArgs) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    return _emit(a, ew.MulOp, x, x)


@converts("torch.aten.log2", args="self")
def log2(a: AtenArgs) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    return _emit(a, ew.DivOp, _emit(a, ew.LogOp, x), a.scalar_tensor(math.log(2.0), a.result_dtype()))


@converts("torch.aten.exp2", args="self")
def exp2(a: AtenArgs) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    return _emit(a, ew.PowOp, a.scalar_tensor(2.0, a.result_dtype()), x)


@converts("torch.aten.tan", args="self")
def tan(a: AtenArgs) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    return _emit(a, ew.DivOp, _emit(a, ew.SinOp, x), _emit(a, ew.CosOp, x))


@converts("torch.aten.cosh", args="self")
def cosh(a: AtenArgs) -> SSAValue:
    """(e^x + e^-x) / 2."""
    x = a.tensor_as("self", a.result_dtype())
    both = _emit(a, ew.AddOp, _emit(a, ew.ExpOp, x), _emit(a, ew.ExpOp, _emit(a, ew.NegOp, x)))
    return _emit(a, ew.DivOp, both, a.scalar_tensor(2.0, a.result_dtype()))


@converts("torch.aten.isnan", args="self")
def isnan(a: AtenArgs) -> SSAValue:
    """NaN is the only value that differs from itself."""
    x = a.tensor("self")
    return _emit(a, ew.NeOp, x, x)


@converts("torch.aten.isinf", args="self")
def isinf(a: AtenArgs) -> SSAValue:
    """|x| == inf; an integer is never infinite."""
    x = a.tensor("self")
    element = tensor_type(x).get_element_type()
    if isinstance(element, IntegerType):
        if DYN in tensor_type(x).get_shape():
            raise NotConvertible("isinf of integers of dynamic shape")
        return a.splat(0, a.result_type())
    return _emit(a, ew.EqOp, _emit(a, ew.AbsOp, x), a.scalar_tensor(math.inf, element))


@converts("torch.aten.threshold", args="self threshold value")
def threshold(a: AtenArgs) -> SSAValue:
    """x if x > threshold else value."""
    x = a.tensor("self")
    element = tensor_type(x).get_element_type()
    above = _emit(a, ew.GtOp, x, a.scalar_tensor(a.float("threshold"), element))
    return _emit(a, ew.WhereOp, above, x, a.scalar_tensor(a.float("value"), element))


@converts("torch.aten.mish", args="self")
def mish(a: AtenArgs) -> SSAValue:
    """x * tanh(softplus(x))."""
    x = a.tensor("self")
    props = {"beta": f64_attr(1.0), "threshold": f64_attr(20.0)}
    softplus = a.value(ew.SoftplusOp.build(operands=[x], properties=props, result_types=[tensor_type(x)]))
    return _emit(a, ew.MulOp, x, _emit(a, ew.TanhOp, softplus))


@converts("torch.aten.glu", args="self dim")
def glu(a: AtenArgs) -> SSAValue:
    """a * sigmoid(b), where a and b are the halves of the input along `dim`."""
    x = a.tensor("self")
    shape = tensor_type(x).get_shape()
    dim = a.int("dim") % len(shape)
    if shape[dim] == DYN or shape[dim] % 2:
        raise NotConvertible("glu of a dim that is dynamic or odd")
    half = shape[dim] // 2
    first, second = slice_along(a, dim, 0, half, 1), slice_along(a, dim, half, shape[dim], 1)
    gate = a.value(ew.SigmoidOp.build(operands=[second], result_types=[tensor_type(second)]))
    return a.value(ew.MulOp.build(operands=[first, gate], result_types=[a.result_type()]))


@converts("torch.aten.pow.Tensor_Tensor", "torch.aten.pow.Tensor_Scalar", "torch.aten.pow.Scalar", args="self exponent")
def pow_(a: AtenArgs) -> SSAValue:
    return _binary(a, ew.PowOp, "self", "exponent")


@converts("torch.aten.prelu", args="self weight")
def prelu(a: AtenArgs) -> SSAValue:
    """torch's slope vector runs along the channel dim (1). torch-mlir lowers ONNX PRelu, whose slope
    broadcasts NumPy-style (along the last dims), to the same op; but a 1-d slope that only fits the
    channels comes from an old opset (<= 6: channel-wise slopes) that the opset upgrade kept."""
    x, slope = a.tensor("self"), a.tensor("weight")
    shape = list(a.result_type().get_shape())
    slope_shape = list(tensor_type(slope).get_shape())
    channelwise = len(slope_shape) == 1 and len(shape) >= 2
    if channelwise and a.from_onnx():
        channelwise = slope_shape[0] not in (1, shape[-1]) and slope_shape[0] == shape[1]
    if channelwise:
        shaped = TensorType(tensor_type(slope).get_element_type(), [*slope_shape, *([1] * (len(shape) - 2))])
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


@converts("torch.prims.convert_element_type", args="a dtype")
def convert_element_type(a: AtenArgs) -> SSAValue:
    return a.cast(a.tensor("a"), a.result_dtype())


@converts("torch.aten.type_as", args="self other")
def type_as(a: AtenArgs) -> SSAValue:
    return _cast(a)


@converts("onnx.BitCast", args="input")
def onnx_bitcast(a: AtenArgs) -> SSAValue:
    return a.value(ew.BitcastOp.build(operands=[a.tensor("input")], result_types=[a.result_type()]))


def _swish(a: AtenArgs, x: SSAValue, alpha: float) -> SSAValue:
    """x * sigmoid(alpha * x): silu when alpha is 1."""
    if alpha == 1.0:
        return _emit(a, ew.SiluOp, x)
    scaled = _emit(a, ew.MulOp, x, a.scalar_tensor(alpha, tensor_type(x).get_element_type()))
    return _emit(a, ew.MulOp, x, _emit(a, ew.SigmoidOp, scaled))


@converts("onnx.Swish", args="X")
def onnx_swish(a: AtenArgs) -> SSAValue:
    return _swish(a, a.tensor("X"), a.onnx_float("alpha", 1.0))


@converts("onnx.SwiGLU", args="A B")
def onnx_swiglu(a: AtenArgs) -> SSAValue:
    """swish(A) * B, of one shape: ONNX does not broadcast them."""
    x, gate = a.tensor("A"), a.tensor("B")
    if tensor_type(x) != tensor_type(gate):
        raise NotConvertible(f"SwiGLU of {tensor_type(x)} and {tensor_type(gate)}, which differ")
    return _emit(a, ew.MulOp, _swish(a, x, a.onnx_float("alpha", 1.0)), gate)
