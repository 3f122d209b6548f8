"""Gradient graph ops of a training step: what the backward pass computes that no forward op does.

A convolution's gradient with respect to its input is a transposed convolution (`graph.conv_transpose`), and its
bias's a sum over the batch and spatial dims; the weight's needs its own op. Max pooling's gradient routes each
output's gradient to the input element its window's max came from; average pooling's spreads it over the window.
An embedding bag's gradient scatters each bag's gradient back to the rows it looked up. Layouts are channels-first,
as in `gnomon.dialects.graph.nn`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    DYN,
    GraphOperation,
    Shape,
    TensorT,
    dims_compatible,
    dtype_of,
    ints,
    shape_of,
    shape_str,
    tensor_of,
    tensor_type,
)
from gnomon.dialects.graph.nn import activation_shape, check_spatial, spatial_output
from gnomon.dialects.graph.traits import ReadsAtDataIndices


def _check_gradient(op: str, gradient: Sequence[int], expected: Sequence[int]) -> None:
    """The result gradient's shape must be the forward op's result shape."""
    if len(gradient) != len(expected) or not all(dims_compatible(g, e) for g, e in zip(gradient, expected)):
        raise VerifyException(
            f"{op}: grad_output has shape {shape_str(gradient)}, the forward result's is {shape_str(expected)}"
        )


@irdl_op_definition
class ConvWeightGradOp(GraphOperation):
    """The gradient of `graph.conv`'s loss with respect to its weight, from the conv's input and the gradient of its
    result: for each weight element, the sum over images and output positions of the input element it multiplied
    times that output's gradient.

    `%dw = graph.conv_weight_grad %x, %dy {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>,
          pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
          : (tensor<8x16x32x32xf32>, tensor<8x32x32x32xf32>) -> tensor<32x16x3x3xf32>`
    """

    name = "graph.conv_weight_grad"
    input = operand_def(TensorType)
    grad_output = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    groups = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = activation_shape(self.name, self.input)
        dy = activation_shape(self.name, self.grad_output, "grad_output")
        kernel, groups = ints(self.kernel), self.groups.value.data
        check_spatial(self.name, "kernel", kernel, len(x) - 2)
        if groups < 1 or (x[1] != DYN and x[1] % groups) or (dy[1] != DYN and dy[1] % groups):
            raise VerifyException(
                f"{self.name}: {x[1]} input and {dy[1]} output channels are not both divisible by groups {groups}"
            )
        spatial = spatial_output(self.name, x, kernel, ints(self.strides), ints(self.pads), ints(self.dilations))
        _check_gradient(self.name, dy, [x[0], dy[1], *spatial])
        per_group = DYN if x[1] == DYN else x[1] // groups
        return [tensor_of(dtype_of(self.input, "input"), [dy[1], per_group, *kernel])]


@irdl_op_definition
class MaxPoolGradOp(GraphOperation):
    """The gradient of `graph.max_pool`'s loss with respect to its input: each output's gradient added to the input
    element its window's max came from (the first such element where several tie, as torch picks); zero elsewhere.

    `%dx = graph.max_pool_grad %dy, %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,
          pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false}
          : (tensor<8x64x56x56xf32>, tensor<8x64x112x112xf32>) -> tensor<8x64x112x112xf32>`
    """

    name = "graph.max_pool_grad"
    grad_output = operand_def(TensorType)
    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = activation_shape(self.name, self.input)
        kernel = ints(self.kernel)
        check_spatial(self.name, "kernel", kernel, len(x) - 2)
        ceil_mode = bool(self.ceil_mode.value.data)
        spatial = spatial_output(
            self.name, x, kernel, ints(self.strides), ints(self.pads), ints(self.dilations), ceil_mode
        )
        _check_gradient(self.name, shape_of(self.grad_output, f"{self.name} grad_output"), [x[0], x[1], *spatial])
        return [tensor_type(self.input, "input")]


@irdl_op_definition
class AvgPoolGradOp(GraphOperation):
    """The gradient of `graph.avg_pool`'s loss with respect to its input: each output's gradient, divided by its
    window's divisor (as the forward op counts it), added to every input element of the window.

    `%dx = graph.avg_pool_grad %dy, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
          pads = array<i64: 0, 0, 0, 0>, ceil_mode = true, count_include_pad = true}
          : (tensor<2x8x4x4xf32>, tensor<2x8x7x7xf32>) -> tensor<2x8x7x7xf32>`
    """

    name = "graph.avg_pool_grad"
    grad_output = operand_def(TensorType)
    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    count_include_pad = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = activation_shape(self.name, self.input)
        kernel = ints(self.kernel)
        check_spatial(self.name, "kernel", kernel, len(x) - 2)
        ones = [1] * len(kernel)
        ceil_mode = bool(self.ceil_mode.value.data)
        spatial = spatial_output(self.name, x, kernel, ints(self.strides), ints(self.pads), ones, ceil_mode)
        _check_gradient(self.name, shape_of(self.grad_output, f"{self.name} grad_output"), [x[0], x[1], *spatial])
        return [tensor_type(self.input, "input")]


@irdl_op_definition
class EmbeddingBagGradOp(GraphOperation):
    """The gradient of `graph.embedding_bag`'s loss with respect to its table, dense: each looked-up row gets its
    bag's gradient (divided by the bag's size in mean mode, times its per-sample weight), rows looked up several
    times the sum. `graph.embedding`'s gradient is this with one index per bag. Bags are as the forward op reads
    them: bag b holds indices[offsets[b]:offsets[b+1]], the last bag running to `offsets`' final entry where it
    has one more than there are bags (`include_last_offset`), else to the end.

    `%dt = graph.embedding_bag_grad %dp, %ids, %offsets {mode = "sum", rows = 100000 : i64}
          : (tensor<32x64xf32>, tensor<640xi64>, tensor<32xi64>) -> tensor<100000x64xf32>`
    """

    name = "graph.embedding_bag_grad"
    grad_output = operand_def(TensorType)
    indices = operand_def(TensorType)
    offsets = operand_def(TensorType)
    per_sample_weights = opt_operand_def(TensorType)
    mode = prop_def(StringAttr)
    rows = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    def infer_result_types(self) -> Sequence[TensorT]:
        dy = _check_bags(self)
        return [tensor_of(dtype_of(self.grad_output, "grad_output"), [self.rows.value.data, dy[1]])]


@irdl_op_definition
class EmbeddingBagUpdateOp(GraphOperation):
    """A table plus `scale` times its `graph.embedding_bag_grad`, computed on the looked-up rows alone: plain SGD's
    update of an embedding table (`scale` = -lr), which leaves every other row as it was, so the dense gradient
    is never made. The runtime adds into the table's own memory where the step updates it in place.

    `%t2 = graph.embedding_bag_update %t, %dp, %ids, %offsets {mode = "sum", scale = -0.01 : f64}
          : (tensor<100000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<32xi64>) -> tensor<100000x64xf32>`
    """

    name = "graph.embedding_bag_update"
    table = operand_def(TensorType)
    grad_output = operand_def(TensorType)
    indices = operand_def(TensorType)
    offsets = operand_def(TensorType)
    per_sample_weights = opt_operand_def(TensorType)
    mode = prop_def(StringAttr)
    scale = prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    def infer_result_types(self) -> Sequence[TensorT]:
        dy = _check_bags(self)
        table = shape_of(self.table, f"{self.name} table")
        if len(table) != 2 or (DYN not in (table[1], dy[1]) and table[1] != dy[1]):
            raise VerifyException(f"{self.name}: table {shape_str(table)} and grad_output {shape_str(dy)} differ")
        return [tensor_type(self.table, "table")]


@irdl_op_definition
class EmbeddingBagAdamUpdateOp(GraphOperation):
    """torch.optim.SparseAdam's step on an embedding table, from what its `graph.embedding_bag_grad` would read, on
    the looked-up rows alone. The gradient's rows are first summed per distinct row (torch coalesces the sparse
    gradient); then, for each such row g, its moments move towards it, m' = m + (1 - beta1) (g - m) and
    v' = v + (1 - beta2) (g^2 - v), and the row by -step_size * m' / (sqrt(v') + eps), where `step_size` is the
    0-d lr * sqrt(1 - beta2^t) / (1 - beta1^t) of step t. Rows not looked up keep their values and their moments
    (lazy Adam), unlike dense Adam's. The runtime updates the table and both moments in their own memory where the
    step updates them in place.

    `%t2, %m2, %v2 = graph.embedding_bag_adam_update %t, %m, %v, %dp, %ids, %offsets, %lr_t
          {mode = "sum", beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64}
          : (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>,
             tensor<32xi64>, tensor<f32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>)`
    """

    name = "graph.embedding_bag_adam_update"
    table = operand_def(TensorType)
    exp_avg = operand_def(TensorType)
    exp_avg_sq = operand_def(TensorType)
    grad_output = operand_def(TensorType)
    indices = operand_def(TensorType)
    offsets = operand_def(TensorType)
    step_size = operand_def(TensorType)
    per_sample_weights = opt_operand_def(TensorType)
    mode = prop_def(StringAttr)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    eps = prop_def(FloatAttr)
    new_table = result_def(TensorType)
    new_exp_avg = result_def(TensorType)
    new_exp_avg_sq = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    def infer_result_types(self) -> Sequence[TensorT]:
        dy = _check_bags(self)
        table = shape_of(self.table, f"{self.name} table")
        if len(table) != 2 or not dims_compatible(table[1], dy[1]):
            raise VerifyException(f"{self.name}: table {shape_str(table)} and grad_output {shape_str(dy)} differ")
        for value, what in ((self.exp_avg, "exp_avg"), (self.exp_avg_sq, "exp_avg_sq")):
            if tensor_type(value, what) != tensor_type(self.table, "table"):
                raise VerifyException(f"{self.name}: {what} {value.type} is not the table's {self.table.type}")
        if shape_of(self.step_size, f"{self.name} step_size") != ():
            raise VerifyException(f"{self.name}: step_size {self.step_size.type} is not a 0-d tensor")
        for name in ("beta1", "beta2"):
            beta = self.properties[name]
            assert isinstance(beta, FloatAttr)
            if not 0.0 <= beta.value.data < 1.0:
                raise VerifyException(f"{self.name}: {name} {beta.value.data} is not in [0, 1)")
        table_type = tensor_type(self.table, "table")
        return [table_type, table_type, table_type]


def _check_bags(op: EmbeddingBagGradOp | EmbeddingBagUpdateOp | EmbeddingBagAdamUpdateOp) -> Shape:
    """The shape of a bag-gradient op's `grad_output`, after checking it against its indices, offsets and mode."""
    dy = shape_of(op.grad_output, f"{op.name} grad_output")
    indices, offsets = shape_of(op.indices, "indices"), shape_of(op.offsets, "offsets")
    if len(dy) != 2 or len(indices) != 1 or len(offsets) != 1:
        raise VerifyException(
            f"{op.name}: grad_output {shape_str(dy)} must be 2-D, indices {shape_str(indices)} and offsets "
            f"{shape_str(offsets)} 1-D"
        )
    if op.mode.data not in ("sum", "mean"):
        raise VerifyException(f"{op.name}: mode must be sum or mean, got {op.mode.data!r}")
    if DYN not in (dy[0], offsets[0]) and offsets[0] not in (dy[0], dy[0] + 1):
        raise VerifyException(f"{op.name}: {offsets[0]} offsets for {dy[0]} bags")
    if op.per_sample_weights is not None and op.mode.data != "sum":
        raise VerifyException(f"{op.name}: per_sample_weights need mode sum")
    return dy


GRAD_OPS = [
    AvgPoolGradOp,
    ConvWeightGradOp,
    EmbeddingBagAdamUpdateOp,
    EmbeddingBagGradOp,
    EmbeddingBagUpdateOp,
    MaxPoolGradOp,
]
