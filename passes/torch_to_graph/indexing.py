"""Converters that join or select parts of tensors: concat, stack and split, slices, flips, gathers,
advanced indexing, padding and ONNX's KV-cache scatter."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import IntegerType, TensorType, i1, i64
from xdsl.ir import Operation, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import (
    DYN,
    broadcast_shapes,
    f64_attr,
    i64_array,
    i64_attr,
    shape_of,
    str_attr,
    tensor_of,
)
from gnomon.dialects.graph.tensor import (
    ConcatOp,
    ExpandOp,
    GatherElementsOp,
    GatherOp,
    PadOp,
    ReshapeOp,
    SliceOp,
    SplitOp,
    TransposeOp,
)
from gnomon.dialects.torch import NoneType, PrimListUnpackOp, ValueTensorType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_scalar, tensor_type, torch_op_name
from gnomon.passes.torch_to_graph.registry import converts


@converts("torch.aten.cat", "torch.aten.concat", args="tensors dim")
def cat(a: AtenArgs) -> SSAValue:
    element = a.result_dtype()
    # torch drops empty 1-D tensors from cat; they carry no data.
    inputs = [a.cast(t, element) for t in a.tensors("tensors") if tensor_type(t).get_shape() != (0,)]
    if len(inputs) == 1:
        return inputs[0]
    return a.value(
        ConcatOp.build(operands=[inputs], properties={"axis": i64_attr(a.int("dim"))}, result_types=[a.result_type()])
    )


@converts("torch.aten.stack", args="tensors dim")
def stack(a: AtenArgs) -> SSAValue:
    """Each input gains a unit dim at `dim`; then they are concatenated along it."""
    out = a.result_type()
    element = out.get_element_type()
    dim = a.int("dim") % len(out.get_shape())
    pieces: list[SSAValue] = []
    for t in a.tensors("tensors"):
        t = a.cast(t, element)
        unit = list(tensor_type(t).get_shape())
        unit.insert(dim, 1)
        pieces.append(a.value(ReshapeOp.build(operands=[t], result_types=[TensorType(element, unit)])))
    if len(pieces) == 1:
        return pieces[0]
    return a.value(ConcatOp.build(operands=[pieces], properties={"axis": i64_attr(dim)}, result_types=[out]))


def _list_results(a: AtenArgs) -> list[TensorType]:
    """The element types of a `!torch.list<vtensor>` result, read from its ListUnpack user."""
    users = [use.operation for use in a.op.results[0].uses]
    if len(users) != 1 or not isinstance(users[0], PrimListUnpackOp):
        raise NotConvertible("a list of tensors that is not unpacked")
    types = []
    for result in users[0].results:
        builtin = result.type.to_builtin() if isinstance(result.type, ValueTensorType) else None
        if builtin is None:
            raise NotConvertible("split pieces without static shapes")
        types.append(builtin)
    return types


def _split(a: AtenArgs, axis: int) -> list[SSAValue]:
    x = a.tensor("self")
    pieces = _list_results(a)
    rank = len(tensor_type(x).get_shape())
    axis %= rank
    sizes = [p.get_shape()[axis] for p in pieces]
    if DYN in sizes:
        raise NotConvertible("split into pieces of dynamic size")
    split = a.emit(
        SplitOp.build(
            operands=[x], properties={"axis": i64_attr(axis), "sizes": i64_array(sizes)}, result_types=[pieces]
        )
    )
    return _unpacked(a, list(split.results))


def _unpacked(a: AtenArgs, pieces: list[SSAValue]) -> list[SSAValue]:
    """The pieces replace the results of the list's ListUnpack; the list value itself has no users left."""
    unpack = next(use.operation for use in a.op.results[0].uses)
    assert isinstance(unpack, PrimListUnpackOp)
    a.rewriter.replace(unpack, [], pieces)
    return [a.tensor("self")]


@converts("torch.aten.split.Tensor", args="self split_size dim")
def split_tensor(a: AtenArgs) -> list[SSAValue]:
    return _split(a, a.int("dim"))


@converts("torch.aten.split_with_sizes", args="self split_sizes dim")
def split_with_sizes(a: AtenArgs) -> list[SSAValue]:
    return _split(a, a.int("dim"))


@converts("torch.aten.chunk", args="self chunks dim")
def chunk(a: AtenArgs) -> list[SSAValue]:
    return _split(a, a.int("dim"))


@converts("torch.aten.unbind.int", args="self dim")
def unbind(a: AtenArgs) -> list[SSAValue]:
    """Size-1 pieces along `dim`, each reshaped to drop it."""
    x = a.tensor("self")
    shape = list(tensor_type(x).get_shape())
    dim = a.int("dim") % len(shape)
    if shape[dim] == DYN:
        raise NotConvertible("unbind of a dynamic dim")
    pieces = _list_results(a)
    unit = TensorType(tensor_type(x).get_element_type(), [1 if i == dim else d for i, d in enumerate(shape)])
    split = a.emit(
        SplitOp.build(
            operands=[x],
            properties={"axis": i64_attr(dim), "sizes": i64_array([1] * shape[dim])},
            result_types=[[unit] * shape[dim]],
        )
    )
    reshaped = [
        a.value(ReshapeOp.build(operands=[piece], result_types=[piece_type]))
        for piece, piece_type in zip(split.results, pieces, strict=True)
    ]
    return _unpacked(a, reshaped)


def _runtime_index(value: SSAValue) -> SSAValue | None:
    """The one-element integer tensor a runtime index is the item of; None otherwise."""
    owner = value.owner
    if not isinstance(owner, Operation) or torch_op_name(owner) not in ("torch.aten.item", "torch.aten.Int.Tensor"):
        return None
    tensor = owner.operands[0]
    if not isinstance(tensor.type, TensorType) or any(d != 1 for d in tensor.type.get_shape()):
        return None
    if not isinstance(tensor.type.get_element_type(), IntegerType) or tensor.type.get_element_type() == i1:
        return None
    return tensor


def slice_along(a: AtenArgs, dim: int, start: int, end: int, step: int) -> SSAValue:
    """`self[start:end:step]` along `dim` (Python's bounds), the input itself when that is all of it."""
    x = a.tensor("self")
    shape = shape_of(x, "slice input")
    dim %= len(shape)
    if shape[dim] == DYN:
        raise NotConvertible("slice of a dynamic dim (graph.slice needs its bounds)")
    start, end, step = slice(start, end, step).indices(shape[dim])
    starts = [start if i == dim else 0 for i in range(len(shape))]
    ends = [end if i == dim else (DYN if d == DYN else d) for i, d in enumerate(shape)]  # a dynamic dim: all of it
    steps = [step if i == dim else 1 for i in range(len(shape))]
    if (start, end, step) == (0, shape[dim], 1):
        return x
    sizes = [d if d == DYN else len(range(s, e, st)) for d, s, e, st in zip(shape, starts, ends, steps, strict=True)]
    out = tensor_of(tensor_type(x).get_element_type(), sizes)
    props = {"starts": i64_array(starts), "ends": i64_array(ends), "steps": i64_array(steps)}
    return a.value(SliceOp.build(operands=[x], properties=props, result_types=[out]))


@converts("torch.aten.slice.Tensor", args="self dim start end step")
def slice_tensor(a: AtenArgs) -> SSAValue:
    start, end = a.optional_int("start"), a.optional_int("end")
    start, end = start if start is not None else 0, end if end is not None else 2**62
    return slice_along(a, a.int("dim"), start, end, a.int("step"))


@converts("torch.aten.select.int", args="self dim index")
def select(a: AtenArgs) -> SSAValue:
    dim = a.int("dim")
    if fold_scalar(a.values["index"]) is None and (position := _runtime_index(a.values["index"])) is not None:
        # x[i] with i known only at run time (a loop's counter): a gather of one position, which drops the dim.
        x, position = a.tensor("self"), a.reshape(position, [])
        axis = dim % len(shape_of(x, "select input"))
        properties = {"axis": i64_attr(axis)}
        gather = GatherOp.build(operands=[x, position], properties=properties, result_types=[a.result_type()])
        return a.value(gather)
    index = a.int("index")
    piece = slice_along(a, dim, index, index + 1 if index != -1 else 2**62, 1)
    return a.value(ReshapeOp.build(operands=[piece], result_types=[a.result_type()]))


@converts("torch.aten.narrow", args="self dim start length")
def narrow(a: AtenArgs) -> SSAValue:
    shape = tensor_type(a.tensor("self")).get_shape()
    dim = a.int("dim") % len(shape)
    start = a.int("start")
    if start < 0:  # counts from the end, as in Python
        if shape[dim] == DYN:
            raise NotConvertible("narrow of a dynamic dim from its end")
        start += shape[dim]
    return slice_along(a, dim, start, start + a.int("length"), 1)


@converts("torch.aten.flip", args="self dims")
def flip(a: AtenArgs) -> SSAValue:
    """A slice with step -1 along each flipped dim."""
    x = a.tensor("self")
    shape = tensor_type(x).get_shape()
    if DYN in shape:
        raise NotConvertible("flip of a tensor with dynamic dims")
    flipped = {d % len(shape) for d in a.ints("dims")}
    props = {
        "starts": i64_array([d - 1 if i in flipped else 0 for i, d in enumerate(shape)]),
        "ends": i64_array([-1 if i in flipped else d for i, d in enumerate(shape)]),
        "steps": i64_array([-1 if i in flipped else 1 for i in range(len(shape))]),
    }
    return a.value(SliceOp.build(operands=[x], properties=props, result_types=[tensor_type(x)]))


@converts("torch.aten.index_select", args="self dim index")
def index_select(a: AtenArgs) -> SSAValue:
    return a.value(
        GatherOp.build(
            operands=[a.tensor("self"), a.tensor("index")],
            properties={"axis": i64_attr(a.int("dim"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.gather", args="self dim index sparse_grad")
def gather(a: AtenArgs) -> SSAValue:
    return a.value(
        GatherElementsOp.build(
            operands=[a.tensor("self"), a.tensor("index")],
            properties={"axis": i64_attr(a.int("dim"))},
            result_types=[a.result_type()],
        )
    )


@converts("torch.aten.index.Tensor", "torch.aten.index.Tensor_hacked_twin", args="self indices")
def index_tensor(a: AtenArgs) -> SSAValue:
    """Advanced indexing `x[:, i, j]`: the indexed dims flatten into one, gathered at the linear index.

    Index tensors broadcast against each other; negative indices count from the end of their dim.
    """
    x = a.tensor("self")
    shape = list(tensor_type(x).get_shape())
    indexed = index_tensors(a, "indices")
    dims = sorted(indexed)
    if not dims:
        return x
    if any(shape[d] == DYN for d in dims):
        raise NotConvertible("indexing a dynamic dim")
    if dims != list(range(dims[0], dims[-1] + 1)):
        # Separated index tensors put the indexed dims first, as in NumPy: move them there.
        permutation = dims + [d for d in range(len(shape)) if d not in indexed]
        shape = [shape[d] for d in permutation]
        moved = TensorType(tensor_type(x).get_element_type(), shape)
        x = a.value(
            TransposeOp.build(operands=[x], properties={"permutation": i64_array(permutation)}, result_types=[moved])
        )
        indexed = {i: indexed[d] for i, d in enumerate(dims)}
        dims = list(range(len(dims)))
    linear = linear_index(a, [indexed[d] for d in dims], [shape[d] for d in dims])
    first, last = dims[0], dims[-1]
    if len(dims) > 1:
        flat = [*shape[:first], math.prod(shape[first : last + 1]), *shape[last + 1 :]]
        x = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(tensor_type(x).get_element_type(), flat)]))
    return a.value(
        GatherOp.build(operands=[x, linear], properties={"axis": i64_attr(first)}, result_types=[a.result_type()])
    )


def index_tensors(a: AtenArgs, name: str) -> dict[int, SSAValue]:
    """The index tensors of an advanced index (`x[:, i, j]`), by the dim each indexes; None entries index nothing."""
    indexed: dict[int, SSAValue] = {}
    for dim, value in enumerate(a.list(name)):
        if isinstance(value.type, NoneType):
            continue
        a.values[f"{name}#{dim}"] = value
        index = a.tensor(f"{name}#{dim}")
        dtype = tensor_type(index).get_element_type()
        if not isinstance(dtype, IntegerType) or dtype.width.data == 1:
            raise NotConvertible("indexing with a boolean mask (a data-dependent shape)")
        indexed[dim] = index
    return indexed


def linear_index(a: AtenArgs, indices: list[SSAValue], sizes: list[int]) -> SSAValue:
    """sum(wrap(index_k) * stride_k) over the indexed dims, row-major; wrap maps -1 to size - 1. An index outside
    [-size, size) makes the whole sum the element count, past the end of the flattened tensor, so the gather
    reading it fails as torch's indexing does (a modulo would have read another element, silently)."""
    total = math.prod(sizes)
    linear: SSAValue | None = None
    stride = 1
    for index, size in reversed(list(zip(indices, sizes, strict=True))):
        index = a.cast(index, i64)
        length, zero = a.scalar_tensor(size, i64), a.scalar_tensor(0, i64)
        wrapped = _index_where(
            a, _index_compare(a, ew.LtOp, index, zero), _index_binary(a, ew.AddOp, index, length), index
        )
        below, beyond = _index_compare(a, ew.LtOp, wrapped, zero), _index_compare(a, ew.GeOp, wrapped, length)
        outside = _index_compare(a, ew.OrOp, below, beyond)
        term = _index_binary(a, ew.MulOp, wrapped, a.scalar_tensor(stride, i64)) if stride != 1 else wrapped
        term = _index_where(a, outside, a.scalar_tensor(total, i64), term)
        linear = term if linear is None else _index_binary(a, ew.AddOp, term, linear)
        stride *= size
    assert linear is not None
    return linear


def _index_compare(a: AtenArgs, op_class: type[ew.BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    """A comparison (or a logical op) of index tensors: a boolean result."""
    shape = broadcast_shapes([tensor_type(lhs).get_shape(), tensor_type(rhs).get_shape()], "index arithmetic")
    return a.value(op_class.build(operands=[lhs, rhs], result_types=[TensorType(i1, shape)]))


def _index_where(a: AtenArgs, condition: SSAValue, yes: SSAValue, no: SSAValue) -> SSAValue:
    shapes = [tensor_type(v).get_shape() for v in (condition, yes, no)]
    shape = broadcast_shapes(shapes, "index arithmetic")
    return a.value(ew.WhereOp.build(operands=[condition, yes, no], result_types=[TensorType(i64, shape)]))


def _index_binary(a: AtenArgs, op_class: type[ew.BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    shape = broadcast_shapes([tensor_type(lhs).get_shape(), tensor_type(rhs).get_shape()], "index arithmetic")
    return a.value(op_class.build(operands=[lhs, rhs], result_types=[TensorType(i64, shape)]))


def _torch_pads_to_graph(pads: list[int], rank: int) -> list[int]:
    """torch lists (begin, end) pairs from the last dim backwards; graph lists all begins, then all ends."""
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    return begins + ends


def _pad(a: AtenArgs, pads: list[int], mode: str, value: float) -> SSAValue:
    x = a.tensor("self")
    shape = tensor_type(x).get_shape()
    graph_pads = _torch_pads_to_graph(pads, len(shape))
    props = {"pads": i64_array(graph_pads), "mode": str_attr(mode), "value": f64_attr(value)}
    out = a.result_type()
    if DYN in out.get_shape() and DYN not in shape:
        # torch-mlir types a pad dynamic when its pads were shape arithmetic (ONNX's CenterCropPad): they are constants.
        padded = [d + graph_pads[i] + graph_pads[i + len(shape)] for i, d in enumerate(shape)]
        out = TensorType(out.get_element_type(), padded)
    return a.value(PadOp.build(operands=[x], properties=props, result_types=[out]))


@converts("torch.aten.constant_pad_nd", args="self pad value")
def constant_pad(a: AtenArgs) -> SSAValue:
    return _pad(a, a.ints("pad"), "constant", a.float("value"))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "wrap"}
"""torch's pad modes as graph.pad's (ONNX's wrap arrives as torch's circular)."""


@converts("torch.aten.pad", args="self pad mode value")
def pad(a: AtenArgs) -> SSAValue:
    mode = a.str("mode")
    if mode not in _PAD_MODES:
        raise NotConvertible(f"pad mode {mode!r}")
    value = a.optional_float("value")
    return _pad(a, a.ints("pad"), _PAD_MODES[mode], value or 0.0)


@converts(
    "torch.aten.reflection_pad1d", "torch.aten.reflection_pad2d", "torch.aten.reflection_pad3d", args="self padding"
)
def reflection_pad(a: AtenArgs) -> SSAValue:
    return _pad(a, a.ints("padding"), "reflect", 0.0)


@converts(
    "torch.aten.replication_pad1d", "torch.aten.replication_pad2d", "torch.aten.replication_pad3d", args="self padding"
)
def replication_pad(a: AtenArgs) -> SSAValue:
    return _pad(a, a.ints("padding"), "replicate", 0.0)


@converts("onnx.TensorScatter", args="past_cache update write_indices?")
def onnx_tensor_scatter(a: AtenArgs) -> SSAValue:
    """ONNX TensorScatter, the KV-cache update: `update` written into `past_cache` along `axis` from each batch's
    write index on, wrapping around the axis in mode "circular". Each cache position reads the update at its
    distance from the write index where that lies inside the update, and keeps its value elsewhere: a gather of
    the update and a select."""
    mode = a.onnx_str("mode", "linear")
    if mode not in ("linear", "circular"):
        raise NotConvertible(f"TensorScatter mode {mode!r}")
    cache, update = a.tensor("past_cache"), a.tensor("update")
    shape, update_shape = tensor_type(cache).get_shape(), tensor_type(update).get_shape()
    if DYN in (*shape, *update_shape):
        raise NotConvertible("TensorScatter with a dynamic shape")
    rank = len(shape)
    axis = a.onnx_int("axis", -2)
    if rank < 2 or not -rank < axis < rank or axis % rank == 0:
        raise NotConvertible(f"TensorScatter along axis {axis} of a rank-{rank} cache (not the batch axis)")
    axis %= rank
    length, steps = shape[axis], update_shape[axis]
    others = [d for i, d in enumerate(shape) if i != axis]
    if len(update_shape) != rank or [d for i, d in enumerate(update_shape) if i != axis] != others or steps > length:
        raise NotConvertible(f"TensorScatter of an update {list(update_shape)} into a cache {list(shape)}")
    positions = [1] * rank
    positions[axis] = length
    distance = a.constant(np.arange(length).reshape(positions), i64)
    if not a.is_none("write_indices"):
        starts = TensorType(i64, [shape[0], *[1] * (rank - 1)])
        start = a.value(ReshapeOp.build(operands=[a.tensor_as("write_indices", i64)], result_types=[starts]))
        distance = _index_binary(a, ew.SubOp, distance, start)
    if mode == "circular":
        distance = _index_binary(a, ew.RemOp, distance, a.scalar_tensor(length, i64))
    distance_shape = tensor_type(distance).get_shape()
    flags = TensorType(i1, distance_shape)
    after = a.value(ew.GeOp.build(operands=[distance, a.scalar_tensor(0, i64)], result_types=[flags]))
    before = a.value(ew.LtOp.build(operands=[distance, a.scalar_tensor(steps, i64)], result_types=[flags]))
    inside = a.value(ew.AndOp.build(operands=[after, before], result_types=[flags]))
    index = a.value(
        ew.WhereOp.build(
            operands=[inside, distance, a.scalar_tensor(0, i64)], result_types=[TensorType(i64, distance_shape)]
        )
    )
    index = a.value(ExpandOp.build(operands=[index], result_types=[TensorType(i64, shape)]))
    written = a.value(
        GatherElementsOp.build(operands=[update, index], properties={"axis": i64_attr(axis)}, result_types=[cache.type])
    )
    return a.value(ew.WhereOp.build(operands=[inside, written, cache], result_types=[cache.type]))
