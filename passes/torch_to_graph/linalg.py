"""Converters for matrix products (mm, bmm, matmul, linear, addmm, baddbmm) and determinants."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import i64_array
from gnomon.dialects.graph.elementwise import AddOp, MulOp
from gnomon.dialects.graph.linalg import DetOp, LinearOp, MatmulOp
from gnomon.dialects.graph.tensor import ReshapeOp, TransposeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, tensor_type
from gnomon.passes.torch_to_graph.registry import converts


def _matmul(a: AtenArgs, lhs: str, rhs: str) -> SSAValue:
    element = a.result_dtype()
    return a.value(
        MatmulOp.build(operands=[a.tensor_as(lhs, element), a.tensor_as(rhs, element)], result_types=[a.result_type()])
    )


@converts("torch.aten.mm", "torch.aten.bmm", args="self mat2")
def mm(a: AtenArgs) -> SSAValue:
    return _matmul(a, "self", "mat2")


@converts("torch.aten.matmul", args="self other")
def matmul(a: AtenArgs) -> SSAValue:
    return _matmul(a, "self", "other")


@converts("torch.aten.mv", args="self vec")
def mv(a: AtenArgs) -> SSAValue:
    return _matmul(a, "self", "vec")


@converts("torch.aten.dot", args="self tensor")
def dot(a: AtenArgs) -> SSAValue:
    return _matmul(a, "self", "tensor")


@converts("torch.aten.outer", args="self vec2")
def outer(a: AtenArgs) -> SSAValue:
    """u vᵀ as a broadcasting product of a column and a row."""
    element = a.result_dtype()
    u, v = a.tensor_as("self", element), a.tensor_as("vec2", element)
    (n,), (m,) = tensor_type(u).get_shape(), tensor_type(v).get_shape()
    column = a.value(ReshapeOp.build(operands=[u], result_types=[TensorType(element, [n, 1])]))
    row = a.value(ReshapeOp.build(operands=[v], result_types=[TensorType(element, [1, m])]))
    return a.value(MulOp.build(operands=[column, row], result_types=[a.result_type()]))


@converts("torch.aten.linear", args="input weight bias")
def linear(a: AtenArgs) -> SSAValue:
    bias = a.optional_tensor("bias")
    operands = [a.tensor("input"), a.tensor("weight"), [bias] if bias is not None else []]
    return a.value(LinearOp.build(operands=operands, result_types=[a.result_type()]))


def _scale(a: AtenArgs, value: SSAValue, name: str) -> SSAValue:
    factor = a.float(name)
    if factor == 1.0:
        return value
    scale = a.scalar_tensor(factor, tensor_type(value).get_element_type())
    return a.value(MulOp.build(operands=[value, scale], result_types=[tensor_type(value)]))


def _product_plus(a: AtenArgs, lhs: str, rhs: str) -> SSAValue:
    """beta * self + alpha * (lhs @ rhs)."""
    out = a.result_type()
    product = _scale(a, _matmul(a, lhs, rhs), "alpha")
    bias = _scale(a, a.tensor("self"), "beta")
    return a.value(AddOp.build(operands=[product, bias], result_types=[out]))


@converts("torch.aten.addmm", args="self mat1 mat2 beta alpha")
def addmm(a: AtenArgs) -> SSAValue:
    """`addmm(b, x, wᵀ)` is how a linear layer reaches us after export: keep it a linear layer."""
    weight_t = a.values["mat2"].owner
    if a.float("alpha") == 1.0 and a.float("beta") == 1.0 and isinstance(weight_t, TransposeOp):
        weight = weight_t.input
        bias_shape = tensor_type(a.tensor("self")).get_shape()
        if len(tensor_type(weight).get_shape()) == 2 and len(bias_shape) == 1:
            operands = [a.tensor("mat1"), weight, [a.tensor("self")]]
            return a.value(LinearOp.build(operands=operands, result_types=[a.result_type()]))
    return _product_plus(a, "mat1", "mat2")


@converts("torch.aten.baddbmm", args="self batch1 batch2 beta alpha")
def baddbmm(a: AtenArgs) -> SSAValue:
    return _product_plus(a, "batch1", "batch2")


@converts("torch.aten.t", "torch.aten.numpy_T", args="self")
def t(a: AtenArgs) -> SSAValue:
    x = a.tensor("self")
    rank = len(tensor_type(x).get_shape())
    if rank < 2:
        return x
    out = a.result_type()
    return a.value(
        TransposeOp.build(
            operands=[x],
            properties={"permutation": i64_array([1, 0])},
            result_types=[TensorType(out.get_element_type(), out.get_shape())],
        )
    )


@converts("torch.aten.linalg_det", args="A")
def linalg_det(a: AtenArgs) -> SSAValue:
    return a.value(DetOp.build(operands=[a.tensor("A")], result_types=[a.result_type()]))


@converts("torch.aten.det", args="self")
def det(a: AtenArgs) -> SSAValue:
    return a.value(DetOp.build(operands=[a.tensor("self")], result_types=[a.result_type()]))
