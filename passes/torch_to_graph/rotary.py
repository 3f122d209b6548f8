"""Converter for ONNX RotaryEmbedding (opset 23), composed from splits, elementwise products and concats.

Each head's first `rotary_embedding_dim` features (all of them by default) form pairs (x1, x2), rotated by the angle
of the token's position: x1 cos - x2 sin and x1 sin + x2 cos, from the caches' cos and sin of that angle. The pairs
are the two halves of the rotated features, or even and odd features when `interleaved`. The caches are
(positions, rotary_embedding_dim / 2), indexed by `position_ids` (batch, sequence), or without position ids already
(batch, sequence, rotary_embedding_dim / 2). A 4-d input is (batch, heads, sequence, head size); a 3-d one is
(batch, sequence, heads * head size), split into `num_heads` heads. The frontend hides this op from torch-mlir,
whose lowering is com.microsoft's RotaryEmbedding with its other input order (see `gnomon.frontends.onnx`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, broadcast_shapes, i64_array, i64_attr
from gnomon.dialects.graph.tensor import ConcatOp, GatherOp, ReshapeOp, SplitOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

_ATTRIBUTES = {"interleaved", "num_heads", "rotary_embedding_dim"}


@converts("onnx.RotaryEmbedding", args="X cos_cache sin_cache position_ids?")
def onnx_rotary_embedding(a: AtenArgs) -> SSAValue:
    unknown = sorted(set(a.onnx_attributes()) - _ATTRIBUTES)
    if unknown:
        raise NotConvertible(f"rotary embedding with {', '.join(unknown)}")
    x = a.tensor("X")
    shape = list(tensor_type(x).get_shape())
    if DYN in shape:
        raise NotConvertible("rotary embedding of a dynamic shape")
    if len(shape) == 3:
        batch, seq, hidden = shape
        heads = a.onnx_int("num_heads", 0)
        if heads < 1 or hidden % heads:
            raise NotConvertible(f"3-d rotary embedding of hidden size {hidden} in num_heads {heads}")
        x = _reshape(a, x, [batch, seq, heads, hidden // heads])
        heads_axis = 2
    elif len(shape) == 4:
        batch, _, seq, _ = shape
        heads_axis = 1
    else:
        raise NotConvertible(f"rotary embedding of a {len(shape)}-d input")
    head_size = tensor_type(x).get_shape()[3]
    rotary = a.onnx_int("rotary_embedding_dim", 0) or head_size
    if rotary > head_size or rotary % 2:
        raise NotConvertible(f"rotary_embedding_dim {rotary} for head size {head_size}")
    half = rotary // 2
    cos, sin = (_angles(a, name, batch, seq, half, heads_axis) for name in ("cos_cache", "sin_cache"))
    rotated, kept = _split(a, x, [rotary, head_size - rotary]) if rotary < head_size else (x, None)
    interleaved = bool(a.onnx_int("interleaved", 0))
    x1, x2 = _pairs(a, rotated, half, interleaved)
    real = _binary(a, ew.SubOp, _binary(a, ew.MulOp, cos, x1), _binary(a, ew.MulOp, sin, x2))
    imaginary = _binary(a, ew.AddOp, _binary(a, ew.MulOp, sin, x1), _binary(a, ew.MulOp, cos, x2))
    y = _unpair(a, real, imaginary, interleaved)
    if kept is not None:
        y = _concat(a, [y, kept])
    return _reshape(a, y, shape) if len(shape) == 3 else y


def _angles(a: AtenArgs, name: str, batch: int, seq: int, half: int, heads_axis: int) -> SSAValue:
    """The cache's values for each token, (batch, seq, half), with a dim of 1 at `heads_axis` to broadcast over
    the heads; a batch of 1 broadcasts over the batch, as in ONNX's reference."""
    cache = a.tensor(name)
    element = tensor_type(cache).get_element_type()
    position_ids = a.optional_tensor("position_ids")
    if position_ids is not None:
        gathered = [*tensor_type(position_ids).get_shape(), *tensor_type(cache).get_shape()[1:]]
        cache = a.value(
            GatherOp.build(
                operands=[cache, position_ids],
                properties={"axis": i64_attr(0)},
                result_types=[TensorType(element, gathered)],
            )
        )
    shape = list(tensor_type(cache).get_shape())
    if len(shape) != 3 or shape[0] not in (1, batch) or shape[1:] != [seq, half]:
        raise NotConvertible(f"{name} of shape {shape} for {batch} x {seq} tokens of rotary dim {2 * half}")
    shape.insert(heads_axis, 1)
    return _reshape(a, cache, shape)


def _pairs(a: AtenArgs, x: SSAValue, half: int, interleaved: bool) -> tuple[SSAValue, SSAValue]:
    """(x1, x2): the halves of the last dim, or its even and odd elements."""
    if not interleaved:
        x1, x2 = _split(a, x, [half, half])
        return x1, x2
    shape = list(tensor_type(x).get_shape())
    x1, x2 = _split(a, _reshape(a, x, [*shape[:-1], half, 2]), [1, 1])
    return _reshape(a, x1, [*shape[:-1], half]), _reshape(a, x2, [*shape[:-1], half])


def _unpair(a: AtenArgs, real: SSAValue, imaginary: SSAValue, interleaved: bool) -> SSAValue:
    """The inverse of `_pairs`."""
    if not interleaved:
        return _concat(a, [real, imaginary])
    shape = list(tensor_type(real).get_shape())
    pairs = _concat(a, [_reshape(a, v, [*shape, 1]) for v in (real, imaginary)])
    return _reshape(a, pairs, [*shape[:-1], 2 * shape[-1]])


def _split(a: AtenArgs, x: SSAValue, sizes: list[int]) -> tuple[SSAValue, ...]:
    """`x` cut along its last dim."""
    x_type = tensor_type(x)
    shape, element = list(x_type.get_shape()), x_type.get_element_type()
    op = a.emit(
        SplitOp.build(
            operands=[x],
            properties={"axis": i64_attr(len(shape) - 1), "sizes": i64_array(sizes)},
            result_types=[[TensorType(element, [*shape[:-1], size]) for size in sizes]],
        )
    )
    return tuple(op.results)


def _concat(a: AtenArgs, values: Sequence[SSAValue]) -> SSAValue:
    """`values` joined along their last dim."""
    shapes = [list(tensor_type(v).get_shape()) for v in values]
    out = TensorType(tensor_type(values[0]).get_element_type(), [*shapes[0][:-1], sum(s[-1] for s in shapes)])
    return a.value(
        ConcatOp.build(operands=[values], properties={"axis": i64_attr(len(shapes[0]) - 1)}, result_types=[out])
    )


def _reshape(a: AtenArgs, x: SSAValue, shape: list[int]) -> SSAValue:
    element: Attribute = tensor_type(x).get_element_type()
    return a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, shape)]))


def _binary(a: AtenArgs, op: type[ew.BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    """lhs op rhs, broadcast (the angles broadcast over the heads)."""
    shape = broadcast_shapes([tensor_type(v).get_shape() for v in (lhs, rhs)], op.name)
    return a.value(op.build(operands=[lhs, rhs], result_types=[TensorType(tensor_type(lhs).get_element_type(), shape)]))
