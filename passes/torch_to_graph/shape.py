"""Converters that change a tensor's shape or layout, not its values: views and reshapes, permutes,
broadcasts and tiles, and the reshape-transpose idioms (pixel and channel shuffles, ONNX's SpaceToDepth,
nearest upsampling)."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import DYN, i64_array
from gnomon.dialects.graph.tensor import ExpandOp, ReshapeOp, TileOp, TransposeOp
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


@converts("torch.aten._shape_as_tensor", args="self")
def shape_as_tensor(a: AtenArgs) -> SSAValue:
    """ONNX's Shape of a tensor torch-mlir typed dynamic, whose shape its converter has made static: a constant."""
    shape = tensor_type(a.tensor("self")).get_shape()
    if DYN in shape:
        raise NotConvertible("the shape of a tensor with dynamic dims")
    return a.constant(np.array(shape, np.int64), i64)


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


@converts("onnx.SpaceToDepth", args="input")
def onnx_space_to_depth(a: AtenArgs) -> SSAValue:
    """(N, C, H, W) -> (N, C b², H / b, W / b): split the rows and columns into blocks of b and move the block
    offsets into the channels, after the channel (CRD, opset 28) or before it (DCR, the default)."""
    x = a.tensor("input")
    x_type = tensor_type(x)
    b, mode = a.onnx_int("blocksize", 0), a.onnx_str("mode", "DCR")
    shape = x_type.get_shape()
    if mode not in ("CRD", "DCR"):
        raise NotConvertible(f"SpaceToDepth mode {mode!r}")
    if len(shape) != 4 or DYN in shape or b < 1 or shape[2] % b or shape[3] % b:
        raise NotConvertible(f"SpaceToDepth of {list(shape)} by blocks of {b}")
    n, c, h, w = shape
    element = x_type.get_element_type()
    split = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, [n, c, h // b, b, w // b, b])]))
    permutation = [0, 1, 3, 5, 2, 4] if mode == "CRD" else [0, 3, 5, 1, 2, 4]
    moved_type = TensorType(element, [tensor_type(split).get_shape()[p] for p in permutation])
    moved = a.value(
        TransposeOp.build(
            operands=[split], properties={"permutation": i64_array(permutation)}, result_types=[moved_type]
        )
    )
    out = TensorType(element, [n, c * b * b, h // b, w // b])
    return a.value(ReshapeOp.build(operands=[moved], result_types=[out]))


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
