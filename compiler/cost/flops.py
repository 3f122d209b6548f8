"""FLOP counts of the ops that are no matrix products, by the conventions of `gnomon.cost.roofline`: every
arithmetic or transcendental function counts 1; an elementwise op its formula's operations per result element; a
reduction, pooling window, softmax or normalization the operations of its formula over its rows or windows."""

from __future__ import annotations

import math

from gnomon.cost.values import CostModelError, describe, elements, static_shape
from gnomon.dialects.graph.base import GraphOperation, ints, normalize_axis
from gnomon.dialects.graph.elementwise import (
    AbsOp,
    AcoshOp,
    AcosOp,
    AddOp,
    AndOp,
    AsinhOp,
    AsinOp,
    AtanhOp,
    AtanOp,
    BitwiseAndOp,
    BitwiseNotOp,
    BitwiseOrOp,
    BitwiseXorOp,
    CastOp,
    CeilOp,
    ClipOp,
    CosOp,
    DivOp,
    EluOp,
    EqOp,
    ErfOp,
    ExpOp,
    FloorOp,
    FmodOp,
    GeOp,
    GtOp,
    HardSigmoidOp,
    HardSwishOp,
    LeakyReluOp,
    LeOp,
    LogOp,
    LtOp,
    MaxOp,
    MinOp,
    MulOp,
    NegOp,
    NeOp,
    NotOp,
    OrOp,
    PowOp,
    PreluOp,
    ReciprocalOp,
    ReluOp,
    RemOp,
    RoundOp,
    RsqrtOp,
    SeluOp,
    ShiftLeftOp,
    ShiftRightOp,
    SigmoidOp,
    SignOp,
    SiluOp,
    SinhOp,
    SinOp,
    SoftplusOp,
    SoftsignOp,
    SqrtOp,
    SubOp,
    TanhOp,
    WhereOp,
)  # fmt: skip
from gnomon.dialects.graph.nn import (
    AdaptiveAvgPoolOp,
    AdaptivePoolOp,
    AffineNormOp,
    AvgPoolOp,
    BatchNormOp,
    BatchNormTrainOp,
    GlobalAvgPoolOp,
    GlobalPoolOp,
    GroupNormOp,
    InstanceNormOp,
    LayerNormOp,
    LogSoftmaxOp,
    LrnOp,
    MaxPoolOp,
    SoftmaxOp,
)
from gnomon.dialects.graph.reduce import ArgReduceOp, ReduceMeanOp, ReduceOp
from gnomon.dialects.graph.sampling import GridSampleOp

__all__ = [
    "ELEMENTWISE_FLOPS",
    "GELU_FLOPS",
    "grid_sample_flops",
    "norm_flops",
    "pool_flops",
    "reduction_flops",
    "softmax_flops",
]

_ONE_FLOP: tuple[type[GraphOperation], ...] = (
    AbsOp, AcosOp, AcoshOp, AddOp, AndOp, AsinOp, AsinhOp, AtanOp, AtanhOp, CeilOp, CosOp, DivOp, EqOp, ErfOp, ExpOp,
    FloorOp, FmodOp, GeOp, GtOp, LeOp, LogOp, LtOp, MaxOp, MinOp, MulOp, NeOp, NegOp, NotOp, OrOp, PowOp,
    ReciprocalOp, ReluOp, RemOp, RoundOp, RsqrtOp, SignOp, SinOp, SinhOp, SqrtOp, SubOp, TanhOp, WhereOp,
    BitwiseAndOp, BitwiseNotOp, BitwiseOrOp, BitwiseXorOp,
)  # fmt: skip

ELEMENTWISE_FLOPS: dict[type[GraphOperation], int] = {
    **dict.fromkeys(_ONE_FLOP, 1),
    CastOp: 0,  # a conversion, no arithmetic
    ClipOp: 2,  # max, min
    LeakyReluOp: 2,  # mul, select
    PreluOp: 2,  # mul, select
    SoftsignOp: 3,  # abs, add, div
    SigmoidOp: 4,  # neg, exp, add, div
    HardSigmoidOp: 4,  # mul, add, max, min
    EluOp: 4,  # exp, sub, mul, select
    SiluOp: 5,  # sigmoid's 4, mul
    SeluOp: 5,  # elu's 4, mul
    HardSwishOp: 5,  # add, max, min, mul, div
    SoftplusOp: 6,  # mul, exp, add, log, div, select above the threshold
    ShiftLeftOp: 3,  # range check, shift, select
    ShiftRightOp: 3,  # range check, select of the count, shift
}
"""FLOPs per result element of each elementwise op (gelu depends on its approximation: `GELU_FLOPS`)."""

GELU_FLOPS: dict[str, int] = {
    "none": 5,  # x * 0.5 * (1 + erf(x / sqrt 2)): mul, erf, add, mul, mul
    "tanh": 9,  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): 2 muls for x^3, mul, add, mul, tanh, add, 2 muls
}


def reduction_flops(op: ReduceOp | ArgReduceOp) -> int:
    """n - 1 operations per result to reduce n values; a mean's division makes it n."""
    x = static_shape(op.input)
    if isinstance(op, ReduceOp):
        n = math.prod(x[a] for a in op.reduced_axes())
    else:
        n = x[normalize_axis(op.axis.value.data, len(x), op.name)]
    outputs = elements(op.results[0])
    return outputs * n if isinstance(op, ReduceMeanOp) else outputs * max(n - 1, 0)


def _rows(total: int, n: int) -> int:
    return total // n if n else 0


def softmax_flops(op: SoftmaxOp | LogSoftmaxOp) -> int:
    """Per row of n: softmax is max (n - 1), sub (n), exp (n), sum (n - 1), div (n): 5n - 2;
    log-softmax is max, sub, exp, sum, one log, sub: 4n - 1."""
    x = static_shape(op.input)
    n = x[normalize_axis(op.axis.value.data, len(x), op.name)]
    rows = _rows(math.prod(x), n)
    return rows * (5 * n - 2 if isinstance(op, SoftmaxOp) else 4 * n - 1)


def norm_flops(op: BatchNormOp | BatchNormTrainOp | AffineNormOp | LrnOp) -> int:
    """Statistics over rows of n: mean n, variance 3n (sub, square, sum and a division), rstd 2 (add epsilon,
    rsqrt); normalizing 1 per element (times rstd); an affine pair 2 per element (mul, add)."""
    x = static_shape(op.input)
    total = math.prod(x)
    match op:
        case BatchNormOp():
            # Per channel a factor scale * rsqrt(var + eps) and a shift bias - mean * factor (5); then x * f + s.
            return 2 * total + 5 * x[1]
        case BatchNormTrainOp():
            # Batch statistics per channel (4n + 2), then the inference form's factor (3) and its 2 per element.
            return 6 * total + 5 * x[1]
        case LrnOp():
            # Per element: `size` squares and size - 1 adds, then times alpha / size, plus bias, pow, div.
            return (2 * op.size.value.data + 3) * total
        case LayerNormOp():
            n = math.prod(x[normalize_axis(op.axis.value.data, len(x), op.name) :])
        case InstanceNormOp():
            n = math.prod(x[2:])
        case GroupNormOp():
            n = x[1] // op.num_groups.value.data * math.prod(x[2:])
        case _:
            raise CostModelError(f"cost model: no model for {describe(op)}")
    affine = 2 * total if op.affine else 0
    return _rows(total, n) * (5 * n + 2) + affine


def pool_flops(op: MaxPoolOp | AvgPoolOp | GlobalPoolOp | AdaptivePoolOp) -> int:
    """A window of w values: max takes w - 1 compares, average w - 1 adds and a division (w)."""
    x, outputs = static_shape(op.input), elements(op.results[0])
    match op:
        case MaxPoolOp() | AvgPoolOp():
            window_elements = outputs * math.prod(ints(op.kernel))
        case GlobalPoolOp():
            window_elements = math.prod(x)
        case AdaptivePoolOp():
            # PyTorch's windows along a dim of `size` into `out`: [floor(i size / out), ceil((i + 1) size / out)).
            per_dim = [
                sum(-(-(i + 1) * size // out) - i * size // out for i in range(out))
                for size, out in zip(x[2:], ints(op.output_size), strict=True)
            ]
            window_elements = x[0] * x[1] * math.prod(per_dim)
    averages = isinstance(op, AvgPoolOp | GlobalAvgPoolOp | AdaptiveAvgPoolOp)
    return window_elements if averages else window_elements - outputs


GRID_SAMPLE_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
"""The input elements a grid sample's interpolation weighs along each spatial dim."""

GRID_SAMPLE_WEIGHT_FLOPS = {"nearest": 1, "linear": 3, "cubic": 36}
"""Per point and dim, the taps' weights: a rounding; a floor, the fraction and 1 - it; four cubics of about 9."""


def grid_sample_flops(op: GridSampleOp) -> int:
    """Per point and dim, the coordinate's denormalization (3) and the taps' weights; per output element, a
    multiply and an add for each tap of the dims' outer product."""
    grid, mode = static_shape(op.grid), op.mode.data
    dims = grid[-1]
    coordinates = math.prod(grid[:-1]) * dims * (3 + GRID_SAMPLE_WEIGHT_FLOPS[mode])
    return coordinates + elements(op.result) * 2 * GRID_SAMPLE_TAPS[mode] ** dims
