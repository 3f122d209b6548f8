"""Torch implementations of the graph dialect's reductions: ATen's reduction kernels, all with out=."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
from xdsl.dialects.builtin import IntegerType

from gnomon.dialects.graph import reduce as red
from gnomon.runtime.library.base import Launch, TorchFn, copy_back, element_type, out_impl, torch_dtype, torch_impl


def _keepdims(op: red.ReduceOp | red.ArgReduceOp) -> bool:
    return bool(op.keepdims.value.data)


def _same_dtype(op: red.ReduceOp) -> torch.dtype:
    # torch sums and multiplies integers in int64; the graph op keeps the input's element type.
    return torch_dtype(element_type(op.input))


@torch_impl(red.ReduceSumOp, "aten.sum")
def reduce_sum(op: red.ReduceOp) -> TorchFn:
    return partial(torch.sum, dim=op.reduced_axes(), keepdim=_keepdims(op), dtype=_same_dtype(op))


@out_impl(red.ReduceSumOp)
def reduce_sum_into(op: red.ReduceOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    return partial(torch.sum, args[0], op.reduced_axes(), _keepdims(op), dtype=_same_dtype(op), out=results[0])


@torch_impl(red.ReduceMeanOp, "aten.mean")
def reduce_mean(op: red.ReduceOp) -> TorchFn:
    axes, keep = op.reduced_axes(), _keepdims(op)
    if not isinstance(element_type(op.input), IntegerType):
        return partial(torch.mean, dim=axes, keepdim=keep)
    dtype = _same_dtype(op)

    def run(x: torch.Tensor) -> torch.Tensor:
        # torch has no integer mean; NumPy's is a float64 mean, truncated by the cast back.
        return x.double().mean(axes, keep).to(dtype)

    return run


@out_impl(red.ReduceMeanOp)
def reduce_mean_into(op: red.ReduceOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    if isinstance(element_type(op.input), IntegerType):
        return copy_back(op, args, results)
    return partial(torch.mean, args[0], op.reduced_axes(), _keepdims(op), out=results[0])


@torch_impl(red.ReduceMaxOp, "aten.amax")
def reduce_max(op: red.ReduceOp) -> TorchFn:
    return partial(torch.amax, dim=op.reduced_axes(), keepdim=_keepdims(op))


@out_impl(red.ReduceMaxOp)
def reduce_max_into(op: red.ReduceOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    return partial(torch.amax, args[0], op.reduced_axes(), _keepdims(op), out=results[0])


@torch_impl(red.ReduceMinOp, "aten.amin")
def reduce_min(op: red.ReduceOp) -> TorchFn:
    return partial(torch.amin, dim=op.reduced_axes(), keepdim=_keepdims(op))


@out_impl(red.ReduceMinOp)
def reduce_min_into(op: red.ReduceOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    return partial(torch.amin, args[0], op.reduced_axes(), _keepdims(op), out=results[0])


@torch_impl(red.ReduceProdOp, "aten.prod")
def reduce_prod(op: red.ReduceOp) -> TorchFn:
    # aten.prod takes one dim: reduce the axes one at a time, the highest first so the others keep their index.
    axes, keep, dtype = sorted(op.reduced_axes(), reverse=True), _keepdims(op), _same_dtype(op)

    def run(x: torch.Tensor) -> torch.Tensor:
        for axis in axes:
            x = torch.prod(x, axis, keep, dtype=dtype)
        return x

    return run


@torch_impl(red.ArgmaxOp, "aten.argmax")
def argmax(op: red.ArgReduceOp) -> TorchFn:
    return partial(torch.argmax, dim=op.axis.value.data, keepdim=_keepdims(op))


@out_impl(red.ArgmaxOp)
def argmax_into(op: red.ArgReduceOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    return partial(torch.argmax, args[0], op.axis.value.data, _keepdims(op), out=results[0])


@torch_impl(red.ArgminOp, "aten.argmin")
def argmin(op: red.ArgReduceOp) -> TorchFn:
    return partial(torch.argmin, dim=op.axis.value.data, keepdim=_keepdims(op))


@out_impl(red.ArgminOp)
def argmin_into(op: red.ArgReduceOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    return partial(torch.argmin, args[0], op.axis.value.data, _keepdims(op), out=results[0])
