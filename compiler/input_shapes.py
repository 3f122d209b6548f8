"""`--input-shape`: an input's shape (`x=1x3x224x224`) or a named dynamic dim's range (`seq=1..128`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gnomon.errors import InputShapeError
from gnomon.limits import check_fits

_MAX_DIM = 2**63 - 1
"""The largest dim MLIR's i64 shapes hold."""


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """`NAME=1x3x224x224` -> ("NAME", [1, 3, 224, 224])."""
    name, sep, dims = text.rpartition("=")
    try:
        shape = [int(d) for d in dims.split("x")]
    except ValueError:
        shape = None
    if not sep or not name or shape is None or any(d < 0 for d in shape):
        raise InputShapeError(f"--input-shape {text!r} is not NAME=DIMS, e.g. x=1x3x224x224")
    if any(d > _MAX_DIM for d in shape):
        raise InputShapeError(f"--input-shape {text!r}: a dim is larger than {_MAX_DIM}")
    # At least a byte per element: a typo such as 99999999999x3 fails here, not when the runtime allocates.
    elements = math.prod(shape)
    check_fits(f"--input-shape {text!r} (at least a byte for each of {elements} elements)", elements)
    return name, shape


def parse_dim_range(text: str) -> tuple[str, tuple[int, int]] | None:
    """`seq=1..128` -> ("seq", (1, 128)); None for text that is no range (an input's shape)."""
    name, sep, span = text.rpartition("=")
    low, dots, high = span.partition("..")
    if not sep or not dots:
        return None
    if not name or not low.isdigit() or not high.isdigit():
        raise InputShapeError(f"--input-shape {text!r} is not DIM=LOW..HIGH, e.g. seq=1..128")
    if not 1 <= int(low) <= int(high) <= _MAX_DIM:
        raise InputShapeError(f"--input-shape {text!r}: a range needs 1 <= LOW <= HIGH <= {_MAX_DIM}")
    return name, (int(low), int(high))


def dim_ranges_of(values: Sequence[str] | None) -> dict[str, tuple[int, int]] | None:
    """The `--input-shape DIM=LOW..HIGH` ranges of named dynamic dims."""
    ranges = dict(r for value in values or () if (r := parse_dim_range(value)) is not None)
    return ranges or None


def input_shapes_of(values: Sequence[str] | None) -> dict[str, list[int]] | None:
    """The `--input-shape NAME=DIMS` shapes of inputs, by name (the dims' ranges are `dim_ranges_of`'s)."""
    if not values:
        return None
    shapes: dict[str, list[int]] = {}
    for value in values:
        if parse_dim_range(value) is not None:
            continue
        name, shape = parse_input_shape(value)
        if name in shapes:
            raise InputShapeError(f"--input-shape given twice for input '{name}'")
        shapes[name] = shape
    return shapes
