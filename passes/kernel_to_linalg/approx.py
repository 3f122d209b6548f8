"""Vectorizable f32 exp, log, tanh and erf, as arith ops.

LLVM turns `math.exp` and friends into scalar libm calls, which keep the loop vectorizer from
vectorizing a loop of sigmoids or GELUs. These are Cephes' single-precision algorithms (range
reduction, then a polynomial), within a few ulp of libm over the whole f32 range; special
values (±inf, NaN, denormals) are handled with selects so the loop stays branch-free.
`expm1` and `log1p` use Kahan's rewrites over exp and log, which stay accurate near 0.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, IntegerType, VectorType, f32, i32
from xdsl.ir import Attribute, SSAValue

from gnomon.passes.kernel_to_linalg.builder import ScalarBuilder

_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_LOG_P = (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1,
)  # fmt: skip
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
_ERF_SMALL_P = (
    7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3, -2.685381193529856e-2,
    1.128358514861418e-1, -3.761262582423300e-1, 1.128379165726710,
)  # fmt: skip
_ERF_LARGE_P = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592, 0.0)


def _like(x: SSAValue, element: Attribute) -> Attribute:
    """`element`, or a vector of it shaped as `x` where `x` is a vector (`conv_nhwc` runs these on vectors)."""
    shaped = x.type
    return VectorType(element, shaped.get_shape()) if isinstance(shaped, VectorType) else element


def _i32_like(x: SSAValue) -> IntegerType:
    """i32 shaped as `x`: MLIR's casts take vectors, which xDSL's annotations (a scalar type) leave out."""
    return cast(IntegerType, _like(x, i32))


def _f32_like(x: SSAValue) -> Float32Type:
    return cast(Float32Type, _like(x, f32))


def _is_f32(x: SSAValue) -> bool:
    shaped = x.type
    return (shaped.element_type if isinstance(shaped, VectorType) else shaped) == f32


def _power_of_two(b: ScalarBuilder, n: SSAValue) -> SSAValue:
    """2^n as an f32, for an i32 n in [-126, 127]: n + 127 in the exponent field."""
    biased = b.emit(arith.AddiOp(n, b.const(127, n.type)))
    return b.emit(arith.BitcastOp(b.emit(arith.ShLIOp(biased, b.const(23, n.type))), _like(n, f32)))


def exp(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """e^x: x = n ln2 + r with |r| <= ln2 / 2, e^r by a polynomial, times 2^n in two steps (so overflow
    gives inf and underflow denormals, as libm)."""
    clamped = b.clamp(x, -104.0, 88.8)
    n = b.emit(math.FloorOp(b.fma(clamped, b.like(1.44269504088896341, x), b.like(0.5, x))))
    # ln2 split in a part exact in f32 and the rest, so n * ln2 loses nothing.
    minus_n = b.emit(arith.NegfOp(n))
    r = b.fma(minus_n, b.like(-2.12194440e-4, x), b.fma(minus_n, b.like(0.693359375, x), clamped))
    y = b.add(b.fma(b.polynomial(r, _EXP_P), b.mul(r, r), r), b.like(1.0, x))
    n_int = b.emit(arith.FPToSIOp(n, _i32_like(x)))
    half = b.emit(arith.ShRSIOp(n_int, b.const(1, n_int.type)))
    rest = b.emit(arith.SubiOp(n_int, half))
    scaled = b.mul(b.mul(y, _power_of_two(b, half)), _power_of_two(b, rest))
    return b.select(b.is_nan(x), x, scaled)


def sigmoid(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """1 / (1 + e^-x), with `exp`'s reduction and polynomial for e^-x but one scaling step: x is clamped to
    [-88.7, 87.3], where 2^n is a normal f32 and e^-x finite. Above, the sigmoid rounds to 1; below, it is under
    3e-39 and this gives 3e-39 (a denormal's difference). 24 ops beside constants, where 1 / (1 + `exp`(-x)) is 31."""
    clamped = b.clamp(x, -88.7, 87.3)
    n = b.emit(math.RoundEvenOp(b.mul(clamped, b.like(-1.44269504088896341, x))))
    # r = -x - n ln2, with ln2 split as in `exp`.
    r = b.emit(arith.NegfOp(b.fma(n, b.like(-2.12194440e-4, x), b.fma(n, b.like(0.693359375, x), clamped))))
    y = b.add(b.fma(b.polynomial(r, _EXP_P), b.mul(r, r), r), b.like(1.0, x))
    exp_minus_x = b.mul(y, _power_of_two(b, b.emit(arith.FPToSIOp(n, _i32_like(x)))))
    one = b.like(1.0, x)
    return b.select(b.is_nan(x), x, b.div(one, b.add(one, exp_minus_x)))


def log(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m by a polynomial in m - 1."""
    denormal = b.cmpf("olt", x, b.like(1.17549435e-38, x))
    normal = b.select(denormal, b.mul(x, b.like(8388608.0, x)), x)  # 2^23 makes a denormal normal
    ints = _like(x, i32)
    bits = b.emit(arith.BitcastOp(normal, ints))
    exponent = b.emit(arith.SubiOp(b.emit(arith.ShRSIOp(bits, b.const(23, ints))), b.const(126, ints)))
    mantissa_bits = b.emit(arith.OrIOp(b.emit(arith.AndIOp(bits, b.const(0x7FFFFF, ints))), b.const(0x3F000000, ints)))
    mantissa = b.emit(arith.BitcastOp(mantissa_bits, x.type))  # in [0.5, 1)
    e = b.sub(b.emit(arith.SIToFPOp(exponent, _f32_like(x))), b.select(denormal, b.like(23.0, x), b.like(0.0, x)))
    below = b.cmpf("olt", mantissa, b.like(0.707106781186547524, x))
    e = b.sub(e, b.select(below, b.like(1.0, x), b.like(0.0, x)))
    m = b.sub(b.select(below, b.add(mantissa, mantissa), mantissa), b.like(1.0, x))
    z = b.mul(m, m)
    y = b.mul(b.mul(b.polynomial(m, _LOG_P), m), z)
    y = b.add(y, b.mul(e, b.like(-2.12194440e-4, x)))
    y = b.add(y, b.mul(z, b.like(-0.5, x)))
    result = b.add(b.add(m, y), b.mul(e, b.like(0.693359375, x)))
    result = b.select(b.cmpf("oeq", x, b.like(float("inf"), x)), x, result)
    result = b.select(b.cmpf("oeq", x, b.like(0.0, x)), b.like(float("-inf"), x), result)
    # NaN and negative inputs give NaN.
    return b.select(b.cmpf("ult", x, b.like(0.0, x)), b.like(float("nan"), x), result)


def tanh(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """tanh x: an odd polynomial below |x| = 0.625, else 1 - 2 / (e^2|x| + 1) with x's sign."""
    z = b.emit(math.AbsFOp(x))
    s = b.mul(x, x)
    small = b.add(b.mul(b.mul(b.polynomial(s, _TANH_P), s), x), x)
    large = b.sub(b.like(1.0, x), b.div(b.like(2.0, x), b.add(exp(b, b.add(z, z)), b.like(1.0, x))))
    large = b.emit(math.CopySignOp(large, x))
    return b.select(b.cmpf("ogt", z, b.like(0.625, x)), large, small)


def erf(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """erf x: Cephes' odd polynomial below |x| = 1; above, Abramowitz and Stegun 7.1.26 (error < 1.5e-7)."""
    z = b.emit(math.AbsFOp(x))
    small = b.mul(x, b.polynomial(b.mul(x, x), _ERF_SMALL_P))
    t = b.div(b.like(1.0, x), b.add(b.like(1.0, x), b.mul(z, b.like(0.3275911, x))))
    tail = b.mul(b.polynomial(t, _ERF_LARGE_P), exp(b, b.emit(arith.NegfOp(b.mul(z, z)))))
    large = b.emit(math.CopySignOp(b.sub(b.like(1.0, x), tail), x))
    return b.select(b.cmpf("olt", z, b.like(1.0, x)), small, large)


def expm1(b: ScalarBuilder, x: SSAValue, exp_x: SSAValue) -> SSAValue:
    """e^x - 1 from e^x; near 0 (Kahan) (u - 1) x / ln u keeps the digits that u - 1 cancels."""
    one = b.like(1.0, x)
    u_minus_1 = b.sub(exp_x, one)
    near_zero = b.div(b.mul(u_minus_1, x), log_of(b, exp_x))
    near_zero = b.select(b.cmpf("oeq", exp_x, one), x, near_zero)
    return b.select(b.cmpf("olt", b.emit(math.AbsFOp(x)), b.like(0.5, x)), near_zero, u_minus_1)


def log1p(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """ln(1 + x) (Kahan): ln u * x / (u - 1) with u = 1 + x corrects the rounding of u."""
    one = b.like(1.0, x)
    u = b.add(one, x)
    result = b.div(b.mul(log_of(b, u), x), b.sub(u, one))
    result = b.select(b.cmpf("oeq", u, b.like(float("inf"), x)), u, result)
    return b.select(b.cmpf("oeq", u, one), x, result)


def exp_of(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """e^x: the vectorizable approximation for f32, libm's for other widths."""
    return exp(b, x) if _is_f32(x) else b.emit(math.ExpOp(x))


def sigmoid_of(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """1 / (1 + e^-x): the vectorizable approximation for f32, libm's exp for other widths."""
    if _is_f32(x):
        return sigmoid(b, x)
    one = b.like(1.0, x)
    return b.div(one, b.add(one, b.emit(math.ExpOp(b.emit(arith.NegfOp(x))))))


def log_of(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    return log(b, x) if _is_f32(x) else b.emit(math.LogOp(x))


def tanh_of(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    return tanh(b, x) if _is_f32(x) else b.emit(math.TanhOp(x))


def erf_of(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    return erf(b, x) if _is_f32(x) else b.emit(math.ErfOp(x))
