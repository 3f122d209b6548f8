"""Torch implementations of the graph dialect's constants and data movement.

Functionally most are views (reshape, transpose, slice, expand), as in eager PyTorch. Bound into a
preallocated output, each is one copy from a view of the input set up at bind time, or an ATen
kernel with out= (cat, index_select, gather, scatter).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from gnomon.dialects.graph import tensor
from gnomon.dialects.graph.base import DYN, ints
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.reference.tensor import constant_value
from gnomon.runtime.library.base import (
    Into,
    Launch,
    TorchImpl,
    element_type,
    static_shape,
    to_torch,
    torch_impl,
    torch_padding,
)
from gnomon.runtime.library.embedding import wrapped


@torch_impl(tensor.ConstantOp)
def constant(op: tensor.ConstantOp) -> TorchImpl:
    value = to_torch(constant_value(op))  # converted once, when the op is built

    def run() -> torch.Tensor:
        return value

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(results[0].copy_, value)

    return TorchImpl(run, into)


@torch_impl(tensor.ReshapeOp)
def reshape(op: tensor.ReshapeOp) -> TorchImpl:
    shape = [-1 if d == DYN else d for d in static_shape(op.result)]  # at most one `?`, as torch's -1

    def run(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(shape)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x = args[0]
        return partial(results[0].view(x.shape).copy_, x)

    return TorchImpl(run, into)


@torch_impl(tensor.TransposeOp)
def transpose(op: tensor.TransposeOp) -> TorchImpl:
    permutation = ints(op.permutation)

    def run(x: torch.Tensor) -> torch.Tensor:
        return x.permute(permutation)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(results[0].copy_, args[0].permute(permutation))

    return TorchImpl(run, into)


@torch_impl(tensor.ConcatOp)
def concat(op: tensor.ConcatOp) -> TorchImpl:
    axis = op.axis.value.data

    def run(*inputs: torch.Tensor) -> torch.Tensor:
        return torch.cat(inputs, axis)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(torch.cat, list(args), axis, out=results[0])

    return TorchImpl(run, into)


@torch_impl(tensor.SplitOp)
def split(op: tensor.SplitOp) -> TorchImpl:
    sizes, axis = list(ints(op.sizes)), op.axis.value.data

    def run(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(torch.split(x, sizes, axis))

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        pairs = list(zip(results, torch.split(args[0], sizes, axis), strict=True))

        def launch() -> None:
            for result, piece in pairs:
                result.copy_(piece)

        return launch

    return TorchImpl(run, into)


def _slice_index(op: tensor.SliceOp, shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[slice, ...]]:
    """The dims to flip, and the positive-step slices of the flipped input that make the op's slice.

    torch slices take no negative step: a dim stepped backwards is flipped (index i becomes n-1-i) and
    stepped forwards. A negative end runs past index 0 when stepping backwards (ONNX's INT_MIN end).
    """
    flips: list[int] = []
    index: list[slice] = []
    for dim, (start, end, step) in enumerate(zip(ints(op.starts), ints(op.ends), ints(op.steps), strict=True)):
        if step > 0:
            index.append(slice(start, None if end < 0 else end, step))
            continue
        n = shape[dim]
        flips.append(dim)
        index.append(slice(n - 1 - start, n if end < 0 else n - 1 - end, -step))
    return tuple(flips), tuple(index)


@torch_impl(tensor.SliceOp)
def slice_(op: tensor.SliceOp) -> TorchImpl:
    def run(x: torch.Tensor) -> torch.Tensor:
        flips, index = _slice_index(op, x.shape)
        return (x.flip(flips) if flips else x)[index]

    if any(step < 0 for step in ints(op.steps)):
        return TorchImpl(run)  # flipped dims need their sizes: worked out per call, and copied back
    _, index = _slice_index(op, static_shape(op.input))

    def run_static(x: torch.Tensor) -> torch.Tensor:
        return x[index]

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(results[0].copy_, args[0][index])

    return TorchImpl(run_static, into)


@torch_impl(tensor.GatherOp)
def gather(op: tensor.GatherOp) -> TorchImpl:
    rank = len(static_shape(op.input))
    axis = op.axis.value.data % rank

    def run(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        picked = torch.index_select(x, axis, wrapped(indices.reshape(-1), x.shape[axis]))
        return picked.view(*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :])

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, indices = args
        flat, size = indices.reshape(-1), x.shape[axis]
        out = results[0].view(*x.shape[:axis], flat.numel(), *x.shape[axis + 1 :])

        def launch() -> None:
            torch.index_select(x, axis, wrapped(flat, size), out=out)

        return launch

    return TorchImpl(run, into)


@torch_impl(tensor.GatherElementsOp)
def gather_elements(op: tensor.GatherElementsOp) -> TorchImpl:
    axis = op.axis.value.data

    def run(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, axis, wrapped(indices, x.shape[axis]))

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, indices = args
        out, size = results[0], x.shape[axis]

        def launch() -> None:
            torch.gather(x, axis, wrapped(indices, size), out=out)

        return launch

    return TorchImpl(run, into)


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}
"""ATen's name of each reduction of graph.scatter_elements (the inputs' own values always take part)."""


@torch_impl(tensor.ScatterElementsOp)
def scatter_elements(op: tensor.ScatterElementsOp) -> TorchImpl:
    """ATen's CPU scatter walks the indices along the axis in order for each position off it, so where indices
    repeat with reduction none the last update wins, as the op defines."""
    axis, reduction = op.scatter_axis(), op.reduction.data

    def scatter(
        x: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, out: torch.Tensor | None
    ) -> torch.Tensor:
        index = wrapped(indices, x.shape[axis]).to(torch.int64)
        if reduction == "none":
            return torch.scatter(x, axis, index, updates, out=out)
        return torch.scatter_reduce(x, axis, index, updates, _SCATTER_REDUCE[reduction], out=out)

    def run(x: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor) -> torch.Tensor:
        return scatter(x, indices, updates, None)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(scatter, *args, results[0])

    return TorchImpl(run, into)


@torch_impl(tensor.SliceScatterOp)
def slice_scatter(op: tensor.SliceScatterOp) -> TorchImpl:
    index = tuple(slice(*bounds) for bounds in zip(ints(op.starts), ints(op.ends), ints(op.steps), strict=True))

    def run(x: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        out[index] = update
        return out

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        (x, update), out = args, results[0]
        window = out[index]

        def launch() -> None:
            out.copy_(x)
            window.copy_(update)

        return launch

    return TorchImpl(run, into)


def _pad_value(op: tensor.PadOp) -> float | int:
    """The f64 pad value cast to the element type as NumPy casts it (f64's lowest is -inf in f32, ints truncate)."""
    dtype = numpy_dtype(element_type(op.input))
    assert dtype is not None
    with np.errstate(over="ignore"):
        return np.array(op.value.value.data).astype(dtype).item()


_NUMPY_PAD_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {
    "reflect": "reflect",
    "replicate": "edge",
    "wrap": "wrap",
}


def _edge_indices(size: int, begin: int, end: int, mode: str) -> torch.Tensor:
    """The input index each output position of one dim reads, under reflect, replicate or wrap padding.

    NumPy pads the index vector itself, so pads wider than the dim reflect (or wrap) again, as the reference does.
    Negative pads crop first.
    """
    kept = np.arange(size)[max(0, -begin) : size - max(0, -end)]
    return torch.from_numpy(np.pad(kept, (max(0, begin), max(0, end)), mode=_NUMPY_PAD_MODES[mode]))


def _constant_pad_into(pads: Sequence[int], value: float | int) -> Into:
    """As constant_pad_nd does, without its allocation: fill the output, then copy the kept input inside."""

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, out = args[0], results[0]
        rank = x.ndim
        inside = out[tuple(slice(max(0, pads[d]), out.shape[d] - max(0, pads[d + rank])) for d in range(rank))]
        kept = x[tuple(slice(max(0, -pads[d]), x.shape[d] - max(0, -pads[d + rank])) for d in range(rank))]

        def launch() -> None:
            out.fill_(value)
            inside.copy_(kept)

        return launch

    return into


@torch_impl(tensor.PadOp)
def pad(op: tensor.PadOp) -> TorchImpl:
    pads, mode = ints(op.pads), op.mode.data
    rank = len(pads) // 2
    if mode == "constant":
        value = _pad_value(op)
        # Negative pads crop.
        return TorchImpl(partial(F.pad, pad=torch_padding(pads), value=value), _constant_pad_into(pads, value))
    # Reflect, replicate and wrap gather each padded dim with an index vector: any rank, any width.
    padded = [d for d in range(rank) if pads[d] or pads[d + rank]]
    shape = static_shape(op.input)
    fixed = {d: _edge_indices(shape[d], pads[d], pads[d + rank], mode) for d in padded if shape[d] != DYN}

    def run(x: torch.Tensor) -> torch.Tensor:
        for d in padded:
            indices = fixed.get(d)
            if indices is None:
                indices = _edge_indices(x.shape[d], pads[d], pads[d + rank], mode)
            x = x.index_select(d, indices)
        return x

    return TorchImpl(run)


@torch_impl(tensor.ExpandOp)
def expand(op: tensor.ExpandOp) -> TorchImpl:
    shape = static_shape(op.result)

    def run(x: torch.Tensor) -> torch.Tensor:
        # A `?` target dim keeps the input's size there (right-aligned; a new leading dim is 1).
        dims = (1,) * (len(shape) - x.ndim) + tuple(x.shape)
        return x.expand(*(d if s == DYN else s for s, d in zip(shape, dims, strict=True)))

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        out = results[0]
        return partial(out.copy_, args[0].expand(out.shape))

    return TorchImpl(run, into)


@torch_impl(tensor.IotaOp)
def iota(op: tensor.IotaOp) -> TorchImpl:
    axis = op.axis.value.data

    def run(like: torch.Tensor) -> torch.Tensor:
        return torch.arange(like.shape[axis])

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        out = results[0]
        return partial(torch.arange, args[0].shape[axis], out=out)

    return TorchImpl(run, into)


@torch_impl(tensor.TileOp)
def tile(op: tensor.TileOp) -> TorchImpl:
    repeats = ints(op.repeats)

    def run(x: torch.Tensor) -> torch.Tensor:
        return x.repeat(repeats)  # numpy.tile when there is one repeat per dim, as the op has

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, out = args[0], results[0]
        # Output dim i, of size r * d, is (r, d) row-major: the input broadcast along the interleaved r's.
        interleaved = [size for r, d in zip(repeats, x.shape, strict=True) for size in (r, d)]
        source = x.reshape([size for d in x.shape for size in (1, d)]).expand(interleaved)
        return partial(out.view(interleaved).copy_, source)

    return TorchImpl(run, into)
