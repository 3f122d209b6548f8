"""Reference semantics of the graph dialect's table lookups, in NumPy."""

from __future__ import annotations

import itertools

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import embedding
from gnomon.reference.base import Array, typed


def _bag(rows: Array, mode: str, width: int, dtype: np.dtype) -> Array:
    """One bag's reduction; an empty bag is zeros, as in PyTorch."""
    if len(rows) == 0:
        return np.zeros(width, dtype)
    if mode == "sum":
        return rows.sum(0)
    if mode == "mean":
        return rows.mean(0)
    if mode == "max":
        return rows.max(0)
    raise NotImplementedError(f"graph.embedding_bag: unknown mode {mode!r}")


@register_impls
class GraphEmbeddingFunctions(InterpreterFunctions):
    @impl(embedding.EmbeddingOp)
    def run_embedding(self, interpreter: Interpreter, op: embedding.EmbeddingOp, args: PythonValues) -> PythonValues:
        table, indices = args
        return (typed(op.result, table[indices]),)

    @impl(embedding.EmbeddingBagOp)
    def run_embedding_bag(
        self, interpreter: Interpreter, op: embedding.EmbeddingBagOp, args: PythonValues
    ) -> PythonValues:
        table, indices, offsets, *weights = args
        bounds = [int(o) for o in offsets]
        if not op.include_last_offset.value.data:
            bounds.append(len(indices))
        bags: list[Array] = []
        for start, end in itertools.pairwise(bounds):
            rows = table[indices[start:end]]
            if weights:
                rows = rows * weights[0][start:end, None]
            bags.append(_bag(rows, op.mode.data, table.shape[1], table.dtype))
        return (typed(op.result, np.stack(bags)),)
