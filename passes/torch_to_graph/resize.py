"""Converter for resizing (ONNX Resize, as torch-mlir lowers it to `aten.__interpolate`) with ONNX's semantics.

Shapes are static, so each resized axis is a fixed map from input to output positions, computed here in NumPy:
nearest picks one input position (a `graph.gather`), linear and cubic weigh two or four neighbours, clamped to
the edge (a matmul by an out x in interpolation matrix). torch-mlir encodes ONNX's attributes in the mode string:
`nearest[_<coordinate mode>][,<nearest mode>]`, `(bi|tri)linear[_<coordinate mode>]`, `cubic[_<coordinate
mode>]`, with align_corners as its own flag; without a suffix the coordinate mode is asymmetric for nearest and
half_pixel otherwise, and the nearest mode is floor. It refuses antialiasing, exclude_outside, another cubic
coefficient than -0.75, tf_crop_and_resize and axes, so none reach here.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import DYN, i64_attr
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.tensor import GatherOp, ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_scalar, tensor_type
from gnomon.passes.torch_to_graph.registry import converts
from gnomon.reference.interpolation import cubic_weights

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_positions(mode: str, size_in: int, size_out: int, scale: float) -> np.ndarray:
    """The input coordinate of each output position, by ONNX's coordinate_transformation_mode. As ONNX's reference
    does, the output's width in the formulas is the unrounded `scale * size_in`."""
    o = np.arange(size_out, dtype=np.float64)
    width = scale * size_in
    if mode == "align_corners":
        return o * (size_in - 1) / (width - 1) if width != 1 else np.zeros(size_out)
    if mode == "asymmetric":
        return o / scale
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if width != 1 else np.full(size_out, -0.5)
    if mode == "half_pixel_symmetric":
        adjustment = size_out / width
        return size_in / 2 * (1 - adjustment) + (o + 0.5) / scale - 0.5
    return (o + 0.5) / scale - 0.5  # half_pixel


def nearest_indices(x: np.ndarray, rounding: str, size_in: int) -> np.ndarray:
    """The input position each coordinate takes, by ONNX's nearest_mode, clamped to the axis."""
    if rounding == "floor":
        index = np.floor(x)
    elif rounding == "ceil":
        index = np.ceil(x)
    else:
        halfway = x - np.floor(x) == 0.5
        tie = np.ceil(x) if rounding == "round_prefer_ceil" else np.floor(x)
        index = np.where(halfway, tie, np.round(x))
    return np.clip(index, 0, size_in - 1).astype(np.int64)


def interpolation_matrix(x: np.ndarray, cubic: bool, size_in: int) -> np.ndarray:
    """out x in weights of linear (two taps) or cubic (four taps) interpolation at coordinates `x`; a tap beyond
    the axis takes the edge element, as ONNX's reference pads."""
    base = np.floor(x)
    ratio = x - base
    offsets, weights = ([-1, 0, 1, 2], cubic_weights(ratio)) if cubic else ([0, 1], [1 - ratio, ratio])
    matrix = np.zeros((len(x), size_in))
    rows = np.arange(len(x))
    for offset, weight in zip(offsets, weights, strict=True):
        np.add.at(matrix, (rows, np.clip(base + offset, 0, size_in - 1).astype(np.int64)), weight)
    return matrix


def _parse_mode(mode: str, align_corners: bool) -> tuple[str, str, str]:
    """(nearest | linear | cubic, coordinate mode, nearest mode) of torch-mlir's mode string."""
    mode, _, rounding = mode.partition(",")
    for base, default in (("nearest", "asymmetric"), ("trilinear", "half_pixel"), ("bilinear", "half_pixel")):
        if mode.startswith(base):
            break
    else:
        base, default = ("linear", "half_pixel") if mode.startswith("linear") else ("cubic", "half_pixel")
        if not mode.startswith(base):
            raise NotConvertible(f"interpolation mode '{mode}'")
    coordinate = mode.removeprefix(base).removeprefix("_") or ("align_corners" if align_corners else default)
    rounding = rounding or "floor"
    if coordinate not in COORDINATE_MODES or rounding not in NEAREST_MODES:
        raise NotConvertible(f"interpolation mode '{mode}'")
    return ("linear" if base.endswith("linear") else base), coordinate, rounding


@converts(
    "torch.aten.__interpolate.size_list_scale_list",
    args="input size scale_factor mode align_corners recompute_scale_factor antialias",
)
def interpolate(a: AtenArgs) -> SSAValue:
    if a.bool("antialias"):
        raise NotConvertible("antialiased interpolation")
    kind, coordinate, rounding = _parse_mode(a.str("mode"), not a.is_none("align_corners") and a.bool("align_corners"))
    x = a.tensor("input")
    x_type = tensor_type(x)
    shape, element = list(x_type.get_shape()), x_type.get_element_type()
    spatial = shape[2:]
    if DYN in shape:
        raise NotConvertible("interpolation of a dynamic shape")
    if not a.is_none("size"):
        sizes = a.ints("size")
        scales = [o / i for i, o in zip(spatial, sizes, strict=True)]
    else:
        folded = [fold_scalar(v) for v in a.list("scale_factor")]
        if any(s is None for s in folded):
            raise NotConvertible("interpolation scales that are not constant")
        scales = [float(s) for s in folded if s is not None]
        sizes = [math.floor(i * s) for i, s in zip(spatial, scales, strict=True)]
    if len(sizes) != len(spatial):
        raise NotConvertible(f"{len(sizes)} sizes for {len(spatial)} spatial dims")
    y = x
    for axis, (size_in, size_out, scale) in enumerate(zip(spatial, sizes, scales, strict=True), start=2):
        positions = source_positions(coordinate, size_in, size_out, scale)
        current = list(tensor_type(y).get_shape())
        out_shape = [*current[:axis], size_out, *current[axis + 1 :]]
        if kind == "nearest":
            indices = nearest_indices(positions, rounding, size_in)
            if size_in == size_out and np.array_equal(indices, np.arange(size_in)):
                continue
            y = a.value(
                GatherOp.build(
                    operands=[y, a.constant(indices, i64)],
                    properties={"axis": i64_attr(axis)},
                    result_types=[TensorType(element, out_shape)],
                )
            )
            continue
        matrix = interpolation_matrix(positions, kind == "cubic", size_in)
        if size_in == size_out and np.allclose(matrix, np.eye(size_in)):
            continue
        before, after = math.prod(current[:axis]), math.prod(current[axis + 1 :])
        folded = a.value(ReshapeOp.build(operands=[y], result_types=[TensorType(element, [before, size_in, after])]))
        mixed = a.value(
            MatmulOp.build(
                operands=[a.constant(matrix, element), folded],
                result_types=[TensorType(element, [before, size_out, after])],
            )
        )
        y = a.value(ReshapeOp.build(operands=[mixed], result_types=[TensorType(element, out_shape)]))
    result = a.result_type()
    if DYN not in result.get_shape() and list(result.get_shape()) != list(tensor_type(y).get_shape()):
        raise NotConvertible(f"interpolation to {list(result.get_shape())}, computed {tensor_type(y).get_shape()}")
    return y
