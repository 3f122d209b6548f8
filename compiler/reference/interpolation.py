"""Keys' cubic convolution, the kernel of ONNX's and PyTorch's cubic resampling (Resize, GridSample)."""

from __future__ import annotations

from gnomon.reference.base import Array

CUBIC_A = -0.75
"""The coefficient of Keys' cubic convolution, as ONNX's and PyTorch's bicubic modes use."""


def cubic_weights(t: Array) -> list[Array]:
    """The weights of the four taps at offsets -1, 0, 1 and 2 from floor(x), for fractions `t` = x - floor(x)."""
    a = CUBIC_A
    return [
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]
