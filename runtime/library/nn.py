"""Torch implementations of the graph dialect's neural-network ops: oneDNN and ATen's CPU kernels.

Windowed ops follow the reference's handling of ONNX-style pads: torch's own padding where the pads
are symmetric (and, for pooling, at most half the window), an explicit `F.pad` first otherwise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F

from gnomon.cost.pools import library_pool
from gnomon.dialects.graph import attention_train, nn, sampling
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import TO_CHANNELS_FIRST, TO_CHANNELS_LAST, channels_last
from gnomon.passes.graph_to_kernel.library import gemm_conv
from gnomon.runtime.library.base import (
    ATEN_NN,
    Launch,
    TorchImpl,
    aten,
    copy_back,
    static_shape,
    symmetric_pads,
    torch_impl,
    torch_padding,
)
from gnomon.runtime.library.grid_sample import aten_grid_sample, onnx_grid_sample

# ---- channels-last activations ----


def in_channels_last(impl: TorchImpl) -> TorchImpl:
    """A channels-first op's impl for its channels-last form (`layout = "nhwc"`): it reads its first operand and
    writes its result, (N, H, W, C) buffers, as (N, C, H, W) views with channels-last strides, on which oneDNN's
    convolutions and ATen's pools compute in that order, with no reorder."""

    def run(x: torch.Tensor, *rest: torch.Tensor | None) -> torch.Tensor:
        y = impl.run(x.permute(TO_CHANNELS_FIRST), *rest)
        assert isinstance(y, torch.Tensor)  # convolutions and pools have one result
        return y.permute(TO_CHANNELS_LAST)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, *rest = args
        return impl.bind([x.permute(TO_CHANNELS_FIRST), *rest], [results[0].permute(TO_CHANNELS_FIRST)])

    return TorchImpl(run, into)


# ---- convolutions ----


@torch_impl(nn.ConvOp)
def conv(op: nn.ConvOp) -> TorchImpl:
    strides, pads, dilations = ints(op.strides), ints(op.pads), ints(op.dilations)
    groups, n = op.groups.value.data, len(strides)
    symmetric = symmetric_pads(pads)
    padding, spec = (list(pads[:n]) if symmetric else [0] * n), torch_padding(pads)

    def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        source = x if symmetric else F.pad(x, spec)
        return torch.convolution(source, weight, bias, strides, padding, dilations, False, [0] * n, groups)

    if channels_last(op):
        plain = in_channels_last(TorchImpl(run))
        return TorchImpl(plain.run, _gemm_conv_channels_last_into if gemm_conv(op) else plain.into)
    # aten's convolution has no out= kernel of its own; a `gemm_conv` is BLAS products into the output.
    return TorchImpl(run, _gemm_conv_into if gemm_conv(op) else None)


def _gemm_conv_channels_last_into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    """A channels-last 1x1, stride-1 convolution as BLAS products into the output: its pixels are the rows of
    (N*H*W, C_in) by the transposed weight's (C_in, C_out); with groups, one batched product whose operands are
    strided views, each group's channels a column block of every pixel's row (oneDNN's grouped channels-last
    convolution took 0.9-3.6x its time on ShuffleNet's layers here)."""
    x, weight, *bias = args
    outputs, per_group = weight.shape[0], weight.shape[1]
    groups = x.shape[-1] // per_group
    rows, into = x.reshape(-1, x.shape[-1]), results[0].view(-1, outputs)
    if groups > 1:
        shape = (groups, outputs // groups)
        matrices = weight.reshape(*shape, per_group).transpose(1, 2)  # (G, C_in/G, C_out/G), a view
        columns = rows.view(rows.shape[0], groups, per_group).transpose(0, 1)
        blocks = into.view(into.shape[0], *shape).transpose(0, 1)
        if bias:
            return partial(torch.baddbmm, bias[0].reshape(groups, 1, -1), columns, matrices, out=blocks)
        return partial(torch.bmm, columns, matrices, out=blocks)
    matrix = weight.reshape(outputs, -1).t()
    if bias:
        return partial(torch.addmm, bias[0], rows, matrix, out=into)
    return partial(torch.mm, rows, matrix, out=into)


def _gemm_conv_into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    """A 1x1, stride-1 convolution as one BLAS product per image (a batched one over its groups), into the output."""
    x, weight, *bias = args
    out = results[0]
    images, channels, outputs = x.shape[0], x.shape[1], weight.shape[0]
    groups = channels // weight.shape[1]
    if groups > 1:
        per_group = (groups, outputs // groups)
        matrices = weight.reshape(*per_group, channels // groups)
        products = []
        for image in range(images):  # out[n, g] = W[g] @ x[n, g]
            columns, into = x[image].reshape(groups, channels // groups, -1), out[image].view(*per_group, -1)
            if bias:
                products.append(partial(torch.baddbmm, bias[0].reshape(*per_group, 1), matrices, columns, out=into))
            else:
                products.append(partial(torch.bmm, matrices, columns, out=into))
    else:
        matrix = weight.reshape(outputs, channels)
        products = []
        for image in range(images):  # out[n] = W @ x[n], each image's pixels the columns
            columns, into = x[image].reshape(channels, -1), out[image].view(outputs, -1)
            if bias:
                products.append(partial(torch.addmm, bias[0].reshape(outputs, 1), matrix, columns, out=into))
            else:
                products.append(partial(torch.mm, matrix, columns, out=into))
    if len(products) == 1:
        return products[0]

    def launch() -> None:
        for product in products:
            product()

    return launch


@torch_impl(nn.ConvTransposeOp)
def conv_transpose(op: nn.ConvTransposeOp) -> TorchImpl:
    strides, pads, dilations = ints(op.strides), ints(op.pads), ints(op.dilations)
    output_padding, groups, n = ints(op.output_padding), op.groups.value.data, len(strides)
    # torch's padding crops the full output by the same amount at both ends; uneven pads crop it here.
    padding = list(pads[:n]) if symmetric_pads(pads) else [0] * n
    crop = None if symmetric_pads(pads) else [(pads[i], pads[i + n]) for i in range(n)]

    def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        y = torch.convolution(x, weight, bias, strides, padding, dilations, True, output_padding, groups)
        if crop is None:
            return y
        return y[(slice(None), slice(None), *(slice(b, y.shape[2 + i] - e) for i, (b, e) in enumerate(crop)))]

    return TorchImpl(run)


# ---- pooling ----


def _torch_pads_pool(pads: Sequence[int], kernel: Sequence[int]) -> bool:
    """Whether torch's pooling can take `pads` itself (equal both sides, at most half the window)."""
    return symmetric_pads(pads) and all(p <= k // 2 for p, k in zip(pads, kernel, strict=False))


@torch_impl(nn.MaxPoolOp)
def max_pool(op: nn.MaxPoolOp) -> TorchImpl:
    kernel, strides, pads, dilations = ints(op.kernel), ints(op.strides), ints(op.pads), ints(op.dilations)
    ceil_mode, n = bool(op.ceil_mode.value.data), len(kernel)
    pool: Callable[..., torch.Tensor] = {1: torch.max_pool1d, 2: torch.max_pool2d, 3: torch.max_pool3d}[n]
    in_torch = _torch_pads_pool(pads, kernel)
    padding, spec = list(pads[:n]) if in_torch else [0] * n, torch_padding(pads)

    def padded(x: torch.Tensor) -> torch.Tensor:
        # Padding with -inf: padded positions never win.
        return x if in_torch else F.pad(x, spec, value=-math.inf)

    def run(x: torch.Tensor) -> torch.Tensor:
        return pool(padded(x), kernel, strides, padding, dilations, ceil_mode)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        """oneDNN's pooling, 5-10x ATen's NCHW max_pool2d here (6.5 ms against 1.2 ms on SqueezeNet's first, whose
        compare-and-branch loop mispredicts on real data), unless the input holds a NaN: oneDNN's max drops it,
        where ATen's, ONNX's and the reference propagate it (a NaN or mixed infinities make the sum NaN)."""
        x, out = args[0], results[0]
        if library_pool(op) != "onednn" or not torch.backends.mkldnn.is_available():
            return copy_back(run, args, results)

        def launch() -> None:
            source = padded(x)
            if torch.isnan(source.sum()):
                out.copy_(pool(source, kernel, strides, padding, dilations, ceil_mode))
                return
            out.copy_(
                torch.mkldnn_max_pool2d(source.to_mkldnn(), kernel, strides, padding, dilations, ceil_mode).to_dense()
            )

        return launch

    impl = TorchImpl(run, into)
    return in_channels_last(impl) if channels_last(op) else impl


def _avg_pool_function(rank: int) -> Callable[..., torch.Tensor]:
    """avg_pool{1,2,3}d(x, kernel, stride, padding, ceil_mode, count_include_pad[, divisor][, out=])."""
    return {3: torch.avg_pool1d, 4: ATEN_NN.avg_pool2d, 5: ATEN_NN.avg_pool3d}[rank]


@functools.cache
def _counted_cells(
    spatial: tuple[int, ...], spec: tuple[int, ...], include_pad: bool, kernel: tuple[int, ...],
    strides: tuple[int, ...], ceil_mode: bool, dtype: torch.dtype,
) -> torch.Tensor:  # fmt: skip
    """How many cells each window of an unevenly padded average pool counts: shape (1, 1, *output spatial)."""
    ones = torch.ones((1, 1, *spatial), dtype=dtype)
    pool = _avg_pool_function(len(spatial) + 2)
    padded = F.pad(ones, list(spec), value=1.0 if include_pad else 0.0)
    return pool(padded, kernel, strides, [0] * len(kernel), ceil_mode, True)


def _window_sums_into(dim: int, size: int) -> Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]:
    """An average over a window of `size` along one dim (stride 1, no padding): `size` shifted slices summed into
    the output, then scaled. torch-mlir lowers ONNX's LRN to such a pool over channels, of a (1, 1, C, H, W) view,
    which ATen's avg_pool3d runs on one thread (its only plane): Inception-v1's two took 0.2 and 0.7 ms this way
    (its three average pools, these two among them, 22.8 ms before)."""

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, out = args[0], results[0]
        count = out.shape[dim]
        slices = [x.narrow(dim, start, count) for start in range(size)]

        def launch() -> None:
            out.copy_(slices[0])
            for shifted in slices[1:]:
                out.add_(shifted)
            out.mul_(1.0 / size)

        return launch

    return into


@torch_impl(nn.AvgPoolOp)
def avg_pool(op: nn.AvgPoolOp) -> TorchImpl:
    impl = _channels_first_avg_pool(op)
    return in_channels_last(impl) if channels_last(op) else impl


def _channels_first_avg_pool(op: nn.AvgPoolOp) -> TorchImpl:
    kernel, strides, pads = ints(op.kernel), ints(op.strides), ints(op.pads)
    ceil_mode, include_pad, n = bool(op.ceil_mode.value.data), bool(op.count_include_pad.value.data), len(kernel)
    pool = _avg_pool_function(n + 2)
    if library_pool(op) == "window-sums":
        dim = next(d for d, k in enumerate(kernel) if k > 1)
        window = {"kernel_size": kernel, "stride": strides, "padding": [0] * n, "ceil_mode": ceil_mode}
        functional = partial(pool, **window, count_include_pad=include_pad)
        return TorchImpl(functional, _window_sums_into(dim + 2, kernel[dim]))
    if _torch_pads_pool(pads, kernel):
        window = {"kernel_size": kernel, "stride": strides, "padding": pads[:n], "ceil_mode": ceil_mode}
        if n == 1:  # avg_pool1d has no out= kernel
            return TorchImpl(partial(pool, **window, count_include_pad=include_pad))
        in_aten = aten(pool, **window, count_include_pad=include_pad)
        if n != 2:
            return in_aten

        def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
            """oneDNN's pooling where it pays (`library_pool`): 3-9x ATen's NCHW avg_pool2d on Inception's 3x3 ones,
            with the same results (sums in the same order)."""
            x, out = args[0], results[0]
            if library_pool(op) != "onednn" or not torch.backends.mkldnn.is_available():
                return in_aten.bind(args, results)
            arguments = (kernel, strides, pads[:n], ceil_mode, include_pad)
            return lambda: out.copy_(pool(x.to_mkldnn(), *arguments).to_dense())

        return TorchImpl(in_aten.run, into)
    spec = tuple(torch_padding(pads))

    def run(x: torch.Tensor) -> torch.Tensor:
        # Uneven pads: the sum over the explicitly padded input, divided by the count of counted cells.
        total = pool(F.pad(x, list(spec)), kernel, strides, [0] * n, ceil_mode, True)
        return total / _counted_cells(tuple(x.shape[2:]), spec, include_pad, kernel, strides, ceil_mode, x.dtype)

    return TorchImpl(run)


@torch_impl(nn.AdaptiveAvgPoolOp)
def adaptive_avg_pool(op: nn.AdaptiveAvgPoolOp) -> TorchImpl:
    size = ints(op.output_size)
    pool = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[len(size)]

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, out = args[0], results[0]
        if len(size) == 1:  # no 1-d out= kernel: the 2-d one over a unit dim
            return partial(ATEN_NN.adaptive_avg_pool2d, x.unsqueeze(2), (1, *size), out=out.unsqueeze(2))
        out_pool = {2: ATEN_NN.adaptive_avg_pool2d, 3: ATEN_NN.adaptive_avg_pool3d}[len(size)]
        return partial(out_pool, x, size, out=out)

    return TorchImpl(partial(pool, output_size=size), into)


@torch_impl(nn.AdaptiveMaxPoolOp)
def adaptive_max_pool(op: nn.AdaptiveMaxPoolOp) -> TorchImpl:
    size = ints(op.output_size)
    pool = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}[len(size)]
    return TorchImpl(partial(pool, output_size=size))


def _spatial_dims(op: nn.GlobalPoolOp) -> tuple[int, ...]:
    return tuple(range(2, len(static_shape(op.input))))


@torch_impl(nn.GlobalAvgPoolOp)
def global_avg_pool(op: nn.GlobalAvgPoolOp) -> TorchImpl:
    return aten(torch.mean, dim=_spatial_dims(op), keepdim=True)


@torch_impl(nn.GlobalMaxPoolOp)
def global_max_pool(op: nn.GlobalMaxPoolOp) -> TorchImpl:
    return aten(torch.amax, dim=_spatial_dims(op), keepdim=True)


# ---- sampling ----


@torch_impl(sampling.GridSampleOp)
def grid_sample(op: sampling.GridSampleOp) -> TorchImpl:
    mode, padding, align = op.mode.data, op.padding_mode.data, bool(op.align_corners.value.data)
    agrees = sampling.torch_grid_sample_agrees(len(static_shape(op.input)), mode, padding, align)
    sample = aten_grid_sample if agrees else onnx_grid_sample
    return TorchImpl(partial(sample, mode=mode, padding_mode=padding, align=align))


# ---- norms ----


@torch_impl(nn.BatchNormOp)
def batch_norm(op: nn.BatchNormOp) -> TorchImpl:
    epsilon = op.epsilon.value.data

    def run(
        x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor
    ) -> torch.Tensor:
        return F.batch_norm(x, mean, variance, scale, bias, False, 0.0, epsilon)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, scale, bias, mean, variance = args
        # Inference batch norm leaves the saved statistics empty; they still need tensors to be written to.
        empty = (torch.empty(0, dtype=x.dtype), torch.empty(0, dtype=x.dtype))
        return partial(
            torch.ops.aten.native_batch_norm.out, x, scale, bias, mean, variance, False, 0.0, epsilon,
            out=results[0], save_mean=empty[0], save_invstd=empty[1],
        )  # fmt: skip

    return TorchImpl(run, into)


@torch_impl(nn.BatchNormTrainOp)
def batch_norm_train(op: nn.BatchNormTrainOp) -> TorchImpl:
    epsilon = op.epsilon.value.data

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # ATen's training kernel: the statistics and the normalization in two passes over x, 2.7x faster here than
        # var_mean and an inference batch norm. It saves 1/sqrt(variance + eps); the op gives the variance.
        y, mean, inverse_std = torch.ops.aten.native_batch_norm(x, scale, bias, None, None, True, 0.0, epsilon)
        return y, mean, inverse_std.pow(-2) - epsilon

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, scale, bias = args
        y, mean, variance = results

        def launch() -> None:
            torch.ops.aten.native_batch_norm.out(
                x, scale, bias, None, None, True, 0.0, epsilon, out=y, save_mean=mean, save_invstd=variance
            )
            variance.pow_(-2).sub_(epsilon)

        return launch

    return TorchImpl(run, into)


@torch_impl(nn.LayerNormOp)
def layer_norm(op: nn.LayerNormOp) -> TorchImpl:
    axis, epsilon = op.axis.value.data, op.epsilon.value.data

    def run(x: torch.Tensor, scale: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
        return F.layer_norm(x, x.shape[axis % x.ndim :], scale, bias, epsilon)

    return TorchImpl(run)


@torch_impl(nn.InstanceNormOp)
def instance_norm(op: nn.InstanceNormOp) -> TorchImpl:
    epsilon = op.epsilon.value.data

    def run(x: torch.Tensor, scale: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
        return F.instance_norm(x, weight=scale, bias=bias, eps=epsilon)

    return TorchImpl(run)


@torch_impl(nn.GroupNormOp)
def group_norm(op: nn.GroupNormOp) -> TorchImpl:
    groups, epsilon = op.num_groups.value.data, op.epsilon.value.data

    def run(x: torch.Tensor, scale: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
        return F.group_norm(x, groups, scale, bias, epsilon)

    return TorchImpl(run)


@torch_impl(nn.LrnOp)
def lrn(op: nn.LrnOp) -> TorchImpl:
    return TorchImpl(
        partial(
            F.local_response_norm, size=op.size.value.data, alpha=op.alpha.value.data, beta=op.beta.value.data,
            k=op.bias.value.data,
        )
    )  # fmt: skip


# ---- softmax and attention ----


@torch_impl(nn.SoftmaxOp)
def softmax(op: nn.SoftmaxOp) -> TorchImpl:
    return aten(torch.softmax, dim=op.axis.value.data)


@torch_impl(nn.LogSoftmaxOp)
def log_softmax(op: nn.LogSoftmaxOp) -> TorchImpl:
    return aten(torch.log_softmax, dim=op.axis.value.data)


def _causal(mask: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """`mask` with positions j > i masked too (SDPA takes a mask or is_causal, not both)."""
    keep = torch.ones((rows, columns), dtype=torch.bool).tril()
    return mask & keep if mask.dtype == torch.bool else mask.masked_fill(~keep, -math.inf)


@torch_impl(nn.AttentionOp)
def attention(op: nn.AttentionOp) -> TorchImpl:
    scale, causal = op.scale.value.data, bool(op.is_causal.value.data)

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None and causal:
            return F.scaled_dot_product_attention(q, k, v, _causal(mask, q.shape[-2], k.shape[-2]), scale=scale)
        return F.scaled_dot_product_attention(q, k, v, mask, is_causal=causal, scale=scale)

    return TorchImpl(run)


# ---- attention in training: the CPU flash kernel each way, as eager's autograd runs it ----


@torch_impl(attention_train.AttentionTrainOp)
def attention_forward(op: attention_train.AttentionTrainOp) -> TorchImpl:
    scale, causal = op.scale.value.data, bool(op.is_causal.value.data)

    def run(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, attn_mask=mask, scale=scale
        )

    return TorchImpl(run)


@torch_impl(attention_train.AttentionGradOp)
def attention_backward(op: attention_train.AttentionGradOp) -> TorchImpl:
    scale, causal = op.scale.value.data, bool(op.is_causal.value.data)

    def run(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
            mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:  # fmt: skip
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            do, q, k, v, o, lse, 0.0, causal, attn_mask=mask, scale=scale
        )

    return TorchImpl(run)
