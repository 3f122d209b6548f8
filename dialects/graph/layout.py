"""Activation layouts of the graph dialect's windowed ops (`graph.conv`, `graph.max_pool`, `graph.avg_pool`).

Activations are channels-first, (N, C, *spatial), unless an op's `layout` property says channels-last: `"nhwc"`,
2-D activations as (N, H, W, C), which `graph-layout` sets where it predicts a region faster so.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation

__all__ = ["CHANNELS_LAST", "TO_CHANNELS_FIRST", "TO_CHANNELS_LAST", "channels_last", "permuted"]

CHANNELS_LAST = "nhwc"
"""The `layout` of an op on channels-last 2-D activations (N, H, W, C); without one, they are (N, C, H, W)."""

TO_CHANNELS_LAST = (0, 2, 3, 1)
"""The permutation from (N, C, H, W) to (N, H, W, C)."""
TO_CHANNELS_FIRST = (0, 3, 1, 2)
"""The permutation from (N, H, W, C) to (N, C, H, W)."""


def channels_last(op: Operation) -> bool:
    """Whether `op` takes and gives channels-last activations (`layout = "nhwc"`)."""
    layout = op.properties.get("layout")
    return isinstance(layout, StringAttr) and layout.data == CHANNELS_LAST


def permuted(shape: Sequence[int], permutation: Sequence[int]) -> tuple[int, ...]:
    """`shape`'s dims in `permutation`'s order."""
    return tuple(shape[i] for i in permutation)
