"""Converters for ONNX's quantization ops, which the ONNX frontend keeps from torch-mlir's lowering to torch's
quantized tensors (`gnomon.frontends.onnx.HELD_BACK`): integer and float arithmetic on graph ops, step by step
as ONNX's reference computes it (`onnx/reference/ops/op_quantize_linear.py` and its neighbours), so that the
integers come out the same.

Quantizing divides by the scale in NumPy's promoted type, rounds half to even, adds the zero point and
saturates to the result's integer type (8 or 16-bit); dequantizing subtracts the zero point in f32 and
multiplies by the scale. A scale or zero point is one value, one per index along `axis`, or one per block of
`block_size` indices along it. Integer matrix products accumulate in i32, as the reference does; integer
convolutions run in f64, where the products of 8-bit differences and their sums are exact (torch's integer
convolution has no dilation). A product is rescaled in f64, as NumPy promotes i32 times a float scale.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    IntegerType,
    Signedness,
    TensorType,
    f32,
    f64,
    i32,
)
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph.base import (
    DYN,
    bool_attr,
    broadcast_shapes,
    f64_attr,
    i64_array,
    i64_attr,
    multiply_dims,
    normalize_axis,
)
from gnomon.dialects.graph.elementwise import (
    AddOp,
    BinaryOp,
    ClipOp,
    CompareOp,
    DivOp,
    EqOp,
    MaxOp,
    MinOp,
    MulOp,
    RoundOp,
    SubOp,
    WhereOp,
)
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import ConvOp
from gnomon.dialects.graph.reduce import ReduceMaxOp, ReduceMinOp
from gnomon.dialects.graph.tensor import ExpandOp, SliceOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

PRECISIONS: dict[int, Attribute] = {1: f32, 10: Float16Type(), 11: f64, 16: BFloat16Type()}
"""QuantizeLinear's `precision` attribute (an ONNX TensorProto data type) as the element type it divides in."""


def _apply(a: AtenArgs, op_class: type[BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    """A broadcasting binary op, typed by its operands (comparisons give i1)."""
    shape = broadcast_shapes([tensor_type(lhs).get_shape(), tensor_type(rhs).get_shape()], op_class.name)
    element = IntegerType(1) if issubclass(op_class, CompareOp) else tensor_type(lhs).get_element_type()
    return a.value(op_class.build(operands=[lhs, rhs], result_types=[TensorType(element, shape)]))


def _integer_range(element: Attribute) -> tuple[int, int]:
    """The values of an 8 or 16-bit integer type (signless is signed, as in the graph dialect)."""
    if not isinstance(element, IntegerType) or element.width.data not in (8, 16):
        raise NotConvertible(f"quantization to {element}: gnomon quantizes to 8 and 16-bit integers")
    width = element.width.data
    if element.signedness.data == Signedness.UNSIGNED:
        return 0, 2**width - 1
    return -(2 ** (width - 1)), 2 ** (width - 1) - 1


def _along(a: AtenArgs, value: SSAValue, shape: Sequence[int], axis: int, block_size: int) -> SSAValue:
    """A scale or zero point shaped to broadcast against a tensor of `shape`, as the reference's `reshape_input`:
    one element for the whole tensor, a vector along `axis`, or with `block_size` each element repeated over a
    block of that many indices along `axis` (the last block may be shorter)."""
    value_shape = tensor_type(value).get_shape()
    if multiply_dims(value_shape) == 1:
        return a.reshape(value, [])
    axis = normalize_axis(axis, len(shape), "quantization axis")
    if block_size <= 0:
        if len(value_shape) != 1:
            raise NotConvertible(f"a per-axis scale or zero point of shape {list(value_shape)} (expected a vector)")
        return a.reshape(value, [value_shape[0] if i == axis else 1 for i in range(len(shape))])
    if DYN in shape:
        raise NotConvertible("blocked quantization of a tensor with dynamic dims")
    if len(value_shape) != len(shape) or DYN in value_shape:
        raise NotConvertible(
            f"a blocked scale or zero point of shape {list(value_shape)} for a tensor of {list(shape)}"
        )
    element, blocks = tensor_type(value).get_element_type(), value_shape[axis]
    unit = a.reshape(value, [*value_shape[: axis + 1], 1, *value_shape[axis + 1 :]])
    repeated = TensorType(element, [*value_shape[: axis + 1], block_size, *value_shape[axis + 1 :]])
    spread = a.reshape(
        a.value(ExpandOp.build(operands=[unit], result_types=[repeated])),
        [*value_shape[:axis], blocks * block_size, *value_shape[axis + 1 :]],
    )
    if blocks * block_size != shape[axis]:
        ends = [shape[axis] if i == axis else d for i, d in enumerate(value_shape)]
        props = {"starts": i64_array([0] * len(shape)), "ends": i64_array(ends), "steps": i64_array([1] * len(shape))}
        spread = a.value(SliceOp.build(operands=[spread], properties=props, result_types=[TensorType(element, ends)]))
    if tuple(tensor_type(spread).get_shape()) != tuple(shape):
        raise NotConvertible(
            f"a blocked scale or zero point of shape {list(value_shape)} does not block a tensor of {list(shape)}"
            f" by {block_size} along axis {axis}"
        )
    return spread


def _quantized(a: AtenArgs, y: SSAValue, zero_point: SSAValue | None, element: Attribute) -> SSAValue:
    """saturate(round(y) + zero_point) as `element`: rounded half to even in y's own type, the zero point added
    in f32 or wider (exact for a 16-bit zero point; a sum too large to be exact saturates anyway)."""
    low, high = _integer_range(element)
    rounded = a.value(RoundOp.build(operands=[y], result_types=[tensor_type(y)]))
    y_element = tensor_type(y).get_element_type()
    wide = f32 if isinstance(y_element, Float16Type | BFloat16Type) else y_element
    rounded = a.cast(rounded, wide)
    if zero_point is not None:
        rounded = _apply(a, AddOp, rounded, a.cast(zero_point, wide))
    props = {"min": f64_attr(float(low)), "max": f64_attr(float(high))}
    clipped = a.value(ClipOp.build(operands=[rounded], properties=props, result_types=[tensor_type(rounded)]))
    return a.cast(clipped, element)


def _division_type(a: AtenArgs, x: Attribute, scale: Attribute) -> Attribute:
    """The type x / scale is computed in: `precision`'s, else NumPy's promotion of the two for true division (with
    an i32 operand it is f64; f16 and bf16 meet in f32)."""
    precision = a.onnx_int("precision", 0)
    if precision:
        if precision not in PRECISIONS:
            raise NotConvertible(f"QuantizeLinear with precision {precision}")
        return PRECISIONS[precision]
    if not isinstance(x, AnyFloat) or not isinstance(scale, AnyFloat):
        return f64
    if x == scale:
        return x
    if x.bitwidth == scale.bitwidth:
        return f32
    return x if x.bitwidth > scale.bitwidth else scale


@converts("onnx.QuantizeLinear", args="x y_scale y_zero_point?")
def onnx_quantize_linear(a: AtenArgs) -> SSAValue:
    """saturate(round(x / y_scale) + y_zero_point); the result's type (the zero point's, `output_dtype`'s, or
    uint8) bounds it."""
    x, scale = a.tensor("x"), a.tensor("y_scale")
    shape = tensor_type(x).get_shape()
    axis, block_size = a.onnx_int("axis", 1), a.onnx_int("block_size", 0)
    compute = _division_type(a, tensor_type(x).get_element_type(), tensor_type(scale).get_element_type())
    quotient = _apply(a, DivOp, a.cast(x, compute), _along(a, a.cast(scale, compute), shape, axis, block_size))
    zero_point = a.optional_tensor("y_zero_point")
    if zero_point is not None:
        zero_point = _along(a, zero_point, shape, axis, block_size)
    return _quantized(a, quotient, zero_point, a.result_dtype())


@converts("onnx.DequantizeLinear", args="x x_scale x_zero_point?")
def onnx_dequantize_linear(a: AtenArgs) -> SSAValue:
    """(f32(x) - x_zero_point) * x_scale, as the scale's type or `output_dtype`. NumPy's promotions decide the
    types between: f32 less an i32 zero point is f64, and so is anything times an f64 scale."""
    x = a.tensor("x")
    element = tensor_type(x).get_element_type()
    if not isinstance(element, IntegerType) or element.width.data not in (8, 16, 32):
        raise NotConvertible(f"DequantizeLinear of {element} values: gnomon dequantizes 8, 16 and 32-bit integers")
    shape = tensor_type(x).get_shape()
    axis, block_size = a.onnx_int("axis", 1), a.onnx_int("block_size", 0)
    centered = a.cast(x, f32)
    zero_point = a.optional_tensor("x_zero_point")
    if zero_point is not None:
        difference = f64 if tensor_type(zero_point).get_element_type() == i32 else f32
        zero_point = _along(a, a.cast(zero_point, difference), shape, axis, block_size)
        centered = _apply(a, SubOp, a.cast(centered, difference), zero_point)
    scale = _along(a, a.tensor("x_scale"), shape, axis, block_size)
    product = f64 if f64 in (tensor_type(centered).get_element_type(), tensor_type(scale).get_element_type()) else f32
    y = _apply(a, MulOp, a.cast(centered, product), a.cast(scale, product))
    return a.cast(y, a.result_dtype())


@converts("onnx.DynamicQuantizeLinear", args="x")
def onnx_dynamic_quantize_linear(a: AtenArgs) -> list[SSAValue]:
    """uint8 quantization over x's range widened to include 0: y_scale = (max - min) / 255 (1 / 255 when the range
    is empty), y_zero_point = round(clip(-min / y_scale, 0, 255)); all in f32, as the reference computes it."""
    x = a.tensor("x")
    element = tensor_type(x).get_element_type()
    if element != f32:
        raise NotConvertible(f"DynamicQuantizeLinear of {element} values")
    scalar = TensorType(element, [])
    every_axis = {"axes": i64_array([]), "keepdims": bool_attr(False)}
    zero = a.scalar_tensor(0.0, element)
    high = _apply(
        a, MaxOp, a.value(ReduceMaxOp.build(operands=[x], properties=every_axis, result_types=[scalar])), zero
    )
    low = _apply(a, MinOp, a.value(ReduceMinOp.build(operands=[x], properties=every_axis, result_types=[scalar])), zero)
    empty = _apply(a, EqOp, high, low)
    span = a.value(
        WhereOp.build(
            operands=[empty, a.scalar_tensor(1.0, element), _apply(a, SubOp, high, low)], result_types=[scalar]
        )
    )
    scale = _apply(a, DivOp, span, a.scalar_tensor(255.0, element))
    shifted = _apply(a, SubOp, zero, _apply(a, DivOp, low, scale))
    props = {"min": f64_attr(0.0), "max": f64_attr(255.0)}
    clipped = a.value(ClipOp.build(operands=[shifted], properties=props, result_types=[scalar]))
    zero_point = a.value(RoundOp.build(operands=[clipped], result_types=[scalar]))
    y = _quantized(a, _apply(a, DivOp, x, scale), zero_point, a.result_dtype(0))
    return [y, a.cast(scale, a.result_dtype(1)), a.cast(zero_point, a.result_dtype(2))]


def _byte_operand(a: AtenArgs, name: str) -> SSAValue:
    """An operand of an integer product: 8-bit integers (the ops' float8 variants are not supported)."""
    x = a.tensor(name)
    element = tensor_type(x).get_element_type()
    if not isinstance(element, IntegerType) or element.width.data != 8:
        raise NotConvertible(f"operand '{name}' of {element} values: gnomon multiplies 8-bit integers")
    return x


def _centered_i32(a: AtenArgs, name: str, zero_point_name: str, lhs: bool) -> SSAValue:
    """i32(x) - i32(zero point), the zero point broadcast as NumPy does: b's per-column one is a vector, the left
    operand's per-row one must keep its last axis of 1."""
    x = a.cast(_byte_operand(a, name), i32)
    zero_point = a.optional_tensor(zero_point_name)
    if zero_point is None:
        return x
    zero_point_shape = tensor_type(zero_point).get_shape()
    if lhs and len(zero_point_shape) == 1 and zero_point_shape[0] != 1:
        raise NotConvertible(
            f"a vector {zero_point_name} of {zero_point_shape[0]} elements: per row by ONNX's spec, along the last"
            " axis by its reference"
        )
    return _apply(a, SubOp, x, a.cast(zero_point, i32))


def _integer_matmul(a: AtenArgs) -> SSAValue:
    lhs, rhs = _centered_i32(a, "a", "a_zero_point", lhs=True), _centered_i32(a, "b", "b_zero_point", lhs=False)
    out = TensorType(i32, a.result_type().get_shape())
    return a.value(MatmulOp.build(operands=[lhs, rhs], result_types=[out]))


@converts("onnx.MatMulInteger", args="a b a_zero_point? b_zero_point?")
def onnx_matmul_integer(a: AtenArgs) -> SSAValue:
    """(a - a_zero_point) @ (b - b_zero_point), accumulated in i32."""
    return _integer_matmul(a)


@converts("onnx.QLinearMatMul", args="a a_scale a_zero_point b b_scale b_zero_point y_scale y_zero_point")
def onnx_qlinear_matmul(a: AtenArgs) -> SSAValue:
    """The i32 product of the centered operands times a_scale * b_scale / y_scale (computed in the scales' type),
    quantized with y_zero_point."""
    factor = _apply(a, DivOp, _apply(a, MulOp, a.tensor("a_scale"), a.tensor("b_scale")), a.tensor("y_scale"))
    product = _apply(a, MulOp, a.cast(_integer_matmul(a), f64), a.cast(factor, f64))
    return _quantized(a, product, a.tensor("y_zero_point"), a.result_dtype())


def _per_output_channel(a: AtenArgs, value: SSAValue, rank: int, axis: int) -> SSAValue:
    """A scalar as it is, a vector along `axis` of a rank-`rank` tensor."""
    shape = tensor_type(value).get_shape()
    if len(shape) != 1:
        return value
    return a.reshape(value, [shape[0] if i == axis else 1 for i in range(rank)])


def _centered_f64(a: AtenArgs, name: str, zero_point_name: str, weight: bool) -> SSAValue:
    """f64(x) - f64(zero point); a weight's vector of zero points is one per output channel."""
    x = a.cast(_byte_operand(a, name), f64)
    zero_point = a.optional_tensor(zero_point_name)
    if zero_point is None:
        return x
    if weight:
        zero_point = _per_output_channel(a, zero_point, len(tensor_type(x).get_shape()), 0)
    return _apply(a, SubOp, x, a.cast(zero_point, f64))


def _pads(
    a: AtenArgs, x: SSAValue, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> list[int]:
    """ONNX's pads, begins then ends, with `auto_pad` resolved as the reference's convolution does."""
    spatial = len(kernel)
    auto_pad = a.onnx_str("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        return a.onnx_ints("pads", [0] * 2 * spatial)
    if auto_pad == "VALID":
        return [0] * 2 * spatial
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise NotConvertible(f"auto_pad {auto_pad!r}")
    sizes = tensor_type(x).get_shape()[2:]
    if DYN in sizes:
        raise NotConvertible(f"auto_pad {auto_pad} with dynamic spatial dims")
    needed = [
        max(0, (-(-d // s) - 1) * s + (k - 1) * dilation + 1 - d)
        for d, k, s, dilation in zip(sizes, kernel, strides, dilations, strict=True)
    ]
    heads = [(p + 1) // 2 if auto_pad == "SAME_LOWER" else p // 2 for p in needed]
    return heads + [p - h for p, h in zip(needed, heads, strict=True)]


def _conv_f64(a: AtenArgs, x: SSAValue, w: SSAValue, bias: SSAValue | None) -> SSAValue:
    """ONNX Conv of f64 operands, by the op's attributes."""
    kernel = tensor_type(w).get_shape()[2:]
    spatial = len(kernel)
    if list(a.onnx_ints("kernel_shape", kernel)) != list(kernel):
        raise NotConvertible(f"kernel_shape {a.onnx_ints('kernel_shape', kernel)} differs from the weight's {kernel}")
    strides, dilations = a.onnx_ints("strides", [1] * spatial), a.onnx_ints("dilations", [1] * spatial)
    props = {
        "strides": i64_array(strides),
        "pads": i64_array(_pads(a, x, kernel, strides, dilations)),
        "dilations": i64_array(dilations),
        "groups": i64_attr(a.onnx_int("group", 1)),
    }
    out = TensorType(f64, a.result_type().get_shape())
    operands = [x, w, [bias] if bias is not None else []]
    return a.value(ConvOp.build(operands=operands, properties=props, result_types=[out]))


@converts("onnx.ConvInteger", args="x w x_zero_point? w_zero_point?")
def onnx_conv_integer(a: AtenArgs) -> SSAValue:
    """Conv(x - x_zero_point, w - w_zero_point) as i32."""
    x, w = _centered_f64(a, "x", "x_zero_point", weight=False), _centered_f64(a, "w", "w_zero_point", weight=True)
    conv = _conv_f64(a, x, w, None)
    return a.cast(conv, a.result_dtype())


@converts("onnx.QLinearConv", args="x x_scale x_zero_point w w_scale w_zero_point y_scale y_zero_point B?")
def onnx_qlinear_conv(a: AtenArgs) -> SSAValue:
    """Conv(x - x_zero_point, w - w_zero_point) + B times x_scale * w_scale / y_scale (w_scale one per output
    channel or one for all, the factor computed in the scales' type), quantized with y_zero_point."""
    x, w = _centered_f64(a, "x", "x_zero_point", weight=False), _centered_f64(a, "w", "w_zero_point", weight=True)
    bias = a.optional_tensor("B")
    conv = _conv_f64(a, x, w, None if bias is None else a.cast(bias, f64))
    rank = len(tensor_type(conv).get_shape())
    w_scale = _per_output_channel(a, a.tensor("w_scale"), rank, 1)
    factor = _apply(a, DivOp, _apply(a, MulOp, a.tensor("x_scale"), w_scale), a.tensor("y_scale"))
    product = _apply(a, MulOp, conv, a.cast(factor, f64))
    return _quantized(a, product, a.tensor("y_zero_point"), a.result_dtype())
