"""Neural-network graph ops: convolutions, pooling, normalizations, softmax, attention.

Layouts are channels-first: activations are (N, C, *spatial), convolution weights are
(C_out, C_in / groups, *kernel), transposed-convolution weights (C_in, C_out / groups, *kernel).
Padding lists give the leading pads of every spatial dim, then the trailing pads (ONNX order).

A 2-D convolution and max or average pool may instead take and give channels-last activations (N, H, W, C):
`layout = "nhwc"` (`gnomon.dialects.graph.layout`), which `graph-layout` sets where it predicts the region faster
so. Weights, biases, pads and windows keep their channels-first form; the op computes what its channels-first
form computes on the permuted activations.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    DYN,
    GraphOperation,
    Shape,
    TensorT,
    dim_str,
    dims_compatible,
    dtype_of,
    ints,
    normalize_axis,
    shape_of,
    shape_str,
    tensor_of,
    tensor_type,
)
from gnomon.dialects.graph.layout import CHANNELS_LAST, TO_CHANNELS_FIRST, TO_CHANNELS_LAST, channels_last, permuted
from gnomon.dialects.graph.traits import MaxPoolCanonicalization


def check_spatial(op: str, name: str, values: Sequence[int], count: int) -> None:
    if len(values) != count:
        raise VerifyException(f"{op}: {name} has {len(values)} entries, expected {count}")


def _window_output(
    size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, dilation: int, ceil_mode: bool
) -> int:
    if DYN in (size, kernel):
        return DYN
    span = size + pad_begin + pad_end - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    # As PyTorch and ONNX do: the last window must start inside the input or the leading padding.
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def spatial_output(
    op: str, input_shape: Shape, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
    dilations: Sequence[int], ceil_mode: bool = False,
) -> list[int]:  # fmt: skip
    spatial = len(input_shape) - 2
    check_spatial(op, "strides", strides, spatial)
    check_spatial(op, "pads", pads, 2 * spatial)
    check_spatial(op, "dilations", dilations, spatial)
    out: list[int] = []
    for i in range(spatial):
        size = _window_output(
            input_shape[i + 2], kernel[i], strides[i], pads[i], pads[i + spatial], dilations[i], ceil_mode
        )
        if size != DYN and size < 1:
            raise VerifyException(
                f"{op}: spatial dim {i} of input {shape_str(input_shape)} is too small for the window"
            )
        out.append(size)
    return out


def _check_bias(op: str, bias: Shape, channels: int) -> None:
    if len(bias) != 1 or not dims_compatible(bias[0], channels):
        raise VerifyException(f"{op}: bias shape {shape_str(bias)} is not [{dim_str(channels)}]")


def activation_shape(op: str, value: SSAValue, what: str = "input") -> Shape:
    shape = shape_of(value, f"{op} {what}")
    if len(shape) < 3:
        raise VerifyException(f"{op}: {what} must have rank >= 3 (N, C, spatial...), got shape {shape_str(shape)}")
    return shape


def _channels_first_input(op: Operation, value: SSAValue) -> Shape:
    """The activation's shape as (N, C, *spatial), whatever the op's layout; checks the layout."""
    shape = activation_shape(op.name, value)
    layout = op.properties.get("layout")
    if layout is None:
        return shape
    if not isinstance(layout, StringAttr) or layout.data != CHANNELS_LAST:
        raise VerifyException(f'{op.name}: layout must be "{CHANNELS_LAST}", got {layout}')
    if len(shape) != 4:
        raise VerifyException(f'{op.name}: layout "{CHANNELS_LAST}" needs 2-D activations, got {shape_str(shape)}')
    return permuted(shape, TO_CHANNELS_FIRST)


def _in_layout(op: Operation, channels_first: Sequence[int]) -> list[int]:
    """A result shape given as (N, C, *spatial), in the op's layout."""
    return list(permuted(tuple(channels_first), TO_CHANNELS_LAST) if channels_last(op) else channels_first)


@irdl_op_definition
class ConvOp(GraphOperation):
    """N-d convolution (1d/2d/3d); depthwise is `groups` == channels.

    `%y = graph.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>,
         dilations = array<i64: 1, 1>, groups = 1 : i64}
         : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x112x112xf32>`
    """

    name = "graph.conv"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    groups = prop_def(IntegerAttr)
    layout = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x, w = _channels_first_input(self, self.input), shape_of(self.weight, "graph.conv weight")
        groups = self.groups.value.data
        if len(w) != len(x):
            raise VerifyException(f"graph.conv: weight rank {len(w)} differs from input rank {len(x)}")
        if groups < 1 or (w[0] != DYN and w[0] % groups):
            raise VerifyException(f"graph.conv: output channels {w[0]} are not divisible by groups {groups}")
        if not dims_compatible(x[1], DYN if w[1] == DYN else w[1] * groups):
            raise VerifyException(f"graph.conv: input has {x[1]} channels but weight expects {w[1]} x {groups} groups")
        if self.bias is not None:
            _check_bias(self.name, shape_of(self.bias, "graph.conv bias"), w[0])
        spatial = spatial_output(self.name, x, w[2:], ints(self.strides), ints(self.pads), ints(self.dilations))
        return [tensor_of(dtype_of(self.input, "input"), _in_layout(self, [x[0], w[0], *spatial]))]


@irdl_op_definition
class ConvTransposeOp(GraphOperation):
    """N-d transposed convolution (the gradient of `graph.conv` with respect to its input).

    `%y = graph.conv_transpose %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,
         dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, groups = 1 : i64}
         : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>) -> tensor<1x4x8x8xf32>`
    """

    name = "graph.conv_transpose"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    output_padding = prop_def(DenseArrayBase)
    groups = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x, w = activation_shape(self.name, self.input), shape_of(self.weight, "graph.conv_transpose weight")
        groups = self.groups.value.data
        if len(w) != len(x):
            raise VerifyException(f"graph.conv_transpose: weight rank {len(w)} differs from input rank {len(x)}")
        if not dims_compatible(x[1], w[0]):
            raise VerifyException(f"graph.conv_transpose: input has {x[1]} channels but weight expects {w[0]}")
        if groups < 1 or (w[0] != DYN and w[0] % groups):
            raise VerifyException(f"graph.conv_transpose: input channels {w[0]} are not divisible by groups {groups}")
        out_channels = DYN if w[1] == DYN else w[1] * groups
        if self.bias is not None:
            _check_bias(self.name, shape_of(self.bias, "graph.conv_transpose bias"), out_channels)
        spatial = len(x) - 2
        strides, pads, dilations = ints(self.strides), ints(self.pads), ints(self.dilations)
        output_padding = ints(self.output_padding)
        for name, values, count in (
            ("strides", strides, spatial), ("pads", pads, 2 * spatial), ("dilations", dilations, spatial),
            ("output_padding", output_padding, spatial),
        ):  # fmt: skip
            check_spatial(self.name, name, values, count)
        sizes = [
            DYN
            if DYN in (x[i + 2], w[i + 2])
            else (x[i + 2] - 1) * strides[i]
            - pads[i]
            - pads[i + spatial]
            + dilations[i] * (w[i + 2] - 1)
            + output_padding[i]
            + 1
            for i in range(spatial)
        ]
        if any(size != DYN and size < 1 for size in sizes):
            raise VerifyException(
                f"graph.conv_transpose: output spatial dims {sizes} of input {shape_str(x)} are too small"
            )
        return [tensor_of(dtype_of(self.input, "input"), [x[0], out_channels, *sizes])]


@irdl_op_definition
class MaxPoolOp(GraphOperation):
    """Max pooling over a sliding window; padded positions never win.

    `%y = graph.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,
         dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>`
    """

    name = "graph.max_pool"
    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    layout = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), MaxPoolCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = _channels_first_input(self, self.input)
        kernel = ints(self.kernel)
        check_spatial(self.name, "kernel", kernel, len(x) - 2)
        ceil_mode = bool(self.ceil_mode.value.data)
        spatial = spatial_output(
            self.name, x, kernel, ints(self.strides), ints(self.pads), ints(self.dilations), ceil_mode
        )
        return [tensor_of(dtype_of(self.input, "input"), _in_layout(self, [x[0], x[1], *spatial]))]


@irdl_op_definition
class AvgPoolOp(GraphOperation):
    """Average pooling; `count_include_pad` says whether padded zeros count in the divisor.

    `%y = graph.avg_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         ceil_mode = false, count_include_pad = false} : (tensor<1x8x4x4xf32>) -> tensor<1x8x2x2xf32>`
    """

    name = "graph.avg_pool"
    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    count_include_pad = prop_def(BoolAttr)
    layout = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = _channels_first_input(self, self.input)
        kernel = ints(self.kernel)
        check_spatial(self.name, "kernel", kernel, len(x) - 2)
        ones = [1] * len(kernel)
        ceil_mode = bool(self.ceil_mode.value.data)
        spatial = spatial_output(self.name, x, kernel, ints(self.strides), ints(self.pads), ones, ceil_mode)
        return [tensor_of(dtype_of(self.input, "input"), _in_layout(self, [x[0], x[1], *spatial]))]


class GlobalPoolOp(GraphOperation):
    """Pool each channel over all spatial dims; spatial dims become 1."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = activation_shape(self.name, self.input)
        return [tensor_of(dtype_of(self.input, "input"), [x[0], x[1], *([1] * (len(x) - 2))])]


@irdl_op_definition
class GlobalAvgPoolOp(GlobalPoolOp):
    """Mean of each channel over all spatial dims.

    `%y = graph.global_avg_pool %x : (tensor<1x2048x7x7xf32>) -> tensor<1x2048x1x1xf32>`
    """

    name = "graph.global_avg_pool"


@irdl_op_definition
class GlobalMaxPoolOp(GlobalPoolOp):
    """Max of each channel over all spatial dims.

    `%y = graph.global_max_pool %x : (tensor<1x512x7x7xf32>) -> tensor<1x512x1x1xf32>`
    """

    name = "graph.global_max_pool"


class AdaptivePoolOp(GraphOperation):
    """Pool to a fixed spatial `output_size`, windows as PyTorch's adaptive pooling computes them."""

    input = operand_def(TensorType)
    output_size = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = activation_shape(self.name, self.input)
        output_size = ints(self.output_size)
        check_spatial(self.name, "output_size", output_size, len(x) - 2)
        return [tensor_of(dtype_of(self.input, "input"), [x[0], x[1], *output_size])]


@irdl_op_definition
class AdaptiveAvgPoolOp(AdaptivePoolOp):
    """Adaptive average pooling.

    `%y = graph.adaptive_avg_pool %x {output_size = array<i64: 7, 7>}
         : (tensor<1x512x14x14xf32>) -> tensor<1x512x7x7xf32>`
    """

    name = "graph.adaptive_avg_pool"


@irdl_op_definition
class AdaptiveMaxPoolOp(AdaptivePoolOp):
    """Adaptive max pooling.

    `%y = graph.adaptive_max_pool %x {output_size = array<i64: 1, 1>} : (tensor<1x8x5x5xf32>) -> tensor<1x8x1x1xf32>`
    """

    name = "graph.adaptive_max_pool"


def _check_channel_vectors(op: str, x: Shape, vectors: Sequence[tuple[str, SSAValue]]) -> None:
    for what, value in vectors:
        shape = shape_of(value, f"{op} {what}")
        if len(shape) != 1 or not dims_compatible(shape[0], x[1]):
            raise VerifyException(
                f"{op}: {what} shape {shape_str(shape)} does not match {dim_str(x[1])} channels of input"
            )


@irdl_op_definition
class BatchNormOp(GraphOperation):
    """Inference batch norm over channel axis 1: (x - mean) / sqrt(var + epsilon) * scale + bias.

    `%y = graph.batch_norm %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f64}
         : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
         -> tensor<1x64x56x56xf32>`
    """

    name = "graph.batch_norm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    variance = operand_def(TensorType)
    epsilon = prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.batch_norm input")
        if len(x) < 2:
            raise VerifyException(f"graph.batch_norm: input must have rank >= 2, got shape {shape_str(x)}")
        _check_channel_vectors(
            self.name,
            x,
            [("scale", self.scale), ("bias", self.bias), ("mean", self.mean), ("variance", self.variance)],
        )
        return [tensor_type(self.input, "input")]


@irdl_op_definition
class BatchNormTrainOp(GraphOperation):
    """Training batch norm: normalizes with the batch statistics and returns them with the output.

    The running statistics are updated outside the op (by the training step) from `batch_mean`,
    `batch_variance` and `momentum`, so the op itself stays pure.

    `%y, %m, %v = graph.batch_norm_train %x, %scale, %bias {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64}
         : (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
         -> (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)`
    """

    name = "graph.batch_norm_train"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    epsilon = prop_def(FloatAttr)
    momentum = prop_def(FloatAttr)
    result = result_def(TensorType)
    batch_mean = result_def(TensorType)
    batch_variance = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.batch_norm_train input")
        if len(x) < 2:
            raise VerifyException(f"graph.batch_norm_train: input must have rank >= 2, got shape {shape_str(x)}")
        _check_channel_vectors(self.name, x, [("scale", self.scale), ("bias", self.bias)])
        dtype = dtype_of(self.input, "input")
        return [tensor_type(self.input, "input"), tensor_of(dtype, [x[1]]), tensor_of(dtype, [x[1]])]


class AffineNormOp(GraphOperation):
    """A normalization with an optional affine pair (scale, bias): both are present or neither."""

    input = operand_def(TensorType)
    affine = var_operand_def(TensorType)
    """Nothing, or the scale and the bias, in that order."""
    epsilon = prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def affine_shape(self, x: Shape) -> Shape:
        raise NotImplementedError

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, f"{self.name} input")
        if len(self.affine) not in (0, 2):
            raise VerifyException(
                f"{self.name}: takes no affine operands or a scale and a bias, got {len(self.affine)}"
            )
        expected = self.affine_shape(x)
        for what, value in zip(("scale", "bias"), self.affine, strict=False):
            shape = shape_of(value, f"{self.name} {what}")
            if len(shape) != len(expected) or not all(map(dims_compatible, shape, expected)):
                raise VerifyException(f"{self.name}: {what} shape {shape_str(shape)} is not {shape_str(expected)}")
        return [tensor_type(self.input, "input")]


@irdl_op_definition
class LayerNormOp(AffineNormOp):
    """Normalize over the dims from `axis` to the last, then scale and shift (if given).

    `%y = graph.layer_norm %x, %gamma, %beta {axis = 2 : i64, epsilon = 1.0e-05 : f64}
         : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>`
    """

    name = "graph.layer_norm"
    axis = prop_def(IntegerAttr)

    def affine_shape(self, x: Shape) -> Shape:
        axis = normalize_axis(self.axis.value.data, len(x), self.name)
        return x[axis:]


@irdl_op_definition
class InstanceNormOp(AffineNormOp):
    """Normalize each (sample, channel) over its spatial dims; scale and bias are per channel.

    `%y = graph.instance_norm %x, %s, %b {epsilon = 1.0e-05 : f64}
         : (tensor<1x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x8x8xf32>`
    """

    name = "graph.instance_norm"

    def affine_shape(self, x: Shape) -> Shape:
        if len(x) < 3:
            raise VerifyException(f"graph.instance_norm: input must have rank >= 3, got shape {shape_str(x)}")
        return (x[1],)


@irdl_op_definition
class GroupNormOp(AffineNormOp):
    """Normalize over groups of channels (and the spatial dims); scale and bias are per channel.

    `%y = graph.group_norm %x, %s, %b {num_groups = 2 : i64, epsilon = 1.0e-05 : f64}
         : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>`
    """

    name = "graph.group_norm"
    num_groups = prop_def(IntegerAttr)

    def affine_shape(self, x: Shape) -> Shape:
        groups = self.num_groups.value.data
        if len(x) < 2 or groups < 1 or (x[1] != DYN and x[1] % groups):
            raise VerifyException(
                f"graph.group_norm: channels of input {shape_str(x)} are not divisible by {groups} groups"
            )
        return (x[1],)


@irdl_op_definition
class LrnOp(GraphOperation):
    """Local response normalization across `size` neighbouring channels (AlexNet).

    `%y = graph.lrn %x {size = 5 : i64, alpha = 1.0e-04 : f64, beta = 0.75 : f64, bias = 1.0 : f64}
         : (tensor<1x96x55x55xf32>) -> tensor<1x96x55x55xf32>`
    """

    name = "graph.lrn"
    input = operand_def(TensorType)
    size = prop_def(IntegerAttr)
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)
    bias = prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        activation_shape(self.name, self.input)
        return [tensor_type(self.input, "input")]


class AxisOp(GraphOperation):
    """An op that normalizes along one `axis`; the result has the input's type."""

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        normalize_axis(self.axis.value.data, len(shape_of(self.input, f"{self.name} input")), self.name)
        return [tensor_type(self.input, "input")]


@irdl_op_definition
class SoftmaxOp(AxisOp):
    """e^x / sum(e^x) along `axis`.

    `%y = graph.softmax %x {axis = 1 : i64} : (tensor<1x1000xf32>) -> tensor<1x1000xf32>`
    """

    name = "graph.softmax"


@irdl_op_definition
class LogSoftmaxOp(AxisOp):
    """x - log(sum(e^x)) along `axis`.

    `%y = graph.log_softmax %x {axis = 1 : i64} : (tensor<1x10xf32>) -> tensor<1x10xf32>`
    """

    name = "graph.log_softmax"


@irdl_op_definition
class AttentionOp(GraphOperation):
    """Scaled dot-product attention: softmax(q kᵀ · scale + mask) v, over the last two dims.

    q is (..., L, E), k (..., S, E), v (..., S, Ev); the optional mask broadcasts to (..., L, S)
    and is added (float) or selects (i1). `is_causal` masks positions j > i. A query row with every
    key masked gives zeros.

    `%o = graph.attention %q, %k, %v {scale = 0.125 : f64, is_causal = false}
         : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>) -> tensor<2x4x16x64xf32>`
    """

    name = "graph.attention"
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    scale = prop_def(FloatAttr)
    is_causal = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        q, k, v = (
            shape_of(x, f"graph.attention {n}")
            for x, n in ((self.query, "query"), (self.key, "key"), (self.value, "value"))
        )
        if len(q) < 2 or len(k) != len(q) or len(v) != len(q):
            raise VerifyException(
                f"graph.attention: query {shape_str(q)}, key {shape_str(k)} and value {shape_str(v)} need one rank >= 2"
            )
        if not dims_compatible(q[-1], k[-1]):
            raise VerifyException(f"graph.attention: query embedding {q[-1]} differs from key embedding {k[-1]}")
        if not dims_compatible(k[-2], v[-2]):
            raise VerifyException(f"graph.attention: key length {k[-2]} differs from value length {v[-2]}")
        return [tensor_of(dtype_of(self.query, "query"), [*q[:-1], v[-1]])]


NN_OPS = [
    AdaptiveAvgPoolOp, AdaptiveMaxPoolOp, AttentionOp, AvgPoolOp, BatchNormOp, BatchNormTrainOp, ConvOp,
    ConvTransposeOp, GlobalAvgPoolOp, GlobalMaxPoolOp, GroupNormOp, InstanceNormOp, LayerNormOp,
    LogSoftmaxOp, LrnOp, MaxPoolOp, SoftmaxOp,
]  # fmt: skip
