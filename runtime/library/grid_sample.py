"""`graph.grid_sample` in torch: ATen's grid_sampler where it computes ONNX's GridSample
(`torch_grid_sample_agrees`), else ONNX's semantics composed from torch ops (as `gnomon.reference.grid_sample`
defines them in NumPy)."""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from gnomon.reference.interpolation import CUBIC_A


def aten_grid_sample(x: torch.Tensor, grid: torch.Tensor, mode: str, padding_mode: str, align: bool) -> torch.Tensor:
    torch_mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return F.grid_sample(x, grid, mode=torch_mode, padding_mode=padding_mode, align_corners=align)


def _reflect(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """`x` folded into [low, high] by reflecting it at the nearer border as often as it takes."""
    span = high - low
    if span == 0:
        return torch.full_like(x, low)
    distance = torch.where(x < low, low - x, x - high)
    folds = torch.trunc(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    from_low, from_high = low + rest, high - rest
    folded = torch.where(x < low, torch.where(even, from_low, from_high), torch.where(even, from_high, from_low))
    return torch.where((x < low) | (x > high), folded, x)


def _taps(c: torch.Tensor, mode: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The integer positions an interpolation reads around coordinates `c`, and their weights."""
    if mode == "nearest":
        return [c.trunc().long()], [torch.ones_like(c)]
    base = torch.floor(c)
    t, index = c - base, base.long()
    if mode == "linear":
        return [index, index + 1], [1 - t, t]
    a = CUBIC_A
    weights = [
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]
    return [index + offset for offset in (-1, 0, 1, 2)], weights


def _bounded(index: torch.Tensor, size: int, padding_mode: str, low: float, high: float) -> torch.Tensor:
    """The element a tap reads: clamped or reflected into the input (zeros: clamped, and masked by the caller)."""
    if padding_mode == "reflection":
        return torch.trunc(_reflect(index.double(), low, high)).long()
    return index.clamp(0, size - 1)


def onnx_grid_sample(x: torch.Tensor, grid: torch.Tensor, mode: str, padding_mode: str, align: bool) -> torch.Tensor:
    """ONNX's GridSample of `x` (N, C, *sizes) at `grid` (N, *out, D), composed from torch ops."""
    batch, channels, *sizes = x.shape
    points = grid.reshape(batch, -1, len(sizes))
    per_dim: list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]] = []
    for dim, size in enumerate(sizes):
        n = points[:, :, len(sizes) - 1 - dim].float()
        low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        c = (n + 1) / 2 * (size - 1) if align else ((n + 1) * size - 1) / 2
        c = torch.round(c) if mode == "nearest" else c  # half to even, as NumPy's rint
        outside = (c < low) | (c > high)
        if padding_mode == "border":
            c = torch.where(outside, c.clamp(0, size - 1), c)
        elif padding_mode == "reflection":
            c = _reflect(c.double(), low, high).float()
        indices, weights = _taps(c, mode)
        inside = [(i >= 0) & (i < size) if padding_mode == "zeros" else torch.ones_like(i, dtype=torch.bool)
                  for i in indices]  # fmt: skip
        per_dim.append(([_bounded(i, size, padding_mode, low, high) for i in indices], inside, weights))
    flat = x.reshape(batch, channels, -1)
    strides = [math.prod(sizes[d + 1 :]) for d in range(len(sizes))]
    y = torch.zeros(batch, channels, points.shape[1], dtype=x.dtype)
    for taps in itertools.product(*(range(len(d[0])) for d in per_dim)):
        weight = torch.ones(points.shape[:2])
        index = torch.zeros(points.shape[:2], dtype=torch.long)
        for (indices, inside, weights), tap, stride in zip(per_dim, taps, strides, strict=True):
            weight = torch.where(inside[tap], weight * weights[tap], 0)
            index = index + indices[tap] * stride
        values = flat.gather(2, index.unsqueeze(1).expand(batch, channels, -1))
        y += weight.to(x.dtype).unsqueeze(1) * values
    return y.reshape(batch, channels, *grid.shape[1:-1])
