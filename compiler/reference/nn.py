"""Reference semantics of the graph dialect's neural-network ops.

Norms, softmax, attention and grid sampling (`grid_sample`) are NumPy. Windowed ops (convolution,
transposed convolution and pooling) borrow torch's CPU kernels through `torch.nn.functional`: the oracle
trusts them rather than re-deriving window arithmetic, and ONNX-style asymmetric pads are applied explicitly
first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.ir import Operation

from gnomon.dialects.graph import nn, sampling
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import TO_CHANNELS_FIRST, TO_CHANNELS_LAST, channels_last
from gnomon.reference.base import Array, typed
from gnomon.reference.grid_sample import grid_sample


def _functional() -> Any:
    import torch.nn.functional  # imported on first use: constant folding and the other ops need no torch

    return torch.nn.functional


def _tensor(x: Array | None) -> Any:
    if x is None:
        return None
    import torch

    return torch.from_numpy(np.array(x))  # a writable, contiguous copy


def _padded(x: Array, pads: Sequence[int], value: float) -> Any:
    """`x` as a torch tensor padded by ONNX-style `pads` (all begins, then all ends) on its spatial dims."""
    n = len(pads) // 2
    spec: list[int] = []
    for i in reversed(range(n)):
        spec += [pads[i], pads[i + n]]
    return _functional().pad(_tensor(x), spec, value=value)


def _symmetric(pads: Sequence[int], kernel: Sequence[int]) -> bool:
    """Whether torch's pooling can take `pads` itself (equal both sides, at most half the window)."""
    n = len(kernel)
    return tuple(pads[:n]) == tuple(pads[n:]) and all(pads[i] <= kernel[i] // 2 for i in range(n))


def _channel_vector(v: Array, rank: int) -> Array:
    """A per-channel vector shaped to broadcast against an (N, C, ...) tensor."""
    return v.reshape((1, -1) + (1,) * (rank - 2))


def _normalize(x: Array, axes: tuple[int, ...], epsilon: float) -> Array:
    mean = x.mean(axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon)


def _softmax(x: Array, axis: int) -> Array:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _channels_first(op: Operation, x: Array) -> Array:
    """The op's activation as (N, C, H, W): channels-last ones (`layout = "nhwc"`) are permuted."""
    return np.transpose(x, TO_CHANNELS_FIRST) if channels_last(op) else x


def _in_layout(op: Operation, y: Array) -> Array:
    """A channels-first result in the op's layout."""
    return np.ascontiguousarray(np.transpose(y, TO_CHANNELS_LAST)) if channels_last(op) else y


@register_impls
class GraphNNFunctions(InterpreterFunctions):
    # ---- windowed ops (torch kernels) ----

    @impl(nn.ConvOp)
    def run_conv(self, interpreter: Interpreter, op: nn.ConvOp, args: PythonValues) -> PythonValues:
        x, weight, *bias = args
        x = _channels_first(op, x)
        conv: Callable[..., Any] = getattr(_functional(), f"conv{x.ndim - 2}d")
        y = conv(
            _padded(x, ints(op.pads), 0.0),
            _tensor(weight),
            _tensor(bias[0]) if bias else None,
            stride=ints(op.strides),
            dilation=ints(op.dilations),
            groups=op.groups.value.data,
        )
        return (typed(op.result, _in_layout(op, y.numpy())),)

    @impl(nn.ConvTransposeOp)
    def run_conv_transpose(self, interpreter: Interpreter, op: nn.ConvTransposeOp, args: PythonValues) -> PythonValues:
        x, weight, *bias = args
        n = x.ndim - 2
        conv: Callable[..., Any] = getattr(_functional(), f"conv_transpose{n}d")
        y: Array = conv(
            _tensor(x),
            _tensor(weight),
            _tensor(bias[0]) if bias else None,
            stride=ints(op.strides),
            dilation=ints(op.dilations),
            groups=op.groups.value.data,
            output_padding=ints(op.output_padding),
        ).numpy()
        # Pads crop the full transposed output, possibly unevenly.
        pads = ints(op.pads)
        crop = (slice(None), slice(None), *(slice(pads[i], y.shape[2 + i] - pads[i + n]) for i in range(n)))
        return (typed(op.result, y[crop]),)

    @impl(nn.MaxPoolOp)
    def run_max_pool(self, interpreter: Interpreter, op: nn.MaxPoolOp, args: PythonValues) -> PythonValues:
        x: Array = _channels_first(op, args[0])
        pads, kernel = ints(op.pads), ints(op.kernel)
        pool: Callable[..., Any] = getattr(_functional(), f"max_pool{x.ndim - 2}d")
        ceil_mode = bool(op.ceil_mode.value.data)
        strides, dilations = ints(op.strides), ints(op.dilations)
        if _symmetric(pads, kernel):
            y = pool(_tensor(x), kernel, strides, pads[: len(kernel)], dilations, ceil_mode=ceil_mode)
        else:
            y = pool(_padded(x, pads, -math.inf), kernel, strides, 0, dilations, ceil_mode=ceil_mode)
        return (typed(op.result, _in_layout(op, y.numpy())),)

    @impl(nn.AvgPoolOp)
    def run_avg_pool(self, interpreter: Interpreter, op: nn.AvgPoolOp, args: PythonValues) -> PythonValues:
        x: Array = _channels_first(op, args[0])
        pads, kernel, strides = ints(op.pads), ints(op.kernel), ints(op.strides)
        pool: Callable[..., Any] = getattr(_functional(), f"avg_pool{x.ndim - 2}d")
        ceil_mode, include = bool(op.ceil_mode.value.data), bool(op.count_include_pad.value.data)
        if _symmetric(pads, kernel):
            y = pool(_tensor(x), kernel, strides, pads[: len(kernel)], ceil_mode=ceil_mode, count_include_pad=include)
            return (typed(op.result, _in_layout(op, y.numpy())),)
        # Uneven pads: average the explicitly padded input, dividing by the count of counted cells.
        total = pool(_padded(x, pads, 0.0), kernel, strides, 0, ceil_mode=ceil_mode)
        count = pool(_padded(np.ones_like(x), pads, 1.0 if include else 0.0), kernel, strides, 0, ceil_mode=ceil_mode)
        return (typed(op.result, _in_layout(op, (total / count).numpy())),)

    @impl(sampling.GridSampleOp)
    def run_grid_sample(self, interpreter: Interpreter, op: sampling.GridSampleOp, args: PythonValues) -> PythonValues:
        x, grid = args
        y = grid_sample(x, grid, op.mode.data, op.padding_mode.data, bool(op.align_corners.value.data))
        return (typed(op.result, y),)

    @impl(nn.AdaptiveAvgPoolOp)
    def run_adaptive_avg_pool(
        self, interpreter: Interpreter, op: nn.AdaptiveAvgPoolOp, args: PythonValues
    ) -> PythonValues:
        x: Array = args[0]
        pool: Callable[..., Any] = getattr(_functional(), f"adaptive_avg_pool{x.ndim - 2}d")
        return (typed(op.result, pool(_tensor(x), ints(op.output_size)).numpy()),)

    @impl(nn.AdaptiveMaxPoolOp)
    def run_adaptive_max_pool(
        self, interpreter: Interpreter, op: nn.AdaptiveMaxPoolOp, args: PythonValues
    ) -> PythonValues:
        x: Array = args[0]
        pool: Callable[..., Any] = getattr(_functional(), f"adaptive_max_pool{x.ndim - 2}d")
        return (typed(op.result, pool(_tensor(x), ints(op.output_size)).numpy()),)

    @impl(nn.GlobalAvgPoolOp)
    def run_global_avg_pool(self, interpreter: Interpreter, op: nn.GlobalAvgPoolOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        return (typed(op.result, x.mean(tuple(range(2, x.ndim)), keepdims=True)),)

    @impl(nn.GlobalMaxPoolOp)
    def run_global_max_pool(self, interpreter: Interpreter, op: nn.GlobalMaxPoolOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        return (typed(op.result, x.max(tuple(range(2, x.ndim)), keepdims=True)),)

    # ---- norms ----

    @impl(nn.BatchNormOp)
    def run_batch_norm(self, interpreter: Interpreter, op: nn.BatchNormOp, args: PythonValues) -> PythonValues:
        x, scale, bias, mean, variance = args
        rank = x.ndim
        inv = 1 / np.sqrt(_channel_vector(variance, rank) + op.epsilon.value.data)
        y = (x - _channel_vector(mean, rank)) * inv * _channel_vector(scale, rank) + _channel_vector(bias, rank)
        return (typed(op.result, y),)

    @impl(nn.BatchNormTrainOp)
    def run_batch_norm_train(
        self, interpreter: Interpreter, op: nn.BatchNormTrainOp, args: PythonValues
    ) -> PythonValues:
        x, scale, bias = args
        axes = (0, *range(2, x.ndim))
        mean, variance = x.mean(axes), x.var(axes)  # the biased variance, over the batch and spatial dims
        y = _normalize(x, axes, op.epsilon.value.data) * _channel_vector(scale, x.ndim) + _channel_vector(bias, x.ndim)
        return typed(op.result, y), typed(op.batch_mean, mean), typed(op.batch_variance, variance)

    @impl(nn.LayerNormOp)
    def run_layer_norm(self, interpreter: Interpreter, op: nn.LayerNormOp, args: PythonValues) -> PythonValues:
        x, *affine = args
        axis = op.axis.value.data % x.ndim
        y = _normalize(x, tuple(range(axis, x.ndim)), op.epsilon.value.data)
        if affine:
            y = y * affine[0] + affine[1]
        return (typed(op.result, y),)

    @impl(nn.InstanceNormOp)
    def run_instance_norm(self, interpreter: Interpreter, op: nn.InstanceNormOp, args: PythonValues) -> PythonValues:
        x, *affine = args
        y = _normalize(x, tuple(range(2, x.ndim)), op.epsilon.value.data)
        if affine:
            y = y * _channel_vector(affine[0], x.ndim) + _channel_vector(affine[1], x.ndim)
        return (typed(op.result, y),)

    @impl(nn.GroupNormOp)
    def run_group_norm(self, interpreter: Interpreter, op: nn.GroupNormOp, args: PythonValues) -> PythonValues:
        x, *affine = args
        groups = x.reshape(x.shape[0], op.num_groups.value.data, -1)
        y = _normalize(groups, (2,), op.epsilon.value.data).reshape(x.shape)
        if affine:
            y = y * _channel_vector(affine[0], x.ndim) + _channel_vector(affine[1], x.ndim)
        return (typed(op.result, y),)

    @impl(nn.LrnOp)
    def run_lrn(self, interpreter: Interpreter, op: nn.LrnOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        size = op.size.value.data
        # The sum of squares over a window of `size` channels, centred as in ONNX and PyTorch.
        squares = np.pad(x**2, [(0, 0), (size // 2, (size - 1) // 2)] + [(0, 0)] * (x.ndim - 2))
        cumulative = np.concatenate([np.zeros_like(squares[:, :1]), np.cumsum(squares, axis=1)], axis=1)
        window = cumulative[:, size:] - cumulative[:, :-size]
        denominator = (op.bias.value.data + op.alpha.value.data / size * window) ** op.beta.value.data
        return (typed(op.result, x / denominator),)

    # ---- softmax and attention ----

    @impl(nn.SoftmaxOp)
    def run_softmax(self, interpreter: Interpreter, op: nn.SoftmaxOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, _softmax(args[0], op.axis.value.data)),)

    @impl(nn.LogSoftmaxOp)
    def run_log_softmax(self, interpreter: Interpreter, op: nn.LogSoftmaxOp, args: PythonValues) -> PythonValues:
        x, axis = args[0], op.axis.value.data
        shifted = x - x.max(axis, keepdims=True)
        return (typed(op.result, shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))),)

    @impl(nn.AttentionOp)
    def run_attention(self, interpreter: Interpreter, op: nn.AttentionOp, args: PythonValues) -> PythonValues:
        query, key, value, *mask = args
        scores = query @ np.swapaxes(key, -1, -2) * op.scale.value.data
        if mask:
            scores = np.where(mask[0], scores, -np.inf) if mask[0].dtype == np.bool_ else scores + mask[0]
        if op.is_causal.value.data:
            rows, columns = scores.shape[-2:]
            scores = np.where(np.tril(np.ones((rows, columns), np.bool_)), scores, -np.inf)
        # A row that attends no key gives zeros (as PyTorch's and ONNX's attention do), not softmax's 0/0.
        masked = np.isneginf(scores).all(-1, keepdims=True)
        weights = np.where(masked, 0.0, _softmax(np.where(masked, 0.0, scores), -1))
        return (typed(op.result, weights @ value),)
