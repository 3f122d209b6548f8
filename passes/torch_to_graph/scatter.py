"""Converters that write into parts of tensors: torch's scatter family, index_put and index_add, ONNX's
ScatterElements (all as `graph.scatter_elements`), slice_scatter and select_scatter, and the ops that are
scatters into zeros (MaxUnpool, Col2Im)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, f64_attr, i64_array, i64_attr, str_attr
from gnomon.dialects.graph.constant_values import dense_to_numpy, numpy_dtype, splat_bytes
from gnomon.dialects.graph.tensor import (
    ConstantOp,
    ExpandOp,
    PadOp,
    ScatterElementsOp,
    SliceOp,
    SliceScatterOp,
    TransposeOp,
)
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_tensor, tensor_type
from gnomon.passes.torch_to_graph.indexing import index_tensors, linear_index
from gnomon.passes.torch_to_graph.registry import converts


def scatter(a: AtenArgs, x: SSAValue, axis: int, indices: SSAValue, updates: SSAValue, reduction: str) -> SSAValue:
    """`graph.scatter_elements` of `updates` cast to the input's element type. torch lets them be larger than the
    indices in any dim and takes their corner of the indices' shape."""
    x_type = tensor_type(x)
    shape = tensor_type(indices).get_shape()
    updates = a.cast(updates, x_type.get_element_type())
    if tensor_type(updates).get_shape() != shape:
        updates = _corner(a, updates, shape)
    props = {"axis": i64_attr(axis), "reduction": str_attr(reduction)}
    return a.value(ScatterElementsOp.build(operands=[x, indices, updates], properties=props, result_types=[x_type]))


def _corner(a: AtenArgs, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    x_type = tensor_type(x)
    if len(x_type.get_shape()) != len(shape) or DYN in (*x_type.get_shape(), *shape):
        raise NotConvertible("scatter updates of another rank than the indices, or of dynamic shape")
    props = {"starts": i64_array([0] * len(shape)), "ends": i64_array(shape), "steps": i64_array([1] * len(shape))}
    return a.value(
        SliceOp.build(operands=[x], properties=props, result_types=[TensorType(x_type.get_element_type(), shape)])
    )


def _expand(a: AtenArgs, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    x_type = tensor_type(x)
    if tuple(x_type.get_shape()) == tuple(shape):
        return x
    return a.value(ExpandOp.build(operands=[x], result_types=[TensorType(x_type.get_element_type(), shape)]))


def _static_shape(x: SSAValue, what: str) -> tuple[int, ...]:
    shape = tensor_type(x).get_shape()
    if DYN in shape:
        raise NotConvertible(f"{what} of a tensor with dynamic dims")
    return shape


# ---- torch's scatter family ----

_TORCH_REDUCTIONS = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}
"""graph.scatter_elements's reduction for each of scatter_reduce's (and the older scatter's `reduce`)."""


def _filled(a: AtenArgs, name: str) -> SSAValue:
    """A scalar `value` argument as updates of the index's shape."""
    shape = _static_shape(a.tensor("index"), "a scatter of a value")
    return a.splat(a.float(name), TensorType(tensor_type(a.tensor("self")).get_element_type(), shape))


def _reduction(a: AtenArgs) -> str:
    reduce = a.str("reduce")
    if reduce not in _TORCH_REDUCTIONS:
        raise NotConvertible(f"scatter reduction {reduce!r}")
    return _TORCH_REDUCTIONS[reduce]


@converts("torch.aten.scatter.src", args="self dim index src")
def scatter_src(a: AtenArgs) -> SSAValue:
    return scatter(a, a.tensor("self"), a.int("dim"), a.tensor("index"), a.tensor("src"), "none")


@converts("torch.aten.scatter.value", args="self dim index value")
def scatter_value(a: AtenArgs) -> SSAValue:
    return scatter(a, a.tensor("self"), a.int("dim"), a.tensor("index"), _filled(a, "value"), "none")


@converts("torch.aten.scatter.reduce", args="self dim index src reduce")
def scatter_src_reduce(a: AtenArgs) -> SSAValue:
    return scatter(a, a.tensor("self"), a.int("dim"), a.tensor("index"), a.tensor("src"), _reduction(a))


@converts("torch.aten.scatter.value_reduce", args="self dim index value reduce")
def scatter_value_reduce(a: AtenArgs) -> SSAValue:
    return scatter(a, a.tensor("self"), a.int("dim"), a.tensor("index"), _filled(a, "value"), _reduction(a))


@converts("torch.aten.scatter_add", args="self dim index src")
def scatter_add(a: AtenArgs) -> SSAValue:
    return scatter(a, a.tensor("self"), a.int("dim"), a.tensor("index"), a.tensor("src"), "add")


@converts("torch.aten.scatter_reduce.two", args="self dim index src reduce include_self")
def scatter_reduce(a: AtenArgs) -> SSAValue:
    """Without include_self, the positions the indices name first take the reduction's identity (a scatter of
    it), so that only the updates reduce there."""
    x, dim, index = a.tensor("self"), a.int("dim"), a.tensor("index")
    reduction = _reduction(a)
    if not a.bool("include_self"):
        element = tensor_type(x).get_element_type()
        shape = _static_shape(index, "scatter_reduce without include_self")
        identity = a.splat(_identity(reduction, element), TensorType(element, shape))
        x = scatter(a, x, dim, index, identity, "none")
    return scatter(a, x, dim, index, a.tensor("src"), reduction)


def _identity(reduction: str, element: Attribute) -> float:
    """The value that `reduction` leaves any element of type `element` unchanged with."""
    if reduction in ("add", "mul"):
        return float(reduction == "mul")
    dtype = numpy_dtype(element)
    if dtype == np.bool_:
        return float(reduction == "min")
    if dtype is not None and np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return int(limits.min if reduction == "max" else limits.max)
    return -math.inf if reduction == "max" else math.inf


@converts("onnx.ScatterElements", args="data indices updates")
def onnx_scatter_elements(a: AtenArgs) -> SSAValue:
    reduction = a.onnx_str("reduction", "none")
    if reduction not in ScatterElementsOp.REDUCTIONS:
        raise NotConvertible(f"ScatterElements reduction {reduction!r}")
    return scatter(a, a.tensor("data"), a.onnx_int("axis", 0), a.tensor("indices"), a.tensor("updates"), reduction)


@converts("torch.aten.index_put", "torch.aten.index_put.hacked_twin", "torch.aten._index_put_impl",
          args="self indices values accumulate")  # fmt: skip
def index_put(a: AtenArgs) -> SSAValue:
    """`x[i, j] = v` (`+=` with accumulate): the indexed dims flatten into one, scattered at the linear index
    (as `aten.index.Tensor` gathers), with the index broadcast over the other dims. Separated index tensors put
    the indexed dims first, as NumPy does: the input is transposed so, and the result back."""
    x = a.tensor("self")
    element = tensor_type(x).get_element_type()
    shape = list(_static_shape(x, "index_put"))
    indexed = index_tensors(a, "indices")
    dims = sorted(indexed)
    if not dims:
        raise NotConvertible("index_put without index tensors")
    permutation = dims + [d for d in range(len(shape)) if d not in indexed]
    moved = dims != list(range(dims[0], dims[-1] + 1))
    if moved:
        shape = [shape[d] for d in permutation]
        x = a.value(
            TransposeOp.build(
                operands=[x],
                properties={"permutation": i64_array(permutation)},
                result_types=[TensorType(element, shape)],
            )
        )
        indexed = {i: indexed[d] for i, d in enumerate(dims)}
        dims = list(range(len(dims)))
    first, last = dims[0], dims[-1]
    linear = linear_index(a, [indexed[d] for d in dims], [shape[d] for d in dims])
    picked = _static_shape(linear, "index_put")
    before, after = math.prod(shape[:first]), math.prod(shape[last + 1 :])
    rows = [before, math.prod(picked), after]
    # The values broadcast to what x[i, j] would return, flattened as the input is.
    values = _expand(a, a.cast(a.tensor("values"), element), [*shape[:first], *picked, *shape[last + 1 :]])
    where = _expand(a, a.reshape(linear, [1, rows[1], 1]), rows)
    flat = a.reshape(x, [before, math.prod(shape[first : last + 1]), after])
    reduction = "add" if a.bool("accumulate") else "none"
    out = a.reshape(scatter(a, flat, 1, where, a.reshape(values, rows), reduction), shape)
    if not moved:
        return out
    inverse = [permutation.index(d) for d in range(len(shape))]
    return a.value(
        TransposeOp.build(
            operands=[out], properties={"permutation": i64_array(inverse)}, result_types=[a.result_type()]
        )
    )


@converts("torch.aten.index_add", args="self dim index source alpha")
def index_add(a: AtenArgs) -> SSAValue:
    """`x.index_add(dim, i, s)`: x[..., i[k], ...] += alpha * s[..., k, ...], a scatter-add of s along dim with the
    1-D index broadcast over its other dims."""
    x = a.tensor("self")
    element = tensor_type(x).get_element_type()
    rank = len(tensor_type(x).get_shape())
    dim = a.int("dim") % max(rank, 1)
    source = a.cast(a.tensor("source"), element)
    source_shape = _static_shape(source, "index_add")
    index = a.tensor("index")
    if len(tensor_type(index).get_shape()) != 1:
        raise NotConvertible("index_add with an index that is not 1-D")
    alpha = a.float("alpha")
    if alpha != 1:
        scale = a.scalar_tensor(alpha, element)
        source = a.value(ew.MulOp.build(operands=[source, scale], result_types=[tensor_type(source)]))
    column = [source_shape[dim] if d == dim else 1 for d in range(rank)]
    where = _expand(a, a.reshape(index, column), source_shape)
    return scatter(a, x, dim, where, source, "add")


# ---- slices ----


def _splat_value(x: SSAValue) -> float | None:
    """The one value of a splat constant, if `x` is one and an f64 holds it exactly (graph.pad's fill)."""
    owner = x.owner
    if not isinstance(owner, ConstantOp) or not isinstance(owner.value, DenseIntOrFPElementsAttr):
        return None
    array = dense_to_numpy(owner.value) if splat_bytes(owner.value) is not None else None
    if array is None:
        return None
    value = array.reshape(-1)[0].item()
    return float(value) if float(value) == value or value != value else None


@converts("torch.aten.slice_scatter", args="self src dim start end step")
def slice_scatter(a: AtenArgs) -> SSAValue:
    """`x[start:end:step] = src` along `dim`."""
    if a.int("step") < 1:
        raise NotConvertible("slice_scatter with a step below 1")
    return _slice_scatter(
        a, a.tensor("src"), a.int("dim"), a.optional_int("start"), a.optional_int("end"), a.int("step")
    )


@converts("torch.aten.select_scatter", args="self src dim index")
def select_scatter(a: AtenArgs) -> SSAValue:
    """`x[index] = src` along `dim`: a slice of one, src with the dim restored."""
    shape = _static_shape(a.tensor("self"), "select_scatter")
    dim, index = a.int("dim") % len(shape), a.int("index") % shape[a.int("dim") % len(shape)]
    src = a.tensor("src")
    unit = [*tensor_type(src).get_shape()[:dim], 1, *tensor_type(src).get_shape()[dim:]]
    return _slice_scatter(a, a.reshape(src, unit), dim, index, index + 1, 1)


def _slice_scatter(a: AtenArgs, src: SSAValue, dim: int, start: int | None, end: int | None, step: int) -> SSAValue:
    """`self` with its slice along `dim` replaced by `src`; into a splat (CenterCropPad's zeros), a unit-step slice
    is a pad of src."""
    x = a.tensor("self")
    x_type = tensor_type(x)
    shape = _static_shape(x, "slice_scatter")
    src = a.cast(src, x_type.get_element_type())
    dim %= len(shape)
    start, end, step = slice(start, end, step).indices(shape[dim])
    window = [len(range(start, end, step)) if d == dim else n for d, n in enumerate(shape)]
    if tensor_type(src).get_shape() != tuple(window):
        raise NotConvertible(f"slice_scatter of {list(tensor_type(src).get_shape())} into a slice of {window}")
    fill = _splat_value(x)
    if fill is not None and step == 1:
        pads = [start if d == dim else 0 for d in range(len(shape))] + [
            shape[d] - end if d == dim else 0 for d in range(len(shape))
        ]
        props = {"pads": i64_array(pads), "mode": str_attr("constant"), "value": f64_attr(fill)}
        return a.value(PadOp.build(operands=[src], properties=props, result_types=[x_type]))
    props = {
        "starts": i64_array([start if d == dim else 0 for d in range(len(shape))]),
        "ends": i64_array([end if d == dim else n for d, n in enumerate(shape)]),
        "steps": i64_array([step if d == dim else 1 for d in range(len(shape))]),
    }
    return a.value(SliceScatterOp.build(operands=[x, src], properties=props, result_types=[x_type]))


# ---- scatters into zeros ----


def _unpool(a: AtenArgs, x: SSAValue, indices: SSAValue, spatial: Sequence[int], per_plane: bool) -> SSAValue:
    """Each input element to its index in a zero output of `spatial` size. torch's indices count within each
    (n, c) plane (a scatter along rows that are the planes), ONNX's across the whole tensor (along one row)."""
    shape = _static_shape(x, "max unpooling")
    lead = shape[: len(shape) - len(spatial)]
    out_shape = [*lead, *spatial]
    rows = math.prod(lead) if per_plane else 1
    element = tensor_type(x).get_element_type()
    zeros = a.splat(0, TensorType(element, [rows, math.prod(out_shape) // rows]))
    values = a.reshape(x, [rows, math.prod(shape) // rows])
    where = a.reshape(indices, [rows, math.prod(shape) // rows])
    return a.reshape(scatter(a, zeros, 1, where, values, "none"), out_shape)


@converts("torch.aten.max_unpool2d", args="self indices output_size")
def max_unpool2d(a: AtenArgs) -> SSAValue:
    return _unpool(a, a.tensor("self"), a.tensor("indices"), a.ints("output_size"), per_plane=True)


@converts("torch.aten.max_unpool3d", args="self indices output_size stride padding")
def max_unpool3d(a: AtenArgs) -> SSAValue:
    return _unpool(a, a.tensor("self"), a.tensor("indices"), a.ints("output_size"), per_plane=True)


def _constant_ints(a: AtenArgs, name: str, what: str) -> list[int]:
    value = fold_tensor(a.values[name])
    if value is None:
        raise NotConvertible(f"{what} is not a constant")
    return [int(v) for v in value.reshape(-1)]


@converts("onnx.MaxUnpool", args="X I output_shape?")
def onnx_max_unpool(a: AtenArgs) -> SSAValue:
    """As ONNX's reference: the indices place the elements in the shape the pooling attributes imply, and an
    output_shape larger than that pads it at the end of each dim."""
    x = a.tensor("X")
    shape = _static_shape(x, "MaxUnpool")
    kernel = a.onnx_ints("kernel_shape", [])
    n = len(kernel)
    strides, pads = a.onnx_ints("strides", [1] * n), a.onnx_ints("pads", [0] * 2 * n)
    spatial = [
        (d - 1) * s - (pads[i] + pads[n + i]) + k
        for i, (d, s, k) in enumerate(zip(shape[2:], strides, kernel, strict=True))
    ]
    unpooled = _unpool(a, x, a.tensor("I"), spatial, per_plane=False)
    if a.is_none("output_shape"):
        return unpooled
    target = _constant_ints(a, "output_shape", "MaxUnpool's output_shape")
    inferred = [*shape[:2], *spatial]
    if target == inferred:
        return unpooled
    ends = [t - d for t, d in zip(target, inferred, strict=True)]
    props = {"pads": i64_array([0] * len(target) + ends), "mode": str_attr("constant"), "value": f64_attr(0.0)}
    out = TensorType(tensor_type(x).get_element_type(), target)
    return a.value(PadOp.build(operands=[unpooled], properties=props, result_types=[out]))


def _col2im(
    a: AtenArgs,
    x: SSAValue,
    image: Sequence[int],
    block: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
    strides: Sequence[int],
) -> SSAValue:
    """Col2Im (torch's fold): the sum of the sliding blocks' columns at their places in the image, a scatter-add
    of [.., C, block elements x positions] into the padded image flattened, at constant indices; then the
    padding (all begins, then all ends) cropped off."""
    shape = _static_shape(x, "Col2Im")
    n = len(image)
    padded = [d + pads[i] + pads[n + i] for i, d in enumerate(image)]
    positions = [
        (p - (dil * (k - 1) + 1)) // s + 1 for p, k, dil, s in zip(padded, block, dilations, strides, strict=True)
    ]
    kernel, count = math.prod(block), math.prod(positions)
    if len(shape) < 2 or shape[-1] != count or shape[-2] % kernel:
        raise NotConvertible(f"Col2Im of {list(shape)} into blocks {list(block)} at {count} positions")
    # The padded-image coordinate of block offset o at position b is b * stride + o * dilation, per dim.
    offsets = np.indices(block).reshape(n, kernel, 1)
    starts = np.indices(positions).reshape(n, 1, count)
    coordinates = starts * np.array(strides).reshape(n, 1, 1) + offsets * np.array(dilations).reshape(n, 1, 1)
    flat = np.asarray(np.ravel_multi_index(tuple(coordinates), padded))
    lead = [*shape[:-2], shape[-2] // kernel]
    element = tensor_type(x).get_element_type()
    columns = a.reshape(x, [*lead, kernel * count])
    where = _expand(a, a.constant(flat.reshape([1] * len(lead) + [kernel * count]), i64), [*lead, kernel * count])
    zeros = a.splat(0, TensorType(element, [*lead, math.prod(padded)]))
    summed = a.reshape(scatter(a, zeros, len(lead), where, columns, "add"), [*lead, *padded])
    if not any(pads):
        return summed
    props = {
        "starts": i64_array([0] * len(lead) + list(pads[:n])),
        "ends": i64_array([*lead, *(pads[i] + d for i, d in enumerate(image))]),
        "steps": i64_array([1] * (len(lead) + n)),
    }
    return a.value(
        SliceOp.build(operands=[summed], properties=props, result_types=[TensorType(element, [*lead, *image])])
    )


@converts("torch.aten.col2im", args="self output_size kernel_size dilation padding stride")
def col2im(a: AtenArgs) -> SSAValue:
    padding = a.ints("padding")
    return _col2im(
        a, a.tensor("self"), a.ints("output_size"), a.ints("kernel_size"), a.ints("dilation"), padding + padding,
        a.ints("stride"),
    )  # fmt: skip


@converts("onnx.Col2Im", args="input image_shape block_shape")
def onnx_col2im(a: AtenArgs) -> SSAValue:
    image = _constant_ints(a, "image_shape", "Col2Im's image_shape")
    block = _constant_ints(a, "block_shape", "Col2Im's block_shape")
    n = len(image)
    dilations, pads, strides = (
        a.onnx_ints("dilations", [1] * n),
        a.onnx_ints("pads", [0] * 2 * n),
        a.onnx_ints("strides", [1] * n),
    )
    return _col2im(a, a.tensor("input"), image, block, dilations, pads, strides)
