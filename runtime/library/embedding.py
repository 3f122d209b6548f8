"""Torch implementations of the graph dialect's table lookups: aten.index_select and aten.embedding_bag."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gnomon.dialects.graph import embedding
from gnomon.runtime.library.base import Launch, TorchImpl, torch_impl


def wrapped(indices: torch.Tensor, size: int) -> torch.Tensor:
    """Negative indices count from the end, as NumPy's (and ONNX Gather's) do; ATen's lookups reject them.

    Most index tensors have none, so the minimum is checked first, which costs less than the
    remainder that wraps them. Negative indices below -size, which NumPy rejects, wrap around too;
    indices of size and above reach ATen, which raises.
    """
    if indices.numel() == 0 or int(indices.min()) >= 0:
        return indices
    return torch.remainder(indices, size)


def _embedding_into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    table, indices = args
    flat, rows, size = indices.reshape(-1), results[0].view(-1, table.shape[1]), table.shape[0]

    def launch() -> None:
        torch.index_select(table, 0, wrapped(flat, size), out=rows)

    return launch


@torch_impl(embedding.EmbeddingOp)
def embedding_lookup(op: embedding.EmbeddingOp) -> TorchImpl:
    def run(table: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return F.embedding(wrapped(indices, table.shape[0]), table)

    return TorchImpl(run, _embedding_into)


@torch_impl(embedding.EmbeddingBagOp)
def embedding_bag(op: embedding.EmbeddingBagOp) -> TorchImpl:
    mode, include_last_offset = op.mode.data, bool(op.include_last_offset.value.data)

    def run(
        table: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        return F.embedding_bag(
            wrapped(indices, table.shape[0]),
            table,
            offsets.to(indices.dtype),  # ATen wants one index type; a no-op when they agree
            mode=mode,
            per_sample_weights=weights,
            include_last_offset=include_last_offset,
        )

    return TorchImpl(run)
