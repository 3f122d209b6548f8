"""Converters for convolutions, pooling, normalizations, softmax and attention."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import BFloat16Type, Float16Type, TensorType, f32
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph.base import DYN, bool_attr, f64_attr, i64_array, i64_attr
from gnomon.dialects.graph.elementwise import AddOp, MulOp, RsqrtOp, SubOp
from gnomon.dialects.graph.nn import (
    AdaptiveAvgPoolOp,
    AdaptiveMaxPoolOp,
    AttentionOp,
    AvgPoolOp,
    BatchNormOp,
    ConvOp,
    ConvTransposeOp,
    GlobalAvgPoolOp,
    GlobalMaxPoolOp,
    GroupNormOp,
    InstanceNormOp,
    LayerNormOp,
    LogSoftmaxOp,
    MaxPoolOp,
    SoftmaxOp,
)
from gnomon.dialects.graph.reduce import ReduceMeanOp
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type, torch_op_name
from gnomon.passes.torch_to_graph.pool import windowed_max_with_indices, windows
from gnomon.passes.torch_to_graph.registry import converts


def spread(values: list[int], count: int) -> list[int]:
    """torch lets one value stand for every spatial dim."""
    if len(values) == 1:
        return values * count
    if len(values) != count:
        raise NotConvertible(f"a window argument lists {len(values)} values for {count} spatial dims")
    return values


def spatial_dims(a: AtenArgs) -> int:
    """The spatial dims of a windowed op's (N, C, *spatial) result."""
    rank = len(a.result_type().get_shape())
    if rank < 3:
        raise NotConvertible("a windowed op on an unbatched input")
    return rank - 2


def torch_pads(padding: list[int], count: int) -> list[int]:
    """Graph pads (all leading, then all trailing) from torch's symmetric padding; torch-mlir's ONNX
    average pooling passes asymmetric pads as they are in ONNX, one entry per side."""
    if len(padding) == 2 * count:
        return padding
    padding = spread(padding, count)
    return [*padding, *padding]


@converts("torch.aten.convolution", args="input weight bias stride padding dilation transposed output_padding groups")
def convolution(a: AtenArgs) -> SSAValue:
    return _convolution(a)


@converts(
    "torch.aten._convolution",
    args="input weight bias stride padding dilation transposed output_padding groups benchmark deterministic "
    "cudnn_enabled allow_tf32",
)  # fmt: skip
def convolution_internal(a: AtenArgs) -> SSAValue:
    return _convolution(a)


def _convolution(a: AtenArgs) -> SSAValue:
    output_padding = a.ints("output_padding") if a.bool("transposed") else None
    return _conv(a, torch_pads(a.ints("padding"), spatial_dims(a)), output_padding)


def _conv(a: AtenArgs, pads: list[int], output_padding: list[int] | None = None) -> SSAValue:
    """A convolution, or with `output_padding` a transposed one; torch's weight layouts are the graph's."""
    spatial = spatial_dims(a)
    props = {
        "strides": i64_array(spread(a.ints("stride"), spatial)),
        "pads": i64_array(pads),
        "dilations": i64_array(spread(a.ints("dilation"), spatial)),
        "groups": i64_attr(a.int("groups")),
    }
    bias = a.optional_tensor("bias")
    operands = [a.tensor("input"), a.tensor("weight"), [bias] if bias is not None else []]
    if output_padding is not None:
        props["output_padding"] = i64_array(spread(output_padding, spatial))
        return a.value(ConvTransposeOp.build(operands=operands, properties=props, result_types=[a.result_type()]))
    return a.value(ConvOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


@converts(
    "torch.aten.conv1d",
    "torch.aten.conv2d",
    "torch.aten.conv3d",
    args="input weight bias stride padding dilation groups",
)
def conv_nd(a: AtenArgs) -> SSAValue:
    return _conv(a, torch_pads(a.ints("padding"), spatial_dims(a)))


@converts(
    "torch.aten.conv1d.padding",
    "torch.aten.conv2d.padding",
    "torch.aten.conv3d.padding",
    args="input weight bias stride padding dilation groups",
)
def conv_nd_padding(a: AtenArgs) -> SSAValue:
    """`padding="valid"` is none; `"same"` pads dilation * (kernel - 1) per dim, the odd one at the end."""
    spatial = spatial_dims(a)
    mode = a.str("padding")
    if mode == "valid":
        return _conv(a, [0] * 2 * spatial)
    if mode != "same":
        raise NotConvertible(f"convolution padding {mode!r}")
    kernel = tensor_type(a.tensor("weight")).get_shape()[2:]
    totals = [d * (k - 1) for d, k in zip(spread(a.ints("dilation"), spatial), kernel, strict=True)]
    return _conv(a, [t // 2 for t in totals] + [t - t // 2 for t in totals])


@converts(
    "torch.aten.conv_transpose1d",
    "torch.aten.conv_transpose2d.input",
    "torch.aten.conv_transpose3d.input",
    args="input weight bias stride padding output_padding groups dilation",
)
def conv_transpose(a: AtenArgs) -> SSAValue:
    return _conv(a, torch_pads(a.ints("padding"), spatial_dims(a)), a.ints("output_padding"))


@converts("onnx.ConvTranspose", args="X W B?")
def onnx_conv_transpose(a: AtenArgs) -> SSAValue:
    """ONNX ConvTranspose with auto padding (the frontend keeps only those from torch-mlir, which refuses an
    uneven split): the output is `output_shape` (by default the input times the strides), and the full output's
    excess is cropped, the odd one at the end (SAME_UPPER) or at the beginning (SAME_LOWER)."""
    auto_pad = a.onnx_str("auto_pad", "NOTSET")
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise NotConvertible(f"ConvTranspose with auto_pad {auto_pad}")
    x, weight = a.tensor("X"), a.tensor("W")
    spatial = spatial_dims(a)
    sizes, kernel = tensor_type(x).get_shape()[2:], tensor_type(weight).get_shape()[2:]
    if DYN in sizes or DYN in kernel:
        raise NotConvertible("ConvTranspose with auto padding of a dynamic shape")
    strides, dilations = a.onnx_ints("strides", [1] * spatial), a.onnx_ints("dilations", [1] * spatial)
    output_padding = a.onnx_ints("output_padding", [0] * spatial)
    output_shape = a.onnx_ints("output_shape", [n * s for n, s in zip(sizes, strides, strict=True)])[-spatial:]
    totals = [
        s * (n - 1) + p + (k - 1) * d + 1 - o
        for n, s, p, k, d, o in zip(sizes, strides, output_padding, kernel, dilations, output_shape, strict=True)
    ]
    if any(t < 0 for t in totals):
        raise NotConvertible(f"ConvTranspose to {output_shape}, larger than its full output")
    small, large = [t // 2 for t in totals], [t - t // 2 for t in totals]
    bias = a.optional_tensor("B")
    props = {
        "strides": i64_array(strides),
        "pads": i64_array(small + large if auto_pad == "SAME_UPPER" else large + small),
        "dilations": i64_array(dilations),
        "output_padding": i64_array(output_padding),
        "groups": i64_attr(a.onnx_int("group", 1)),
    }
    operands = [x, weight, [bias] if bias is not None else []]
    return a.value(ConvTransposeOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


def _batch_norm(a: AtenArgs) -> SSAValue:
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


def _check_unused(a: AtenArgs, what: str) -> None:
    """Multi-result ops convert to their main result only when nothing reads the others."""
    if any(result.uses for result in a.op.results[1:]):
        raise NotConvertible(f"{what} are used (a training graph)")


@converts(
    "torch.aten.batch_norm", args="input weight bias running_mean running_var training momentum eps cudnn_enabled"
)
def batch_norm(a: AtenArgs) -> SSAValue:
    if a.bool("training"):
        raise NotConvertible("training-mode batch norm in an inference graph")
    return _batch_norm(a)


@converts("torch.aten.native_batch_norm", args="input weight bias running_mean running_var training momentum eps")
def native_batch_norm(a: AtenArgs) -> list[SSAValue]:
    if a.bool("training"):
        raise NotConvertible("training-mode batch norm in an inference graph")
    _check_unused(a, "batch norm's saved mean and inverse std")
    return [_batch_norm(a)] * len(a.op.results)


@converts(
    "torch.aten._native_batch_norm_legit_no_training", args="input weight bias running_mean running_var momentum eps"
)
def batch_norm_no_training(a: AtenArgs) -> list[SSAValue]:
    _check_unused(a, "batch norm's saved mean and inverse std")
    return [_batch_norm(a)] * len(a.op.results)


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
    axis, epsilon = rank - len(normalized), a.float("eps")
    y = a.value(
        LayerNormOp.build(
            operands=[a.tensor("input"), _affine(a, normalized)],
            properties={"axis": i64_attr(axis), "epsilon": f64_attr(epsilon)},
            result_types=[a.result_type()],
        )
    )
    if not any(result.uses for result in a.op.results[1:]):
        return [y, y, y]
    return [y, *_layer_norm_stats(a, list(range(axis, rank)), epsilon)]


def _layer_norm_stats(
    a: AtenArgs, axes: list[int], epsilon: float, x: SSAValue | None = None, stats_type: TensorType | None = None
) -> list[SSAValue]:
    """The mean and 1/sqrt(variance + eps) over `axes` of `x` (default: the input), kept as size-1 dims: what
    native_layer_norm saves (and ONNX LayerNormalization returns as Mean and InvStdDev)."""
    x = a.tensor_as("input", a.result_dtype(1)) if x is None else x
    x_type, stats_type = tensor_type(x), stats_type or a.result_type(1)
    props = {"axes": i64_array(axes), "keepdims": bool_attr(True)}
    mean = a.value(ReduceMeanOp.build(operands=[x], properties=props, result_types=[stats_type]))
    centered = a.value(SubOp.build(operands=[x, mean], result_types=[x_type]))
    squares = a.value(MulOp.build(operands=[centered, centered], result_types=[x_type]))
    variance = a.value(ReduceMeanOp.build(operands=[squares], properties=props, result_types=[stats_type]))
    shifted = a.value(
        AddOp.build(operands=[variance, a.scalar_tensor(epsilon, a.result_dtype(1))], result_types=[stats_type])
    )
    return [mean, a.value(RsqrtOp.build(operands=[shifted], result_types=[stats_type]))]


@converts("onnx.RMSNormalization", args="X scale")
def onnx_rms_normalization(a: AtenArgs) -> SSAValue:
    """x / sqrt(mean(x²) + eps) * scale over the dims from `axis` on, computed in f32 (`stash_type` 1) for
    narrower floats; a decomposition, as torch.export gives for `F.rms_norm`."""
    if a.onnx_int("stash_type", 1) != 1:
        raise NotConvertible("RMSNormalization with a stash_type other than float32")
    x, out_type = a.tensor("X"), a.result_type()
    rank = len(out_type.get_shape())
    element = out_type.get_element_type()
    compute = f32 if isinstance(element, Float16Type | BFloat16Type) else element
    x = a.cast(x, compute)
    x_type = tensor_type(x)
    axes = list(range(a.onnx_int("axis", -1) % max(rank, 1), rank))
    stats_type = TensorType(compute, [1 if i in axes else d for i, d in enumerate(x_type.get_shape())])
    squares = a.value(MulOp.build(operands=[x, x], result_types=[x_type]))
    props = {"axes": i64_array(axes), "keepdims": bool_attr(True)}
    mean = a.value(ReduceMeanOp.build(operands=[squares], properties=props, result_types=[stats_type]))
    epsilon = a.scalar_tensor(a.onnx_float("epsilon", 1e-5), compute)
    shifted = a.value(AddOp.build(operands=[mean, epsilon], result_types=[stats_type]))
    inverse = a.value(RsqrtOp.build(operands=[shifted], result_types=[stats_type]))
    normalized = a.value(MulOp.build(operands=[x, inverse], result_types=[x_type]))
    scaled = a.value(MulOp.build(operands=[normalized, a.tensor_as("scale", compute)], result_types=[x_type]))
    return a.cast(scaled, element)


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


@converts("torch.aten.native_group_norm", args="input weight bias N C HxW group eps")
def native_group_norm(a: AtenArgs) -> list[SSAValue]:
    """The normalized input, and where a training graph reads them, each (image, group)'s mean and
    1/sqrt(variance + eps), as (N, groups)."""
    shape = a.result_type().get_shape()
    groups, epsilon = a.int("group"), a.float("eps")
    y = a.value(
        GroupNormOp.build(
            operands=[a.tensor("input"), _affine(a, [shape[1]])],
            properties={"num_groups": i64_attr(groups), "epsilon": f64_attr(epsilon)},
            result_types=[a.result_type()],
        )
    )
    if not any(result.uses for result in a.op.results[1:]):
        return [y] * len(a.op.results)
    x = a.tensor_as("input", a.result_dtype(1))
    grouped_type = TensorType(a.result_dtype(1), [shape[0], groups, math.prod(shape[1:]) // groups])
    grouped = a.value(ReshapeOp.build(operands=[x], result_types=[grouped_type]))
    kept = TensorType(a.result_dtype(1), [shape[0], groups, 1])
    stats = _layer_norm_stats(a, [2], epsilon, grouped, kept)
    return [y, *(a.value(ReshapeOp.build(operands=[v], result_types=[a.result_type(1)])) for v in stats)]


def _is_global_window(x: SSAValue, kernel: list[int], pads: list[int]) -> bool:
    """One unpadded window covering all spatial dims: the pool is a global pool."""
    return list(tensor_type(x).get_shape()[2:]) == kernel and not any(pads)


def max_pool_properties(a: AtenArgs, spatial: int) -> dict[str, Attribute]:
    """`graph.max_pool`'s window from torch's max-pool arguments (its gradient's, `graph.max_pool_grad`, too)."""
    kernel = spread(a.ints("kernel_size"), spatial)
    return {
        "kernel": i64_array(kernel),
        "strides": i64_array(spread(a.ints("stride") or kernel, spatial)),
        "pads": i64_array(torch_pads(a.ints("padding"), spatial)),
        "dilations": i64_array(spread(a.ints("dilation"), spatial)),
        "ceil_mode": bool_attr(a.bool("ceil_mode")),
    }


def _max_pool(a: AtenArgs) -> SSAValue:
    x = a.tensor("self")
    spatial = spatial_dims(a)
    kernel = spread(a.ints("kernel_size"), spatial)
    if _is_global_window(x, kernel, torch_pads(a.ints("padding"), spatial)):
        return a.value(GlobalMaxPoolOp.build(operands=[x], result_types=[a.result_type()]))
    properties = max_pool_properties(a, spatial)
    return a.value(MaxPoolOp.build(operands=[x], properties=properties, result_types=[a.result_type()]))


@converts(
    "torch.aten.max_pool1d", "torch.aten.max_pool2d", "torch.aten.max_pool3d",
    args="self kernel_size stride padding dilation ceil_mode",
)  # fmt: skip
def max_pool(a: AtenArgs) -> SSAValue:
    return _max_pool(a)


@converts(
    "torch.aten.max_pool1d_with_indices", "torch.aten.max_pool2d_with_indices", "torch.aten.max_pool3d_with_indices",
    args="self kernel_size stride padding dilation ceil_mode",
)  # fmt: skip
def max_pool_with_indices(a: AtenArgs) -> list[SSAValue]:
    """Indices into each image plane, as torch counts them, where they are used; a training graph's backward op
    (`graph.max_pool_grad`) finds the maxima again instead of reading them."""
    if all(torch_op_name(use.operation).endswith("_with_indices_backward") for use in a.op.results[1].uses):
        y = _max_pool(a)
        return [y, y]
    x = a.tensor("self")
    spatial = spatial_dims(a)
    kernel = spread(a.ints("kernel_size"), spatial)
    stride = spread(a.ints("stride") or kernel, spatial)
    padding = torch_pads(a.ints("padding"), spatial)
    w = windows(a, x, kernel, stride, spread(a.ints("dilation"), spatial), padding)
    return list(windowed_max_with_indices(a, x, w, column_major=False, whole_tensor=False))


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
    """A `divisor_override` d (LpPool's sum pooling) is the average over the whole window, scaled:
    without ceil_mode every window lies in the padded input, so counting the padding divides by
    the window size."""
    if a.is_none("divisor_override"):
        return _avg_pool(a)
    if a.bool("ceil_mode"):
        raise NotConvertible("avg_pool with divisor_override and ceil_mode")
    window = math.prod(spread(a.ints("kernel_size"), spatial_dims(a)))
    average = _avg_pool(a, count_include_pad=True)
    factor = a.scalar_tensor(window / a.int("divisor_override"), a.result_dtype())
    return a.value(MulOp.build(operands=[average, factor], result_types=[a.result_type()]))


def _avg_pool(a: AtenArgs, count_include_pad: bool | None = None) -> SSAValue:
    x = a.tensor("self")
    spatial = spatial_dims(a)
    kernel = spread(a.ints("kernel_size"), spatial)
    stride = a.ints("stride") or kernel
    if len(stride) == 2 * spatial:
        # torch-mlir's ONNX lowering appends the dilations to the strides.
        stride, dilations = stride[:spatial], stride[spatial:]
        if any(d != 1 for d in dilations):
            raise NotConvertible(f"average pooling with dilations {dilations}")
    pads = torch_pads(a.ints("padding"), spatial)
    if _is_global_window(x, kernel, pads):
        return a.value(GlobalAvgPoolOp.build(operands=[x], result_types=[a.result_type()]))
    return a.value(
        AvgPoolOp.build(
            operands=[x],
            properties={
                "kernel": i64_array(kernel),
                "strides": i64_array(spread(stride, spatial)),
                "pads": i64_array(pads),
                "ceil_mode": bool_attr(a.bool("ceil_mode")),
                "count_include_pad": bool_attr(
                    a.bool("count_include_pad") if count_include_pad is None else count_include_pad
                ),
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
    output_size = spread(a.ints("output_size"), len(out.get_shape()) - 2)
    if all(d == 1 for d in output_size):
        return a.value(GlobalAvgPoolOp.build(operands=[a.tensor("self")], result_types=[out]))
    return a.value(
        AdaptiveAvgPoolOp.build(
            operands=[a.tensor("self")], properties={"output_size": i64_array(output_size)}, result_types=[out]
        )
    )


@converts("torch.aten.adaptive_max_pool1d", "torch.aten.adaptive_max_pool2d", args="self output_size")
def adaptive_max_pool(a: AtenArgs) -> list[SSAValue]:
    if len(a.op.results) > 1 and a.op.results[1].uses:
        raise NotConvertible("adaptive max pool indices are used")
    out = a.result_type()
    output_size = spread(a.ints("output_size"), len(out.get_shape()) - 2)
    y = a.value(
        AdaptiveMaxPoolOp.build(
            operands=[a.tensor("self")], properties={"output_size": i64_array(output_size)}, result_types=[out]
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
