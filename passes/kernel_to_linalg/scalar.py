"""The scalar body of each elementwise graph op gnomon generates loops for, in arith and math.

`SCALAR_OPS` maps an op class to the function that emits its body for one element (the
operands' elements in, the result's element out) and says which element types it takes;
NumPy's semantics (the reference) decide the details: NaN-propagating max and min, Python's
sign of `rem`, truncating integer division, `astype` casts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.dialects.arith import FloatingPointLikeBinaryOperation
from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerType,
    Signedness,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import irdl_op_definition

from gnomon.dialects.graph import elementwise as ew
from gnomon.passes.kernel_to_linalg.approx import erf_of, exp_of, expm1, log1p, log_of, sigmoid_of, tanh_of
from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder

Emit = Callable[[ScalarBuilder, Operation, list[SSAValue]], SSAValue]

_SQRT1_2 = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


@irdl_op_definition
class RemFOp(FloatingPointLikeBinaryOperation):
    """Upstream `arith.remf` (C's fmod), which xDSL's arith lacks; gnomon only prints it for MLIR."""

    name = "arith.remf"


def is_float(t: Attribute) -> bool:
    """A float type, or a vector of one (`conv_nhwc` runs some ops' bodies on vectors)."""
    return isinstance(t.element_type if isinstance(t, VectorType) else t, Float32Type | Float64Type)


def is_int(t: Attribute) -> bool:
    """A signless integer gnomon computes with (i32, i64); i1 is a bool, not a number. Unsigned types
    (ONNX's uint32, uint64) need unsigned arithmetic and comparisons: the library computes them."""
    return isinstance(t, IntegerType) and t.width.data in (32, 64) and t.signedness.data == Signedness.SIGNLESS


def is_bool(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data == 1


def supported_element(t: Attribute) -> bool:
    return is_float(t) or is_int(t) or is_bool(t)


@dataclass(frozen=True)
class ScalarOp:
    """How to emit one op's body, and the operand element types it accepts."""

    emit: Emit
    accepts: Callable[[Attribute], bool]
    """Whether the op's (first) operand element type is supported."""


def _float_attr(op: Operation, name: str) -> float:
    attr = op.properties[name]
    assert isinstance(attr, FloatAttr)
    return attr.value.data


# ---- unary maps ----


def _abs(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    return b.emit(math.AbsFOp(x[0]) if is_float(x[0].type) else math.AbsIOp(x[0]))


def _neg(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    if is_float(x[0].type):
        return b.emit(arith.NegfOp(x[0]))
    return b.emit(arith.SubiOp(b.const(0, x[0].type), x[0]))


def _relu(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    zero = b.const(0, x[0].type)
    return b.maximum(x[0], zero) if is_float(x[0].type) else b.emit(arith.MaxSIOp(x[0], zero))


def _sign(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    t = x[0].type
    zero, one, minus_one = b.const(0, t), b.const(1, t), b.const(-1, t)
    if is_float(t):
        # 0 and NaN map to themselves, as in NumPy.
        return b.select(b.cmpf("ogt", x[0], zero), one, b.select(b.cmpf("olt", x[0], zero), minus_one, x[0]))
    return b.select(b.cmpi("sgt", x[0], zero), one, b.select(b.cmpi("slt", x[0], zero), minus_one, zero))


def _not(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    return b.emit(arith.XOrIOp(x[0], b.const(1, x[0].type)))


def _elu_negative(b: ScalarBuilder, x: SSAValue, alpha: float) -> SSAValue:
    """alpha * (e^min(x, 0) - 1), the negative branch of ELU and SELU."""
    negative = b.minimum(x, b.like(0.0, x))
    return b.mul(b.like(alpha, x), expm1(b, negative, exp_of(b, negative)))


def _unary_float(f: Callable[[ScalarBuilder, SSAValue, Operation], SSAValue]) -> Emit:
    def emit(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
        return f(b, x[0], op)

    return emit


def _hard_swish(b: ScalarBuilder, x: SSAValue, op: Operation) -> SSAValue:
    clipped = b.minimum(b.maximum(b.add(x, b.like(3.0, x)), b.like(0.0, x)), b.like(6.0, x))
    return b.div(b.mul(x, clipped), b.like(6.0, x))


def _gelu(b: ScalarBuilder, x: SSAValue, op: Operation) -> SSAValue:
    assert isinstance(op, ew.GeluOp)
    if op.approximate.data == "tanh":
        cubic = b.add(x, b.mul(b.like(0.044715, x), b.mul(b.mul(x, x), x)))
        inner = tanh_of(b, b.mul(b.like(_SQRT_2_OVER_PI, x), cubic))
    else:
        inner = erf_of(b, b.mul(x, b.like(_SQRT1_2, x)))
    return b.mul(b.mul(b.like(0.5, x), x), b.add(b.like(1.0, x), inner))


def _softplus(b: ScalarBuilder, x: SSAValue, op: Operation) -> SSAValue:
    beta, threshold = _float_attr(op, "beta"), _float_attr(op, "threshold")
    scaled = b.mul(b.like(beta, x), x)
    linear = b.cmpf("ogt", scaled, b.like(threshold, x))
    soft = b.div(log1p(b, exp_of(b, b.select(linear, b.like(0.0, x), scaled))), b.like(beta, x))
    return b.select(linear, x, soft)


UNARY: dict[type[Operation], Callable[[ScalarBuilder, SSAValue, Operation], SSAValue]] = {
    ew.AcosOp: lambda b, x, op: b.emit(math.AcosOp(x)),
    ew.AcoshOp: lambda b, x, op: b.emit(math.AcoshOp(x)),
    ew.AsinOp: lambda b, x, op: b.emit(math.AsinOp(x)),
    ew.AsinhOp: lambda b, x, op: b.emit(math.AsinhOp(x)),
    ew.AtanOp: lambda b, x, op: b.emit(math.AtanOp(x)),
    ew.AtanhOp: lambda b, x, op: b.emit(math.AtanhOp(x)),
    ew.CeilOp: lambda b, x, op: b.emit(math.CeilOp(x)),
    ew.CosOp: lambda b, x, op: b.emit(math.CosOp(x)),
    ew.EluOp: lambda b, x, op: b.select(
        b.cmpf("ogt", x, b.like(0.0, x)), x, _elu_negative(b, x, _float_attr(op, "alpha"))
    ),
    ew.ErfOp: lambda b, x, op: erf_of(b, x),
    ew.ExpOp: lambda b, x, op: exp_of(b, x),
    ew.FloorOp: lambda b, x, op: b.emit(math.FloorOp(x)),
    ew.GeluOp: _gelu,
    ew.HardSigmoidOp: lambda b, x, op: b.minimum(
        b.maximum(
            b.add(b.mul(b.like(_float_attr(op, "alpha"), x), x), b.like(_float_attr(op, "beta"), x)), b.like(0.0, x)
        ),
        b.like(1.0, x),
    ),
    ew.HardSwishOp: _hard_swish,
    ew.LeakyReluOp: lambda b, x, op: b.select(
        b.cmpf("oge", x, b.like(0.0, x)), x, b.mul(b.like(_float_attr(op, "alpha"), x), x)
    ),
    ew.LogOp: lambda b, x, op: log_of(b, x),
    ew.ReciprocalOp: lambda b, x, op: b.div(b.like(1.0, x), x),
    ew.RoundOp: lambda b, x, op: b.emit(math.RoundEvenOp(x)),
    ew.RsqrtOp: lambda b, x, op: b.div(b.like(1.0, x), b.emit(math.SqrtOp(x))),
    ew.SeluOp: lambda b, x, op: b.mul(
        b.like(_SELU_SCALE, x), b.select(b.cmpf("ogt", x, b.like(0.0, x)), x, _elu_negative(b, x, _SELU_ALPHA))
    ),
    ew.SigmoidOp: lambda b, x, op: sigmoid_of(b, x),
    ew.SiluOp: lambda b, x, op: b.mul(x, sigmoid_of(b, x)),
    ew.SinOp: lambda b, x, op: b.emit(math.SinOp(x)),
    ew.SinhOp: lambda b, x, op: b.emit(math.SinhOp(x)),
    ew.SoftplusOp: _softplus,
    ew.SoftsignOp: lambda b, x, op: b.div(x, b.add(b.like(1.0, x), b.emit(math.AbsFOp(x)))),
    ew.SqrtOp: lambda b, x, op: b.emit(math.SqrtOp(x)),
    ew.TanhOp: lambda b, x, op: tanh_of(b, x),
    ew.ClipOp: lambda b, x, op: b.minimum(
        b.maximum(x, b.like(_float_attr(op, "min"), x)), b.like(_float_attr(op, "max"), x)
    ),
}
"""Unary maps defined on floats only. The inverse trigonometric and hyperbolic functions are libm calls (MLIR's
math-to-libm), correctly rounded or nearly, where a polynomial here would be a new approximation to validate."""


# ---- casts ----


def _cast(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    assert isinstance(op, ew.CastOp)
    source, target = x[0].type, result_element(op)
    value = x[0]
    if source == target:
        return value
    if is_bool(target):
        # astype(bool) is "nonzero"; NaN is nonzero.
        if is_float(source):
            return b.cmpf("une", value, b.const(0, source))
        return b.cmpi("ne", value, b.const(0, source))
    if is_float(source) and is_float(target):
        assert isinstance(source, AnyFloat)
        assert isinstance(target, AnyFloat)
        wider = source.bitwidth < target.bitwidth
        return b.emit(arith.ExtFOp(value, target) if wider else arith.TruncFOp(value, target))
    if is_float(source):
        assert isinstance(target, IntegerType)
        return b.emit(arith.FPToSIOp(value, target))  # truncates toward zero, as np.trunc then astype
    if is_float(target):
        assert isinstance(target, AnyFloat)
        return b.emit(arith.UIToFPOp(value, target) if is_bool(source) else arith.SIToFPOp(value, target))
    assert isinstance(source, IntegerType)
    assert isinstance(target, IntegerType)
    if source.width.data > target.width.data:
        return b.emit(arith.TruncIOp(value, target))
    return b.emit(arith.ExtUIOp(value, target) if is_bool(source) else arith.ExtSIOp(value, target))


# ---- binary ops ----


def _arith(
    float_op: Callable[[SSAValue, SSAValue], Operation], int_op: Callable[[SSAValue, SSAValue], Operation]
) -> Emit:
    def emit(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
        return b.emit(float_op(x[0], x[1]) if is_float(x[0].type) else int_op(x[0], x[1]))

    return emit


def _pow(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    return b.emit(math.PowFOp(x[0], x[1]))


def _safe_divisor(b: ScalarBuilder, rhs: SSAValue) -> tuple[SSAValue, SSAValue]:
    """rhs with 0 and -1 replaced by 1 (x86 traps on x / 0 and INT_MIN / -1), and whether rhs is -1."""
    t = rhs.type
    minus_one = b.cmpi("eq", rhs, b.const(-1, t))
    trapping = b.emit(arith.OrIOp(b.cmpi("eq", rhs, b.const(0, t)), minus_one))
    return b.select(trapping, b.const(1, t), rhs), minus_one


def _div(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    lhs, rhs = x
    if is_float(lhs.type):
        return b.div(lhs, rhs)
    divisor, minus_one = _safe_divisor(b, rhs)
    quotient = b.emit(arith.DivSIOp(lhs, divisor))
    return b.select(minus_one, b.emit(arith.SubiOp(b.const(0, lhs.type), lhs)), quotient)


def _rem(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    """Python's %: the C remainder, moved into the divisor's sign when the signs differ."""
    lhs, rhs = x
    t = lhs.type
    zero = b.const(0, t)
    if is_float(t):
        r = b.emit(RemFOp(lhs, rhs))
        differ = b.emit(arith.XOrIOp(b.cmpf("olt", r, zero), b.cmpf("olt", rhs, zero)))
        adjust = b.emit(arith.AndIOp(b.cmpf("une", r, zero), differ))
        r = b.select(adjust, b.add(r, rhs), r)
        # A zero remainder takes the divisor's sign, as in NumPy.
        return b.select(b.cmpf("oeq", r, zero), b.emit(math.CopySignOp(zero, rhs)), r)
    divisor, _ = _safe_divisor(b, rhs)
    r = b.emit(arith.RemSIOp(lhs, divisor))
    differ = b.emit(arith.XOrIOp(b.cmpi("slt", r, zero), b.cmpi("slt", rhs, zero)))
    adjust = b.emit(arith.AndIOp(b.cmpi("ne", r, zero), differ))
    return b.select(adjust, b.emit(arith.AddiOp(r, rhs)), r)


def _fmod(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    """C's fmod (`arith.remf`) and C's integer %, both with the sign of the dividend."""
    lhs, rhs = x
    if is_float(lhs.type):
        return b.emit(RemFOp(lhs, rhs))
    divisor, _ = _safe_divisor(b, rhs)  # x % 1 and x % -1 are both 0, as NumPy's fmod by 0 is
    return b.emit(arith.RemSIOp(lhs, divisor))


def _prelu(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    value, slope = x
    return b.select(b.cmpf("oge", value, b.like(0.0, value)), value, b.mul(value, slope))


_FLOAT_PREDICATES: dict[type[Operation], str] = {
    ew.EqOp: "oeq",
    ew.NeOp: "une",
    ew.LtOp: "olt",
    ew.LeOp: "ole",
    ew.GtOp: "ogt",
    ew.GeOp: "oge",
}
_INT_PREDICATES: dict[type[Operation], str] = {
    ew.EqOp: "eq",
    ew.NeOp: "ne",
    ew.LtOp: "slt",
    ew.LeOp: "sle",
    ew.GtOp: "sgt",
    ew.GeOp: "sge",
}
_BOOL_PREDICATES: dict[type[Operation], str] = {
    ew.EqOp: "eq",
    ew.NeOp: "ne",
    ew.LtOp: "ult",
    ew.LeOp: "ule",
    ew.GtOp: "ugt",
    ew.GeOp: "uge",
}


def _compare(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    t = x[0].type
    if is_float(t):
        return b.cmpf(_FLOAT_PREDICATES[type(op)], x[0], x[1])
    return b.cmpi((_BOOL_PREDICATES if is_bool(t) else _INT_PREDICATES)[type(op)], x[0], x[1])


def _where(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    return b.select(x[0], x[1], x[2])


def _identity(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    return x[0]


def _width(t: Attribute) -> int:
    assert isinstance(t, IntegerType)
    return t.width.data


def _shift_left(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    """arith.shli is poison for a shift outside [0, width) (an unsigned compare catches negative ones too)."""
    value, shift = x
    in_range = b.cmpi("ult", shift, b.const(_width(value.type), value.type))
    return b.select(in_range, b.emit(arith.ShLIOp(value, shift)), b.const(0, value.type))


def _shift_right(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    """An out-of-range shift gives the sign fill, which a shift by width - 1 gives too."""
    value, shift = x
    width = _width(value.type)
    in_range = b.cmpi("ult", shift, b.const(width, value.type))
    return b.emit(arith.ShRSIOp(value, b.select(in_range, shift, b.const(width - 1, value.type))))


def _bitwise_not(b: ScalarBuilder, op: Operation, x: list[SSAValue]) -> SSAValue:
    return b.emit(arith.XOrIOp(x[0], b.const(-1, x[0].type)))


def _numeric(t: Attribute) -> bool:
    return is_float(t) or is_int(t)


SCALAR_OPS: dict[type[Operation], ScalarOp] = {
    **{op_type: ScalarOp(_unary_float(f), is_float) for op_type, f in UNARY.items()},
    ew.AbsOp: ScalarOp(_abs, _numeric),
    ew.NegOp: ScalarOp(_neg, _numeric),
    ew.ReluOp: ScalarOp(_relu, _numeric),
    ew.SignOp: ScalarOp(_sign, _numeric),
    ew.NotOp: ScalarOp(_not, is_bool),
    ew.DropoutOp: ScalarOp(_identity, supported_element),
    ew.CastOp: ScalarOp(_cast, supported_element),
    ew.AddOp: ScalarOp(_arith(arith.AddfOp, arith.AddiOp), _numeric),
    ew.SubOp: ScalarOp(_arith(arith.SubfOp, arith.SubiOp), _numeric),
    ew.MulOp: ScalarOp(_arith(arith.MulfOp, arith.MuliOp), _numeric),
    ew.DivOp: ScalarOp(_div, _numeric),
    ew.MaxOp: ScalarOp(_arith(arith.MaximumfOp, arith.MaxSIOp), _numeric),
    ew.MinOp: ScalarOp(_arith(arith.MinimumfOp, arith.MinSIOp), _numeric),
    ew.PowOp: ScalarOp(_pow, is_float),
    ew.RemOp: ScalarOp(_rem, _numeric),
    ew.FmodOp: ScalarOp(_fmod, _numeric),
    ew.PreluOp: ScalarOp(_prelu, is_float),
    ew.AndOp: ScalarOp(_arith(arith.AndIOp, arith.AndIOp), is_bool),
    ew.OrOp: ScalarOp(_arith(arith.OrIOp, arith.OrIOp), is_bool),
    ew.BitwiseAndOp: ScalarOp(_arith(arith.AndIOp, arith.AndIOp), is_int),
    ew.BitwiseOrOp: ScalarOp(_arith(arith.OrIOp, arith.OrIOp), is_int),
    ew.BitwiseXorOp: ScalarOp(_arith(arith.XOrIOp, arith.XOrIOp), is_int),
    ew.BitwiseNotOp: ScalarOp(_bitwise_not, is_int),
    ew.ShiftLeftOp: ScalarOp(_shift_left, is_int),
    ew.ShiftRightOp: ScalarOp(_shift_right, is_int),
    **{op_type: ScalarOp(_compare, supported_element) for op_type in _FLOAT_PREDICATES},
    ew.WhereOp: ScalarOp(_where, supported_element),
}


def result_element(op: Operation) -> Attribute:
    result = op.results[0].type
    assert isinstance(result, TensorType)
    return result.get_element_type()


def operand_element(op: Operation) -> Attribute:
    """The element type that decides the op's arithmetic: the values' type (for where, not the condition's)."""
    operand = op.operands[1 if isinstance(op, ew.WhereOp) else 0].type
    assert isinstance(operand, TensorType)
    return operand.get_element_type()
