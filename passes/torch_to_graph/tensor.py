"""Converters for data movement: views and reshapes, permutes, concat/split, slicing, gathers, padding, fills."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import IntegerType, TensorType, i1, i64
from xdsl.ir import SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, broadcast_shapes, f64_attr, i64_array, i64_attr, str_attr
from gnomon.dialects.graph.tensor import (
    ConcatOp,
    ExpandOp,
    GatherElementsOp,
    GatherOp,
    PadOp,
    ReshapeOp,
    SliceOp,
    SplitOp,
    TileOp,
    TransposeOp,
)
from gnomon.dialects.torch import NoneType, PrimListUnpackOp, ValueTensorType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type, torch_op_name
from gnomon.passes.torch_to_graph.registry import converts


def _reshape(a: AtenArgs, name: str = "self", sizes: str | None = None) -> SSAValue:
    x = a.tensor(name)
    out = a.result_type()
    if sizes is not None and DYN in out.get_shape():
        # Sizes computed from the input's shape (ONNX Shape → Gather → Concat) fold to constants.
        try:
            out = TensorType(out.get_element_type(), [DYN if d == -1 else d for d in a.ints(sizes)])
        except NotConvertible:
            pass
    out = _static_reshape_type(tensor_type(x), out)
    if tensor_type(x).get_shape() == out.get_shape():
        return x
    return a.value(ReshapeOp.build(operands=[x], result_types=[out]))


def _static_reshape_type(source: TensorType, result: TensorType) -> TensorType:
    """torch-mlir leaves a `-1` size of a view as `?` even when the input is static: solve for it."""
    shape = list(result.get_shape())
    if shape.count(DYN) > 1:
        raise NotConvertible(f"a reshape to {shape.count(DYN)} dims of unknown size")
    if shape.count(DYN) != 1 or DYN in source.get_shape():
        return result
    known = math.prod(d for d in shape if d != DYN)
    total = math.prod(source.get_shape())
    if known == 0 or total % known:
        return result
    shape[shape.index(DYN)] = total // known
    return TensorType(result.get_element_type(), shape)


@converts("torch.aten.view", "torch.aten._unsafe_view", args="self size")
def view(a: AtenArgs) -> SSAValue:
    return _reshape(a, sizes="size")


@converts("torch.aten.reshape", args="self shape")
def reshape(a: AtenArgs) -> SSAValue:
    return _reshape(a, sizes="shape")


@converts("torch.aten._reshape_alias", args="self size stride")
def reshape_alias(a: AtenArgs) -> SSAValue:
    return _reshape(a, sizes="size")


@converts("torch.aten.flatten.using_ints", args="self start_dim end_dim")
def flatten(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.unflatten.int", args="self dim sizes")
def unflatten(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.prims.collapse", args="a start end")
def collapse(a: AtenArgs) -> SSAValue:
    return _reshape(a, "a")


@converts("torch.prims.squeeze", args="a dimensions")
def prims_squeeze(a: AtenArgs) -> SSAValue:
    return _reshape(a, "a")


@converts("torch.prims.split_dim", args="a dim outer_length")
def split_dim(a: AtenArgs) -> SSAValue:
    return _reshape(a, "a")


@converts("torch.tensor_static_info_cast", args="operand")
def static_info_cast(a: AtenArgs) -> SSAValue:
    """A cast that only adds or drops static shape information: the value itself."""
    return a.tensor("operand")


@converts("torch.prims.view_of", args="a")
def view_of(a: AtenArgs) -> SSAValue:
    return a.tensor("a")


@converts("torch.aten.squeeze", args="self")
def squeeze_all(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.squeeze.dim", "torch.aten.squeeze.dims", "torch.aten.unsqueeze", "torch.aten.unsqueeze_copy",
          args="self dim")  # fmt: skip
def squeeze(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.view_as", "torch.aten.reshape_as", "torch.aten.expand_as", args="self other")
def view_as(a: AtenArgs) -> SSAValue:
    x = a.tensor("self")
    out = a.result_type()
    if torch_op_name(a.op) == "torch.aten.expand_as":
        return a.value(ExpandOp.build(operands=[x], result_types=[out]))
    return _reshape(a)


@converts("torch.aten.clone", "torch.aten.contiguous", args="self memory_format")
def clone(a: AtenArgs) -> SSAValue:
    return a.tensor("self")


@converts("torch.aten.detach", "torch.aten.alias", "torch.aten.lift_fresh_copy", "torch.aten.lift_fresh",
          args="self")  # fmt: skip
def identity(a: AtenArgs) -> SSAValue:
    return a.tensor("self")


def _transpose(a: AtenArgs, permutation: list[int]) -> SSAValue:
    x = a.tensor("self")
    if permutation == sorted(permutation):
        return x
    return a.value(
        TransposeOp.build(
            operands=[x], properties={"permutation": i64_array(permutation)}, result_types=[a.result_type()]
        )
    )


@converts("torch.aten.permute", args="self dims")
def permute(a: AtenArgs) -> SSAValue:
    rank = len(a.result_type().get_shape())
    return _transpose(a, [d % rank for d in a.ints("dims")])


@converts("torch.aten.transpose.int", args="self dim0 dim1")
def transpose(a: AtenArgs) -> SSAValue:
    rank = len(a.result_type().get_shape())
    permutation = list(range(rank))
    d0, d1 = a.int("dim0") % rank, a.int("dim1") % rank
    permutation[d0], permutation[d1] = permutation[d1], permutation[d0]
    return _transpose(a, permutation)


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


def _slice(a: AtenArgs, dim: int, start: int, end: int, step: int) -> SSAValue:
    x = a.tensor("self")
    shape = tensor_type(x).get_shape()
    dim %= len(shape)
    if DYN in shape:
        raise NotConvertible("slice of a tensor with dynamic dims (graph.slice needs every bound)")
    start, end, step = slice(start, end, step).indices(shape[dim])
    starts = [start if i == dim else 0 for i in range(len(shape))]
    ends = [end if i == dim else d for i, d in enumerate(shape)]
    steps = [step if i == dim else 1 for i in range(len(shape))]
    if (start, end, step) == (0, shape[dim], 1):
        return x
    out = TensorType(
        tensor_type(x).get_element_type(), [len(range(s, e, st)) for s, e, st in zip(starts, ends, steps, strict=True)]
    )
    props = {"starts": i64_array(starts), "ends": i64_array(ends), "steps": i64_array(steps)}
    return a.value(SliceOp.build(operands=[x], properties=props, result_types=[out]))


@converts("torch.aten.slice.Tensor", args="self dim start end step")
def slice_tensor(a: AtenArgs) -> SSAValue:
    start, end = a.optional_int("start"), a.optional_int("end")
    return _slice(a, a.int("dim"), start if start is not None else 0, end if end is not None else 2**62, a.int("step"))


@converts("torch.aten.select.int", args="self dim index")
def select(a: AtenArgs) -> SSAValue:
    index = a.int("index")
    dim = a.int("dim")
    piece = _slice(a, dim, index, index + 1 if index != -1 else 2**62, 1)
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
    return _slice(a, dim, start, start + a.int("length"), 1)


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
    indexed: dict[int, SSAValue] = {}
    for dim, value in enumerate(a.list("indices")):
        if isinstance(value.type, NoneType):
            continue
        a.values[f"indices#{dim}"] = value
        index = a.tensor(f"indices#{dim}")
        dtype = tensor_type(index).get_element_type()
        if not isinstance(dtype, IntegerType) or dtype.width.data == 1:
            raise NotConvertible("indexing with a boolean mask (a data-dependent shape)")
        indexed[dim] = index
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
    linear = _linear_index(a, [indexed[d] for d in dims], [shape[d] for d in dims])
    first, last = dims[0], dims[-1]
    if len(dims) > 1:
        flat = [*shape[:first], math.prod(shape[first : last + 1]), *shape[last + 1 :]]
        x = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(tensor_type(x).get_element_type(), flat)]))
    return a.value(
        GatherOp.build(operands=[x, linear], properties={"axis": i64_attr(first)}, result_types=[a.result_type()])
    )


def _linear_index(a: AtenArgs, indices: list[SSAValue], sizes: list[int]) -> SSAValue:
    """sum(wrap(index_k) * stride_k) over the indexed dims, row-major; wrap maps -1 to size - 1."""
    linear: SSAValue | None = None
    stride = 1
    for index, size in reversed(list(zip(indices, sizes, strict=True))):
        index = a.cast(index, i64)
        index = _index_binary(a, ew.RemOp, index, a.scalar_tensor(size, i64))
        if stride != 1:
            index = _index_binary(a, ew.MulOp, index, a.scalar_tensor(stride, i64))
        linear = index if linear is None else _index_binary(a, ew.AddOp, index, linear)
        stride *= size
    assert linear is not None
    return linear


def _index_binary(a: AtenArgs, op_class: type[ew.BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    shape = broadcast_shapes([tensor_type(lhs).get_shape(), tensor_type(rhs).get_shape()], "index arithmetic")
    return a.value(op_class.build(operands=[lhs, rhs], result_types=[TensorType(i64, shape)]))


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


def _torch_pads_to_graph(pads: list[int], rank: int) -> list[int]:
    """torch lists (begin, end) pairs from the last dim backwards; graph lists all begins, then all ends."""
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    return begins + ends


def _pad(a: AtenArgs, pads: list[int], mode: str, value: float) -> SSAValue:
    x = a.tensor("self")
    rank = len(tensor_type(x).get_shape())
    props = {
        "pads": i64_array(_torch_pads_to_graph(pads, rank)),
        "mode": str_attr(mode),
        "value": f64_attr(value),
    }
    return a.value(PadOp.build(operands=[x], properties=props, result_types=[a.result_type()]))


@converts("torch.aten.constant_pad_nd", args="self pad value")
def constant_pad(a: AtenArgs) -> SSAValue:
    return _pad(a, a.ints("pad"), "constant", a.float("value"))


@converts("torch.aten.pad", args="self pad mode value")
def pad(a: AtenArgs) -> SSAValue:
    mode = a.str("mode")
    if mode not in ("constant", "reflect", "replicate"):
        raise NotConvertible(f"pad mode {mode!r}")
    value = a.optional_float("value")
    return _pad(a, a.ints("pad"), mode, value or 0.0)


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


def _expand(a: AtenArgs) -> SSAValue:
    """Broadcast to `size` (-1 keeps the input's dim); sizes from shape arithmetic fold to constants."""
    x = a.tensor("self")
    out = a.result_type()
    if DYN in out.get_shape():
        try:
            sizes = a.ints("size")
        except NotConvertible:
            sizes = None
        if sizes is not None:
            shape = tensor_type(x).get_shape()
            lead = len(sizes) - len(shape)
            dims = [shape[i - lead] if d == -1 else d for i, d in enumerate(sizes)]
            out = TensorType(out.get_element_type(), dims)
    if tensor_type(x).get_shape() == out.get_shape():
        return x
    return a.value(ExpandOp.build(operands=[x], result_types=[out]))


@converts("torch.aten.expand", args="self size implicit")
def expand(a: AtenArgs) -> SSAValue:
    return _expand(a)


@converts("torch.aten.broadcast_to", args="self size")
def broadcast_to(a: AtenArgs) -> SSAValue:
    return _expand(a)


def _tile(a: AtenArgs, repeats: list[int]) -> SSAValue:
    x = a.tensor("self")
    x_type = tensor_type(x)
    rank = len(x_type.get_shape())
    if len(repeats) < rank:  # tile repeats the trailing dims
        repeats = [1] * (rank - len(repeats)) + repeats
    if len(repeats) > rank:  # both prepend unit dims to the input
        unit_dims = TensorType(x_type.get_element_type(), [1] * (len(repeats) - rank) + list(x_type.get_shape()))
        x = a.value(ReshapeOp.build(operands=[x], result_types=[unit_dims]))
    return a.value(
        TileOp.build(operands=[x], properties={"repeats": i64_array(repeats)}, result_types=[a.result_type()])
    )


@converts("torch.aten.repeat", args="self repeats")
def repeat(a: AtenArgs) -> SSAValue:
    return _tile(a, a.ints("repeats"))


@converts("torch.aten.tile", args="self dims")
def tile(a: AtenArgs) -> SSAValue:
    return _tile(a, a.ints("dims"))


def _fill(a: AtenArgs, value: float) -> SSAValue:
    out = a.result_type()
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


@converts("torch.aten.new_zeros", "torch.aten.new_empty", args="self size dtype layout device pin_memory")
def new_zeros(a: AtenArgs) -> SSAValue:
    return _fill(a, 0.0)


@converts("torch.aten.new_ones", args="self size dtype layout device pin_memory")
def new_ones(a: AtenArgs) -> SSAValue:
    return _fill(a, 1.0)


@converts("torch.aten.new_full", args="self size fill_value dtype layout device pin_memory")
def new_full(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


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


@converts("torch.aten.full_like", args="self fill_value dtype layout device pin_memory memory_format")
def full_like(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


def _arange(a: AtenArgs, start: float, end: float, step: float) -> SSAValue:
    out = a.result_type()
    count = len(range(0, max(0, int(-(-(end - start) // step)))))
    return a.constant(np.array([start + i * step for i in range(count)]), out.get_element_type())


@converts("torch.aten.arange", args="end dtype layout device pin_memory")
def arange(a: AtenArgs) -> SSAValue:
    return _arange(a, 0, a.float("end"), 1)


@converts("torch.aten.arange.start", args="start end dtype layout device pin_memory")
def arange_start(a: AtenArgs) -> SSAValue:
    return _arange(a, a.float("start"), a.float("end"), 1)


@converts("torch.aten.arange.start_step", args="start end step dtype layout device pin_memory")
def arange_start_step(a: AtenArgs) -> SSAValue:
    return _arange(a, a.float("start"), a.float("end"), a.float("step"))


@converts("torch.aten.triu_indices", args="row col offset dtype layout device pin_memory")
def triu_indices(a: AtenArgs) -> SSAValue:
    """The (2, N) coordinates of the upper triangle: a constant, as DLRM's interaction uses it."""
    rows, cols, offset = a.int("row"), a.int("col"), a.int("offset")
    pairs = [(i, j) for i in range(rows) for j in range(cols) if j - i >= offset]
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


def _triangle(a: AtenArgs, keep: Callable[[int, int], bool]) -> SSAValue:
    """Keep the elements (i, j) of the last two dims where `keep(i, j)`, zero the others."""
    x = a.tensor("self")
    x_type = tensor_type(x)
    rows, cols = x_type.get_shape()[-2:]
    if DYN in (rows, cols):
        raise NotConvertible("a triangle of a dynamic matrix")
    condition = a.constant(np.array([[keep(i, j) for j in range(cols)] for i in range(rows)]), i1)
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


@converts("torch.aten.pixel_shuffle", args="self upscale_factor")
def pixel_shuffle(a: AtenArgs) -> SSAValue:
    """(N, C r², H, W) -> (N, C, H r, W r): split the channels, interleave them into the rows and columns."""
    x = a.tensor("self")
    x_type = tensor_type(x)
    r = a.int("upscale_factor")
    shape = x_type.get_shape()
    if len(shape) != 4 or DYN in shape:
        raise NotConvertible("pixel shuffle of other than a static 4-d tensor")
    n, c, h, w = shape
    element = x_type.get_element_type()
    split = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, [n, c // (r * r), r, r, h, w])]))
    permutation = [0, 1, 4, 2, 5, 3]
    moved_type = TensorType(element, [n, c // (r * r), h, r, w, r])
    moved = a.value(
        TransposeOp.build(
            operands=[split], properties={"permutation": i64_array(permutation)}, result_types=[moved_type]
        )
    )
    return a.value(ReshapeOp.build(operands=[moved], result_types=[a.result_type()]))


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


@converts("torch.aten.glu", args="self dim")
def glu(a: AtenArgs) -> SSAValue:
    """a * sigmoid(b), where a and b are the halves of the input along `dim`."""
    x = a.tensor("self")
    shape = tensor_type(x).get_shape()
    dim = a.int("dim") % len(shape)
    if shape[dim] == DYN or shape[dim] % 2:
        raise NotConvertible("glu of a dim that is dynamic or odd")
    half = shape[dim] // 2
    first, second = _slice(a, dim, 0, half, 1), _slice(a, dim, half, shape[dim], 1)
    gate = a.value(ew.SigmoidOp.build(operands=[second], result_types=[tensor_type(second)]))
    return a.value(ew.MulOp.build(operands=[first, gate], result_types=[a.result_type()]))


@converts("torch.aten.channel_shuffle", args="self groups")
def channel_shuffle(a: AtenArgs) -> SSAValue:
    """(N, g c, *spatial) -> (N, c g, *spatial): view the channels as (g, c), transpose, flatten back."""
    x = a.tensor("self")
    x_type = tensor_type(x)
    shape = list(x_type.get_shape())
    groups = a.int("groups")
    if len(shape) < 3 or DYN in shape or shape[1] % groups:
        raise NotConvertible("channel shuffle of other than static (N, C, ...) with C divisible by groups")
    element = x_type.get_element_type()
    grouped = [shape[0], groups, shape[1] // groups, *shape[2:]]
    split = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, grouped)]))
    permutation = [0, 2, 1, *range(3, len(grouped))]
    moved_type = TensorType(element, [grouped[p] for p in permutation])
    moved = a.value(
        TransposeOp.build(
            operands=[split], properties={"permutation": i64_array(permutation)}, result_types=[moved_type]
        )
    )
    return a.value(ReshapeOp.build(operands=[moved], result_types=[x_type]))


def _upsample_nearest(a: AtenArgs, name: str) -> SSAValue:
    """Nearest upsampling by whole factors repeats each element: reshape to unit dims, expand, flatten back."""
    x = a.tensor(name)
    x_type = tensor_type(x)
    shape, out = x_type.get_shape(), a.result_type().get_shape()
    if DYN in shape or DYN in out or any(o % i for i, o in zip(shape[2:], out[2:], strict=True)):
        raise NotConvertible("nearest upsampling by other than whole factors")
    element = x_type.get_element_type()
    factors = [o // i for i, o in zip(shape[2:], out[2:], strict=True)]
    unit = [*shape[:2], *(d for size in shape[2:] for d in (size, 1))]
    repeated = [*shape[:2], *(d for size, f in zip(shape[2:], factors, strict=True) for d in (size, f))]
    column = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, unit)]))
    expanded = a.value(ExpandOp.build(operands=[column], result_types=[TensorType(element, repeated)]))
    return a.value(ReshapeOp.build(operands=[expanded], result_types=[a.result_type()]))


@converts("torch.aten.upsample_nearest1d", args="self output_size scales")
def upsample_nearest1d(a: AtenArgs) -> SSAValue:
    return _upsample_nearest(a, "self")


@converts("torch.aten.upsample_nearest2d", args="self output_size scales_h scales_w")
def upsample_nearest2d(a: AtenArgs) -> SSAValue:
    return _upsample_nearest(a, "self")


@converts(
    "torch.aten.upsample_nearest1d.vec", "torch.aten.upsample_nearest2d.vec", args="input output_size scale_factors"
)
def upsample_nearest_vec(a: AtenArgs) -> SSAValue:
    return _upsample_nearest(a, "input")
