"""What the cost model reads off an SSA value: its static shape, element type and bytes, the peak its element type
runs at, the storage it views; and the error an op it cannot price raises."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float64Type, IntegerType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from gnomon.dialects.graph.base import DYN, GraphOperation
from gnomon.dialects.graph.constant_values import element_bytes as element_size
from gnomon.dialects.graph.elementwise import DropoutOp
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.errors import GnomonError
from gnomon.locations import location_name

__all__ = [
    "CostModelError",
    "describe",
    "element_bytes",
    "element_type",
    "elements",
    "nbytes",
    "peak_key",
    "static_shape",
    "storage",
    "vector_key",
]


class CostModelError(GnomonError):
    """An op the cost model cannot price: it has dynamic shapes, or no model exists for it."""


def describe(op: Operation) -> str:
    """The op as messages name it: its name, and its source location when it has one."""
    location = location_name(op.location)
    return op.name if location == "?" else f"{op.name} at {location}"


def static_shape(value: SSAValue) -> tuple[int, ...]:
    """The value's shape (`op_work` reports a dynamic one naming the op; this is for callers that skip it)."""
    if not isinstance(value.type, TensorType):
        raise CostModelError(f"cost model: {value.type} is not a ranked tensor")
    shape = value.type.get_shape()
    if DYN in shape:
        raise CostModelError(f"cost model: {value.type} has a dynamic shape; the cost model needs static shapes")
    return shape


def element_type(value: SSAValue) -> Attribute:
    if not isinstance(value.type, TensorType):
        raise CostModelError(f"cost model: {value.type} is not a ranked tensor")
    return value.type.get_element_type()


def element_bytes(value: SSAValue) -> int:
    dtype = element_type(value)
    size = element_size(dtype)
    if size is None:
        raise CostModelError(f"cost model: no size known for element type {dtype}")
    return size


def elements(value: SSAValue) -> int:
    return math.prod(static_shape(value))


def nbytes(value: SSAValue) -> int:
    return elements(value) * element_bytes(value)


def peak_key(dtype: Attribute) -> str:
    """The `Device.peak_flops` key matrix products of this element type run at.

    Integers wider than 8 bits have no matrix units; they run at about the fp32 rate.
    """
    match dtype:
        case Float64Type():
            return "fp64"
        case Float16Type():
            return "fp16"
        case BFloat16Type():
            return "bf16"
        case IntegerType() if dtype.width.data == 8:
            return "int8"
        case _:
            return "fp32"


def vector_key(op: GraphOperation) -> str:
    """The peak an op's vector code runs at: fp64 where any of its values is f64, else fp32."""
    values = [*op.operands, *op.results]
    return "fp64" if any(isinstance(element_type(v), Float64Type) for v in values) else "fp32"


def storage(value: SSAValue) -> SSAValue:
    """The value whose storage `value` views: through reshapes and dropouts, to what they view."""
    while isinstance(owner := value.owner, ReshapeOp | DropoutOp):
        value = owner.input
    return value
