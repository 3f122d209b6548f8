"""Reference semantics of `graph.grid_sample`: ONNX's GridSample (`onnx.reference`'s implementation, vectorized).

Each point's coordinates are denormalized in float32, as ONNX's reference computes them; nearest mode rounds them
half to even first. A coordinate beyond the input's borders ([0, size - 1] with align_corners, [-0.5, size - 0.5]
without) is clamped into the input (border) or reflected at the borders (reflection) before interpolating, and
each interpolation tap beyond the input is then zero, clamped or reflected again. The taps of the dims are
combined as an outer product: 1 (nearest), 2 (linear) or 4 (cubic) per dim.
"""

from __future__ import annotations

import itertools

import numpy as np

from gnomon.reference.base import Array
from gnomon.reference.interpolation import cubic_weights


def _reflect(x: Array, low: float, high: float) -> Array:
    """`x` folded into [low, high] by reflecting it at the nearer border as often as it takes."""
    span = high - low
    if span == 0:
        return np.full_like(x, low)
    below, above = low - x, x - high
    distance = np.where(x < low, below, above)
    folds = np.trunc(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    from_low, from_high = low + rest, high - rest
    folded = np.where(x < low, np.where(even, from_low, from_high), np.where(even, from_high, from_low))
    return np.where((x < low) | (x > high), folded, x)


def _taps(x: Array, mode: str) -> tuple[list[Array], list[Array]]:
    """The integer positions an interpolation reads around coordinates `x`, and their weights."""
    if mode == "nearest":
        return [x.astype(np.int64)], [np.ones_like(x)]
    base = np.floor(x)
    t = x - base
    index = base.astype(np.int64)
    if mode == "linear":
        return [index, index + 1], [1 - t, t]
    return [index + offset for offset in (-1, 0, 1, 2)], cubic_weights(t)


def _in_bounds(index: Array, size: int, padding_mode: str, low: float, high: float) -> tuple[Array, Array]:
    """The element a tap reads (clamped or reflected into the input), and whether it reads one (zeros: a tap
    beyond the input reads zero)."""
    if padding_mode == "border":
        return np.clip(index, 0, size - 1), np.ones(index.shape, dtype=bool)
    if padding_mode == "reflection":
        return np.trunc(_reflect(index.astype(np.float64), low, high)).astype(np.int64), np.ones(index.shape, bool)
    inside = (index >= 0) & (index < size)
    return np.clip(index, 0, size - 1), inside


def grid_sample(x: Array, grid: Array, mode: str, padding_mode: str, align_corners: bool) -> Array:
    """`graph.grid_sample` of `x` (N, C, *sizes) at `grid` (N, *out, D) into (N, C, *out)."""
    batch, channels, *sizes = x.shape
    points = grid.reshape(batch, -1, len(sizes))
    per_dim: list[tuple[list[Array], list[Array], list[Array]]] = []
    for dim, size in enumerate(sizes):
        n = points[:, :, len(sizes) - 1 - dim].astype(np.float32)
        low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        c = (n + 1) / 2 * (size - 1) if align_corners else ((n + 1) * size - 1) / 2
        c = np.rint(c) if mode == "nearest" else c
        outside = (c < low) | (c > high)
        if padding_mode == "border":
            c = np.where(outside, np.clip(c, 0, size - 1), c)
        elif padding_mode == "reflection":
            c = _reflect(c.astype(np.float64), low, high)
        indices, weights = _taps(c.astype(np.float32), mode)
        bounded = [_in_bounds(i, size, padding_mode, low, high) for i in indices]
        per_dim.append(([b[0] for b in bounded], [b[1] for b in bounded], weights))
    rows = np.arange(batch)[:, None]
    y = np.zeros((batch, points.shape[1], channels), dtype=x.dtype)
    for taps in itertools.product(*(range(len(d[0])) for d in per_dim)):
        weight = np.ones(points.shape[:2], dtype=np.float32)
        read = np.ones(points.shape[:2], dtype=bool)
        for (indices, inside, weights), tap in zip(per_dim, taps, strict=True):
            weight = weight * weights[tap]
            read &= inside[tap]
        # x[rows, :, i0, i1, ...]: the advanced indices (N, points) come first, the channels after them.
        values = x[(rows, slice(None), *(d[0][tap] for d, tap in zip(per_dim, taps, strict=True)))]
        y += np.where(read, weight, 0)[..., None].astype(x.dtype) * values
    return y.transpose(0, 2, 1).reshape(batch, channels, *grid.shape[1:-1])
