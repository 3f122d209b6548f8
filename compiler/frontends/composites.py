"""Composite torch ops that gnomon imports through decompositions of its own: torch has none for them and
torch-mlir none that gnomon's converters take. `nn.Bilinear`'s `aten.bilinear`, which export keeps whole (and
whose autograd form is `aten._trilinear`), becomes a product and a sum: y[n, o] = sum_ij x1[n, i] W[o, i, j]
x2[n, j] + b[o] is x1 by W (its `o` and `j` dims flattened together), times x2, summed over j.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.export import ExportedProgram

__all__ = ["DECOMPOSITIONS", "decompose_composites"]

aten = torch.ops.aten


def _bilinear(x1: torch.Tensor, x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Any:
    outputs, left, right = weight.shape
    leading = x1.shape[:-1]
    product = torch.mm(x1.reshape(-1, left), weight.permute(1, 0, 2).reshape(left, outputs * right))
    result = (product.reshape(-1, outputs, right) * x2.reshape(-1, 1, right)).sum(-1)
    if bias is not None:
        result = result + bias
    return result.reshape(*leading, outputs)


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {aten.bilinear.default: _bilinear}
"""The composite ops gnomon decomposes itself, by their ATen overload."""


def decompose_composites(program: ExportedProgram) -> ExportedProgram:
    """`program` with its `DECOMPOSITIONS` ops decomposed (the program itself if it has none: a re-trace costs)."""
    if not any(program.graph.find_nodes(op="call_function", target=op) for op in DECOMPOSITIONS):
        return program
    return program.run_decompositions(DECOMPOSITIONS)
