"""Torch implementations of the graph dialect's reductions and scans: ATen's kernels, with out= where they have it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from xdsl.dialects.builtin import IntegerType

from gnomon.dialects.graph import reduce as red
from gnomon.runtime.library.base import Launch, TorchImpl, aten, element_type, torch_dtype, torch_impl


def _keepdims(op: red.ReduceOp | red.ArgReduceOp) -> bool:
    return bool(op.keepdims.value.data)


def _same_dtype(op: red.ReduceOp) -> torch.dtype:
    # torch sums and multiplies integers in int64; the graph op keeps the input's element type.
    return torch_dtype(element_type(op.input))


@torch_impl(red.ReduceSumOp)
def reduce_sum(op: red.ReduceOp) -> TorchImpl:
    return aten(torch.sum, dim=op.reduced_axes(), keepdim=_keepdims(op), dtype=_same_dtype(op))


@torch_impl(red.ReduceMeanOp)
def reduce_mean(op: red.ReduceOp) -> TorchImpl:
    axes, keep = op.reduced_axes(), _keepdims(op)
    if not isinstance(element_type(op.input), IntegerType):
        return aten(torch.mean, dim=axes, keepdim=keep)
    dtype = _same_dtype(op)

    def run(x: torch.Tensor) -> torch.Tensor:
        # torch has no integer mean; NumPy's is a float64 mean, truncated by the cast back.
        return x.double().mean(axes, keep).to(dtype)

    return TorchImpl(run)


@torch_impl(red.ReduceMaxOp)
def reduce_max(op: red.ReduceOp) -> TorchImpl:
    return aten(torch.amax, dim=op.reduced_axes(), keepdim=_keepdims(op))


@torch_impl(red.ReduceMinOp)
def reduce_min(op: red.ReduceOp) -> TorchImpl:
    return aten(torch.amin, dim=op.reduced_axes(), keepdim=_keepdims(op))


@torch_impl(red.ReduceProdOp)
def reduce_prod(op: red.ReduceOp) -> TorchImpl:
    # aten.prod takes one dim: reduce the axes one at a time, the highest first so the others keep their index.
    axes, keep, dtype = sorted(op.reduced_axes(), reverse=True), _keepdims(op), _same_dtype(op)

    def run(x: torch.Tensor) -> torch.Tensor:
        for axis in axes:
            x = torch.prod(x, axis, keep, dtype=dtype)
        return x

    return TorchImpl(run)


@torch_impl(red.ArgmaxOp)
def argmax(op: red.ArgReduceOp) -> TorchImpl:
    return aten(torch.argmax, dim=op.axis.value.data, keepdim=_keepdims(op))


@torch_impl(red.ArgminOp)
def argmin(op: red.ArgReduceOp) -> TorchImpl:
    return aten(torch.argmin, dim=op.axis.value.data, keepdim=_keepdims(op))


def _scan(op: red.ScanOp, running: Callable[..., torch.Tensor]) -> TorchImpl:
    """ATen's cumsum or cumprod; `reverse` flips around it, `exclusive` shifts its result by one along the axis."""
    axis, dtype = op.scan_axis(), torch_dtype(element_type(op.input))
    reverse, exclusive = bool(op.reverse.value.data), bool(op.exclusive.value.data)
    if not reverse and not exclusive:
        return aten(running, dim=axis, dtype=dtype)
    identity = 0 if running is torch.cumsum else 1

    def run(x: torch.Tensor) -> torch.Tensor:
        if reverse:
            x = x.flip(axis)
        y = running(x, axis, dtype=dtype)
        if exclusive:
            first = torch.full_like(y.narrow(axis, 0, 1), identity)
            y = torch.cat([first, y.narrow(axis, 0, y.shape[axis] - 1)], axis)
        return y.flip(axis) if reverse else y

    return TorchImpl(run)


@torch_impl(red.CumsumOp)
def cumsum(op: red.ScanOp) -> TorchImpl:
    return _scan(op, torch.cumsum)


@torch_impl(red.CumprodOp)
def cumprod(op: red.ScanOp) -> TorchImpl:
    return _scan(op, torch.cumprod)


@torch_impl(red.TopKOp)
def topk(op: red.TopKOp) -> TorchImpl:
    """A stable sort, not torch.topk: ONNX puts equal values in index order, which topk does not promise."""
    axis, k, largest = op.topk_axis(), op.k.value.data, bool(op.largest.value.data)

    def run(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.sort(x, dim=axis, descending=largest, stable=True)
        return values.narrow(axis, 0, k), indices.narrow(axis, 0, k)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        def launch() -> None:
            values, indices = run(args[0])
            results[0].copy_(values)
            results[1].copy_(indices)

        return launch

    return TorchImpl(run, into)
