"""Grid sampling: `graph.grid_sample` (ONNX's GridSample, torch's grid_sample), and where torch's kernel computes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, StringAttr, TensorType
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    GraphOperation,
    TensorT,
    dims_compatible,
    dtype_of,
    shape_of,
    shape_str,
    tensor_of,
)


@irdl_op_definition
class GridSampleOp(GraphOperation):
    """Sample `input` (N, C, *spatial) at the points of `grid` (N, *out, D): D normalized coordinates, the last
    spatial dim's first, where -1 and 1 are the centres of the corner elements (`align_corners`) or their outer
    edges; `mode` nearest, linear or cubic (Keys, a = -0.75) interpolation, and `padding_mode` zeros, border or
    reflection for points and taps beyond the input, as ONNX's GridSample defines them (torch's grid_sample).

    `%y = graph.grid_sample %x, %g {mode = "linear", padding_mode = "zeros", align_corners = false}
         : (tensor<1x3x8x8xf32>, tensor<1x4x4x2xf32>) -> tensor<1x3x4x4xf32>`
    """

    name = "graph.grid_sample"
    input = operand_def(TensorType)
    grid = operand_def(TensorType)
    mode = prop_def(StringAttr)
    padding_mode = prop_def(StringAttr)
    align_corners = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    MODES: ClassVar[tuple[str, ...]] = ("nearest", "linear", "cubic")
    PADDING_MODES: ClassVar[tuple[str, ...]] = ("zeros", "border", "reflection")

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, f"{self.name} input")
        if len(x) < 3:
            raise VerifyException(
                f"{self.name}: input must have rank >= 3 (N, C, spatial...), got shape {shape_str(x)}"
            )
        grid = shape_of(self.grid, f"{self.name} grid")
        if self.mode.data not in self.MODES:
            raise VerifyException(f"{self.name}: mode must be one of {', '.join(self.MODES)}, got {self.mode.data!r}")
        if self.padding_mode.data not in self.PADDING_MODES:
            raise VerifyException(
                f"{self.name}: padding_mode must be one of {', '.join(self.PADDING_MODES)},"
                f" got {self.padding_mode.data!r}"
            )
        if len(grid) != len(x) or not dims_compatible(grid[-1], len(x) - 2) or not dims_compatible(grid[0], x[0]):
            raise VerifyException(
                f"{self.name}: grid {shape_str(grid)} does not hold {len(x) - 2} coordinates for each point of"
                f" input {shape_str(x)}"
            )
        element, grid_element = dtype_of(self.input, "input"), dtype_of(self.grid, "grid")
        if grid_element != element:
            raise VerifyException(f"{self.name}: grid element type {grid_element} differs from input's {element}")
        return [tensor_of(element, [x[0], x[1], *grid[1:-1]])]


def torch_grid_sample_agrees(rank: int, mode: str, padding_mode: str, align_corners: bool) -> bool:
    """Whether torch's grid_sample computes `graph.grid_sample` (ONNX's GridSample) of an input of `rank`. torch
    samples 2-d and 3-d inputs, bicubically only 2-d ones, and differs in two corners: at the border a cubic point
    beyond the input stays where it is and only its taps are clamped (ONNX clamps the point first), and a nearest
    point is reflected before it is rounded (ONNX rounds first, which differs without align_corners)."""
    if rank not in (4, 5) or (mode == "cubic" and (rank != 4 or padding_mode == "border")):
        return False
    return not (mode == "nearest" and padding_mode == "reflection" and not align_corners)


SAMPLING_OPS = [GridSampleOp]
