"""Scaled dot-product attention in a training step: its forward pass keeping the row statistics its backward pass
needs, and that backward pass.

PyTorch eager trains attention on a CPU with one flash kernel each way (`aten._scaled_dot_product_flash_attention
_for_cpu` and its `_backward`): the scores never exist whole, and the backward pass recomputes them block by block
from the forward pass's log-sum-exp of each query row. torch's joint graph would otherwise spell the forward pass in
ATen's math (the scores and probabilities materialized, kept for the backward pass), some ten ops each way. The
pair keeps eager's kernels, so the step runs and is priced as eager runs it.

Layouts are the flash kernel's: query (B, H, L, E), key (B, H, S, E), value (B, H, S, E) (one head size for all
three), an optional additive mask of the query's dtype that broadcasts to (B, H, L, S); `logsumexp` is (B, H, L)
in f32. `is_causal` masks keys j > i (top-left aligned), on top of the mask. A query row with every key masked
has an output of zeros and a log-sum-exp of -inf, and no gradient flows through it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BoolAttr, Float32Type, FloatAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    GraphOperation,
    Shape,
    TensorT,
    dims_compatible,
    dtype_of,
    shape_of,
    shape_str,
    tensor_of,
    tensor_type,
)


def _heads(op: AttentionTrainOp | AttentionGradOp) -> tuple[Shape, Shape]:
    """The query's and the key's shapes, checked against each other, the value's and the mask's."""
    q, k, v = (shape_of(x, f"{op.name} {n}") for x, n in ((op.query, "query"), (op.key, "key"), (op.value, "value")))
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise VerifyException(
            f"{op.name}: query {shape_str(q)}, key {shape_str(k)} and value {shape_str(v)} must be 4-D"
            " (batch, heads, length, head size)"
        )
    if not all(dims_compatible(a, b) and dims_compatible(a, c) for a, b, c in zip(q[:2], k[:2], v[:2], strict=True)):
        raise VerifyException(
            f"{op.name}: query {shape_str(q)}, key {shape_str(k)} and value {shape_str(v)} differ in batch or heads"
        )
    if not (dims_compatible(q[3], k[3]) and dims_compatible(k[3], v[3])):
        raise VerifyException(
            f"{op.name}: query {shape_str(q)}, key {shape_str(k)} and value {shape_str(v)} need one head size"
        )
    if not dims_compatible(k[2], v[2]):
        raise VerifyException(f"{op.name}: key length {k[2]} differs from value length {v[2]}")
    dtype = dtype_of(op.query, "query")
    for value, what in ((op.key, "key"), (op.value, "value"), *(((op.mask, "mask"),) if op.mask else ())):
        if dtype_of(value, what) != dtype:
            raise VerifyException(f"{op.name}: {what} {tensor_type(value, what)} is not of the query's {dtype}")
    if op.mask is not None:
        mask = shape_of(op.mask, f"{op.name} mask")
        scores = (q[0], q[1], q[2], k[2])
        trailing = scores[len(scores) - len(mask) :]
        if len(mask) > 4 or not all(m == 1 or dims_compatible(m, d) for m, d in zip(mask, trailing, strict=True)):
            raise VerifyException(f"{op.name}: mask {shape_str(mask)} does not broadcast to {shape_str(scores)}")
    return q, k


def _statistics(q: Shape) -> TensorT:
    return tensor_of(Float32Type(), q[:3])


def _check_like(op: AttentionGradOp, value: SSAValue, what: str, expected: TensorT) -> None:
    got = tensor_type(value, f"{op.name} {what}")
    shape, want = got.get_shape(), expected.get_shape()
    same_dims = len(shape) == len(want) and all(dims_compatible(a, b) for a, b in zip(shape, want, strict=True))
    if got.get_element_type() != expected.get_element_type() or not same_dims:
        raise VerifyException(f"{op.name}: {what} {got} is not {expected}")


@irdl_op_definition
class AttentionTrainOp(GraphOperation):
    """`graph.attention`'s output, and the log-sum-exp of each query row's scaled, masked scores.

    `%o, %lse = graph.attention_train %q, %k, %v {scale = 0.125 : f64, is_causal = false}
        : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>)
        -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)`
    """

    name = "graph.attention_train"
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    scale = prop_def(FloatAttr)
    is_causal = prop_def(BoolAttr)
    output = result_def(TensorType)
    logsumexp = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        q, _ = _heads(self)
        return [tensor_of(dtype_of(self.query, "query"), q), _statistics(q)]


@irdl_op_definition
class AttentionGradOp(GraphOperation):
    """The gradients of a loss with respect to an attention's query, key and value, from the gradient of its
    output and what its `graph.attention_train` returned.

    `%dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v, %o, %lse {scale = 0.125 : f64, is_causal = false}
        : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>,
           tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
        -> (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>)`
    """

    name = "graph.attention_grad"
    grad_output = operand_def(TensorType)
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    output = operand_def(TensorType)
    logsumexp = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    scale = prop_def(FloatAttr)
    """The forward op's."""
    is_causal = prop_def(BoolAttr)
    """The forward op's."""
    grad_query = result_def(TensorType)
    grad_key = result_def(TensorType)
    grad_value = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        q, _ = _heads(self)
        output = tensor_of(dtype_of(self.query, "query"), q)
        _check_like(self, self.output, "output", output)
        _check_like(self, self.grad_output, "grad_output", output)
        _check_like(self, self.logsumexp, "logsumexp", _statistics(q))
        return [tensor_type(self.query, "query"), tensor_type(self.key, "key"), tensor_type(self.value, "value")]


ATTENTION_TRAIN_OPS = [AttentionGradOp, AttentionTrainOp]
