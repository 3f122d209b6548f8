"""Windowed pooling as the runtime's library runs it: which kernel takes a pool, and the constants its price uses.

`library_pool` is the one decision, read by the runtime (`gnomon.runtime.library.nn`) and by the cost model
(`gnomon.cost.analytical`), so that a pool is priced as it runs.
"""

from __future__ import annotations

import math
from typing import Literal

from xdsl.dialects.builtin import TensorType, f32

from gnomon.dialects.graph.base import GraphOperation, ints
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.nn import AvgPoolOp, MaxPoolOp

__all__ = [
    "MAX_POOL_INSTRUCTIONS",
    "ONEDNN_POOL_COPIES",
    "ONEDNN_POOL_MIN",
    "POOL_OUTPUT_FLOOR",
    "PoolKernel",
    "library_pool",
]

MAX_POOL_INSTRUCTIONS = 2
"""A windowed max pool's cost per compare, in an average pool's adds: ATen's CPU max pooling keeps each window's
argmax as it compares, so its windows run at about half the rate of average pooling's."""

ONEDNN_POOL_MIN = 1 << 16
"""Input elements from which the runtime pools a 2-D float32 tensor with oneDNN, on a blocked copy of it, rather
than with ATen's NCHW kernels: 3-10x faster there, slower below (a 7x7 average over 1024x7x7 took 90 us there
against 35 in ATen)."""

ONEDNN_POOL_COPIES = 5
"""How many times a oneDNN pool moves its bytes: the input into the blocked layout and through the pooling, the
result back out and into the arena, and a max pool's NaN check. Set from SqueezeNet's three max pools here (three
passes predicted them 2x too fast); on pools not used to set it (`gnomon analyze --device local` against `gnomon
run --profile`), Inception-v2's eight took 0.58-1.10x of the measured time predicted, AlexNet's and ZFNet's four
oneDNN max pools 0.45-1.20x."""

PoolKernel = Literal["onednn", "window-sums", "channels-last", "aten"]


def library_pool(op: MaxPoolOp | AvgPoolOp) -> PoolKernel:
    """How the runtime's library runs a windowed pooling (`gnomon.runtime.library.nn`), decided here, once, for
    the runtime and for the cost model: a channels-last pool (`layout = "nhwc"`) on ATen's channels-last kernels,
    which vectorize over channels in one pass (9-21x its NCHW ones on ResNet's, SqueezeNet's and DenseNet's pools
    here, and as fast as oneDNN's without its copies); an average over a window along one dim, stride 1 and
    unpadded (torch-mlir's LRN), as shifted slices summed; an undilated 2-D max pool, or a 2-D average pool with
    pads torch takes and no ceil mode, of a float32 input of at least `ONEDNN_POOL_MIN` elements, on oneDNN;
    anything else on ATen. (`graph-to-kernel` generates a channels-last max or average pool instead, `pool_nhwc`,
    which the cost model prices as the same one pass.)"""
    if channels_last(op):
        return "channels-last"
    kernel, strides, pads = ints(op.kernel), ints(op.strides), ints(op.pads)
    if isinstance(op, AvgPoolOp) and sum(k > 1 for k in kernel) == 1 and set(strides) == {1} and not any(pads):
        return "window-sums"
    source = op.operands[0].type
    if not isinstance(source, TensorType) or source.get_element_type() != f32 or len(kernel) != 2:
        return "aten"
    if math.prod(source.get_shape()) < ONEDNN_POOL_MIN:
        return "aten"
    if isinstance(op, MaxPoolOp):
        return "onednn" if all(d == 1 for d in ints(op.dilations)) else "aten"
    torch_pads = pads[:2] == pads[2:] and all(p <= k // 2 for p, k in zip(pads, kernel, strict=False))
    # A ceil-mode average's last windows have divisors of ATen's own rules: those stay ATen's.
    return "onednn" if torch_pads and not op.ceil_mode.value.data else "aten"


POOL_OUTPUT_FLOOR: dict[type[GraphOperation], int] = {AvgPoolOp: 9, MaxPoolOp: 5}
"""The fewest window reductions an output of ATen's 2-D CPU pooling costs, however small its window: each output
also computes its window's bounds, its divisor (average) or its argmax (max), and is stored on its own, so a 2x2
or 3x3 window costs about the same per output; a max pool's larger windows (3x3: 8 compares) rise above the
floor."""
