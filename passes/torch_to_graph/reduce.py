"""Converters for reductions: sum, mean, amax/amin, max/min over a dim, argmax/argmin."""

from __future__ import annotations

from gnomon.dialects.graph.base import bool_attr, i64_array, i64_attr
from gnomon.dialects.graph.reduce import (
    ArgmaxOp,
    ArgminOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceMinOp,
    ReduceOp,
    ReduceProdOp,
    ReduceSumOp,
)
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible
from gnomon.passes.torch_to_graph.registry import converts
from xdsl.ir import SSAValue


def _reduce(a: AtenArgs, op: type[ReduceOp], axes: list[int], keepdims: bool) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    props = {"axes": i64_array(axes), "keepdims": bool_attr(keepdims)}
    return a.value(op.build(operands=[x], properties=props, result_types=[a.result_type()]))


@converts("torch.aten.sum.dim_IntList", args="self dim keepdim dtype")
def sum_dims(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceSumOp, a.optional_ints("dim") or [], a.bool("keepdim"))


@converts("torch.aten.mean.dim", args="self dim keepdim dtype")
def mean_dims(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceMeanOp, a.optional_ints("dim") or [], a.bool("keepdim"))


@converts("torch.aten.sum", args="self dtype")
def sum_all(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceSumOp, [], False)


@converts("torch.aten.mean", args="self dtype")
def mean_all(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceMeanOp, [], False)


@converts("torch.aten.prod.dim_int", args="self dim keepdim dtype")
def prod_dim(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceProdOp, [a.int("dim")], a.bool("keepdim"))


@converts("torch.aten.amax", args="self dim keepdim")
def amax(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceMaxOp, a.ints("dim"), a.bool("keepdim"))


@converts("torch.aten.amin", args="self dim keepdim")
def amin(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceMinOp, a.ints("dim"), a.bool("keepdim"))


@converts("torch.aten.max", args="self")
def max_all(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceMaxOp, [], False)


@converts("torch.aten.min", args="self")
def min_all(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceMinOp, [], False)


def _value_and_index(a: AtenArgs, value_op: type[ReduceOp], index_op: type[ArgmaxOp] | type[ArgminOp]) -> list[SSAValue]:
    dim, keep = a.int("dim"), a.bool("keepdim")
    values = _reduce(a, value_op, [dim], keep)
    if not a.op.results[1].uses:
        return [values, values]
    props = {"axis": i64_attr(dim), "keepdims": bool_attr(keep)}
    indices = a.value(index_op.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type(1)]))
    return [values, indices]


@converts("torch.aten.max.dim", args="self dim keepdim")
def max_dim(a: AtenArgs) -> list[SSAValue]:
    return _value_and_index(a, ReduceMaxOp, ArgmaxOp)


@converts("torch.aten.min.dim", args="self dim keepdim")
def min_dim(a: AtenArgs) -> list[SSAValue]:
    return _value_and_index(a, ReduceMinOp, ArgminOp)


def _arg(a: AtenArgs, op: type[ArgmaxOp] | type[ArgminOp]) -> SSAValue:
    dim = a.optional_int("dim")
    if dim is None:
        raise NotConvertible("argmax/argmin over the flattened tensor")
    props = {"axis": i64_attr(dim), "keepdims": bool_attr(a.bool("keepdim"))}
    return a.value(op.build(operands=[a.tensor("self")], properties=props, result_types=[a.result_type()]))


@converts("torch.aten.argmax", args="self dim keepdim")
def argmax(a: AtenArgs) -> SSAValue:
    return _arg(a, ArgmaxOp)


@converts("torch.aten.argmin", args="self dim keepdim")
def argmin(a: AtenArgs) -> SSAValue:
    return _arg(a, ArgminOp)
