"""`graph-fold-batch-norm`: fold inference batch norms into the convolution or linear layer before them.

Batch norm at inference is a per-channel affine map, y = (x - mean) * s + beta with
s = gamma / sqrt(var + eps). After a layer with weight w and bias b it is the same layer with weight
w * s (per output channel) and bias (b - mean) * s + beta, so the norm costs nothing at run time.
A norm with no such layer before it (DenseNet's, after a concat) becomes x * s + t with constant
per-channel s and t: two elementwise ops that fuse with the activation after them.

A convolution followed by such a multiply or add by a constant channel vector (the explicit scale
and shift after each batch norm of the Caffe2-exported Inception-v2) absorbs it the same way:
weight * s and bias * s for the multiply, bias + t for the add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from gnomon.dialects.graph.constant_values import constant_to_numpy, folded_constant
from gnomon.dialects.graph.elementwise import AddOp, BinaryOp, MulOp
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.linalg import LinearOp
from gnomon.dialects.graph.nn import BatchNormOp, ConvOp, ConvTransposeOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp

Layer = ConvOp | ConvTransposeOp | LinearOp


def _constant_array(value: SSAValue) -> np.ndarray | None:
    """The value of a float `graph.constant`, or None when `value` is anything else."""
    owner = value.owner
    if not isinstance(owner, ConstantOp) or not isinstance(value.type, TensorType):
        return None
    if not isinstance(value.type.get_element_type(), AnyFloat):
        return None
    return constant_to_numpy(owner.value)


def _constant_arrays(values: Sequence[SSAValue]) -> list[np.ndarray] | None:
    """The values of `values` when every one is a float constant, else None."""
    arrays = [_constant_array(v) for v in values]
    known = [a for a in arrays if a is not None]
    return known if len(known) == len(arrays) else None


def _scaled_weight(layer: Layer, weight: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """`weight` with each output channel's slice multiplied by that channel's `scale`."""
    if not isinstance(layer, ConvTransposeOp):  # (C_out, ...) for conv and linear
        return weight * scale.reshape((-1,) + (1,) * (weight.ndim - 1))
    # (C_in, C_out / groups, *kernel): output channel g * C_out/groups + j is column j of group g's rows.
    groups = layer.groups.value.data
    c_in, per_group, *kernel = weight.shape
    grouped = weight.reshape(groups, c_in // groups, per_group, *kernel)
    channel_scale = scale.reshape(groups, 1, per_group, *([1] * len(kernel)))
    return (grouped * channel_scale).reshape(weight.shape)


def _replace_by_folded_layer(
    rewriter: PatternRewriter, op: Operation, layer: Layer, weight: np.ndarray, bias: np.ndarray
) -> None:
    """Replace `op`, which reads `layer`'s only result, by `layer` with constant `weight` and `bias`; erase `layer`
    and the constants it leaves unused."""
    assert isinstance(layer.weight.type, TensorType)  # `_constant_arrays` read it as one
    element_type = layer.weight.type.get_element_type()
    weight_op = folded_constant(weight, layer.weight.type, layer.location)
    bias_op = folded_constant(bias, TensorType(element_type, bias.shape), layer.location)
    folded = type(layer).build(
        operands=[layer.input, weight_op.result, [bias_op.result]],
        properties=dict(layer.properties),
        attributes=dict(layer.attributes),
        result_types=[layer.result.type],
    )
    folded.location = layer.location
    old_params = [layer.weight] if layer.bias is None else [layer.weight, layer.bias]
    rewriter.replace(op, [weight_op, bias_op, folded])
    rewriter.erase(layer)
    for value in old_params:
        _erase_if_unused(rewriter, value)


def _erase_if_unused(rewriter: PatternRewriter, value: SSAValue) -> None:
    """Erase a constant nothing reads any more (once: one constant may be several parameters)."""
    owner = value.owner
    if isinstance(owner, ConstantOp) and owner.parent is not None and not owner.result.uses:
        rewriter.erase(owner)


class FoldBatchNormIntoLayer(RewritePattern):
    """batch_norm(conv(x, w, b)) = conv(x, w * s, (b - mean) * s + beta), likewise for conv_transpose and linear.

    Applies only when the layer's result feeds the norm alone (else the unnormalized output is still
    needed) and every weight, bias and statistic is a constant.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BatchNormOp, rewriter: PatternRewriter) -> None:
        layer = op.input.owner
        if not isinstance(layer, Layer) or not layer.result.has_one_use() or channels_last(layer):
            return
        # The norm's channel axis is 1; a linear layer's features are its last axis: they agree for rank 2 only.
        if isinstance(layer, LinearOp) and len(layer.result.type.get_shape()) != 2:
            return
        layer_params = [layer.weight] if layer.bias is None else [layer.weight, layer.bias]
        params = [op.scale, op.bias, op.mean, op.variance, *layer_params]
        arrays = _constant_arrays(params)
        if arrays is None:
            return
        gamma, beta, mean, variance, weight, *bias = (a.astype(np.float64) for a in arrays)
        scale = gamma / np.sqrt(variance + op.epsilon.value.data)
        new_bias = ((bias[0] if bias else 0.0) - mean) * scale + beta

        _replace_by_folded_layer(rewriter, op, layer, _scaled_weight(layer, weight, scale), new_bias)
        for value in params[:4]:
            _erase_if_unused(rewriter, value)


class BatchNormToAffine(RewritePattern):
    """batch_norm(x) = x * s + t per channel, with s = gamma / sqrt(var + eps) and t = beta - mean * s.

    Applies to a norm with constant statistics that no layer could absorb (run after FoldBatchNormIntoLayer).
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BatchNormOp, rewriter: PatternRewriter) -> None:
        params = [op.scale, op.bias, op.mean, op.variance]
        arrays = _constant_arrays(params)
        result_type = op.result.type
        if arrays is None:
            return
        gamma, beta, mean, variance = (a.astype(np.float64) for a in arrays)
        scale = gamma / np.sqrt(variance + op.epsilon.value.data)
        shift = beta - mean * scale
        # (C, 1, ..., 1): broadcasts against (N, C, spatial...) from the right.
        shape = (scale.shape[0],) + (1,) * (len(result_type.get_shape()) - 2)
        element_type = result_type.get_element_type()
        constants = [
            folded_constant(v.reshape(shape), TensorType(element_type, shape), op.location) for v in (scale, shift)
        ]
        scaled = MulOp.build(operands=[op.input, constants[0].result], result_types=[result_type])
        shifted = AddOp.build(operands=[scaled.results[0], constants[1].result], result_types=[result_type])
        for new in (scaled, shifted):
            new.location = op.location
        rewriter.replace(op, [*constants, scaled, shifted])
        for value in params:
            _erase_if_unused(rewriter, value)


def _channel_vector(value: SSAValue, channels: int, rank: int) -> np.ndarray | None:
    """`value` as `channels` floats, when it is a constant (or a reshape of one) broadcast along axis 1 of a
    rank-`rank` tensor: of shape (C, 1, ..., 1) or (1, C, 1, ..., 1)."""
    owner = value.owner
    array = _constant_array(owner.input) if isinstance(owner, ReshapeOp) else _constant_array(value)
    if array is None or not isinstance(value.type, TensorType):
        return None
    shape = tuple(value.type.get_shape())
    if len(shape) > rank or (1,) * (rank - len(shape)) + shape != (1, channels) + (1,) * (rank - 2):
        return None
    return array.reshape(channels).astype(np.float64)


def _erase_channel_vector(rewriter: PatternRewriter, value: SSAValue) -> None:
    owner = value.owner
    if isinstance(owner, ReshapeOp) and not owner.result.uses:
        source = owner.input
        rewriter.erase(owner)
        _erase_if_unused(rewriter, source)
    else:
        _erase_if_unused(rewriter, value)


class FoldChannelAffineIntoConv(RewritePattern):
    """conv(x, w, b) * s = conv(x, w * s, b * s) and conv(x, w, b) + t = conv(x, w, b + t), for constant
    per-channel s and t."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BinaryOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op, MulOp | AddOp):
            return
        for conv_value, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            conv = conv_value.owner
            if not isinstance(conv, ConvOp) or not conv.result.has_one_use() or op.result.type != conv.result.type:
                continue
            if channels_last(conv):  # its channels are the last dim; the graph's norms and affines are channels-first
                continue
            shape = conv.result.type.get_shape()
            vector = _channel_vector(other, shape[1], len(shape))
            arrays = _constant_arrays([conv.weight] if conv.bias is None else [conv.weight, conv.bias])
            if vector is None or arrays is None:
                continue
            weight, *bias = (a.astype(np.float64) for a in arrays)
            old_bias = bias[0] if bias else np.zeros(shape[1])
            if isinstance(op, MulOp):
                weight, new_bias = _scaled_weight(conv, weight, vector), old_bias * vector
            else:
                new_bias = old_bias + vector
            _replace_by_folded_layer(rewriter, op, conv, weight, new_bias)
            _erase_channel_vector(rewriter, other)
            return


@dataclass(frozen=True)
class GraphFoldBatchNormPass(ModulePass):
    """Fold inference batch norms into the layer that feeds them, else into a per-channel multiply-add."""

    name = "graph-fold-batch-norm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Folding into a layer first: the affine form would hide the norm from that pattern.
        for pattern in (FoldBatchNormIntoLayer(), BatchNormToAffine(), FoldChannelAffineIntoConv()):
            PatternRewriteWalker(GreedyRewritePatternApplier([pattern], dce_enabled=False)).rewrite_module(op)
