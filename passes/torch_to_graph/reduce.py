"""Converters for reductions: sum, mean, amax/amin, max/min over a dim, argmax/argmin, the
statistics built from them (variance, standard deviation, logsumexp, vector norms), and scans
(cumulative sums and products)."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType, f32, i1, i64
from xdsl.ir import SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, bool_attr, i64_array, i64_attr, multiply_dims
from gnomon.dialects.graph.reduce import (
    ArgmaxOp,
    ArgminOp,
    CumprodOp,
    CumsumOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceMinOp,
    ReduceOp,
    ReduceProdOp,
    ReduceSumOp,
    ScanOp,
    TopKOp,
)
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts


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


@converts("torch.aten.prod", args="self dtype")
def prod_all(a: AtenArgs) -> SSAValue:
    return _reduce(a, ReduceProdOp, [], False)


def _reduced_type(x: SSAValue, axes: list[int], keepdim: bool) -> TensorType:
    shape = tensor_type(x).get_shape()
    reduced = {d % len(shape) for d in axes} if axes else set(range(len(shape)))
    out = [1 if i in reduced else d for i, d in enumerate(shape) if keepdim or i not in reduced]
    return TensorType(tensor_type(x).get_element_type(), out)


def _reduce_value(x: SSAValue, op: type[ReduceOp], axes: list[int], keepdim: bool) -> ReduceOp:
    props = {"axes": i64_array(axes), "keepdims": bool_attr(keepdim)}
    return op.build(operands=[x], properties=props, result_types=[_reduced_type(x, axes, keepdim)])


def _variance(a: AtenArgs, axes: list[int], correction: float, keepdim: bool) -> SSAValue:
    """sum((x - mean)²) / (N - correction) over `axes`."""
    x = a.tensor_as("self", a.result_dtype())
    shape = tensor_type(x).get_shape()
    count = multiply_dims([shape[d % len(shape)] for d in axes] if axes else shape)
    if count == DYN:
        raise NotConvertible("variance over dynamic dims")
    mean = a.value(_reduce_value(x, ReduceMeanOp, axes, True))
    centered = a.value(ew.SubOp.build(operands=[x, mean], result_types=[tensor_type(x)]))
    squares = a.value(ew.MulOp.build(operands=[centered, centered], result_types=[tensor_type(x)]))
    total = a.value(_reduce_value(squares, ReduceSumOp, axes, keepdim))
    divisor = a.scalar_tensor(max(count - correction, 0), a.result_dtype())
    return a.value(ew.DivOp.build(operands=[total, divisor], result_types=[tensor_type(total)]))


def _correction(a: AtenArgs) -> float:
    correction = a.optional_float("correction")
    return 1.0 if correction is None else correction


@converts("torch.aten.var.correction", args="self dim correction keepdim")
def var_correction(a: AtenArgs) -> SSAValue:
    return _variance(a, a.optional_ints("dim") or [], _correction(a), a.bool("keepdim"))


@converts("torch.aten.var.dim", args="self dim unbiased keepdim")
def var_dim(a: AtenArgs) -> SSAValue:
    return _variance(a, a.optional_ints("dim") or [], float(a.bool("unbiased")), a.bool("keepdim"))


@converts("torch.aten.var", args="self unbiased")
def var_all(a: AtenArgs) -> SSAValue:
    return _variance(a, [], float(a.bool("unbiased")), False)


def _variance_and_mean(a: AtenArgs, axes: list[int], correction: float) -> list[SSAValue]:
    keepdim = a.bool("keepdim")
    x = a.tensor_as("self", a.result_dtype())
    return [_variance(a, axes, correction, keepdim), a.value(_reduce_value(x, ReduceMeanOp, axes, keepdim))]


@converts("torch.aten.var_mean.correction", args="self dim correction keepdim")
def var_mean_correction(a: AtenArgs) -> list[SSAValue]:
    return _variance_and_mean(a, a.optional_ints("dim") or [], _correction(a))


@converts("torch.aten.var_mean.dim", args="self dim unbiased keepdim")
def var_mean_dim(a: AtenArgs) -> list[SSAValue]:
    return _variance_and_mean(a, a.optional_ints("dim") or [], float(a.bool("unbiased")))


def _sqrt(a: AtenArgs, x: SSAValue) -> SSAValue:
    return a.value(ew.SqrtOp.build(operands=[x], result_types=[tensor_type(x)]))


@converts("torch.aten.std.correction", args="self dim correction keepdim")
def std_correction(a: AtenArgs) -> SSAValue:
    return _sqrt(a, _variance(a, a.optional_ints("dim") or [], _correction(a), a.bool("keepdim")))


@converts("torch.aten.std.dim", args="self dim unbiased keepdim")
def std_dim(a: AtenArgs) -> SSAValue:
    return _sqrt(a, _variance(a, a.optional_ints("dim") or [], float(a.bool("unbiased")), a.bool("keepdim")))


@converts("torch.aten.std", args="self unbiased")
def std_all(a: AtenArgs) -> SSAValue:
    return _sqrt(a, _variance(a, [], float(a.bool("unbiased")), False))


@converts("torch.aten.logsumexp", args="self dim keepdim")
def logsumexp(a: AtenArgs) -> SSAValue:
    """max + log(sum(exp(x - max))), which cannot overflow."""
    x = a.tensor_as("self", a.result_dtype())
    axes, keepdim = a.ints("dim"), a.bool("keepdim")
    peak = a.value(_reduce_value(x, ReduceMaxOp, axes, True))
    shifted = a.value(ew.SubOp.build(operands=[x, peak], result_types=[tensor_type(x)]))
    exp = a.value(ew.ExpOp.build(operands=[shifted], result_types=[tensor_type(x)]))
    total = a.value(_reduce_value(exp, ReduceSumOp, axes, keepdim))
    log = a.value(ew.LogOp.build(operands=[total], result_types=[tensor_type(total)]))
    if not keepdim:
        peak = a.value(ReshapeOp.build(operands=[peak], result_types=[tensor_type(log)]))
    return a.value(ew.AddOp.build(operands=[log, peak], result_types=[a.result_type()]))


@converts("torch.aten.linalg_vector_norm", args="self ord dim keepdim dtype")
def vector_norm(a: AtenArgs) -> SSAValue:
    x = a.tensor_as("self", a.result_dtype())
    return _norm(a, x, a.float("ord"), a.optional_ints("dim") or [], a.bool("keepdim"))


@converts("torch.aten.norm.ScalarOpt_dim", args="self p dim keepdim")
def norm_dim(a: AtenArgs) -> SSAValue:
    order = a.optional_float("p")
    x = a.tensor_as("self", a.result_dtype())
    return _norm(a, x, 2.0 if order is None else order, a.optional_ints("dim") or [], a.bool("keepdim"))


@converts("onnx.LpNormalization", args="input")
def onnx_lp_normalization(a: AtenArgs) -> SSAValue:
    """x / norm(x) along `axis`, and 0 where the norm is 0, as ONNX's reference gives (torch-mlir's lowering
    divides by it, so the frontend hides the op from it)."""
    x = a.tensor("input")
    x_type = tensor_type(x)
    norm = _norm(a, x, float(a.onnx_int("p", 2)), [a.onnx_int("axis", -1)], True)
    zero = a.scalar_tensor(0.0, x_type.get_element_type())
    vanishes = a.value(
        ew.EqOp.build(operands=[norm, zero], result_types=[TensorType(i1, tensor_type(norm).get_shape())])
    )
    quotient = a.value(ew.DivOp.build(operands=[x, norm], result_types=[x_type]))
    return a.value(ew.WhereOp.build(operands=[vanishes, zero, quotient], result_types=[x_type]))


def _norm(a: AtenArgs, x: SSAValue, order: float, axes: list[int], keepdim: bool) -> SSAValue:
    """The 1-norm (sum of |x|) or the 2-norm (root of the sum of squares)."""
    if order not in (1.0, 2.0):
        raise NotConvertible(f"vector norm of order {order}")
    if order == 1.0:
        magnitude = a.value(ew.AbsOp.build(operands=[x], result_types=[tensor_type(x)]))
        return a.value(_reduce_value(magnitude, ReduceSumOp, axes, keepdim))
    squares = a.value(ew.MulOp.build(operands=[x, x], result_types=[tensor_type(x)]))
    return _sqrt(a, a.value(_reduce_value(squares, ReduceSumOp, axes, keepdim)))


def _any_or_all(a: AtenArgs, op: type[ReduceOp], axes: list[int], keepdims: bool) -> SSAValue:
    """Whether any (`ReduceMaxOp`) or all (`ReduceMinOp`) elements over `axes` are nonzero: the max or min of the
    truth values as 0.0 and 1.0, compared with 0."""
    x = a.tensor("self")
    x_type = tensor_type(x)
    zero = a.scalar_tensor(0, x_type.get_element_type())
    truth = a.value(ew.NeOp.build(operands=[x, zero], result_types=[TensorType(i1, x_type.get_shape())]))
    values = a.value(ew.CastOp.build(operands=[truth], result_types=[TensorType(f32, x_type.get_shape())]))
    shape = a.result_type().get_shape()
    props = {"axes": i64_array(axes), "keepdims": bool_attr(keepdims)}
    reduced = a.value(op.build(operands=[values], properties=props, result_types=[TensorType(f32, shape)]))
    return a.value(ew.GtOp.build(operands=[reduced, a.scalar_tensor(0.0, f32)], result_types=[TensorType(i1, shape)]))


@converts("torch.aten.any.dim", args="self dim keepdim")
def any_dim(a: AtenArgs) -> SSAValue:
    return _any_or_all(a, ReduceMaxOp, [a.int("dim")], a.bool("keepdim"))


@converts("torch.aten.all.dim", args="self dim keepdim")
def all_dim(a: AtenArgs) -> SSAValue:
    return _any_or_all(a, ReduceMinOp, [a.int("dim")], a.bool("keepdim"))


@converts("torch.aten.any", args="self")
def any_all_dims(a: AtenArgs) -> SSAValue:
    return _any_or_all(a, ReduceMaxOp, [], False)


@converts("torch.aten.all", args="self")
def all_all_dims(a: AtenArgs) -> SSAValue:
    return _any_or_all(a, ReduceMinOp, [], False)


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


def _arg_reduce(
    a: AtenArgs, op: type[ArgmaxOp] | type[ArgminOp], x: SSAValue, axis: int, keepdim: bool, result: int = 0
) -> SSAValue:
    """graph's arg-reductions give i64; torch-mlir's ONNX lowering may ask for i32."""
    index_type = TensorType(i64, a.result_type(result).get_shape())
    props = {"axis": i64_attr(axis), "keepdims": bool_attr(keepdim)}
    index = a.value(op.build(operands=[x], properties=props, result_types=[index_type]))
    return a.cast(index, a.result_dtype(result))


def _value_and_index(
    a: AtenArgs, value_op: type[ReduceOp], index_op: type[ArgmaxOp] | type[ArgminOp]
) -> list[SSAValue]:
    dim, keep = a.int("dim"), a.bool("keepdim")
    values = _reduce(a, value_op, [dim], keep)
    if not a.op.results[1].uses:
        return [values, values]
    return [values, _arg_reduce(a, index_op, a.tensor("self"), dim, keep, result=1)]


@converts("torch.aten.max.dim", args="self dim keepdim")
def max_dim(a: AtenArgs) -> list[SSAValue]:
    return _value_and_index(a, ReduceMaxOp, ArgmaxOp)


@converts("torch.aten.min.dim", args="self dim keepdim")
def min_dim(a: AtenArgs) -> list[SSAValue]:
    return _value_and_index(a, ReduceMinOp, ArgminOp)


def _arg(a: AtenArgs, op: type[ArgmaxOp] | type[ArgminOp]) -> SSAValue:
    x = a.tensor("self")
    dim = a.optional_int("dim")
    if dim is not None:
        return _arg_reduce(a, op, x, dim, a.bool("keepdim"))
    # Over the flattened tensor: a 0-d index, shaped as the result (all ones with keepdim).
    x_type = tensor_type(x)
    flat_type = TensorType(x_type.get_element_type(), [multiply_dims(x_type.get_shape())])
    flat = a.value(ReshapeOp.build(operands=[x], result_types=[flat_type]))
    props = {"axis": i64_attr(0), "keepdims": bool_attr(False)}
    index = a.value(op.build(operands=[flat], properties=props, result_types=[TensorType(i64, [])]))
    shaped = a.value(ReshapeOp.build(operands=[index], result_types=[TensorType(i64, a.result_type().get_shape())]))
    return a.cast(shaped, a.result_dtype())


@converts("torch.aten.argmax", args="self dim keepdim")
def argmax(a: AtenArgs) -> SSAValue:
    return _arg(a, ArgmaxOp)


@converts("torch.aten.argmin", args="self dim keepdim")
def argmin(a: AtenArgs) -> SSAValue:
    return _arg(a, ArgminOp)


def _scan(a: AtenArgs, op: type[ScanOp], x: SSAValue, axis: int, exclusive: bool, reverse: bool) -> SSAValue:
    props = {"axis": i64_attr(axis), "exclusive": bool_attr(exclusive), "reverse": bool_attr(reverse)}
    return a.value(op.build(operands=[x], properties=props, result_types=[a.result_type()]))


@converts("torch.aten.cumsum", args="self dim dtype")
def cumsum(a: AtenArgs) -> SSAValue:
    """torch-mlir lowers ONNX CumSum's `reverse` to flips around it and `exclusive` to a subtraction after it."""
    return _scan(a, CumsumOp, a.tensor_as("self", a.result_dtype()), a.int("dim"), False, False)


@converts("torch.aten.cumprod", args="self dim dtype")
def cumprod(a: AtenArgs) -> SSAValue:
    return _scan(a, CumprodOp, a.tensor_as("self", a.result_dtype()), a.int("dim"), False, False)


@converts("onnx.CumProd", args="x axis")
def onnx_cumprod(a: AtenArgs) -> SSAValue:
    axis = a.constant_scalar("axis")
    if axis is None:
        raise NotConvertible("CumProd's axis is not a constant")
    exclusive, reverse = bool(a.onnx_int("exclusive", 0)), bool(a.onnx_int("reverse", 0))
    return _scan(a, CumprodOp, a.tensor("x"), int(axis), exclusive, reverse)


@converts("torch.aten.topk", args="self k dim largest sorted")
def topk(a: AtenArgs) -> list[SSAValue]:
    """Values and indices, always sorted (an unsorted topk may be in any order, so sorted is one of them)."""
    x = a.tensor("self")
    props = {"k": i64_attr(a.int("k")), "axis": i64_attr(a.int("dim")), "largest": bool_attr(a.bool("largest"))}
    op = a.emit(TopKOp.build(operands=[x], properties=props, result_types=[a.result_type(0), a.result_type(1)]))
    return list(op.results)
