"""Converters for data movement: views and reshapes, permutes, concat/split, slicing, gathers, padding, fills."""

from __future__ import annotations

from gnomon.dialects.graph.base import DYN, f64_attr, i64_array, i64_attr, str_attr
from gnomon.dialects.graph.tensor import (
    ConcatOp,
    ConstantOp,
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
from gnomon.dialects.torch import PrimListUnpackOp, ValueTensorType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, TensorType
from xdsl.ir import SSAValue


def _reshape(a: AtenArgs, name: str = "self") -> SSAValue:
    x = a.tensor(name)
    out = a.result_type()
    if tensor_type(x).get_shape() == out.get_shape():
        return x
    return a.value(ReshapeOp.build(operands=[x], result_types=[out]))


@converts("torch.aten.view", "torch.aten.reshape", "torch.aten._unsafe_view", "torch.aten._reshape_alias",
          args="self size")  # fmt: skip
def view(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.flatten.using_ints", args="self start_dim end_dim")
def flatten(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.unflatten.int", args="self dim sizes")
def unflatten(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.squeeze", "torch.aten.unsqueeze_copy", args="self")
def squeeze_all(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.squeeze.dim", "torch.aten.squeeze.dims", "torch.aten.unsqueeze", args="self dim")
def squeeze(a: AtenArgs) -> SSAValue:
    return _reshape(a)


@converts("torch.aten.view_as", "torch.aten.reshape_as", "torch.aten.expand_as", args="self other")
def view_as(a: AtenArgs) -> SSAValue:
    x = a.tensor("self")
    out = a.result_type()
    if "expand" in a.op.attributes["op_name__"].data:  # type: ignore[union-attr]
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
        TransposeOp.build(operands=[x], properties={"permutation": i64_array(permutation)}, result_types=[a.result_type()])
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
    return a.value(ConcatOp.build(operands=[inputs], properties={"axis": i64_attr(a.int("dim"))}, result_types=[a.result_type()]))


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
    split = a.emit(
        SplitOp.build(
            operands=[x],
            properties={"axis": i64_attr(axis), "sizes": i64_array([p.get_shape()[axis] for p in pieces])},
            result_types=[pieces],
        )
    )
    unpack = next(use.operation for use in a.op.results[0].uses)
    assert isinstance(unpack, PrimListUnpackOp)
    a.rewriter.replace(unpack, [], list(split.results))
    return [x]  # the list value itself has no users left


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
    raise NotConvertible("unbind (select each slice) is not lowered yet")


def _slice(a: AtenArgs, dim: int, start: int, end: int, step: int) -> SSAValue:
    x = a.tensor("self")
    shape = tensor_type(x).get_shape()
    dim %= len(shape)
    if shape[dim] == DYN:
        raise NotConvertible("slice of a dynamic dim")
    start, end, step = slice(start, end, step).indices(shape[dim])
    starts = [start if i == dim else 0 for i in range(len(shape))]
    ends = [end if i == dim else d for i, d in enumerate(shape)]
    steps = [step if i == dim else 1 for i in range(len(shape))]
    if (start, end, step) == (0, shape[dim], 1):
        return x
    out = TensorType(tensor_type(x).get_element_type(), [len(range(s, e, st)) for s, e, st in zip(starts, ends, steps, strict=True)])
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
    start = a.int("start")
    return _slice(a, a.int("dim"), start, start + a.int("length"), 1)


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
    """`x[idx]` with one index tensor on the first dim is a gather; other forms are advanced indexing."""
    indices = a.list("indices")
    if len(indices) != 1:
        raise NotConvertible("advanced indexing with several index tensors")
    a.values["index#0"] = indices[0]
    return a.value(
        GatherOp.build(
            operands=[a.tensor("self"), a.tensor("index#0")], properties={"axis": i64_attr(0)}, result_types=[a.result_type()]
        )
    )


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


@converts("torch.aten.reflection_pad1d", "torch.aten.reflection_pad2d", "torch.aten.reflection_pad3d", args="self padding")
def reflection_pad(a: AtenArgs) -> SSAValue:
    return _pad(a, a.ints("padding"), "reflect", 0.0)


@converts(
    "torch.aten.replication_pad1d", "torch.aten.replication_pad2d", "torch.aten.replication_pad3d", args="self padding"
)
def replication_pad(a: AtenArgs) -> SSAValue:
    return _pad(a, a.ints("padding"), "replicate", 0.0)


@converts("torch.aten.expand", args="self size implicit")
def expand(a: AtenArgs) -> SSAValue:
    x = a.tensor("self")
    if tensor_type(x).get_shape() == a.result_type().get_shape():
        return x
    return a.value(ExpandOp.build(operands=[x], result_types=[a.result_type()]))


@converts("torch.aten.broadcast_to", args="self size")
def broadcast_to(a: AtenArgs) -> SSAValue:
    return a.value(ExpandOp.build(operands=[a.tensor("self")], result_types=[a.result_type()]))


def _tile(a: AtenArgs, repeats: list[int]) -> SSAValue:
    x = a.tensor("self")
    x_type = tensor_type(x)
    rank = len(x_type.get_shape())
    if len(repeats) < rank:  # tile repeats the trailing dims
        repeats = [1] * (rank - len(repeats)) + repeats
    if len(repeats) > rank:  # both prepend unit dims to the input
        unit_dims = TensorType(x_type.get_element_type(), [1] * (len(repeats) - rank) + list(x_type.get_shape()))
        x = a.value(ReshapeOp.build(operands=[x], result_types=[unit_dims]))
    return a.value(TileOp.build(operands=[x], properties={"repeats": i64_array(repeats)}, result_types=[a.result_type()]))


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
    fill = int(value) if isinstance(out.get_element_type(), IntegerType) else value
    attr = DenseIntOrFPElementsAttr.from_list(out, [fill])
    return a.value(ConstantOp.build(properties={"value": attr}, result_types=[out]))


@converts("torch.aten.full", args="size fill_value dtype layout device pin_memory")
def full(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


@converts("torch.aten.zeros", args="size dtype layout device pin_memory")
def zeros(a: AtenArgs) -> SSAValue:
    return _fill(a, 0.0)


@converts("torch.aten.ones", args="size dtype layout device pin_memory")
def ones(a: AtenArgs) -> SSAValue:
    return _fill(a, 1.0)


@converts("torch.aten.zeros_like", "torch.aten.ones_like", args="self dtype layout device pin_memory memory_format")
def fill_like(a: AtenArgs) -> SSAValue:
    return _fill(a, 1.0 if "ones" in a.op.attributes["op_name__"].data else 0.0)  # type: ignore[union-attr]


@converts("torch.aten.full_like", args="self fill_value dtype layout device pin_memory memory_format")
def full_like(a: AtenArgs) -> SSAValue:
    return _fill(a, a.float("fill_value"))


def _arange(a: AtenArgs, start: float, end: float, step: float) -> SSAValue:
    out = a.result_type()
    count = len(range(0, max(0, int(-(-(end - start) // step)))))
    values = [start + i * step for i in range(count)]
    if isinstance(out.get_element_type(), IntegerType):
        values = [int(v) for v in values]
    attr = DenseIntOrFPElementsAttr.from_list(TensorType(out.get_element_type(), [count]), values)
    return a.value(ConstantOp.build(properties={"value": attr}, result_types=[attr.get_type()]))


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
    out = a.result_type()
    attr = DenseIntOrFPElementsAttr.from_list(out, [i for i, _ in pairs] + [j for _, j in pairs])
    return a.value(ConstantOp.build(properties={"value": attr}, result_types=[out]))
