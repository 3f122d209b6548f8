"""Converters for the pooling that `graph.avg_pool` and `graph.max_pool` do not express, composed from other
graph ops: ONNX's dilated AveragePool and LpPool sum each window by a depthwise convolution with a kernel of
ones; max pooling with its indices (ONNX's and torch's) gathers each window and takes its first largest element.

Shapes are static, so where each window lies is computed here in NumPy (`Windows`): output o along a spatial
dim reads input positions o * stride - begin + j * dilation, j < kernel; positions outside the input are padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph.base import DYN, bool_attr, i64_array, i64_attr
from gnomon.dialects.graph.elementwise import AbsOp, AddOp, DivOp, MulOp, PowOp, SqrtOp
from gnomon.dialects.graph.nn import ConvOp
from gnomon.dialects.graph.reduce import ArgmaxOp
from gnomon.dialects.graph.tensor import ExpandOp, GatherElementsOp, GatherOp, ReshapeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts


@dataclass(frozen=True)
class Windows:
    """The windows of a pool over a static (N, C, *sizes) input into (N, C, *outputs)."""

    sizes: list[int]
    outputs: list[int]
    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    begins: list[int]
    """The padding before each spatial dim."""
    ends: list[int]
    """The padding after each spatial dim (where ceil mode's last window reaches beyond it, that is no padding)."""

    def positions(self, axis: int) -> np.ndarray:
        """(outputs, kernel) input positions the windows read along `axis`."""
        o, j = np.arange(self.outputs[axis])[:, None], np.arange(self.kernel[axis])[None, :]
        return o * self.strides[axis] - self.begins[axis] + j * self.dilations[axis]

    def axes(self) -> list[np.ndarray]:
        return [self.positions(axis) for axis in range(len(self.sizes))]

    def reach(self) -> list[int]:
        """How far the last window reaches beyond the end of each spatial dim (0 where it ends inside)."""
        return [max(int(p[-1, -1]) + 1 - n, 0) for p, n in zip(self.axes(), self.sizes, strict=True)]


def windows(
    a: AtenArgs, x: SSAValue, kernel: list[int], strides: list[int], dilations: list[int], pads: list[int]
) -> Windows:
    """The windows of a pool of `x` into the op's static result; `pads` all begins, then all ends."""
    shape, out = tensor_type(x).get_shape(), a.result_type().get_shape()[2:]
    sizes = shape[2:]
    if DYN in shape or DYN in out:
        raise NotConvertible("a pool of a dynamic shape")
    n = len(sizes)
    return Windows(list(sizes), list(out), kernel, strides, dilations, pads[:n], pads[n:])


def _onnx_windows(a: AtenArgs, x: SSAValue, op: str) -> Windows:
    """The windows of an ONNX pool (kernel_shape, strides, dilations, pads or auto_pad). SAME auto padding pads
    the dilated windows' overhang, the odd one at the end (SAME_UPPER) or at the beginning (SAME_LOWER); the
    output size is ONNX's shape inference's, ceil mode included."""
    rank = len(tensor_type(x).get_shape())
    kernel = a.onnx_ints("kernel_shape", [])
    n = len(kernel)
    if rank < 3 or n != rank - 2:
        raise NotConvertible(f"{op} of rank {rank} with kernel {kernel}")
    strides, dilations = a.onnx_ints("strides", [1] * n), a.onnx_ints("dilations", [1] * n)
    auto_pad = a.onnx_str("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        return windows(a, x, kernel, strides, dilations, a.onnx_ints("pads", [0] * 2 * n))
    unpadded = windows(a, x, kernel, strides, dilations, [0] * 2 * n)
    if auto_pad == "VALID":
        return unpadded
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise NotConvertible(f"{op} with auto_pad {auto_pad}")
    totals = unpadded.reach()
    small, large = [t // 2 for t in totals], [t - t // 2 for t in totals]
    return windows(a, x, kernel, strides, dilations, small + large if auto_pad == "SAME_UPPER" else large + small)


def window_sum(a: AtenArgs, x: SSAValue, w: Windows) -> SSAValue:
    """The sum of each window, padding counting as zero: a depthwise convolution with a kernel of ones."""
    x_type = tensor_type(x)
    batch, channels = x_type.get_shape()[:2]
    element = x_type.get_element_type()
    ones = a.splat(1.0, TensorType(element, [channels, 1, *w.kernel]))
    props = {
        "strides": i64_array(w.strides),
        "pads": i64_array([*w.begins, *w.reach()]),
        "dilations": i64_array(w.dilations),
        "groups": i64_attr(channels),
    }
    out = TensorType(element, [batch, channels, *w.outputs])
    return a.value(ConvOp.build(operands=[x, ones, []], properties=props, result_types=[out]))


def _counted(w: Windows, include_pad: bool) -> np.ndarray:
    """(1, 1, *outputs) cells each window averages: those in the input, or with `include_pad` those in the
    padded input."""
    count = np.ones([1, 1], dtype=np.float64)
    for p, n, begin, end in zip(w.axes(), w.sizes, w.begins, w.ends, strict=True):
        low, high = (-begin, n + end) if include_pad else (0, n)
        count = count[..., None] * ((p >= low) & (p < high)).sum(axis=1)
    return count


_AVERAGE_POOL_ATTRIBUTES = {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
                            "strides"}  # fmt: skip


@converts("onnx.AveragePool", args="X")
def onnx_average_pool(a: AtenArgs) -> SSAValue:
    """AveragePool with dilations (the frontend keeps only those from torch-mlir, whose lowering turns ceil mode
    into padding that `count_include_pad` would count): each window's sum over the count of its counted cells."""
    unknown = sorted(set(a.onnx_attributes()) - _AVERAGE_POOL_ATTRIBUTES)
    if unknown:
        raise NotConvertible(f"AveragePool with {', '.join(unknown)}")
    x = a.tensor("X")
    w = _onnx_windows(a, x, "AveragePool")
    counts = _counted(w, bool(a.onnx_int("count_include_pad", 0)))
    if not counts.all():
        raise NotConvertible("an AveragePool with a window of no counted cell")
    total = window_sum(a, x, w)
    element = tensor_type(total).get_element_type()
    return a.value(DivOp.build(operands=[total, a.constant(counts, element)], result_types=[tensor_type(total)]))


_LP_POOL_ATTRIBUTES = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"}


@converts("onnx.LpPool", args="X")
def onnx_lp_pool(a: AtenArgs) -> SSAValue:
    """(sum of |x|^p over each window)^(1/p), padding adding nothing. A window that ceil mode lets reach beyond
    the padded input sums its cells in it scaled up to the whole window (the kernel's size times their mean), as
    ONNX's reference and torch's LPPool compute it."""
    unknown = sorted(set(a.onnx_attributes()) - _LP_POOL_ATTRIBUTES)
    if unknown:
        raise NotConvertible(f"LpPool with {', '.join(unknown)}")
    x, p = a.tensor("X"), a.onnx_int("p", 2)
    if p < 1:
        raise NotConvertible(f"LpPool with p {p}")
    w = _onnx_windows(a, x, "LpPool")
    x_type = tensor_type(x)
    powered = a.value(AbsOp.build(operands=[x], result_types=[x_type]))
    if p == 2:
        powered = a.value(MulOp.build(operands=[powered, powered], result_types=[x_type]))
    elif p > 2:
        exponent = a.scalar_tensor(p, x_type.get_element_type())
        powered = a.value(PowOp.build(operands=[powered, exponent], result_types=[x_type]))
    total = window_sum(a, powered, w)
    out = tensor_type(total)
    counts = _counted(w, include_pad=True)
    if not counts.all():
        raise NotConvertible("an LpPool with a window of no cell in the padded input")
    if (counts != math.prod(w.kernel)).any():
        scale = a.constant(math.prod(w.kernel) / counts, out.get_element_type())
        total = a.value(MulOp.build(operands=[total, scale], result_types=[out]))
    if p == 1:
        return total
    if p == 2:
        return a.value(SqrtOp.build(operands=[total], result_types=[out]))
    root = a.scalar_tensor(1.0 / p, out.get_element_type())
    return a.value(PowOp.build(operands=[total, root], result_types=[out]))


def windowed_max_with_indices(
    a: AtenArgs, x: SSAValue, w: Windows, *, column_major: bool, whole_tensor: bool
) -> tuple[SSAValue, SSAValue]:
    """Each window's first largest element and its index: into the image plane (torch), or into the whole
    tensor (ONNX), its plane positions counted row-major or, with `column_major` (ONNX's storage_order 1),
    column-major. A window's padding reads its first cell in the input instead: the same largest value, and
    where that cell is the largest the first largest element is that cell anyway."""
    x_type = tensor_type(x)
    batch, channels = x_type.get_shape()[:2]
    element = x_type.get_element_type()
    plane = math.prod(w.sizes)
    taps, valid = _window_cells(w)
    if not valid.any(axis=1).all():
        raise NotConvertible("a max pool with a window of padding only")
    first = taps[np.arange(len(taps)), valid.argmax(axis=1)]
    taps = np.where(valid, taps, first[:, None])
    outputs, cells = taps.shape
    flat = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, [batch, channels, plane])]))
    gathered = a.value(
        GatherOp.build(
            operands=[flat, a.constant(taps.reshape(-1), i64)],
            properties={"axis": i64_attr(2)},
            result_types=[TensorType(element, [batch, channels, outputs * cells])],
        )
    )
    grouped = TensorType(element, [batch, channels, outputs, cells])
    cells_of = a.value(ReshapeOp.build(operands=[gathered], result_types=[grouped]))
    picked_type = TensorType(i64, [batch, channels, outputs, 1])
    largest = a.value(
        ArgmaxOp.build(
            operands=[cells_of],
            properties={"axis": i64_attr(3), "keepdims": bool_attr(True)},
            result_types=[picked_type],
        )
    )
    values = _pick(a, cells_of, largest, TensorType(element, [batch, channels, outputs, 1]))
    stored = np.ravel_multi_index(np.unravel_index(taps, w.sizes), w.sizes, order="F") if column_major else taps
    index_table = stored.reshape(1, 1, outputs, cells)
    table = a.value(
        ExpandOp.build(operands=[a.constant(index_table, i64)], result_types=[TensorType(i64, grouped.get_shape())])
    )
    indices = _pick(a, table, largest, picked_type)
    if whole_tensor:
        offsets = (np.arange(batch * channels) * plane).reshape(batch, channels, 1, 1)
        indices = a.value(AddOp.build(operands=[indices, a.constant(offsets, i64)], result_types=[picked_type]))
    out = [batch, channels, *w.outputs]
    return (
        a.value(ReshapeOp.build(operands=[values], result_types=[TensorType(element, out)])),
        a.value(ReshapeOp.build(operands=[indices], result_types=[TensorType(i64, out)])),
    )


def _window_cells(w: Windows) -> tuple[np.ndarray, np.ndarray]:
    """(outputs, cells): each window's cells as plane positions (row-major, in window order), and whether each
    lies in the input."""
    axes = w.axes()
    grids = np.meshgrid(*[np.arange(o) for o in w.outputs], *[np.arange(k) for k in w.kernel], indexing="ij")
    n = len(axes)
    coordinates = [axes[i][grids[i], grids[n + i]] for i in range(n)]
    valid = np.logical_and.reduce([(c >= 0) & (c < size) for c, size in zip(coordinates, w.sizes, strict=True)])
    clipped = [np.clip(c, 0, size - 1) for c, size in zip(coordinates, w.sizes, strict=True)]
    taps = np.ravel_multi_index(clipped, w.sizes)
    shape = (math.prod(w.outputs), math.prod(w.kernel))
    return taps.reshape(shape), valid.reshape(shape)


def _pick(a: AtenArgs, source: SSAValue, index: SSAValue, out: TensorType[Attribute]) -> SSAValue:
    return a.value(
        GatherElementsOp.build(operands=[source, index], properties={"axis": i64_attr(3)}, result_types=[out])
    )


@converts("onnx.MaxPool", args="X")
def onnx_max_pool(a: AtenArgs) -> list[SSAValue]:
    """MaxPool with its Indices output (the frontend keeps only those from torch-mlir): indices into the whole
    tensor, each image plane's counted row-major (storage_order 0) or column-major (1)."""
    x = a.tensor("X")
    w = _onnx_windows(a, x, "MaxPool")
    storage_order = a.onnx_int("storage_order", 0)
    if storage_order not in (0, 1):
        raise NotConvertible(f"MaxPool with storage_order {storage_order}")
    return list(windowed_max_with_indices(a, x, w, column_major=storage_order == 1, whole_tensor=True))
