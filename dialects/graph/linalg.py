"""Matrix products: NumPy-style (batched, broadcasting) matmul and linear layers; determinants."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import AnyFloat, TensorType
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    GraphOperation,
    TensorT,
    broadcast_shapes,
    dims_compatible,
    dtype_of,
    shape_of,
    shape_str,
    tensor_of,
)
from gnomon.dialects.graph.traits import MatmulCanonicalization


@irdl_op_definition
class MatmulOp(GraphOperation):
    """`numpy.matmul`: 1-D operands are promoted and the promoted dim dropped; batch dims broadcast.

    Covers matrix-matrix, matrix-vector and batch matmul (`bmm`).

    `%c = graph.matmul %a, %b : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>`
    """

    name = "graph.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), MatmulCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        a, b = shape_of(self.lhs, "graph.matmul lhs"), shape_of(self.rhs, "graph.matmul rhs")
        if not a or not b:
            raise VerifyException("graph.matmul: operands must have rank >= 1")
        lhs_type, rhs_type = dtype_of(self.lhs, "lhs"), dtype_of(self.rhs, "rhs")
        if lhs_type != rhs_type:
            raise VerifyException(f"graph.matmul: lhs element type {lhs_type} differs from rhs {rhs_type}")
        a2 = (1, *a) if len(a) == 1 else a
        b2 = (*b, 1) if len(b) == 1 else b
        if not dims_compatible(a2[-1], b2[-2]):
            raise VerifyException(f"graph.matmul: contracting dims differ: lhs {shape_str(a)} and rhs {shape_str(b)}")
        batch = broadcast_shapes([a2[:-2], b2[:-2]], "graph.matmul batch dims")
        out = [*batch, *([a2[-2]] if len(a) > 1 else []), *([b2[-1]] if len(b) > 1 else [])]
        return [tensor_of(dtype_of(self.lhs, "lhs"), out)]


@irdl_op_definition
class LinearOp(GraphOperation):
    """A fully connected layer: x @ weightᵀ + bias, weight being (out_features, in_features).

    This is ONNX's Gemm with transB = 1 and PyTorch's `nn.Linear`.

    `%y = graph.linear %x, %w, %b : (tensor<2x2048xf32>, tensor<1000x2048xf32>, tensor<1000xf32>) -> tensor<2x1000xf32>`
    """

    name = "graph.linear"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x, w = shape_of(self.input, "graph.linear input"), shape_of(self.weight, "graph.linear weight")
        if not x or len(w) != 2:
            raise VerifyException(
                f"graph.linear: needs input rank >= 1 and a 2-D weight, got {shape_str(x)} and {shape_str(w)}"
            )
        if not dims_compatible(x[-1], w[1]):
            raise VerifyException(f"graph.linear: input features {x[-1]} differ from weight in_features {w[1]}")
        if self.bias is not None:
            bias = shape_of(self.bias, "graph.linear bias")
            if len(bias) != 1 or not dims_compatible(bias[0], w[0]):
                raise VerifyException(f"graph.linear: bias shape {shape_str(bias)} is not [{w[0]}]")
        return [tensor_of(dtype_of(self.input, "input"), [*x[:-1], w[0]])]


@irdl_op_definition
class DetOp(GraphOperation):
    """The determinant of each square matrix in the last two dims (ONNX Det, torch.linalg.det); floats only.

    `%d = graph.det %x : (tensor<3x4x4xf32>) -> tensor<3xf32>`
    """

    name = "graph.det"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.det input")
        if len(x) < 2 or not dims_compatible(x[-2], x[-1]):
            raise VerifyException(f"graph.det: input {shape_str(x)} is not a batch of square matrices")
        element = dtype_of(self.input, "input")
        if not isinstance(element, AnyFloat):
            raise VerifyException(f"graph.det: input must be floats, got element type {element}")
        return [tensor_of(element, x[:-2])]


LINALG_OPS = [DetOp, LinearOp, MatmulOp]
