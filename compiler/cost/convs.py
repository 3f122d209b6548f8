"""Convolutions as the runtime's library runs them: which call takes one, and whether its weight is packed once.

Read by the runtime (`gnomon.runtime.library`), by `graph-to-kernel`'s library table and by the cost model
(`gnomon.cost.analytical`), so that a convolution is priced as it runs.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import SSAValue

from gnomon.dialects.graph import nn
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import channels_last

__all__ = ["gemm_conv", "packs_weight"]


def _shape(value: SSAValue) -> tuple[int, ...]:
    shaped = value.type
    assert isinstance(shaped, TensorType)
    return shaped.get_shape()


def gemm_conv(op: nn.ConvOp) -> bool:
    """Whether a convolution is a matrix product per image (one per group): a 1x1 kernel, stride 1, no padding,
    and more than one input channel per group (ShuffleNet's grouped 1x1 convolutions ran 2.9-11x faster as one
    batched product than as aten's grouped convolution here; channels-last, one batched product took 0.28-1.1x
    oneDNN's time on ShuffleNet's layers, 3.6x faster on the 24>112 one, 10% slower on the 272 and 544 ones; a
    depthwise 1x1 one is a scale, not a product). A channels-last one is one product over all its pixels, a
    batched one over its groups."""
    weight = _shape(op.weight)
    return (
        weight[1] > 1
        and all(k == 1 for k in weight[2:])
        and all(s == 1 for s in ints(op.strides))
        and not any(ints(op.pads))
    )


def packs_weight(op: nn.ConvOp) -> bool:
    """Whether the runtime packs a 2-D float32 convolution's constant weight into oneDNN's blocked layout once, when
    it binds the kernel, rather than oneDNN reordering the plain weight on every call.

    A packed weight makes oneDNN take blocked activations, which it reorders in and out on every call instead
    (channels-first ones). So packing pays where the weight outweighs the activations: late layers (512>512 3x3
    at 14x14 and 28x28 took 0.87x the time, 64>256 at 13x13 0.82x) and depthwise layers (0.77x at 28x28), and
    costs where they outweigh it (64>64 at 224x224 1.35x, 3>64 4.5x); measured here. Channels-last activations
    need no reorder either way, and a packed weight was as fast or faster on every shape tried (0.46-0.95x the plain
    weight's time, ResNet's and MobileNet's layers): theirs is always packed. BLAS's 1x1 convolutions (`gemm_conv`)
    take the weight as it is."""
    weight, result = _shape(op.weight), _shape(op.result)
    weight_type = op.weight.type
    assert isinstance(weight_type, TensorType)
    if len(weight) != 4 or weight_type.get_element_type() != f32 or gemm_conv(op):
        return False
    if channels_last(op):
        return True
    groups = op.groups.value.data
    depthwise = groups > 1 and weight[1] == 1 and weight[0] == groups
    return depthwise or math.prod(weight) > math.prod(_shape(op.input)) + math.prod(result)
