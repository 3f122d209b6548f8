"""Converters for spatial sampling: grid sampling (ONNX GridSample, torch's grid_sampler) to `graph.grid_sample`,
and the affine grids that feed it (ONNX AffineGrid, torch's affine_grid_generator), composed: a constant grid of
homogeneous base coordinates times each transform."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import DYN, bool_attr, i64_array, str_attr
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.sampling import GridSampleOp, torch_grid_sample_agrees
from gnomon.dialects.graph.tensor import ReshapeOp, TransposeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_tensor, tensor_type
from gnomon.passes.torch_to_graph.registry import converts


def _grid_sample(a: AtenArgs, x: SSAValue, grid: SSAValue, mode: str, padding_mode: str, align: bool) -> SSAValue:
    if mode not in GridSampleOp.MODES or padding_mode not in GridSampleOp.PADDING_MODES:
        raise NotConvertible(f"grid sampling in mode {mode!r} with padding {padding_mode!r}")
    props = {"mode": str_attr(mode), "padding_mode": str_attr(padding_mode), "align_corners": bool_attr(align)}
    operands = [x, a.cast(grid, tensor_type(x).get_element_type())]
    return a.value(GridSampleOp.build(operands=operands, properties=props, result_types=[a.result_type()]))


@converts("onnx.GridSample", args="X grid")
def onnx_grid_sample(a: AtenArgs) -> SSAValue:
    """GridSample (opset 16's bilinear and bicubic are opset 20's linear and cubic); the frontend keeps every
    GridSample from torch-mlir, which lowers only 2-d linear and nearest sampling with zeros padding."""
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(a.onnx_str("mode", "linear"), a.onnx_str("mode", "linear"))
    padding = a.onnx_str("padding_mode", "zeros")
    return _grid_sample(a, a.tensor("X"), a.tensor("grid"), mode, padding, bool(a.onnx_int("align_corners", 0)))


_TORCH_MODES = ("linear", "nearest", "cubic")
_TORCH_PADDING_MODES = ("zeros", "border", "reflection")


@converts("torch.aten.grid_sampler", args="input grid interpolation_mode padding_mode align_corners")
def grid_sampler(a: AtenArgs) -> SSAValue:
    """torch's grid_sample, its modes numbered: bilinear, nearest, bicubic; zeros, border, reflection. Where its
    semantics differ from `graph.grid_sample`'s (ONNX's), it is refused."""
    mode, padding = a.int("interpolation_mode"), a.int("padding_mode")
    if mode not in range(3) or padding not in range(3):
        raise NotConvertible(f"grid sampling in mode {mode} with padding {padding}")
    x, grid = a.tensor("input"), a.tensor("grid")
    mode_name, padding_name, align = _TORCH_MODES[mode], _TORCH_PADDING_MODES[padding], a.bool("align_corners")
    if not torch_grid_sample_agrees(len(tensor_type(x).get_shape()), mode_name, padding_name, align):
        raise NotConvertible(
            f"{mode_name} grid sampling with {padding_name} padding{' and align_corners' if align else ''}:"
            " torch's differs from ONNX's, which gnomon implements"
        )
    return _grid_sample(a, x, grid, mode_name, padding_name, align)


def base_coordinates(size: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinate of each of `size` elements: -1 and 1 at the corner elements' centres
    (`align_corners`) or at their outer edges."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.full(1, -1.0)
    return (2 * np.arange(size) + 1) / size - 1


def _affine_grid(a: AtenArgs, theta: SSAValue, spatial: list[int], align_corners: bool) -> SSAValue:
    """(N, D, D + 1) transforms -> (N, *spatial, D) points: each element's homogeneous base coordinates (the last
    spatial dim's first) times each transform, one matmul by a constant (points, D + 1) matrix."""
    theta_type = tensor_type(theta)
    shape, element = theta_type.get_shape(), theta_type.get_element_type()
    dims = len(spatial)
    if dims not in (2, 3) or len(shape) != 3 or shape[0] == DYN or tuple(shape[1:]) != (dims, dims + 1):
        raise NotConvertible(f"an affine grid of {spatial} from transforms of {list(shape)}")
    mesh = np.meshgrid(*(base_coordinates(n, align_corners) for n in spatial), indexing="ij")
    base = np.stack([*reversed(mesh), np.ones(spatial)], axis=-1).reshape(-1, dims + 1)
    points = math.prod(spatial)
    transposed = a.value(
        TransposeOp.build(
            operands=[theta],
            properties={"permutation": i64_array([0, 2, 1])},
            result_types=[TensorType(element, [shape[0], dims + 1, dims])],
        )
    )
    product = a.value(
        MatmulOp.build(
            operands=[a.constant(base, element), transposed],
            result_types=[TensorType(element, [shape[0], points, dims])],
        )
    )
    return a.value(ReshapeOp.build(operands=[product], result_types=[TensorType(element, [shape[0], *spatial, dims])]))


@converts("onnx.AffineGrid", args="theta size")
def onnx_affine_grid(a: AtenArgs) -> SSAValue:
    size = fold_tensor(a.values["size"])
    if size is None:
        raise NotConvertible("AffineGrid's size is not a constant")
    return _affine_grid(a, a.tensor("theta"), [int(n) for n in size[2:]], bool(a.onnx_int("align_corners", 0)))


@converts("torch.aten.affine_grid_generator", args="theta size align_corners")
def affine_grid_generator(a: AtenArgs) -> SSAValue:
    return _affine_grid(a, a.tensor("theta"), a.ints("size")[2:], a.bool("align_corners"))
