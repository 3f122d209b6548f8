"""Elementwise graph ops: unary maps, broadcasting binary ops, comparisons, select and cast."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerType, StringAttr, TensorType, i1
from xdsl.ir import Attribute
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import OpTrait, Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    GraphOperation,
    TensorT,
    broadcast_shapes,
    dtype_of,
    shape_of,
    tensor_of,
    tensor_type,
)
from gnomon.dialects.graph.constant_values import element_bytes
from gnomon.dialects.graph.traits import (
    AndCanonicalization,
    ClipCanonicalization,
    FoldsIntegerConstants,
    MulCanonicalization,
    PowCanonicalization,
    WhereCanonicalization,
)


class UnaryOp(GraphOperation):
    """y = f(x) elementwise; same shape and element type as `input`."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        return [tensor_type(self.input, f"{self.name} input")]


def _unary(op_name: str, doc: str, *traits: OpTrait) -> type[UnaryOp]:
    """An op class with no properties beyond the unary base; the doc is its one-line meaning."""
    body: dict[str, object] = {
        "name": f"graph.{op_name}",
        "__doc__": f"{doc}\n\n    `%y = graph.{op_name} %x : (tensor<4xf32>) -> tensor<4xf32>`\n",
    }
    if traits:
        body["traits"] = traits_def(Pure(), *traits)
    cls = type("".join(part.title() for part in op_name.split("_")) + "Op", (UnaryOp,), body)
    return irdl_op_definition(cls)


AbsOp = _unary("abs", "|x|.")
AcosOp = _unary("acos", "arccos x, in [0, pi]; NaN outside [-1, 1].")
AcoshOp = _unary("acosh", "The inverse hyperbolic cosine; NaN below 1.")
AsinOp = _unary("asin", "arcsin x, in [-pi/2, pi/2]; NaN outside [-1, 1].")
AsinhOp = _unary("asinh", "The inverse hyperbolic sine.")
AtanOp = _unary("atan", "arctan x, in (-pi/2, pi/2).")
AtanhOp = _unary("atanh", "The inverse hyperbolic tangent; ±inf at ±1, NaN outside [-1, 1].")
CeilOp = _unary("ceil", "Round up to an integer value.")
CosOp = _unary("cos", "cos(x).")
ErfOp = _unary("erf", "The Gauss error function.")
ExpOp = _unary("exp", "e^x.")
FloorOp = _unary("floor", "Round down to an integer value.")
HardSwishOp = _unary("hard_swish", "x * relu6(x + 3) / 6.")
LogOp = _unary("log", "Natural logarithm.")
NegOp = _unary("neg", "-x.", FoldsIntegerConstants())
NotOp = _unary("not", "Logical not of an i1 tensor.", FoldsIntegerConstants())
ReciprocalOp = _unary("reciprocal", "1 / x.")
ReluOp = _unary("relu", "max(x, 0).")
RoundOp = _unary("round", "Round half to even.")
RsqrtOp = _unary("rsqrt", "1 / sqrt(x).")
SeluOp = _unary("selu", "Scaled ELU with the fixed constants of Klambauer et al.")
SigmoidOp = _unary("sigmoid", "1 / (1 + e^-x).")
SignOp = _unary("sign", "-1, 0 or 1 by the sign of x.")
SiluOp = _unary("silu", "x * sigmoid(x) (swish).")
SinOp = _unary("sin", "sin(x).")
SinhOp = _unary("sinh", "The hyperbolic sine.")
SoftsignOp = _unary("softsign", "x / (1 + |x|).")
SqrtOp = _unary("sqrt", "Square root.")
TanhOp = _unary("tanh", "Hyperbolic tangent.")


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU, exact (`approximate = "none"`) or with the tanh approximation.

    `%y = graph.gelu %x {approximate = "none"} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.gelu"
    approximate = prop_def(StringAttr, default_value=StringAttr("none"))
    APPROXIMATIONS: ClassVar[tuple[str, ...]] = ("none", "tanh")

    def infer_result_types(self) -> Sequence[TensorT]:
        if self.approximate.data not in self.APPROXIMATIONS:
            raise VerifyException(f"graph.gelu: approximate must be one of none, tanh, got {self.approximate.data!r}")
        return super().infer_result_types()


@irdl_op_definition
class EluOp(UnaryOp):
    """x if x > 0 else alpha * (e^x - 1).

    `%y = graph.elu %x {alpha = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.elu"
    alpha = prop_def(FloatAttr)


@irdl_op_definition
class LeakyReluOp(UnaryOp):
    """x if x >= 0 else alpha * x.

    `%y = graph.leaky_relu %x {alpha = 0.01 : f64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.leaky_relu"
    alpha = prop_def(FloatAttr)


@irdl_op_definition
class SoftplusOp(UnaryOp):
    """log(1 + e^(beta x)) / beta, linear above `threshold` (PyTorch's definition).

    `%y = graph.softplus %x {beta = 1.0 : f64, threshold = 20.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.softplus"
    beta = prop_def(FloatAttr)
    threshold = prop_def(FloatAttr)


@irdl_op_definition
class HardSigmoidOp(UnaryOp):
    """clip(alpha * x + beta, 0, 1).

    `%y = graph.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.hard_sigmoid"
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)


@irdl_op_definition
class ClipOp(UnaryOp):
    """clamp(x, min, max); relu6 is `clip` with min 0 and max 6. Bounds may be ±inf.

    `%y = graph.clip %x {min = 0.0 : f64, max = 6.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.clip"
    min = prop_def(FloatAttr)
    max = prop_def(FloatAttr)
    traits = traits_def(Pure(), ClipCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        if self.min.value.data > self.max.value.data:
            raise VerifyException(f"graph.clip: min {self.min.value.data} is greater than max {self.max.value.data}")
        return super().infer_result_types()


@irdl_op_definition
class DropoutOp(UnaryOp):
    """Dropout with probability `ratio` at inference: the identity (a training step's is `graph.dropout_train`).

    `%y = graph.dropout %x {ratio = 0.5 : f64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    name = "graph.dropout"
    ratio = prop_def(FloatAttr)


@irdl_op_definition
class DropoutTrainOp(GraphOperation):
    """Dropout in a training step: each element kept with probability 1 - `ratio` and scaled by 1 / (1 - ratio),
    else zero (all zero at ratio 1); `mask` says which were kept, for the backward pass. The draws are random, so
    the op is not pure: never folded, merged or hoisted. The runtime draws from torch's default generator, as
    `aten.native_dropout` does (`torch.manual_seed` makes a step reproducible, and equal to eager's when the
    dropouts run in the same order).

    `%y, %mask = graph.dropout_train %x {ratio = 0.1 : f64} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)`
    """

    name = "graph.dropout_train"
    input = operand_def(TensorType)
    ratio = prop_def(FloatAttr)
    result = result_def(TensorType)
    mask = result_def(TensorType)

    def infer_result_types(self) -> Sequence[TensorT]:
        ratio = self.ratio.value.data
        if not 0.0 <= ratio <= 1.0:
            raise VerifyException(f"graph.dropout_train: ratio {ratio} is not in [0, 1]")
        dtype = dtype_of(self.input, "graph.dropout_train input")
        if not isinstance(dtype, AnyFloat):
            raise VerifyException(f"graph.dropout_train: input must be floating point, got {dtype}")
        shape = shape_of(self.input, "graph.dropout_train input")
        return [tensor_of(dtype, shape), tensor_of(i1, shape)]


@irdl_op_definition
class CastOp(GraphOperation):
    """Convert the element type; the result type names the target.

    `%y = graph.cast %x : (tensor<4xf32>) -> tensor<4xi64>`
    """

    name = "graph.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), FoldsIntegerConstants())

    def infer_result_types(self) -> Sequence[TensorT]:
        shape = shape_of(self.input, "graph.cast input")
        return [tensor_of(tensor_type(self.result, "graph.cast result").get_element_type(), shape)]


@irdl_op_definition
class BitcastOp(GraphOperation):
    """Reinterpret each element's bytes as the result's element type, of the same size (ONNX BitCast).

    `%y = graph.bitcast %x : (tensor<4xf32>) -> tensor<4xi32>`
    """

    name = "graph.bitcast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        source, target = dtype_of(self.input, "graph.bitcast input"), dtype_of(self.result, "graph.bitcast result")
        if element_bytes(source) is None or element_bytes(source) != element_bytes(target):
            raise VerifyException(f"graph.bitcast: element types {source} and {target} differ in size")
        return [tensor_of(target, shape_of(self.input, "input"))]


class BinaryOp(GraphOperation):
    """y = f(lhs, rhs) with NumPy broadcasting; both operands share one element type."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), FoldsIntegerConstants())

    def result_element_type(self) -> Attribute:
        return dtype_of(self.lhs, f"{self.name} lhs")

    def infer_result_types(self) -> Sequence[TensorT]:
        lhs_type, rhs_type = dtype_of(self.lhs, f"{self.name} lhs"), dtype_of(self.rhs, f"{self.name} rhs")
        if lhs_type != rhs_type:
            raise VerifyException(f"{self.name}: lhs element type {lhs_type} differs from rhs element type {rhs_type}")
        shape = broadcast_shapes([shape_of(self.lhs, "lhs"), shape_of(self.rhs, "rhs")], self.name)
        return [tensor_of(self.result_element_type(), shape)]


def _binary(
    op_name: str, doc: str, base: type[BinaryOp] = BinaryOp, element: str = "f32", *traits: OpTrait
) -> type[BinaryOp]:
    body: dict[str, object] = {
        "name": f"graph.{op_name}",
        "__doc__": f"{doc}\n\n    `%z = graph.{op_name} %x, %y"
        f" : (tensor<2x4x{element}>, tensor<4x{element}>) -> tensor<2x4x{element}>`\n",
    }
    if traits:
        body["traits"] = traits_def(Pure(), *traits)
    cls = type("".join(part.title() for part in op_name.split("_")) + "Op", (base,), body)
    return irdl_op_definition(cls)


class CompareOp(BinaryOp):
    """A broadcasting comparison; the result is an i1 tensor."""

    def result_element_type(self) -> Attribute:
        return i1


AddOp = _binary("add", "lhs + rhs.")
AndOp = _binary("and", "Logical and of i1 tensors.", BinaryOp, "i1", AndCanonicalization())
DivOp = _binary("div", "lhs / rhs (true division for floats, truncating for integers).")
FmodOp = _binary("fmod", "Remainder with the sign of the dividend, as truncating division leaves it (C's fmod).")
MaxOp = _binary("max", "Elementwise maximum.")
MinOp = _binary("min", "Elementwise minimum.")
MulOp = _binary("mul", "lhs * rhs.", BinaryOp, "f32", MulCanonicalization())
OrOp = _binary("or", "Logical or of i1 tensors.")
PowOp = _binary("pow", "lhs ** rhs.", BinaryOp, "f32", PowCanonicalization())
PreluOp = _binary("prelu", "lhs if lhs >= 0 else rhs * lhs: rhs holds the slopes, broadcast to lhs.")
RemOp = _binary("rem", "Remainder with the sign of the divisor (Python's %).")
SubOp = _binary("sub", "lhs - rhs.")
EqOp = _binary("eq", "lhs == rhs.", CompareOp)
GeOp = _binary("ge", "lhs >= rhs.", CompareOp)
GtOp = _binary("gt", "lhs > rhs.", CompareOp)
LeOp = _binary("le", "lhs <= rhs.", CompareOp)
LtOp = _binary("lt", "lhs < rhs.", CompareOp)
NeOp = _binary("ne", "lhs != rhs.", CompareOp)


class BitwiseOp(BinaryOp):
    """A broadcasting op on the bits of integers (ONNX's Bitwise*, BitShift); i1 has its logical ops."""

    def infer_result_types(self) -> Sequence[TensorT]:
        element = dtype_of(self.lhs, f"{self.name} lhs")
        if not isinstance(element, IntegerType) or element.width.data == 1:
            raise VerifyException(f"{self.name}: operands must be integers, got element type {element}")
        return super().infer_result_types()


BitwiseAndOp = _binary("bitwise_and", "lhs & rhs on integers.", BitwiseOp, "i32")
BitwiseOrOp = _binary("bitwise_or", "lhs | rhs on integers.", BitwiseOp, "i32")
BitwiseXorOp = _binary("bitwise_xor", "lhs ^ rhs on integers.", BitwiseOp, "i32")
ShiftLeftOp = _binary(
    "shift_left",
    "lhs << rhs; bits past the width are dropped, and a shift outside [0, width) gives 0.",
    BitwiseOp,
    "i32",
)
ShiftRightOp = _binary(
    "shift_right",
    "lhs >> rhs, arithmetic for signed types and logical for unsigned ones; a shift outside [0, width)"
    " gives the sign fill (0, or -1 for a negative signed lhs).",
    BitwiseOp,
    "i32",
)


@irdl_op_definition
class BitwiseNotOp(UnaryOp):
    """~x: every bit of an integer flipped.

    `%y = graph.bitwise_not %x : (tensor<4xi32>) -> tensor<4xi32>`
    """

    name = "graph.bitwise_not"

    def infer_result_types(self) -> Sequence[TensorT]:
        element = dtype_of(self.input, "graph.bitwise_not input")
        if not isinstance(element, IntegerType) or element.width.data == 1:
            raise VerifyException(f"graph.bitwise_not: input must be integers, got element type {element}")
        return super().infer_result_types()


@irdl_op_definition
class WhereOp(GraphOperation):
    """Select `on_true` where `condition` holds, else `on_false`; all three broadcast.

    `%z = graph.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>`
    """

    name = "graph.where"
    condition = operand_def(TensorType)
    on_true = operand_def(TensorType)
    on_false = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), WhereCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        condition_type = dtype_of(self.condition, "graph.where condition")
        if condition_type != i1 and not (isinstance(condition_type, IntegerType) and condition_type.width.data == 1):
            raise VerifyException(f"graph.where: condition must have element type i1, got {condition_type}")
        true_type, false_type = dtype_of(self.on_true, "on_true"), dtype_of(self.on_false, "on_false")
        if true_type != false_type:
            raise VerifyException(f"graph.where: on_true element type {true_type} differs from on_false {false_type}")
        shapes = [
            shape_of(v, n)
            for v, n in (
                (self.condition, "condition"),
                (self.on_true, "on_true"),
                (self.on_false, "on_false"),
            )
        ]
        return [tensor_of(true_type, broadcast_shapes(shapes, "graph.where"))]


ELEMENTWISE_OPS = [
    AbsOp, AcosOp, AcoshOp, AddOp, AndOp, AsinOp, AsinhOp, AtanOp, AtanhOp, BitcastOp, BitwiseAndOp, BitwiseNotOp,
    BitwiseOrOp, BitwiseXorOp, CastOp, CeilOp, ClipOp, CosOp, DivOp, DropoutOp, DropoutTrainOp, EluOp, EqOp, ErfOp,
    ExpOp, FloorOp, FmodOp, GeOp, GeluOp, GtOp, HardSigmoidOp, HardSwishOp, LeOp, LeakyReluOp, LogOp, LtOp, MaxOp,
    MinOp, MulOp, NeOp, NegOp, NotOp, OrOp, PowOp, PreluOp, ReciprocalOp, ReluOp, RemOp, RoundOp, RsqrtOp, SeluOp,
    ShiftLeftOp, ShiftRightOp, SigmoidOp, SignOp, SiluOp, SinOp, SinhOp, SoftplusOp, SoftsignOp, SqrtOp, SubOp, TanhOp,
    WhereOp,
]  # fmt: skip

POINTWISE = (UnaryOp, BinaryOp, CastOp, WhereOp)
"""The bases of every op here: each result element comes from the operand elements at its (broadcast) index."""
