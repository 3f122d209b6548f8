"""Torch implementations of the graph dialect's elementwise ops.

Most are one ATen function with a structured `out=` kernel, registered from the table below; the
rest are written out where the graph op's definition differs from torch's (NaN's sign, integer
division, clip bounds on integers, hard_sigmoid's parameters).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

import torch
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation

from gnomon.dialects.graph import elementwise as ew
from gnomon.runtime.library.base import ATEN_NN, Launch, TorchImpl, aten, element_type, torch_dtype, torch_impl

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _register(op_type: type[Operation], fn: Callable[..., torch.Tensor]) -> None:
    """An op that is `fn` of its operands, `fn` taking `out=`."""
    impl = aten(fn)
    torch_impl(op_type)(lambda op: impl)


_ONE_FUNCTION: dict[type[Operation], Callable[..., torch.Tensor]] = {
    ew.AbsOp: torch.abs,
    ew.AcosOp: torch.acos,
    ew.AcoshOp: torch.acosh,
    ew.AsinOp: torch.asin,
    ew.AsinhOp: torch.asinh,
    ew.AtanOp: torch.atan,
    ew.AtanhOp: torch.atanh,
    ew.CeilOp: torch.ceil,
    ew.CosOp: torch.cos,
    ew.ErfOp: torch.erf,
    ew.ExpOp: torch.exp,
    ew.FloorOp: torch.floor,
    ew.HardSwishOp: ATEN_NN.hardswish,
    ew.LogOp: torch.log,
    ew.NegOp: torch.neg,
    ew.NotOp: torch.logical_not,
    ew.ReciprocalOp: torch.reciprocal,
    ew.RoundOp: torch.round,  # half to even, as the graph op
    ew.RsqrtOp: torch.rsqrt,
    ew.SigmoidOp: torch.sigmoid,
    ew.SiluOp: ATEN_NN.silu,
    ew.SinOp: torch.sin,
    ew.SinhOp: torch.sinh,
    ew.SqrtOp: torch.sqrt,
    ew.TanhOp: torch.tanh,
    ew.AddOp: torch.add,
    ew.AndOp: torch.logical_and,
    ew.BitwiseAndOp: torch.bitwise_and,
    ew.BitwiseNotOp: torch.bitwise_not,
    ew.BitwiseOrOp: torch.bitwise_or,
    ew.BitwiseXorOp: torch.bitwise_xor,
    ew.MaxOp: torch.maximum,  # NaN-propagating, as NumPy's maximum
    ew.MinOp: torch.minimum,
    ew.MulOp: torch.mul,
    ew.OrOp: torch.logical_or,
    ew.PowOp: torch.pow,
    ew.RemOp: torch.remainder,  # the sign of the divisor, as Python's %
    ew.FmodOp: torch.fmod,  # the sign of the dividend, as C's fmod
    ew.SubOp: torch.sub,
    ew.EqOp: torch.eq,
    ew.GeOp: torch.ge,
    ew.GtOp: torch.gt,
    ew.LeOp: torch.le,
    ew.LtOp: torch.lt,
    ew.NeOp: torch.ne,
    ew.WhereOp: torch.where,
}

for _op_type, _fn in _ONE_FUNCTION.items():
    _register(_op_type, _fn)


# ---- unary maps that differ from torch's function or take properties ----


@torch_impl(ew.ReluOp)
def relu(op: ew.UnaryOp) -> TorchImpl:
    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        # relu has no out= kernel of its own (relu.out is a generated copy-back); clamp_min is relu's kernel.
        return partial(torch.clamp_min, args[0], 0, out=results[0])

    return TorchImpl(torch.relu, into)


@torch_impl(ew.SignOp)
def sign(op: ew.UnaryOp) -> TorchImpl:
    def run(x: torch.Tensor) -> torch.Tensor:
        # torch's sign of NaN is 0; the graph op's (NumPy's) is NaN.
        return torch.where(x.isnan(), x, torch.sign(x)) if x.is_floating_point() else torch.sign(x)

    return TorchImpl(run)


@torch_impl(ew.SeluOp)
def selu(op: ew.UnaryOp) -> TorchImpl:
    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        # selu has no out= kernel; it is elu's kernel with selu's constants.
        return partial(ATEN_NN.elu, args[0], SELU_ALPHA, SELU_SCALE, 1.0, out=results[0])

    return TorchImpl(torch.selu, into)


@torch_impl(ew.SoftsignOp)
def softsign(op: ew.UnaryOp) -> TorchImpl:
    def run(x: torch.Tensor) -> torch.Tensor:
        return x / (1 + x.abs())

    return TorchImpl(run)


@torch_impl(ew.GeluOp)
def gelu(op: ew.GeluOp) -> TorchImpl:
    return aten(ATEN_NN.gelu, approximate=op.approximate.data)


@torch_impl(ew.EluOp)
def elu(op: ew.EluOp) -> TorchImpl:
    return aten(ATEN_NN.elu, alpha=op.alpha.value.data)


@torch_impl(ew.LeakyReluOp)
def leaky_relu(op: ew.LeakyReluOp) -> TorchImpl:
    return aten(ATEN_NN.leaky_relu, negative_slope=op.alpha.value.data)


@torch_impl(ew.SoftplusOp)
def softplus(op: ew.SoftplusOp) -> TorchImpl:
    return aten(ATEN_NN.softplus, beta=op.beta.value.data, threshold=op.threshold.value.data)


@torch_impl(ew.HardSigmoidOp)
def hard_sigmoid(op: ew.HardSigmoidOp) -> TorchImpl:
    alpha, beta = op.alpha.value.data, op.beta.value.data
    # torch's hardsigmoid is the graph op with alpha 1/6, beta 1/2 (ONNX's default alpha is 0.2).
    if math.isclose(alpha, 1 / 6) and beta == 0.5:
        return aten(ATEN_NN.hardsigmoid)

    def run(x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * alpha + beta, 0, 1)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, out = args[0], results[0]

        def launch() -> None:
            torch.mul(x, alpha, out=out).add_(beta).clamp_(0, 1)

        return launch

    return TorchImpl(run, into)


def _clip_bounds(op: ew.ClipOp) -> tuple[float | int | None, float | int | None]:
    """clamp's bounds: none for ±inf; on integers, truncated (NumPy clips in float, then truncates the cast)."""
    low, high = op.min.value.data, op.max.value.data
    integer = isinstance(element_type(op.input), IntegerType)
    bounds = [None if math.isinf(b) else (math.trunc(b) if integer else b) for b in (low, high)]
    return bounds[0], bounds[1]


@torch_impl(ew.ClipOp)
def clip(op: ew.ClipOp) -> TorchImpl:
    low, high = _clip_bounds(op)
    return aten(torch.clamp, min=low, max=high)


@torch_impl(ew.DropoutOp)
def dropout(op: ew.DropoutOp) -> TorchImpl:
    def run(x: torch.Tensor) -> torch.Tensor:
        return x  # the identity at inference

    return TorchImpl(run)


@torch_impl(ew.DropoutTrainOp)
def dropout_train(op: ew.DropoutTrainOp) -> TorchImpl:
    ratio = op.ratio.value.data

    def run(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.native_dropout(x, ratio, True)  # eager's kernel and generator

    return TorchImpl(run)


@torch_impl(ew.CastOp)
def cast(op: ew.CastOp) -> TorchImpl:
    dtype = torch_dtype(element_type(op.result))

    def run(x: torch.Tensor) -> torch.Tensor:
        return x.to(dtype)  # float to integer truncates toward zero, as the graph op does

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(results[0].copy_, args[0])  # copy_ converts the element type

    return TorchImpl(run, into)


@torch_impl(ew.BitcastOp)
def bitcast(op: ew.BitcastOp) -> TorchImpl:
    dtype = torch_dtype(element_type(op.result))

    def run(x: torch.Tensor) -> torch.Tensor:
        return x.view(dtype)  # the same bytes, read as the other type

    return TorchImpl(run)


# ---- binary ops that differ from torch's function ----


@torch_impl(ew.DivOp)
def div(op: ew.BinaryOp) -> TorchImpl:
    if isinstance(element_type(op.lhs), IntegerType):
        return aten(torch.div, rounding_mode="trunc")
    return aten(torch.div)


@torch_impl(ew.PreluOp)
def prelu(op: ew.BinaryOp) -> TorchImpl:
    # Slopes broadcast to lhs in any layout, which aten.prelu's channel-axis rule does not cover.
    def run(x: torch.Tensor, slope: torch.Tensor) -> torch.Tensor:
        return torch.where(x >= 0, x, x * slope)

    return TorchImpl(run)


def _shift_counts(x: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the count is in [0, width), and the count with out-of-range ones made width - 1: ATen's shifts,
    like C's, leave those undefined, where the graph ops shift every bit out."""
    width = x.dtype.itemsize * 8
    in_range = (shift >= 0) & (shift < width)
    return in_range, torch.where(in_range, shift, width - 1)


@torch_impl(ew.ShiftLeftOp)
def shift_left(op: ew.BinaryOp) -> TorchImpl:
    def run(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        in_range, count = _shift_counts(x, shift)
        return torch.where(in_range, torch.bitwise_left_shift(x, count), 0)

    return TorchImpl(run)


@torch_impl(ew.ShiftRightOp)
def shift_right(op: ew.BinaryOp) -> TorchImpl:
    def run(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        # A shift by width - 1 gives the sign fill, which is what an out-of-range count gives.
        return torch.bitwise_right_shift(x, _shift_counts(x, shift)[1])

    return TorchImpl(run)
