"""Fully connected layers as the runtime's library runs them: whether a constant weight is packed once.

Read by the runtime (`gnomon.runtime.library.kernel`) and by the cost model (`gnomon.cost.analytical`), so that a
linear layer is priced as it runs.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import TensorType, f32

from gnomon.dialects.graph.linalg import LinearOp

__all__ = ["packs_linear_weight"]

PACKED_WEIGHT_ELEMENTS = 1 << 17
"""The smallest weight (512 KiB of float32) the runtime packs."""
PACKED_PRODUCTS = 1 << 20
"""The fewest multiply-adds of a call the runtime packs the weight for."""


def packs_linear_weight(op: LinearOp) -> bool:
    """Whether the runtime packs a float32 linear layer's constant weight into oneDNN's blocked layout once, when it
    binds the kernel, and calls oneDNN's linear on it (`mkldnn._linear_pointwise`, as Inductor's CPU backend does
    after freezing) rather than BLAS's addmm, which packs the plain weight on every call.

    oneDNN's call costs about 14 us more than addmm's, so packing pays on large products only. Measured here
    (2-core AVX-512 Xeon, smallest of 5 medians, the copy into the runtime's buffer included; rows x in x out):
    1x1280x1000 1.51x faster packed, 1x2048x1000 1.69x, 64x1024x2048 1.57x, 197x384x1152 1.15x, 256x415x512 1.14x,
    256x512x256 1.06x, 1024x256x768 1.04x; slower packed: 1x512x256 0.52x, 256x13x512 0.62x, 128x256x256 0.92x,
    1024x64x64 0.85x, the products under a million multiply-adds tried 0.18-0.52x. Left unpacked by the weight's
    size though faster packed: 256x512x64 (1.18x). The probes included the MLP's and the ViT block's layer shapes of
    `bench/latency.py`, whose figures for those two models are therefore not independent of this rule."""
    weight_type, input_type = op.weight.type, op.input.type
    if not isinstance(weight_type, TensorType) or not isinstance(input_type, TensorType):
        return False
    weight, rows = weight_type.get_shape(), input_type.get_shape()[:-1]
    if weight_type.get_element_type() != f32 or len(weight) != 2 or any(d < 0 for d in (*weight, *rows)):
        return False
    return math.prod(weight) >= PACKED_WEIGHT_ELEMENTS and math.prod(rows) * math.prod(weight) >= PACKED_PRODUCTS
