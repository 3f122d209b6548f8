"""Dynamic dims in `kernel-to-rt`: every `?` dim named and bounded, buffers sized at the bounds, and the ranges an
rt function's plan holds for (see the package's docstring)."""

from __future__ import annotations

from math import prod

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, DictionaryAttr, MemRefType, TensorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from gnomon.dialects import rt
from gnomon.dialects.graph.base import dim_names, dim_symbols, i64_array
from gnomon.dialects.graph.constant_values import element_bytes
from gnomon.errors import GnomonError
from gnomon.locations import location_name


class LoweringError(GnomonError):
    """A function cannot be lowered to the runtime (an unbounded dynamic dim, an op outside any kernel)."""


Bounds = dict[str, tuple[int, int]]
"""Each symbol of the `?` dims: its (smallest, largest) size."""


def _names(value: SSAValue) -> tuple[str, ...]:
    """The names of a value's dims: a tensor's encoding, an rt value's `dims`."""
    if isinstance(value.type, TensorType):
        return dim_names(value.type)
    return rt.dims_of(value)


def byte_size(value: SSAValue, bounds: Bounds) -> int:
    """Bytes of a dense row-major buffer of the value's type (i1 takes a byte, as in NumPy), with each `?` dim at
    its bound."""
    shaped = value.type
    assert isinstance(shaped, TensorType | MemRefType)
    size = element_bytes(shaped.element_type)
    if size is None:
        raise LoweringError(f"the runtime has no buffers of element type {shaped.element_type}")
    largest = {symbol: high for symbol, (_, high) in bounds.items()}
    names = _names(value)
    dynamic = [name for d, name in zip(shaped.get_shape(), names, strict=True) if d == DYNAMIC_INDEX]
    if any(symbol not in largest for name in dynamic for symbol in dim_symbols(name)):
        raise LoweringError(f"a buffer of type {shaped} has dims {list(names)}, not all of them ranged")
    return prod(rt.shape_at(MemRefType(shaped.element_type, shaped.get_shape()), names, largest)) * size


def _described(value: SSAValue) -> str:
    """A value as an error names it: an input by position, a result by its op and source location."""
    owner = value.owner
    if not isinstance(owner, Operation):
        return f"input {value.index}" if isinstance(value, BlockArgument) else "a block argument"
    location = location_name(owner.location)
    return f"the result of {owner.name}" + (f" ({location})" if location != "?" else "")


def check_bounded(function: func.FuncOp, bounds: Bounds) -> None:
    """Every `?` dim of a value is named, and each symbol of its name has a bound: the memory plan is made there."""
    where = f"@{function.sym_name.data}"
    values = [*function.body.block.args, *(result for op in function.walk() for result in op.results)]
    for value in values:
        if not isinstance(value.type, TensorType):
            continue
        for axis, (d, name) in enumerate(zip(value.type.get_shape(), dim_names(value.type), strict=True)):
            if d != DYNAMIC_INDEX:
                continue
            if not name:
                raise LoweringError(
                    f"{where}: dim {axis} of {_described(value)} ({value.type}) is `?` without a name; the runtime "
                    "plans memory at each dynamic dim's bound: name it and declare its range"
                )
            for symbol in dim_symbols(name):
                if symbol not in bounds:
                    raise LoweringError(
                        f"{where}: dim {axis} ({name}) of {_described(value)} ({value.type}) has no upper bound; "
                        f"declare its range (e.g. --input-shape {symbol}=1..64, or dim_ranges={{{symbol!r}: (1, 64)}})"
                    )


def ranges_read(block: Block, bounds: Bounds) -> DictionaryAttr | None:
    """The range of each symbol that a `?` dim of `block`'s values names (`rt.dim_ranges`), or None for none."""
    symbols = {
        symbol
        for value in (*block.args, *(r for op in block.ops for r in op.results))
        if isinstance(value.type, TensorType)
        for d, name in zip(value.type.get_shape(), dim_names(value.type), strict=True)
        if d == DYNAMIC_INDEX
        for symbol in dim_symbols(name)
    }
    return DictionaryAttr({symbol: i64_array(bounds[symbol]) for symbol in sorted(symbols)}) if symbols else None
