"""Reference semantics of the graph dialect's elementwise ops, in NumPy."""

from __future__ import annotations

import math

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.reference.base import Array, typed

_math_erf = np.frompyfunc(math.erf, 1, 1)


def _erf(x: Array) -> Array:
    """The error function, exact to float64 through `math.erf` (NumPy has no erf)."""
    return np.asarray(_math_erf(np.asarray(x, np.float64)), np.float64)


def _sigmoid(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


def _shift_operands(x: Array, shift: Array) -> tuple[Array, Array, Array]:
    """x and the shift broadcast, the shift as x's type with out-of-range counts made 0, and where it is in range
    ([0, width)): C and NumPy leave those undefined or mask them, where the graph ops define them."""
    x, shift = np.broadcast_arrays(np.asarray(x), np.asarray(shift))
    in_range = (shift >= 0) & (shift < x.dtype.itemsize * 8)
    return x, np.where(in_range, shift, 0).astype(x.dtype), in_range


@register_impls
class GraphElementwiseFunctions(InterpreterFunctions):
    # ---- unary maps ----

    @impl(ew.AbsOp)
    def run_abs(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.abs(args[0])),)

    @impl(ew.AcosOp)
    def run_acos(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.arccos(args[0])),)

    @impl(ew.AcoshOp)
    def run_acosh(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.arccosh(args[0])),)

    @impl(ew.AsinOp)
    def run_asin(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.arcsin(args[0])),)

    @impl(ew.AsinhOp)
    def run_asinh(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.arcsinh(args[0])),)

    @impl(ew.AtanOp)
    def run_atan(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.arctan(args[0])),)

    @impl(ew.AtanhOp)
    def run_atanh(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.arctanh(args[0])),)

    @impl(ew.CeilOp)
    def run_ceil(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.ceil(args[0])),)

    @impl(ew.CosOp)
    def run_cos(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.cos(args[0])),)

    @impl(ew.ErfOp)
    def run_erf(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, _erf(args[0])),)

    @impl(ew.ExpOp)
    def run_exp(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.exp(args[0])),)

    @impl(ew.FloorOp)
    def run_floor(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.floor(args[0])),)

    @impl(ew.HardSwishOp)
    def run_hard_swish(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        x = args[0]
        return (typed(op.result, x * np.clip(x + 3, 0, 6) / 6),)

    @impl(ew.LogOp)
    def run_log(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.log(args[0])),)

    @impl(ew.NegOp)
    def run_neg(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, -args[0]),)

    @impl(ew.BitwiseNotOp)
    def run_bitwise_not(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.invert(args[0])),)

    @impl(ew.NotOp)
    def run_not(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.logical_not(args[0])),)

    @impl(ew.ReciprocalOp)
    def run_reciprocal(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, 1 / args[0]),)

    @impl(ew.ReluOp)
    def run_relu(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.maximum(args[0], 0)),)

    @impl(ew.RoundOp)
    def run_round(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.round(args[0])),)

    @impl(ew.RsqrtOp)
    def run_rsqrt(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, 1 / np.sqrt(args[0])),)

    @impl(ew.SeluOp)
    def run_selu(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        x = args[0]
        return (typed(op.result, scale * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))),)

    @impl(ew.SigmoidOp)
    def run_sigmoid(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, _sigmoid(args[0])),)

    @impl(ew.SignOp)
    def run_sign(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.sign(args[0])),)

    @impl(ew.SiluOp)
    def run_silu(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, args[0] * _sigmoid(args[0])),)

    @impl(ew.SinOp)
    def run_sin(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.sin(args[0])),)

    @impl(ew.SinhOp)
    def run_sinh(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.sinh(args[0])),)

    @impl(ew.SoftsignOp)
    def run_softsign(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, args[0] / (1 + np.abs(args[0]))),)

    @impl(ew.SqrtOp)
    def run_sqrt(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.sqrt(args[0])),)

    @impl(ew.TanhOp)
    def run_tanh(self, interpreter: Interpreter, op: ew.UnaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.tanh(args[0])),)

    @impl(ew.GeluOp)
    def run_gelu(self, interpreter: Interpreter, op: ew.GeluOp, args: PythonValues) -> PythonValues:
        x = args[0]
        if op.approximate.data == "tanh":
            y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        else:
            y = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
        return (typed(op.result, y),)

    @impl(ew.EluOp)
    def run_elu(self, interpreter: Interpreter, op: ew.EluOp, args: PythonValues) -> PythonValues:
        x, alpha = args[0], op.alpha.value.data
        return (typed(op.result, np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))),)

    @impl(ew.LeakyReluOp)
    def run_leaky_relu(self, interpreter: Interpreter, op: ew.LeakyReluOp, args: PythonValues) -> PythonValues:
        x = args[0]
        return (typed(op.result, np.where(x >= 0, x, op.alpha.value.data * x)),)

    @impl(ew.SoftplusOp)
    def run_softplus(self, interpreter: Interpreter, op: ew.SoftplusOp, args: PythonValues) -> PythonValues:
        x, beta, threshold = args[0], op.beta.value.data, op.threshold.value.data
        linear = beta * x > threshold
        soft = np.log1p(np.exp(np.where(linear, 0, beta * x))) / beta
        return (typed(op.result, np.where(linear, x, soft)),)

    @impl(ew.HardSigmoidOp)
    def run_hard_sigmoid(self, interpreter: Interpreter, op: ew.HardSigmoidOp, args: PythonValues) -> PythonValues:
        y = np.clip(op.alpha.value.data * args[0] + op.beta.value.data, 0, 1)
        return (typed(op.result, y),)

    @impl(ew.ClipOp)
    def run_clip(self, interpreter: Interpreter, op: ew.ClipOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.clip(args[0], op.min.value.data, op.max.value.data)),)

    @impl(ew.DropoutOp)
    def run_dropout(self, interpreter: Interpreter, op: ew.DropoutOp, args: PythonValues) -> PythonValues:
        return (args[0],)

    @impl(ew.DropoutTrainOp)
    def run_dropout_train(self, interpreter: Interpreter, op: ew.DropoutTrainOp, args: PythonValues) -> PythonValues:
        x: Array = np.asarray(args[0])
        ratio = op.ratio.value.data
        mask = np.random.default_rng().random(x.shape) >= ratio  # fresh draws: the op is random by definition
        y = np.zeros_like(x) if ratio == 1.0 else x * mask / x.dtype.type(1.0 - ratio)
        return (typed(op.result, y), typed(op.mask, mask))

    @impl(ew.CastOp)
    def run_cast(self, interpreter: Interpreter, op: ew.CastOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        dtype = numpy_dtype(op.result.type.get_element_type())
        if dtype is None:
            raise NotImplementedError(f"graph.cast: no NumPy dtype for {op.result.type}")
        if dtype.kind in "iu" and x.dtype.kind == "f":
            return (np.trunc(x).astype(dtype),)
        return (x.astype(dtype),)

    # ---- binary ops (NumPy broadcasting) ----

    @impl(ew.AddOp)
    def run_add(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, args[0] + args[1]),)

    @impl(ew.SubOp)
    def run_sub(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, args[0] - args[1]),)

    @impl(ew.MulOp)
    def run_mul(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, args[0] * args[1]),)

    @impl(ew.DivOp)
    def run_div(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        lhs, rhs = args
        if lhs.dtype.kind in "iu":
            # Exactly, in integers (a float64 quotient rounds 64-bit ones): floor division, moved toward zero.
            quotient = np.floor_divide(lhs, rhs)
            inexact = (lhs - quotient * rhs != 0) & ((lhs < 0) != (rhs < 0))
            return (typed(op.result, np.where(inexact, quotient + 1, quotient)),)
        return (typed(op.result, lhs / rhs),)

    @impl(ew.MaxOp)
    def run_max(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.maximum(args[0], args[1])),)

    @impl(ew.MinOp)
    def run_min(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.minimum(args[0], args[1])),)

    @impl(ew.PowOp)
    def run_pow(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.power(args[0], args[1])),)

    @impl(ew.RemOp)
    def run_rem(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.mod(args[0], args[1])),)

    @impl(ew.FmodOp)
    def run_fmod(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.fmod(args[0], args[1])),)

    @impl(ew.AndOp)
    def run_and(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.logical_and(args[0], args[1])),)

    @impl(ew.OrOp)
    def run_or(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.logical_or(args[0], args[1])),)

    @impl(ew.BitcastOp)
    def run_bitcast(self, interpreter: Interpreter, op: ew.BitcastOp, args: PythonValues) -> PythonValues:
        dtype = numpy_dtype(op.result.type.get_element_type())
        assert dtype is not None
        return (np.array(args[0], order="C").view(dtype),)

    @impl(ew.BitwiseAndOp)
    def run_bitwise_and(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.bitwise_and(args[0], args[1])),)

    @impl(ew.BitwiseOrOp)
    def run_bitwise_or(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.bitwise_or(args[0], args[1])),)

    @impl(ew.BitwiseXorOp)
    def run_bitwise_xor(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.bitwise_xor(args[0], args[1])),)

    @impl(ew.ShiftLeftOp)
    def run_shift_left(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        x, shift, in_range = _shift_operands(args[0], args[1])
        return (typed(op.result, np.where(in_range, np.left_shift(x, shift), 0)),)

    @impl(ew.ShiftRightOp)
    def run_shift_right(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        x, shift, in_range = _shift_operands(args[0], args[1])
        # An out-of-range shift moves every bit out: the sign fill, which a shift by width - 1 gives.
        width = x.dtype.itemsize * 8
        return (typed(op.result, np.right_shift(x, np.where(in_range, shift, width - 1))),)

    @impl(ew.PreluOp)
    def run_prelu(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        x, slope = args
        return (typed(op.result, np.where(x >= 0, x, x * slope)),)

    @impl(ew.EqOp)
    def run_eq(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (np.equal(args[0], args[1]),)

    @impl(ew.NeOp)
    def run_ne(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (np.not_equal(args[0], args[1]),)

    @impl(ew.LtOp)
    def run_lt(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (np.less(args[0], args[1]),)

    @impl(ew.LeOp)
    def run_le(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (np.less_equal(args[0], args[1]),)

    @impl(ew.GtOp)
    def run_gt(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (np.greater(args[0], args[1]),)

    @impl(ew.GeOp)
    def run_ge(self, interpreter: Interpreter, op: ew.BinaryOp, args: PythonValues) -> PythonValues:
        return (np.greater_equal(args[0], args[1]),)

    @impl(ew.WhereOp)
    def run_where(self, interpreter: Interpreter, op: ew.WhereOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.where(args[0], args[1], args[2])),)
