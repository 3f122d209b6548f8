"""Converters for convolutions, pooling, normalizations, softmax and attention."""

from __future__ import annotations

import math

from gnomon.dialects.graph.base import bool_attr, f64_attr, i64_array, i64_attr
from gnomon.dialects.graph.nn import (
    AdaptiveAvgPoolOp,
    AdaptiveMaxPoolOp,
    AttentionOp,
    AvgPoolOp,
    BatchNormOp,
    ConvOp,
    ConvTransposeOp,
    GlobalAvgPoolOp,
    GroupNormOp,
    InstanceNormOp,
    LayerNormOp,
    LogSoftmaxOp,
    MaxPoolOp,
    SoftmaxOp,
)
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts
from xdsl.ir import SSAValue


def _spread(values: list[int], count: int) -> list[int]:
    """torch lets one value stand for every spatial dim; torch-mlir's ONNX pooling may list extra
    trailing strides, which torch's own lowering ignores too."""
    return values * count if len(values) == 1 else values[:count]


def _symmetric_pads(padding: list[int], count: int) -> list[int]:
    padding = _spread(padding, count)
    return [*padding, *padding]


@converts(
    "torch.aten.convolution", "torch.aten._convolution",
    args="input weight bias stride padding dilation transposed output_padding groups",
)  # fmt: skip
def convolution(a: AtenArgs) -> SSAValue:
    x, w = a.tensor("input"), a.tensor("weight")
    bias = a.optional_tensor("bias")
    spatial = len(a.result_type().get_shape()) - 2
    props = {
        "strides": i64_array(_spread(a.ints("stride"), spatial)),
        "pads": i64_array(_symmetric_pads(a.ints("padding"), spatial)),
        "dilations": i64_array(_spread(a.ints("dilation"), spatial)),
        "groups": i64_attr(a.int("groups")),
    }
    operands = [x, w, [bias] if bias is not None else []]
    if a.bool("transposed"):
        props["output_padding"] = i64_array(_spread(a.ints("output_padding"), spatial))
        return a.value(ConvTransposeOp.build(operands=operands, properties=props, result_types=[a.result_type()]))
    return a.value(ConvOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


@converts("torch.aten.conv1d", "torch.aten.conv2d", "torch.aten.conv3d", args="input weight bias stride padding dilation groups")
def conv_nd(a: AtenArgs) -> SSAValue:
    spatial = len(a.result_type().get_shape()) - 2
    props = {
        "strides": i64_array(_spread(a.ints("stride"), spatial)),
        "pads": i64_array(_symmetric_pads(a.ints("padding"), spatial)),
        "dilations": i64_array(_spread(a.ints("dilation"), spatial)),
        "groups": i64_attr(a.int("groups")),
    }
    bias = a.optional_tensor("bias")
    operands = [a.tensor("input"), a.tensor("weight"), [bias] if bias is not None else []]
    return a.value(ConvOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


def _batch_norm(a: AtenArgs) -> SSAValue:
    if a.bool("training"):
        raise NotConvertible("training-mode batch norm in an inference graph")
    x = a.tensor("input")
    channels = a.result_type().get_shape()[1]
    dtype = a.result_dtype()
    scale = a.optional_tensor("weight") or a.splat_tensor(1.0, dtype, [channels])
    bias = a.optional_tensor("bias") or a.splat_tensor(0.0, dtype, [channels])
    mean, var = a.optional_tensor("running_mean"), a.optional_tensor("running_var")
    if mean is None or var is None:
        raise NotConvertible("batch norm without running statistics")
    return a.value(
        BatchNormOp.build(
            operands=[x, scale, bias, mean, var],
            properties={"epsilon": f64_attr(a.float("eps"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.batch_norm", args="input weight bias running_mean running_var training momentum eps cudnn_enabled")
def batch_norm(a: AtenArgs) -> SSAValue:
    return _batch_norm(a)


@converts("torch.aten._native_batch_norm_legit_no_training", args="input weight bias running_mean running_var momentum eps")
def batch_norm_no_training(a: AtenArgs) -> list[SSAValue]:
    x = a.tensor("input")
    channels = a.result_type().get_shape()[1]
    dtype = a.result_dtype()
    scale = a.optional_tensor("weight") or a.splat_tensor(1.0, dtype, [channels])
    bias = a.optional_tensor("bias") or a.splat_tensor(0.0, dtype, [channels])
    y = a.value(
        BatchNormOp.build(
            operands=[x, scale, bias, a.tensor("running_mean"), a.tensor("running_var")],
            properties={"epsilon": f64_attr(a.float("eps"))},
            result_types=[a.result_type()],
        )
    )
    # The saved statistics are empty in inference; nothing uses them once exported.
    return [y, *(a.splat_tensor(0.0, a.result_dtype(i), list(a.result_type(i).get_shape())) for i in (1, 2))]


def _affine(a: AtenArgs, shape: list[int]) -> list[SSAValue]:
    scale, bias = a.optional_tensor("weight"), a.optional_tensor("bias")
    if scale is None and bias is None:
        return []
    dtype = a.result_dtype()
    return [scale or a.splat_tensor(1.0, dtype, shape), bias or a.splat_tensor(0.0, dtype, shape)]


@converts("torch.aten.layer_norm", args="input normalized_shape weight bias eps cudnn_enable")
def layer_norm(a: AtenArgs) -> SSAValue:
    normalized = a.ints("normalized_shape")
    rank = len(a.result_type().get_shape())
    return a.value(
        LayerNormOp.build(
            operands=[a.tensor("input"), _affine(a, normalized)],
            properties={"axis": i64_attr(rank - len(normalized)), "epsilon": f64_attr(a.float("eps"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.native_layer_norm", args="input normalized_shape weight bias eps")
def native_layer_norm(a: AtenArgs) -> list[SSAValue]:
    normalized = a.ints("normalized_shape")
    rank = len(a.result_type().get_shape())
    for index in (1, 2):
        if a.op.results[index].uses:
            raise NotConvertible("native_layer_norm's mean and rstd results are used (a training graph)")
    y = a.value(
        LayerNormOp.build(
            operands=[a.tensor("input"), _affine(a, normalized)],
            properties={"axis": i64_attr(rank - len(normalized)), "epsilon": f64_attr(a.float("eps"))},
            result_types=[a.result_type()],
        )
    )
    return [y, y, y]


@converts(
    "torch.aten.instance_norm",
    args="input weight bias running_mean running_var use_input_stats momentum eps cudnn_enabled",
)
def instance_norm(a: AtenArgs) -> SSAValue:
    if not a.bool("use_input_stats"):
        raise NotConvertible("instance norm with running statistics")
    channels = a.result_type().get_shape()[1]
    return a.value(
        InstanceNormOp.build(
            operands=[a.tensor("input"), _affine(a, [channels])],
            properties={"epsilon": f64_attr(a.float("eps"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.group_norm", args="input num_groups weight bias eps cudnn_enabled")
def group_norm(a: AtenArgs) -> SSAValue:
    channels = a.result_type().get_shape()[1]
    return a.value(
        GroupNormOp.build(
            operands=[a.tensor("input"), _affine(a, [channels])],
            properties={"num_groups": i64_attr(a.int("num_groups")), "epsilon": f64_attr(a.float("eps"))},
            result_types=[a.result_type()],
        )
    )


def _max_pool(a: AtenArgs) -> SSAValue:
    kernel = a.ints("kernel_size")
    spatial = len(kernel)
    stride = a.ints("stride") or kernel
    return a.value(
        MaxPoolOp.build(
            operands=[a.tensor("self")],
            properties={
                "kernel": i64_array(kernel),
                "strides": i64_array(_spread(stride, spatial)),
                "pads": i64_array(_symmetric_pads(a.ints("padding"), spatial)),
                "dilations": i64_array(_spread(a.ints("dilation"), spatial)),
                "ceil_mode": bool_attr(a.bool("ceil_mode")),
            },
            result_types=[a.result_type()],
        )
    )


@converts(
    "torch.aten.max_pool1d", "torch.aten.max_pool2d", "torch.aten.max_pool3d",
    args="self kernel_size stride padding dilation ceil_mode",
)  # fmt: skip
def max_pool(a: AtenArgs) -> SSAValue:
    return _max_pool(a)


@converts(
    "torch.aten.max_pool2d_with_indices", "torch.aten.max_pool3d_with_indices",
    args="self kernel_size stride padding dilation ceil_mode",
)  # fmt: skip
def max_pool_with_indices(a: AtenArgs) -> list[SSAValue]:
    if a.op.results[1].uses:
        raise NotConvertible("max pool indices are used")
    y = _max_pool(a)
    return [y, y]


@converts(
    "torch.aten.avg_pool1d", args="self kernel_size stride padding ceil_mode count_include_pad",
)  # fmt: skip
def avg_pool1d(a: AtenArgs) -> SSAValue:
    return _avg_pool(a)


@converts(
    "torch.aten.avg_pool2d", "torch.aten.avg_pool3d",
    args="self kernel_size stride padding ceil_mode count_include_pad divisor_override",
)  # fmt: skip
def avg_pool(a: AtenArgs) -> SSAValue:
    if not a.is_none("divisor_override"):
        raise NotConvertible("avg_pool with divisor_override")
    return _avg_pool(a)


def _avg_pool(a: AtenArgs) -> SSAValue:
    kernel = a.ints("kernel_size")
    spatial = len(kernel)
    stride = a.ints("stride") or kernel
    return a.value(
        AvgPoolOp.build(
            operands=[a.tensor("self")],
            properties={
                "kernel": i64_array(_spread(kernel, spatial)),
                "strides": i64_array(_spread(stride, spatial)),
                "pads": i64_array(_symmetric_pads(a.ints("padding"), spatial)),
                "ceil_mode": bool_attr(a.bool("ceil_mode")),
                "count_include_pad": bool_attr(a.bool("count_include_pad")),
            },
            result_types=[a.result_type()],
        )
    )


@converts(
    "torch.aten.adaptive_avg_pool1d", "torch.aten.adaptive_avg_pool2d", "torch.aten.adaptive_avg_pool3d",
    "torch.aten._adaptive_avg_pool2d",
    args="self output_size",
)  # fmt: skip
def adaptive_avg_pool(a: AtenArgs) -> SSAValue:
    out = a.result_type()
    if all(d == 1 for d in out.get_shape()[2:]):
        return a.value(GlobalAvgPoolOp.build(operands=[a.tensor("self")], result_types=[out]))
    return a.value(
        AdaptiveAvgPoolOp.build(
            operands=[a.tensor("self")], properties={"output_size": i64_array(out.get_shape()[2:])}, result_types=[out]
        )
    )


@converts("torch.aten.adaptive_max_pool1d", "torch.aten.adaptive_max_pool2d", args="self output_size")
def adaptive_max_pool(a: AtenArgs) -> list[SSAValue]:
    if len(a.op.results) > 1 and a.op.results[1].uses:
        raise NotConvertible("adaptive max pool indices are used")
    out = a.result_type()
    y = a.value(
        AdaptiveMaxPoolOp.build(
            operands=[a.tensor("self")], properties={"output_size": i64_array(out.get_shape()[2:])}, result_types=[out]
        )
    )
    return [y] * len(a.op.results)


def _softmax(a: AtenArgs, op: type[SoftmaxOp] | type[LogSoftmaxOp]) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    return a.value(op.build(operands=[x], properties={"axis": i64_attr(a.int("dim"))}, result_types=[a.result_type()]))


@converts("torch.aten.softmax.int", args="self dim dtype")
def softmax(a: AtenArgs) -> SSAValue:
    return _softmax(a, SoftmaxOp)


@converts("torch.aten._softmax", args="self dim half_to_float")
def softmax_internal(a: AtenArgs) -> SSAValue:
    return _softmax(a, SoftmaxOp)


@converts("torch.aten.log_softmax.int", args="self dim dtype")
def log_softmax(a: AtenArgs) -> SSAValue:
    return _softmax(a, LogSoftmaxOp)


@converts("torch.aten._log_softmax", args="self dim half_to_float")
def log_softmax_internal(a: AtenArgs) -> SSAValue:
    return _softmax(a, LogSoftmaxOp)


@converts(
    "torch.aten.scaled_dot_product_attention",
    args="query key value attn_mask dropout_p is_causal scale enable_gqa",
)
def scaled_dot_product_attention(a: AtenArgs) -> SSAValue:
    if a.float("dropout_p") != 0.0:
        raise NotConvertible("attention dropout in an inference graph")
    if a.bool("enable_gqa"):
        raise NotConvertible("grouped-query attention")
    q = a.tensor("query")
    embed = _last_dim(q)
    scale = a.optional_float("scale")
    mask = a.optional_tensor("attn_mask")
    return a.value(
        AttentionOp.build(
            operands=[q, a.tensor("key"), a.tensor("value"), [mask] if mask is not None else []],
            properties={
                "scale": f64_attr(scale if scale is not None else 1.0 / math.sqrt(embed)),
                "is_causal": bool_attr(a.bool("is_causal")),
            },
            result_types=[a.result_type()],
        )
    )


def _last_dim(value: SSAValue) -> int:
    dim = tensor_type(value).get_shape()[-1]
    if dim < 1:
        raise NotConvertible("attention with a dynamic embedding size and no explicit scale")
    return dim
