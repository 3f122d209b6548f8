"""Reference semantics of attention's training ops (`graph.attention_train`, `graph.attention_grad`) in NumPy.

The scores are materialized (the oracle favours obviousness): P = softmax(q kᵀ scale + mask), the causal keys
j > i excluded; the backward pass takes P from the forward pass's log-sum-exp, as the flash kernel does, and
dv = Pᵀ dO, dS = P (dO vᵀ - rowsum(dO o)), dq = dS k scale, dk = dSᵀ q scale. A row with every key masked has
a zero output, a log-sum-exp of -inf and zero gradients.
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph.attention_train import AttentionGradOp, AttentionTrainOp
from gnomon.reference.base import Array, typed


def _scores(op: AttentionTrainOp | AttentionGradOp, query: Array, key: Array, mask: list[Array]) -> Array:
    scores = query @ np.swapaxes(key, -1, -2) * op.scale.value.data
    if mask:
        scores = scores + mask[0]
    if op.is_causal.value.data:
        rows, columns = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((rows, columns), np.bool_)), scores, -np.inf)
    return scores


def _probabilities(scores: Array, logsumexp: Array) -> Array:
    """exp(scores - lse) per row; a row whose log-sum-exp is -inf (every key masked) has none."""
    finite = np.isfinite(logsumexp)[..., None]
    return np.where(finite, np.exp(scores - np.where(finite, logsumexp[..., None], 0.0)), 0.0)


@register_impls
class GraphAttentionTrainFunctions(InterpreterFunctions):
    @impl(AttentionTrainOp)
    def run_attention_train(self, interpreter: Interpreter, op: AttentionTrainOp, args: PythonValues) -> PythonValues:
        query, key, value, *mask = (np.asarray(a) for a in args)
        scores = _scores(op, query, key, mask).astype(np.float32)
        top = scores.max(-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        logsumexp = (np.log(np.exp(scores - top).sum(-1, keepdims=True)) + top)[..., 0]
        output = _probabilities(scores, logsumexp) @ value
        return typed(op.output, output), typed(op.logsumexp, logsumexp)

    @impl(AttentionGradOp)
    def run_attention_grad(self, interpreter: Interpreter, op: AttentionGradOp, args: PythonValues) -> PythonValues:
        grad_output, query, key, value, output, logsumexp, *mask = (np.asarray(a) for a in args)
        p = _probabilities(_scores(op, query, key, mask), logsumexp)
        grad_value = np.swapaxes(p, -1, -2) @ grad_output
        row_dot = (grad_output * output).sum(-1, keepdims=True)
        grad_scores = p * (grad_output @ np.swapaxes(value, -1, -2) - row_dot) * op.scale.value.data
        grad_query = grad_scores @ key
        grad_key = np.swapaxes(grad_scores, -1, -2) @ query
        return tuple(typed(r, v) for r, v in zip(op.results, (grad_query, grad_key, grad_value), strict=True))
