"""Converters that create tensors known at compile time: fills, scalars, copies, ranges, identity matrices,
triangle masks and one-hot codes; and the positions along a dynamic dim (`graph.iota`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import TensorType, i1, i64
from xdsl.ir import Operation, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, i64_attr, shape_of, tensor_of
from gnomon.dialects.graph.tensor import ExpandOp, IotaOp, ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_scalar, tensor_type, torch_op_name
from gnomon.passes.torch_to_graph.registry import converts


def _fill(a: AtenArgs, value: float) -> SSAValue:
    out = a.result_type()
    if DYN in out.get_shape() and "size" in a.values:
        # torch-mlir types ONNX's ConstantOfShape dynamic even where its shape is constant arithmetic.
        sizes = [fold_scalar(v) for v in a.list("size")] if not a.is_none("size") else []
        if sizes and all(isinstance(s, int) and s >= 0 for s in sizes):
            out = TensorType(out.get_element_type(), [int(s) for s in sizes if s is not None])
    if DYN in out.get_shape():
        raise NotConvertible("a fill of dynamic shape")
    return a.splat(value, out)


@converts("torch.aten.full", args="size fill_value dtype layout device pin_memory")
def full(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


@converts("torch.aten.zeros", args="size dtype layout device pin_memory")
def zeros(a: AtenArgs) -> SSAValue:
    return _fill(a, 0.0)


@converts("torch.aten.ones", args="size dtype layout device pin_memory")
def ones(a: AtenArgs) -> SSAValue:
    return _fill(a, 1.0)


@converts("torch.aten.zeros_like", "torch.aten.empty_like", args="self dtype layout device pin_memory memory_format")
def zeros_like(a: AtenArgs) -> SSAValue:
    """Zeros; `empty` tensors are zeros too (their contents are undefined, and get overwritten)."""
    return _fill(a, 0.0)


@converts("torch.aten.ones_like", args="self dtype layout device pin_memory memory_format")
def ones_like(a: AtenArgs) -> SSAValue:
    return _fill(a, 1.0)


@converts("torch.aten.empty.memory_format", args="size dtype layout device pin_memory memory_format")
def empty(a: AtenArgs) -> SSAValue:
    return _fill(a, 0.0)


@converts("torch.aten.empty_permuted", args="size physical_layout dtype layout device pin_memory")
def empty_permuted(a: AtenArgs) -> SSAValue:
    """An empty tensor whose memory is laid out in another dim order: a value, to gnomon, like any other."""
    return _fill(a, 0.0)


@converts("torch.aten.new_zeros", "torch.aten.new_empty", args="self size dtype layout device pin_memory")
def new_zeros(a: AtenArgs) -> SSAValue:
    return _fill(a, 0.0)


@converts("torch.aten.new_ones", args="self size dtype layout device pin_memory")
def new_ones(a: AtenArgs) -> SSAValue:
    return _fill(a, 1.0)


@converts("torch.aten.new_full", args="self size fill_value dtype layout device pin_memory")
def new_full(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


@converts("torch.aten.full_like", args="self fill_value dtype layout device pin_memory memory_format")
def full_like(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


@converts("torch.aten.fill.Scalar", args="self value")
def fill(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("value"))


@converts("torch.aten.copy", args="self src non_blocking")
def copy(a: AtenArgs) -> SSAValue:
    """`self` overwritten by `src`, broadcast and converted to self's type."""
    src = a.cast(a.tensor("src"), a.result_dtype())
    if tensor_type(src).get_shape() == a.result_type().get_shape():
        return src
    return a.value(ExpandOp.build(operands=[src], result_types=[a.result_type()]))


def _scalar(a: AtenArgs, name: str) -> SSAValue:
    """A 0-d (or one-element) tensor holding a scalar known at compile time."""
    out = a.result_type()
    if math.prod(out.get_shape()) != 1:
        raise NotConvertible("a tensor of a scalar with more than one element")
    return _fill(a, a.float(name))


@converts("torch.prim.NumToTensor.Scalar", args="a")
def num_to_tensor(a: AtenArgs) -> SSAValue:
    return _scalar(a, "a")


@converts("torch.aten.scalar_tensor", args="s dtype layout device pin_memory")
def scalar_tensor(a: AtenArgs) -> SSAValue:
    return _scalar(a, "s")


@converts(
    "torch.aten.tensor.int", "torch.aten.tensor.float", "torch.aten.tensor.bool", args="t dtype device requires_grad"
)
def tensor_of_scalar(a: AtenArgs) -> SSAValue:
    return _scalar(a, "t")


def _arange(a: AtenArgs, start: float, end: float, step: float) -> SSAValue:
    out = a.result_type()
    count = len(range(0, max(0, int(-(-(end - start) // step)))))
    return a.constant(np.array([start + i * step for i in range(count)]), out.get_element_type())


@converts("torch.aten.arange", args="end dtype layout device pin_memory")
def arange(a: AtenArgs) -> SSAValue:
    if fold_scalar(a.values["end"]) is None and (positions := _positions(a)) is not None:
        return positions
    return _arange(a, 0, a.float("end"), 1)


def _positions(a: AtenArgs) -> SSAValue | None:
    """`arange(x.shape[d])` of a dynamic dim: `graph.iota` along it (a transformer's position ids)."""
    size = a.values["end"].owner
    if not isinstance(size, Operation) or torch_op_name(size) != "torch.aten.size.int":
        return None
    like, axis = size.operands[0], fold_scalar(size.operands[1])
    if not isinstance(like.type, TensorType) or axis is None:
        return None
    dims = shape_of(like, "arange's dim")
    result = tensor_of(i64, [dims[int(axis) % len(dims)]])  # the dim's name, where it has one
    iota = a.value(IotaOp.build(operands=[like], properties={"axis": i64_attr(int(axis))}, result_types=[result]))
    return a.cast(iota, a.result_type().get_element_type())


@converts("torch.aten.arange.start", args="start end dtype layout device pin_memory")
def arange_start(a: AtenArgs) -> SSAValue:
    return _arange(a, a.float("start"), a.float("end"), 1)


@converts("torch.aten.arange.start_step", args="start end step dtype layout device pin_memory")
def arange_start_step(a: AtenArgs) -> SSAValue:
    return _arange(a, a.float("start"), a.float("end"), a.float("step"))


_STASH_DTYPES: dict[int, type[np.floating]] = {1: np.float32, 11: np.float64}
"""ONNX Range's `stash_type` (a TensorProto data type: FLOAT, DOUBLE) as the NumPy type it computes in."""


@converts("onnx.Range", args="start limit delta")
def onnx_range(a: AtenArgs) -> SSAValue:
    """Range of half floats, which torch-mlir cannot lower (the ONNX frontend keeps it from its lowering), computed as
    ONNX's reference does: in the stash type (float32 by default from opset 27) or, without one, in Python floats,
    then rounded once. The bounds must be constants: they decide the result's length."""
    bounds = [a.constant_scalar(name) for name in ("start", "limit", "delta")]
    if any(bound is None for bound in bounds):
        raise NotConvertible("Range with bounds that are not constants (a data-dependent shape)")
    start, limit, delta = (float(bound) for bound in bounds if bound is not None)
    if delta == 0:
        raise NotConvertible("Range with a delta of 0")
    stash = a.onnx_int("stash_type", 1 if a.onnx_opset() >= 27 else 0)
    return a.constant(np.arange(start, limit, delta, dtype=_STASH_DTYPES.get(stash)), a.result_dtype())


@converts("torch.aten.tril_indices", "torch.aten.triu_indices", args="row col offset dtype layout device pin_memory")
def triangle_indices(a: AtenArgs) -> SSAValue:
    """The (2, N) coordinates of the lower or upper triangle, row by row: a constant, as DLRM's interaction
    uses it (`z[:, li, lj]`)."""
    rows, cols, offset = a.int("row"), a.int("col"), a.int("offset")
    lower = torch_op_name(a.op).endswith("tril_indices")
    pairs = [(i, j) for i in range(rows) for j in range(cols) if (j - i <= offset if lower else j - i >= offset)]
    coordinates = np.array([[i for i, _ in pairs], [j for _, j in pairs]]).reshape(2, len(pairs))
    return a.constant(coordinates, a.result_dtype())


@converts("torch.aten.eye", args="n dtype layout device pin_memory")
def eye(a: AtenArgs) -> SSAValue:
    return _identity_matrix(a)


@converts("torch.aten.eye.m", args="n m dtype layout device pin_memory")
def eye_m(a: AtenArgs) -> SSAValue:
    return _identity_matrix(a)


def _identity_matrix(a: AtenArgs) -> SSAValue:
    out = a.result_type()
    rows, cols = out.get_shape()
    if DYN in (rows, cols):
        raise NotConvertible("an identity matrix of dynamic size")
    return a.constant(np.eye(rows, cols), out.get_element_type())


def _triangle(a: AtenArgs, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> SSAValue:
    """Keep the elements (i, j) of the last two dims where `keep(i, j)`, zero the others."""
    x = a.tensor("self")
    x_type = tensor_type(x)
    rows, cols = x_type.get_shape()[-2:]
    if DYN in (rows, cols):
        raise NotConvertible("a triangle of a dynamic matrix")
    i, j = np.indices((rows, cols))  # a rows x cols mask even where a side is 0
    condition = a.constant(keep(i, j), i1)
    zero = a.scalar_tensor(0, x_type.get_element_type())
    return a.value(ew.WhereOp.build(operands=[condition, x, zero], result_types=[x_type]))


@converts("torch.aten.triu", args="self diagonal")
def triu(a: AtenArgs) -> SSAValue:
    diagonal = a.int("diagonal")
    return _triangle(a, lambda i, j: j - i >= diagonal)


@converts("torch.aten.tril", args="self diagonal")
def tril(a: AtenArgs) -> SSAValue:
    diagonal = a.int("diagonal")
    return _triangle(a, lambda i, j: j - i <= diagonal)


@converts("torch.aten.one_hot", args="self num_classes")
def one_hot(a: AtenArgs) -> SSAValue:
    """(x[..., None] == arange(num_classes)) as integers."""
    x = a.cast(a.tensor("self"), i64)
    classes = a.int("num_classes")
    if classes < 0:
        raise NotConvertible("one_hot with the class count taken from the data")
    shape = tensor_type(x).get_shape()
    column = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(i64, [*shape, 1])]))
    labels = a.constant(np.arange(classes), i64)
    hot = a.value(ew.EqOp.build(operands=[column, labels], result_types=[TensorType(i1, [*shape, classes])]))
    return a.cast(hot, a.result_dtype())
