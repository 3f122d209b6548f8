"""Torch implementations of the graph dialect's matrix products (BLAS through aten.mm, addmm and bmm) and
determinants (LAPACK's LU through aten.linalg_det)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import BFloat16Type, Float16Type

from gnomon.dialects.graph import linalg
from gnomon.runtime.library.base import Launch, TorchImpl, aten, element_type, torch_impl


@torch_impl(linalg.MatmulOp)
def matmul(op: linalg.MatmulOp) -> TorchImpl:
    # numpy.matmul's rules: promoted 1-D operands, broadcast batch dims. matmul's out= lowers to mm, bmm
    # or mv writing into the output (it copies an operand only to broadcast it).
    return aten(torch.matmul)


def _linear_into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    x, weight, *bias = args
    # Leading dims flatten into rows (free: the runtime's buffers are contiguous); weightᵀ is a strided view BLAS reads.
    rows, out = x.reshape(-1, x.shape[-1]), results[0].view(-1, weight.shape[0])
    if bias:
        return partial(torch.addmm, bias[0], rows, weight.t(), out=out)
    return partial(torch.mm, rows, weight.t(), out=out)


@torch_impl(linalg.LinearOp)
def linear(op: linalg.LinearOp) -> TorchImpl:
    return TorchImpl(F.linear, _linear_into)


@torch_impl(linalg.DetOp)
def det(op: linalg.DetOp) -> TorchImpl:
    if isinstance(element_type(op.input), Float16Type | BFloat16Type):

        def run(x: torch.Tensor) -> torch.Tensor:
            # LAPACK has no half-precision LU: f32, rounded once, as the reference computes it.
            return torch.linalg.det(x.float()).to(x.dtype)

        return TorchImpl(run)
    return aten(torch.linalg.det)
