"""Torch implementations of the graph dialect's matrix products: BLAS through aten.mm, addmm and bmm."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
import torch.nn.functional as F

from gnomon.dialects.graph import linalg
from gnomon.runtime.library.base import Launch, TorchFn, out_impl, torch_impl


@torch_impl(linalg.MatmulOp, "aten.matmul")
def matmul(op: linalg.MatmulOp) -> TorchFn:
    return torch.matmul  # numpy.matmul's rules: promoted 1-D operands, broadcast batch dims


@out_impl(linalg.MatmulOp)
def matmul_into(op: linalg.MatmulOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    # matmul's out= lowers to mm, bmm or mv writing into the output (it copies an operand only to broadcast it).
    return partial(torch.matmul, args[0], args[1], out=results[0])


@torch_impl(linalg.LinearOp, "aten.linear")
def linear(op: linalg.LinearOp) -> TorchFn:
    return F.linear


@out_impl(linalg.LinearOp)
def linear_into(op: linalg.LinearOp, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    x, weight, *bias = args
    # Leading dims flatten into rows (free: the runtime's buffers are contiguous); weightᵀ is a strided view BLAS reads.
    rows, out = x.reshape(-1, x.shape[-1]), results[0].view(-1, weight.shape[0])
    if bias:
        return partial(torch.addmm, bias[0], rows, weight.t(), out=out)
    return partial(torch.mm, rows, weight.t(), out=out)
