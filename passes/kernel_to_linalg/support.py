"""Which graph ops gnomon generates loops for."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Operation, SSAValue

from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import AvgPoolOp, ConvOp, LogSoftmaxOp, MaxPoolOp, SoftmaxOp
from gnomon.dialects.graph.reduce import ReduceOp
from gnomon.dialects.graph.tensor import ExpandOp, TransposeOp
from gnomon.errors import GnomonError
from gnomon.passes.kernel_to_linalg.scalar import SCALAR_OPS, is_float, operand_element, supported_element

MATMUL_GENERATED = True
"""Whether generated matmuls are fast enough to replace the library's: within 2x of torch.mm
on 256^3 and 1024^3 f32 (see bench/codegen.py for the figures)."""


class CodegenError(GnomonError):
    """A generated kernel holds an op or a type the code generator cannot lower."""


def _ranked_tensors(op: Operation) -> bool:
    """Tensors of supported element types; `?` dims are read from the memrefs at run time."""
    values = [*op.operands, *op.results]
    return all(isinstance(v.type, TensorType) and supported_element(v.type.element_type) for v in values)


def _static(op: Operation) -> bool:
    return all(isinstance(v.type, TensorType) and v.type.has_static_shape() for v in (*op.operands, *op.results))


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return value.type.get_shape()


def is_depthwise(op: Operation) -> bool:
    """A 2-D convolution with one input channel per group, as many groups as channels."""
    if not isinstance(op, ConvOp):
        return False
    x, w = _shape(op.input), _shape(op.weight)
    channels = x[3] if channels_last(op) else x[1]
    return len(x) == 4 and w[1] == 1 and op.groups.value.data == channels == w[0]


def channels_last_generatable(conv: ConvOp) -> bool:
    """Whether gnomon generates a channels-last convolution (`conv_nhwc`): any 2-D one, depthwise
    (`conv_nhwc_depthwise`) or dense or grouped of any window, stride, padding and dilation (`conv_nhwc_dense`)."""
    return len(_shape(conv.weight)) == 4


def generatable(op: Operation) -> bool:
    """Whether gnomon can generate a loop nest for `op` (supported element types).

    Elementwise ops with broadcasting, casts, `where`, transposes and expands (f32 and f64 for
    everything, i32/i64 for arithmetic and comparisons, i1 for logic); float sum/mean/prod/max/min
    reductions over trailing axes and softmax/log_softmax over the last; 2-D f32 matmuls when
    `MATMUL_GENERATED`; 2-D f32 convolutions, dense or depthwise (a depthwise one only after a dense one, `conv`),
    channels-last ones of any window (`channels_last_generatable`); channels-last 2-D f32 max and average pools.
    All of them take `?` dims (sizes read at run time) but matmuls and convolutions, whose register blocks and
    packed panels are planned for static sizes: with `?` dims they go to the library.
    """
    if not op.results or not _ranked_tensors(op):
        return False
    if isinstance(op, MatmulOp | ConvOp) and not _static(op):
        return False
    if isinstance(op, TransposeOp | ExpandOp):
        return True
    if isinstance(op, ReduceOp):
        # Trailing axes: each row of the input is contiguous.
        axes, rank = op.reduced_axes(), len(_shape(op.input))
        return is_float(operand_element(op)) and axes == tuple(range(rank - len(axes), rank))
    if isinstance(op, SoftmaxOp | LogSoftmaxOp):
        rank = len(_shape(op.input))
        return is_float(operand_element(op)) and rank > 0 and op.axis.value.data % rank == rank - 1
    if isinstance(op, MatmulOp):
        lhs, rhs = op.lhs.type, op.rhs.type
        assert isinstance(lhs, TensorType)
        assert isinstance(rhs, TensorType)
        return MATMUL_GENERATED and lhs.get_num_dims() == rhs.get_num_dims() == 2 and lhs.element_type == f32
    if isinstance(op, MaxPoolOp | AvgPoolOp):
        # Channels-last 2-D f32 only (`pool_nhwc`): channels-first windows are the library's.
        return channels_last(op) and len(_shape(op.input)) == 4 and operand_element(op) == f32
    if isinstance(op, ConvOp):
        if channels_last(op):
            return operand_element(op) == f32 and channels_last_generatable(op)
        dense = op.groups.value.data == 1 and len(_shape(op.input)) == 4
        return operand_element(op) == f32 and (dense or is_depthwise(op))
    scalar = SCALAR_OPS.get(type(op))
    return scalar is not None and scalar.accepts(operand_element(op))
