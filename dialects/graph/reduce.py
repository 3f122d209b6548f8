"""Reductions over a set of axes, arg-reductions over one axis, and scans (running sums and products) along one."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    DYN,
    GraphOperation,
    TensorT,
    dtype_of,
    ints,
    normalize_axis,
    shape_of,
    tensor_of,
)


class ReduceOp(GraphOperation):
    """Reduce `input` over `axes` (all dims when empty); `keepdims` keeps them as size 1."""

    input = operand_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def reduced_axes(self) -> tuple[int, ...]:
        rank = len(shape_of(self.input, f"{self.name} input"))
        axes = ints(self.axes) or tuple(range(rank))
        normalized = tuple(sorted({normalize_axis(a, rank, self.name) for a in axes}))
        if len(normalized) != len(axes):
            raise VerifyException(f"{self.name}: axes {list(axes)} repeat a dim")
        return normalized

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, f"{self.name} input")
        axes = self.reduced_axes()
        keep = bool(self.keepdims.value.data)
        out = [1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes]
        return [tensor_of(dtype_of(self.input, "input"), out)]


def _reduce(op_name: str, doc: str) -> type[ReduceOp]:
    cls = type(
        "".join(part.title() for part in op_name.split("_")) + "Op",
        (ReduceOp,),
        {
            "name": f"graph.{op_name}",
            "__doc__": f"{doc}\n\n    `%y = graph.{op_name} %x {{axes = array<i64: 1>, keepdims = false}}"
            " : (tensor<2x8xf32>) -> tensor<2xf32>`\n",
        },
    )
    return irdl_op_definition(cls)


ReduceMaxOp = _reduce("reduce_max", "Maximum over `axes`.")
ReduceMeanOp = _reduce("reduce_mean", "Arithmetic mean over `axes`.")
ReduceMinOp = _reduce("reduce_min", "Minimum over `axes`.")
ReduceProdOp = _reduce("reduce_prod", "Product over `axes`.")
ReduceSumOp = _reduce("reduce_sum", "Sum over `axes`.")


class ArgReduceOp(GraphOperation):
    """The index (i64) of the extreme value along `axis`; the first one on ties."""

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    keepdims = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, f"{self.name} input")
        axis = normalize_axis(self.axis.value.data, len(x), self.name)
        keep = bool(self.keepdims.value.data)
        out = [1 if i == axis else d for i, d in enumerate(x) if keep or i != axis]
        return [tensor_of(i64, out)]


@irdl_op_definition
class ArgmaxOp(ArgReduceOp):
    """Index of the maximum along `axis`.

    `%i = graph.argmax %x {axis = 1 : i64, keepdims = false} : (tensor<2x10xf32>) -> tensor<2xi64>`
    """

    name = "graph.argmax"


@irdl_op_definition
class ArgminOp(ArgReduceOp):
    """Index of the minimum along `axis`.

    `%i = graph.argmin %x {axis = 1 : i64, keepdims = false} : (tensor<2x10xf32>) -> tensor<2xi64>`
    """

    name = "graph.argmin"


class ScanOp(GraphOperation):
    """A running reduction along `axis`: element i combines elements 0..i (i..n-1 when `reverse`), or
    0..i-1 (i+1..n-1) when `exclusive`, whose first element is the identity. Same type as `input`."""

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    exclusive = prop_def(BoolAttr)
    reverse = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def scan_axis(self) -> int:
        return normalize_axis(self.axis.value.data, len(shape_of(self.input, f"{self.name} input")), self.name)

    def infer_result_types(self) -> Sequence[TensorT]:
        self.scan_axis()
        return [tensor_of(dtype_of(self.input, "input"), shape_of(self.input, "input"))]


@irdl_op_definition
class CumsumOp(ScanOp):
    """Running sum along `axis` (ONNX CumSum, torch.cumsum).

    `%y = graph.cumsum %x {axis = 1 : i64, exclusive = false, reverse = false} : (tensor<2x8xf32>) -> tensor<2x8xf32>`
    """

    name = "graph.cumsum"


@irdl_op_definition
class CumprodOp(ScanOp):
    """Running product along `axis` (ONNX CumProd, torch.cumprod).

    `%y = graph.cumprod %x {axis = 0 : i64, exclusive = true, reverse = false} : (tensor<8xi32>) -> tensor<8xi32>`
    """

    name = "graph.cumprod"


@irdl_op_definition
class TopKOp(GraphOperation):
    """The `k` largest (or smallest) elements along `axis` and their indices (ONNX TopK, torch.topk). Sorted, and
    among equal values the lower index first, as ONNX defines.

    `%v, %i = graph.topk %x {k = 3 : i64, axis = -1 : i64, largest = true}
        : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)`
    """

    name = "graph.topk"
    input = operand_def(TensorType)
    k = prop_def(IntegerAttr)
    axis = prop_def(IntegerAttr)
    largest = prop_def(BoolAttr)
    values = result_def(TensorType)
    indices = result_def(TensorType)
    traits = traits_def(Pure())

    def topk_axis(self) -> int:
        return normalize_axis(self.axis.value.data, len(shape_of(self.input, f"{self.name} input")), self.name)

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, f"{self.name} input")
        axis, k = self.topk_axis(), self.k.value.data
        if k < 0 or (x[axis] != DYN and k > x[axis]):
            raise VerifyException(f"{self.name}: k {k} is outside 0..{x[axis]}, the size of axis {axis}")
        out = [k if i == axis else d for i, d in enumerate(x)]
        return [tensor_of(dtype_of(self.input, "input"), out), tensor_of(i64, out)]


REDUCE_OPS = [
    ArgmaxOp,
    ArgminOp,
    CumprodOp,
    CumsumOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceMinOp,
    ReduceProdOp,
    ReduceSumOp,
    TopKOp,
]
