"""Converters for ONNX's DFT and STFT without complex tensors: ONNX keeps a complex signal's real and imaginary
parts in a trailing dim of 2 (a real one has a trailing dim of 1), and every variant of the transform is a
real-linear map of those parts along the signal's axis, so it is one matmul by a constant matrix.

The matrix is NumPy's own transform applied to each unit signal (`np.fft.fft`, `ifft`, `irfft`, as ONNX's
reference computes DFT), so zero padding or truncation to `dft_length`, the one-sided spectrum and the inverse's
scaling are NumPy's by construction. It has (input length x parts) x (output length x parts) entries: for the
frame sizes of signal processing, not for huge transforms, for which a real FFT kernel would be needed.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, TensorType, f32, i64
from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import DYN, i64_array, i64_attr
from gnomon.dialects.graph.elementwise import MulOp
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.tensor import GatherOp, ReshapeOp, TransposeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts


def dft_matrix(length: int, parts: int, size: int, *, inverse: bool, onesided: bool) -> np.ndarray:
    """(length * parts, outputs * output parts): the DFT of `size` points of a signal of `length` points, each
    of `parts` (1 real, 2 complex), as it maps the flattened (point, part) input to the flattened output. The
    inverse of a one-sided spectrum is a real signal (`irfft`)."""
    units = np.eye(length)
    signals = [units, 1j * units] if parts == 2 else [units]
    rows = []
    for signal in signals:
        if inverse:
            spectrum = np.fft.irfft(signal, n=size, axis=1) if onesided else np.fft.ifft(signal, n=size, axis=1)
        else:
            spectrum = np.fft.fft(signal, n=size, axis=1)
            spectrum = spectrum[:, : size // 2 + 1] if onesided else spectrum
        parts_out = [spectrum.real] if inverse and onesided else [spectrum.real, spectrum.imag]
        rows.append(np.stack(parts_out, axis=-1).reshape(length, -1))
    # Rows are ordered (part, point) here; the input's flattening is (point, part).
    return np.stack(rows, axis=1).reshape(length * parts, -1)


def dft(a: AtenArgs, x: SSAValue, axis: int, size: int, *, inverse: bool, onesided: bool) -> SSAValue:
    """The DFT of `x` (..., 1 or 2) along `axis`: the axis moves next to the parts, both flatten into one row
    per signal, and a matmul by `dft_matrix` transforms every row."""
    x_type = tensor_type(x)
    shape, element = list(x_type.get_shape()), x_type.get_element_type()
    rank = len(shape)
    if DYN in shape or rank < 2 or shape[-1] not in (1, 2) or not 0 <= axis < rank - 1:
        raise NotConvertible(f"a DFT along axis {axis} of {shape} (the last dim holds 1 or 2 parts)")
    # Half-precision signals are transformed in f32: rounding the matrix and its sums to fp16 loses digits.
    compute = f32 if isinstance(element, Float16Type | BFloat16Type) else element
    x = a.cast(x, compute)
    matrix = dft_matrix(shape[axis], shape[-1], size, inverse=inverse, onesided=onesided)
    parts = 1 if inverse and onesided else 2
    points = matrix.shape[1] // parts
    order = [*(d for d in range(rank - 1) if d != axis), axis, rank - 1]
    moved = _permute(a, x, order)
    moved_shape = list(tensor_type(moved).get_shape())
    signals = math.prod(moved_shape[:-2])
    rows = a.value(ReshapeOp.build(operands=[moved], result_types=[TensorType(compute, [signals, matrix.shape[0]])]))
    product = a.value(
        MatmulOp.build(
            operands=[rows, a.constant(matrix, compute)], result_types=[TensorType(compute, [signals, matrix.shape[1]])]
        )
    )
    spectra_shape = [*moved_shape[:-2], points, parts]
    spectra = a.value(ReshapeOp.build(operands=[product], result_types=[TensorType(compute, spectra_shape)]))
    return a.cast(_permute(a, spectra, [order.index(d) for d in range(rank)]), element)


def _permute(a: AtenArgs, x: SSAValue, permutation: list[int]) -> SSAValue:
    if permutation == sorted(permutation):
        return x
    x_type = tensor_type(x)
    moved = TensorType(x_type.get_element_type(), [x_type.get_shape()[p] for p in permutation])
    return a.value(
        TransposeOp.build(operands=[x], properties={"permutation": i64_array(permutation)}, result_types=[moved])
    )


def _constant_int(a: AtenArgs, name: str, what: str) -> int | None:
    """The value of an optional one-element constant input, None when it is absent."""
    if a.is_none(name):
        return None
    value = a.constant_scalar(name)
    if value is None:
        raise NotConvertible(f"{what} is not a constant")
    return int(value)


@converts("onnx.DFT", args="input dft_length? axis?")
def onnx_dft(a: AtenArgs) -> SSAValue:
    """DFT (opset 17 to 20; the axis an attribute before 20, an input from it): forward, inverse, one-sided."""
    x = a.tensor("input")
    rank = len(tensor_type(x).get_shape())
    axis = _constant_int(a, "axis", "DFT's axis")
    if axis is None:
        axis = a.onnx_int("axis", -2 if a.onnx_opset() >= 20 else 1)
    axis %= rank
    inverse, onesided = bool(a.onnx_int("inverse", 0)), bool(a.onnx_int("onesided", 0))
    size = _constant_int(a, "dft_length", "DFT's dft_length")
    if size is None:
        points = tensor_type(x).get_shape()[axis]
        size = 2 * (points - 1) if inverse and onesided else points
    if size < 1:
        raise NotConvertible(f"a DFT of length {size}")
    return dft(a, x, axis, size, inverse=inverse, onesided=onesided)


@converts("onnx.STFT", args="signal frame_step window? frame_length?")
def onnx_stft(a: AtenArgs) -> SSAValue:
    """The DFT of each frame of `frame_length` points, `frame_step` apart, times the window: (batch, length, 1 or
    2) -> (batch, frames, points, 2), as many frames as fit whole."""
    x = a.tensor("signal")
    shape = tensor_type(x).get_shape()
    step = _constant_int(a, "frame_step", "STFT's frame_step")
    window = a.optional_tensor("window")
    length = _constant_int(a, "frame_length", "STFT's frame_length")
    window_length = None if window is None else tensor_type(window).get_shape()[0]
    if length is None:
        length = window_length if window_length is not None else shape[1]
    if len(shape) != 3 or DYN in shape or step is None or step < 1 or not 1 <= length <= shape[1]:
        raise NotConvertible(f"an STFT of {list(shape)} by frames of {length} every {step}")
    if window_length is not None and window_length != length:
        raise NotConvertible(f"an STFT with a window of {window_length} points for frames of {length}")
    frames = 1 + (shape[1] - length) // step
    element = tensor_type(x).get_element_type()
    starts = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).reshape(-1)
    gathered = a.value(
        GatherOp.build(
            operands=[x, a.constant(starts, i64)],
            properties={"axis": i64_attr(1)},
            result_types=[TensorType(element, [shape[0], frames * length, shape[2]])],
        )
    )
    framed_type = TensorType(element, [shape[0], frames, length, shape[2]])
    framed = a.value(ReshapeOp.build(operands=[gathered], result_types=[framed_type]))
    if window is not None:
        column = a.value(
            ReshapeOp.build(operands=[a.cast(window, element)], result_types=[TensorType(element, [length, 1])])
        )
        framed = a.value(MulOp.build(operands=[framed, column], result_types=[framed_type]))
    return dft(a, framed, 2, length, inverse=False, onesided=bool(a.onnx_int("onesided", 1)))
