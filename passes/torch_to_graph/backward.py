"""Converters for the ops of training graphs (`torch.export`'s joint forward-backward graphs): batch norm in
training mode, and the backward ops that the joint graph keeps whole (a convolution's, pooling's, an embedding's
and an embedding bag's; attention's are in `attention_train`). The rest of a backward pass arrives decomposed into
ops the forward converters know.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import bool_attr, f64_attr, i64_array, i64_attr, str_attr
from gnomon.dialects.graph.elementwise import AddOp, MulOp, RsqrtOp
from gnomon.dialects.graph.grad import AvgPoolGradOp, ConvWeightGradOp, EmbeddingBagGradOp, MaxPoolGradOp
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import BatchNormTrainOp, ConvOp, ConvTransposeOp
from gnomon.dialects.graph.reduce import ReduceSumOp
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.nn import max_pool_properties, spatial_dims, spread, torch_pads
from gnomon.passes.torch_to_graph.registry import converts


def _times(a: AtenArgs, value: SSAValue, factor: float) -> SSAValue:
    return a.value(MulOp.build(operands=[value, a.scalar_tensor(factor, a.result_dtype())], result_types=[value.type]))


def _plus(a: AtenArgs, x: SSAValue, y: SSAValue) -> SSAValue:
    return a.value(AddOp.build(operands=[x, y], result_types=[x.type]))


def _batch_statistics(a: AtenArgs) -> tuple[SSAValue, SSAValue, SSAValue, SSAValue]:
    """The batch-normalized output, the batch mean and (biased) variance and 1/sqrt(variance + eps)."""
    x = a.tensor("input")
    shape = a.result_type().get_shape()
    channels, dtype = shape[1], a.result_dtype()
    scale = a.optional_tensor("weight") or a.splat_tensor(1.0, dtype, [channels])
    bias = a.optional_tensor("bias") or a.splat_tensor(0.0, dtype, [channels])
    momentum, epsilon = a.float("momentum"), a.float("eps")
    vector = TensorType(dtype, [channels])
    normalized = a.emit(
        BatchNormTrainOp.build(
            operands=[x, scale, bias],
            properties={"epsilon": f64_attr(epsilon), "momentum": f64_attr(momentum)},
            result_types=[a.result_type(), vector, vector],
        )
    )
    y, mean, variance = normalized.results
    shifted = _plus(a, variance, a.scalar_tensor(epsilon, dtype))
    return y, mean, variance, a.value(RsqrtOp.build(operands=[shifted], result_types=[vector]))


@converts("torch.aten._native_batch_norm_legit.no_stats", args="input weight bias training momentum eps")
def batch_norm_without_statistics(a: AtenArgs) -> list[SSAValue]:
    """(output, batch mean, batch 1/sqrt(variance + eps)) of a batch norm that keeps no running statistics: what
    instance norm runs in training, over the (batch x channels) planes as channels."""
    if not a.bool("training"):
        raise NotConvertible("batch norm without running statistics outside training")
    y, mean, _, inverse_std = _batch_statistics(a)
    return [y, mean, inverse_std]


@converts(
    "torch.aten._native_batch_norm_legit_functional",
    args="input weight bias running_mean running_var training momentum eps",
)
def batch_norm_functional(a: AtenArgs) -> list[SSAValue]:
    """(output, batch mean, batch 1/sqrt(variance + eps), new running mean, new running variance), the running
    statistics moved towards the batch's by `momentum`, the variance unbiased as torch keeps it."""
    if not a.bool("training"):
        raise NotConvertible("functional batch norm outside training")
    y, mean, variance, inverse_std = _batch_statistics(a)
    shape = a.result_type().get_shape()
    channels, momentum = shape[1], a.float("momentum")
    count = math.prod(shape) // channels
    running_mean, running_variance = a.tensor("running_mean"), a.tensor("running_var")
    new_mean = _plus(a, _times(a, running_mean, 1.0 - momentum), _times(a, mean, momentum))
    unbiased = momentum * count / max(count - 1, 1)
    new_variance = _plus(a, _times(a, running_variance, 1.0 - momentum), _times(a, variance, unbiased))
    return [y, mean, inverse_std, new_mean, new_variance]


@converts(
    "torch.aten.convolution_backward",
    args="grad_output input weight bias_sizes stride padding dilation transposed output_padding groups output_mask",
)
def convolution_backward(a: AtenArgs) -> list[SSAValue]:
    """The gradients of a convolution's input (a transposed convolution of the result's gradient by the same
    weight), weight (`graph.conv_weight_grad`) and bias (a sum), each where `output_mask` asks for it. A transposed
    convolution is the adjoint of a convolution by its weight, so the roles swap: its input's gradient is that
    convolution of the result's gradient, its weight's the weight gradient of that convolution with the result's
    gradient as input and its own input as the output's gradient."""
    if a.bool("transposed"):
        return _transposed_convolution_backward(a)
    dy, x, weight = a.tensor("grad_output"), a.tensor("input"), a.tensor("weight")
    spatial = len(tensor_type(x).get_shape()) - 2  # result 0 is none where the input's gradient is not asked for
    strides = spread(a.ints("stride"), spatial)
    dilations = spread(a.ints("dilation"), spatial)
    pads = torch_pads(a.ints("padding"), spatial)
    groups = a.int("groups")
    mask = a.bools("output_mask")
    results: list[SSAValue] = [dy, dy, dy]  # a gradient nobody asked for is never read
    x_shape, w_shape, dy_shape = (tensor_type(v).get_shape() for v in (x, weight, dy))
    if mask[0]:
        # The transposed convolution's output is (dy - 1) * stride - pads + dilated kernel; output padding makes up
        # the rows a strided forward convolution dropped.
        extra = [
            x_shape[2 + i]
            - (
                (dy_shape[2 + i] - 1) * strides[i]
                - pads[i]
                - pads[i + spatial]
                + dilations[i] * (w_shape[2 + i] - 1)
                + 1
            )
            for i in range(spatial)
        ]
        props = {
            "strides": i64_array(strides), "pads": i64_array(pads), "dilations": i64_array(dilations),
            "groups": i64_attr(groups), "output_padding": i64_array(extra),
        }  # fmt: skip
        results[0] = a.value(
            ConvTransposeOp.build(operands=[dy, weight, []], properties=props, result_types=[a.result_type(0)])
        )
    if mask[1]:
        props = {
            "kernel": i64_array(list(w_shape[2:])), "strides": i64_array(strides), "pads": i64_array(pads),
            "dilations": i64_array(dilations), "groups": i64_attr(groups),
        }  # fmt: skip
        results[1] = a.value(
            ConvWeightGradOp.build(operands=[x, dy], properties=props, result_types=[a.result_type(1)])
        )
    if mask[2]:
        results[2] = _bias_gradient(a, dy, spatial)
    return results


def _bias_gradient(a: AtenArgs, dy: SSAValue, spatial: int) -> SSAValue:
    """A convolution's bias gradient, plain or transposed: the result's gradient summed over batch and space."""
    axes = [0, *range(2, 2 + spatial)]
    return a.value(
        ReduceSumOp.build(
            operands=[dy], properties={"axes": i64_array(axes), "keepdims": bool_attr(False)},
            result_types=[a.result_type(2)],
        )
    )  # fmt: skip


def _transposed_convolution_backward(a: AtenArgs) -> list[SSAValue]:
    dy, x, weight = a.tensor("grad_output"), a.tensor("input"), a.tensor("weight")
    spatial = len(tensor_type(x).get_shape()) - 2
    window = {
        "strides": i64_array(spread(a.ints("stride"), spatial)),
        "pads": i64_array(torch_pads(a.ints("padding"), spatial)),
        "dilations": i64_array(spread(a.ints("dilation"), spatial)),
        "groups": i64_attr(a.int("groups")),
    }
    mask = a.bools("output_mask")
    results: list[SSAValue] = [dy, dy, dy]  # a gradient nobody asked for is never read
    if mask[0]:  # output padding only added rows the convolution's window never reaches again
        results[0] = a.value(
            ConvOp.build(operands=[dy, weight, []], properties=window, result_types=[a.result_type(0)])
        )
    if mask[1]:
        kernel = {"kernel": i64_array(list(tensor_type(weight).get_shape()[2:]))}
        results[1] = a.value(
            ConvWeightGradOp.build(operands=[dy, x], properties={**kernel, **window}, result_types=[a.result_type(1)])
        )
    if mask[2]:
        results[2] = _bias_gradient(a, dy, spatial)
    return results


@converts(
    "torch.aten.max_pool1d_with_indices_backward",
    "torch.aten.max_pool2d_with_indices_backward",
    "torch.aten.max_pool3d_with_indices_backward",
    args="grad_output self kernel_size stride padding dilation ceil_mode indices",
)
def max_pool_backward(a: AtenArgs) -> SSAValue:
    """`graph.max_pool_grad`, which finds the window maxima again: the forward pass's indices are not read."""
    props = max_pool_properties(a, spatial_dims(a))
    operands = [a.tensor("grad_output"), a.tensor("self")]
    return a.value(MaxPoolGradOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


@converts(
    "torch.aten.avg_pool1d_backward",
    "torch.aten.avg_pool2d_backward",
    "torch.aten.avg_pool3d_backward",
    args="grad_output self kernel_size stride padding ceil_mode count_include_pad divisor_override",
)
def avg_pool_backward(a: AtenArgs) -> SSAValue:
    if not a.is_none("divisor_override"):
        raise NotConvertible("average pooling backward with a divisor override")
    spatial = spatial_dims(a)
    kernel = spread(a.ints("kernel_size"), spatial)
    props = {
        "kernel": i64_array(kernel),
        "strides": i64_array(spread(a.ints("stride") or kernel, spatial)),
        "pads": i64_array(torch_pads(a.ints("padding"), spatial)),
        "ceil_mode": bool_attr(a.bool("ceil_mode")),
        "count_include_pad": bool_attr(a.bool("count_include_pad")),
    }
    operands = [a.tensor("grad_output"), a.tensor("self")]
    return a.value(AvgPoolGradOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


@converts("torch.aten._adaptive_avg_pool2d_backward", args="grad_output self")
def adaptive_avg_pool_backward(a: AtenArgs) -> SSAValue:
    """Each output cell's gradient spread evenly over its window. Adaptive windows are products of one window per
    axis (rows [floor(i H / OH), ceil((i + 1) H / OH)), columns alike) and a cell's weight is the product of one
    weight per axis, so the spreading is two products by constant matrices: dx = A_hᵀ dy A_w."""
    dy = a.tensor("grad_output")
    *_, rows, columns = tensor_type(dy).get_shape()
    *batch, height, width = a.result_type().get_shape()
    dtype = a.result_dtype()
    by_row = a.constant(_adaptive_spread(rows, height).T, dtype)
    by_column = a.constant(_adaptive_spread(columns, width), dtype)
    spread_rows = _matmul(a, by_row, dy, TensorType(dtype, [*batch, height, columns]))
    return _matmul(a, spread_rows, by_column, a.result_type())


def _adaptive_spread(cells: int, size: int) -> np.ndarray:
    """(cells, size): row i averages adaptive window i of an axis of `size`."""
    weights = np.zeros((cells, size), np.float64)
    for i in range(cells):
        start, end = i * size // cells, -(-(i + 1) * size // cells)
        weights[i, start:end] = 1.0 / (end - start)
    return weights


def _matmul(a: AtenArgs, lhs: SSAValue, rhs: SSAValue, result: TensorType) -> SSAValue:  # type: ignore[type-arg]
    return a.value(MatmulOp.build(operands=[lhs, rhs], result_types=[result]))


@converts(
    "torch.aten._embedding_bag_backward",
    args="grad indices offsets offset2bag bag_size maximum_indices num_weights scale_grad_by_freq mode sparse "
    "per_sample_weights padding_idx",
)
def embedding_bag_backward(a: AtenArgs) -> SSAValue:
    """The table's dense gradient (a sparse one, for `sparse=True`, is the same rows)."""
    mode = {0: "sum", 1: "mean"}.get(a.int("mode"))
    if mode is None:
        raise NotConvertible("the backward of a max embedding bag")
    if a.bool("scale_grad_by_freq"):
        raise NotConvertible("embedding bag backward scaled by frequency")
    if a.optional_int("padding_idx") not in (None, -1):
        raise NotConvertible("embedding bag backward with padding_idx")
    weights = a.optional_tensor("per_sample_weights")
    operands = [a.tensor("grad"), a.tensor("indices"), a.tensor("offsets"), [weights] if weights is not None else []]
    props = {"mode": str_attr(mode), "rows": i64_attr(a.int("num_weights"))}
    return a.value(EmbeddingBagGradOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


@converts("torch.aten.embedding_dense_backward", args="grad_output indices num_weights padding_idx scale_grad_by_freq")
def embedding_backward(a: AtenArgs) -> SSAValue:
    """An embedding's gradient: the embedding bag's with one index per bag."""
    if a.bool("scale_grad_by_freq"):
        raise NotConvertible("embedding backward scaled by frequency")
    if a.int("padding_idx") != -1:
        raise NotConvertible("embedding backward with padding_idx")
    indices = a.tensor("indices")
    count = math.prod(tensor_type(indices).get_shape())
    dim = a.result_type().get_shape()[1]
    flat_indices = _reshaped(a, indices, [count])
    flat_grad = _reshaped(a, a.tensor("grad_output"), [count, dim])
    offsets = a.constant(np.arange(count), tensor_type(indices).get_element_type())
    props = {"mode": str_attr("sum"), "rows": i64_attr(a.int("num_weights"))}
    return a.value(
        EmbeddingBagGradOp.build(
            operands=[flat_grad, flat_indices, offsets, []], properties=props, result_types=[a.result_type()]
        )
    )


def _reshaped(a: AtenArgs, x: SSAValue, shape: list[int]) -> SSAValue:
    x_type = tensor_type(x)
    return a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(x_type.get_element_type(), shape)]))
