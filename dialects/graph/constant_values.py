"""NumPy views of inline `dense` constants, for folding shape arithmetic at compile time."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, Float16Type, Float32Type, Float64Type, IntegerType, TensorType
from xdsl.ir import Attribute

_FLOATS: dict[type[Attribute], np.dtype] = {Float16Type: np.dtype(np.float16), Float32Type: np.dtype(np.float32), Float64Type: np.dtype(np.float64)}


def numpy_dtype(element_type: Attribute) -> np.dtype | None:
    """The NumPy dtype of a builtin element type, or None for types NumPy lacks (bf16)."""
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        if width == 1:
            return np.dtype(np.bool_)
        signed = element_type.signedness.data.name != "UNSIGNED"
        return np.dtype(f"{'i' if signed else 'u'}{width // 8}") if width in (8, 16, 32, 64) else None
    return _FLOATS.get(type(element_type))


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray | None:
    dtype = numpy_dtype(attr.get_element_type())
    if dtype is None:
        return None
    flat = np.frombuffer(attr.data.data, dtype=dtype if dtype != np.bool_ else np.int8).astype(dtype)
    return flat.reshape(attr.get_shape())


def numpy_to_dense(array: np.ndarray, element_type: Attribute) -> DenseIntOrFPElementsAttr:
    dtype = numpy_dtype(element_type)
    assert dtype is not None, f"no NumPy dtype for {element_type}"
    # xDSL stores an i1 `true` as the normalized signless value -1.
    data = np.where(array, -1, 0).astype(np.int8) if dtype == np.bool_ else np.ascontiguousarray(array.astype(dtype))
    return DenseIntOrFPElementsAttr(TensorType(element_type, array.shape), BytesAttr(data.tobytes()))
