"""What every reference impl shares: NumPy values typed as the op's results declare."""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph.constant_values import numpy_dtype

Array = np.ndarray[Any, np.dtype[Any]]


def typed(result: SSAValue, value: Any) -> Array:
    """`value` as an array of `result`'s declared element type (NumPy may promote, e.g. f32 * f64 scalar)."""
    array = np.asarray(value)
    tensor = result.type
    assert isinstance(tensor, TensorType)
    element_type: Attribute = tensor.get_element_type()
    dtype = numpy_dtype(element_type)
    if dtype is None or array.dtype == dtype:
        return array
    return array.astype(dtype)
