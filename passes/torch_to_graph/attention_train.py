"""Converters for attention's training kernels, as the torch frontend leaves them in a joint graph
(`gnomon.frontends.training_attention`): `aten._scaled_dot_product_flash_attention_for_cpu` becomes
`graph.attention_train`, its backward `graph.attention_grad` (see `gnomon.dialects.graph.attention_train`).
torch picks the flash kernel only without dropout (with it, the joint graph spells attention in ATen's math).
"""

from __future__ import annotations

import math

from xdsl.ir import Attribute, Operation, SSAValue

from gnomon.dialects.graph.attention_train import AttentionGradOp, AttentionTrainOp
from gnomon.dialects.graph.base import bool_attr, f64_attr
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts


def _built(a: AtenArgs, op: Operation) -> list[SSAValue]:
    op.verify_()  # a malformed call's shapes: refused with the verifier's reason
    return list(a.emit(op).results)


def _properties(a: AtenArgs, query: SSAValue) -> dict[str, Attribute]:
    if a.float("dropout_p") != 0.0:
        raise NotConvertible("flash attention with dropout")
    scale = a.optional_float("scale")
    head_size = tensor_type(query).get_shape()[-1]
    return {
        "scale": f64_attr(1.0 / math.sqrt(head_size) if scale is None else scale),
        "is_causal": bool_attr(a.bool("is_causal")),
    }


def _masks(a: AtenArgs) -> list[SSAValue]:
    mask = a.optional_tensor("attn_mask")
    return [] if mask is None else [mask]


@converts(
    "torch.aten._scaled_dot_product_flash_attention_for_cpu",
    args="query key value dropout_p is_causal attn_mask scale",
)
def flash_attention(a: AtenArgs) -> list[SSAValue]:
    """(output, logsumexp)."""
    q, k, v = (a.tensor(name) for name in ("query", "key", "value"))
    op = AttentionTrainOp.build(
        operands=[q, k, v, _masks(a)], properties=_properties(a, q), result_types=[a.result_type(0), a.result_type(1)]
    )
    return _built(a, op)


@converts(
    "torch.aten._scaled_dot_product_flash_attention_for_cpu_backward",
    args="grad_out query key value out logsumexp dropout_p is_causal attn_mask scale",
)
def flash_attention_backward(a: AtenArgs) -> list[SSAValue]:
    """(grad_query, grad_key, grad_value)."""
    names = ("grad_out", "query", "key", "value", "out", "logsumexp")
    operands = [a.tensor(name) for name in names]
    q, k, v = operands[1:4]
    op = AttentionGradOp.build(
        operands=[*operands, _masks(a)],
        properties=_properties(a, q),
        result_types=[tensor_type(q), tensor_type(k), tensor_type(v)],
    )
    return _built(a, op)
