"""The values of tensor constants: NumPy views of `dense` and `dense_resource` attributes.

Weights live as `dense_resource` blobs in the builtin dialect's `OpAsmDialectInterface`
storage, which xDSL keeps process-wide and prints as the file's resource section. Keys are
derived from a blob's content, so two models in one process never clobber each other.
An MLIR blob is `0x`, a 4-byte little-endian alignment, then the raw little-endian data.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Builtin,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    LocationAttr,
    ModuleOp,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, Dialect

if TYPE_CHECKING:
    from gnomon.dialects.graph.tensor import ConstantOp

INLINE_ELEMENT_LIMIT = 16
"""Constants with more elements than this are stored as `dense_resource` blobs (weights); smaller stay inline."""

_FLOATS: dict[type[Attribute], np.dtype] = {
    Float16Type: np.dtype(np.float16),
    Float32Type: np.dtype(np.float32),
    Float64Type: np.dtype(np.float64),
}


def numpy_dtype(element_type: Attribute) -> np.dtype | None:
    """The NumPy dtype of a builtin element type (bf16 through ml_dtypes), or None."""
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        if width == 1:
            return np.dtype(np.bool_)
        signed = element_type.signedness.data != Signedness.UNSIGNED
        return np.dtype(f"<{'i' if signed else 'u'}{width // 8}") if width in (8, 16, 32, 64) else None
    if isinstance(element_type, BFloat16Type):
        import ml_dtypes  # a dependency of onnx; only bf16 constants need it

        return np.dtype(ml_dtypes.bfloat16)
    return _FLOATS.get(type(element_type))


def element_bytes(element_type: Attribute) -> int | None:
    """Bytes an element of a builtin element type takes in a dense buffer, as NumPy stores it (an i1 takes a whole
    byte), or None for a type NumPy has no dtype for."""
    dtype = numpy_dtype(element_type)
    return dtype.itemsize if dtype is not None else None


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray | None:
    """The constant's value; a compact splat (see `compact_splat`) comes back as a read-only broadcast view."""
    dtype = numpy_dtype(attr.get_element_type())
    if dtype is None:
        return None
    flat = np.frombuffer(attr.data.data, dtype=dtype if dtype != np.bool_ else np.int8).astype(dtype)
    if flat.size == 1:
        return np.broadcast_to(flat.reshape(()), attr.get_shape())
    return flat.reshape(attr.get_shape())


def element_count(attr: DenseIntOrFPElementsAttr) -> int:
    """How many elements the constant's type has (a compact splat stores only one)."""
    return math.prod(attr.get_shape())


def compact_splat(value: float | int, tensor: TensorType[Attribute]) -> DenseIntOrFPElementsAttr:
    """A splat that stores its one element only.

    xDSL's own splats store every element (a 4096x25088 fill takes 411 MB); its printer and
    verifier accept a one-element payload for any shape, which prints as the same `dense<v>`.
    """
    element = numpy_to_dense(np.asarray(value), tensor.get_element_type())
    return DenseIntOrFPElementsAttr(TensorType(element.get_element_type(), tensor.get_shape()), element.data)


def numpy_to_dense(array: np.ndarray, element_type: Attribute) -> DenseIntOrFPElementsAttr:
    dtype = numpy_dtype(element_type)
    assert dtype is not None, f"no NumPy dtype for {element_type}"
    assert isinstance(element_type, IntegerType | AnyFloat)  # the only types numpy_dtype knows
    # xDSL stores an i1 `true` as the normalized signless value -1.
    data = np.where(array, -1, 0).astype(np.int8) if dtype == np.bool_ else np.ascontiguousarray(array.astype(dtype))
    return DenseIntOrFPElementsAttr(TensorType(element_type, array.shape), BytesAttr(data.tobytes()))


def splat_bytes(attr: DenseIntOrFPElementsAttr) -> bytes | None:
    """The bytes of the one element a splat repeats, or None (also for a single element).

    Checked without unpacking or copying: n non-overlapping occurrences of an element-sized
    chunk in n elements' bytes must tile them. xDSL's own check unpacks every element.
    """
    data = attr.data.data
    size = attr.get_element_type().compile_time_size
    if len(data) <= size or data.count(data[:size]) != len(data) // size:
        return None
    return data[:size]


# ---- dense_resource blobs ----


def resource_storage() -> OpAsmDialectInterface:
    interface = Builtin.get_interface(OpAsmDialectInterface)
    assert interface is not None, "xDSL's builtin dialect has an OpAsmDialectInterface"
    return interface


def register_blob(name_hint: str, blob: str) -> str:
    """Store a hex blob under a key made of `name_hint` and the blob's digest; returns the key."""
    if not blob:
        raise ValueError(f"dense_resource<{name_hint}> has no blob in the module's resource section")
    storage = resource_storage()
    digest = hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()
    stem = re.sub(r"[^A-Za-z0-9_.]", "_", name_hint)
    # A key this function made keeps its name when its file is read again.
    key = stem if stem.endswith(f"_{digest}") else f"{stem}_{digest}"
    if storage.lookup(key) is None:
        storage.declare_resource(key)
        storage.parse_resource(key, blob)
    return key


def dense_to_resource(attr: DenseIntOrFPElementsAttr, name_hint: str) -> DenseResourceAttr:
    """Move an inline constant's bytes into a blob, as MLIR keeps weights out of the op text."""
    alignment = max(1, attr.get_element_type().compile_time_size)
    blob = "0x" + struct.pack("<I", alignment).hex() + attr.data.data.hex()
    return DenseResourceAttr.from_params(register_blob(name_hint, blob), attr.type)


def resource_to_numpy(attr: DenseResourceAttr) -> np.ndarray:
    """The array a dense_resource attribute holds, with its tensor type's shape and dtype."""
    blob = resource_storage().lookup(attr.resource_handle.data)
    if not blob:
        raise KeyError(f"no blob registered for dense_resource<{attr.resource_handle.data}>")
    tensor_type = attr.type
    if not isinstance(tensor_type, TensorType):
        raise TypeError(f"dense_resource<{attr.resource_handle.data}> has non-tensor type {tensor_type}")
    dtype = numpy_dtype(tensor_type.get_element_type())
    if dtype is None:
        raise NotImplementedError(f"no NumPy dtype for {tensor_type.get_element_type()}")
    data = bytes.fromhex(blob[2:])[4:]
    return np.frombuffer(data, dtype=dtype).reshape(tensor_type.get_shape())


def constant_to_numpy(attr: DenseIntOrFPElementsAttr | DenseResourceAttr) -> np.ndarray:
    """A writable array of a constant's value, inline or in a blob (a compact splat is materialized)."""
    if isinstance(attr, DenseResourceAttr):
        return np.array(resource_to_numpy(attr))
    array = dense_to_numpy(attr)
    if array is None:
        raise NotImplementedError(f"no NumPy dtype for {attr.get_type()}")
    return np.array(array)


def parse_with_resources(
    text: str, dialects: Mapping[str, Callable[[], Dialect]], source: str = "<unknown>"
) -> ModuleOp:
    """Parse `text` with a private blob storage, then re-key its dense_resources by content into the global one.

    xDSL's builtin storage is per process and renames a key it already holds when a file declares
    it again, which breaks re-reading a file (or a model) in the process that wrote it. Parsing
    against a private storage and registering each blob under a key made from its content keeps
    every reference pointing at the right bytes.
    """
    from xdsl.context import Context
    from xdsl.parser import Parser

    private = OpAsmDialectInterface()
    builtin = Dialect(Builtin.name, list(Builtin.operations), list(Builtin.attributes), [private])
    ctx = Context(allow_unregistered=True)
    ctx.load_dialect(builtin)
    for name, dialect in dialects.items():
        ctx.register_dialect(name, dialect)
    module = Parser(ctx, text, source).parse_module()
    renamed: dict[str, str] = {}
    for op in module.walk():
        for attrs in (op.properties, op.attributes):
            for name, attr in attrs.items():
                if not isinstance(attr, DenseResourceAttr):
                    continue
                key = attr.resource_handle.data
                if key not in renamed:
                    renamed[key] = register_blob(key, private.lookup(key) or "")
                attrs[name] = DenseResourceAttr.from_params(renamed[key], attr.type)
    return module


def folded_constant(array: np.ndarray, tensor: TensorType[Attribute], location: LocationAttr) -> ConstantOp:
    """A `graph.constant` of type `tensor` holding `array`, stored as the importers store constants.

    A splat keeps its one element; other values are inline when tiny, else `dense_resource` blobs.
    """
    from gnomon.dialects.graph.tensor import ConstantOp  # the op's module reads constants with this one
    from gnomon.locations import location_name

    value: DenseIntOrFPElementsAttr | DenseResourceAttr
    value = numpy_to_dense(array.reshape(tensor.get_shape()), tensor.get_element_type())
    if splat_bytes(value) is not None:  # compared bitwise: 0.0 and -0.0 are two values
        value = compact_splat(array.reshape(-1)[0].item(), tensor)
    elif array.size > INLINE_ELEMENT_LIMIT:
        value = dense_to_resource(value, location_name(location))
    constant = ConstantOp.build(properties={"value": value}, result_types=[tensor])
    constant.location = location
    return constant
