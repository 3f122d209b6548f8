"""Torch implementations of the graph dialect's gradient ops: ATen's own backward kernels (oneDNN's for a
convolution's weight, ATen's for max pooling), as torch's autograd calls them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
import torch.nn.functional as F

from gnomon.dialects.graph import grad
from gnomon.dialects.graph.base import ints
from gnomon.runtime.library.base import Launch, TorchImpl, symmetric_pads, torch_impl, torch_padding


def _padding(pads: Sequence[int]) -> tuple[list[int], list[int]]:
    """The padding ATen's kernel takes (symmetric), and an `F.pad` spec applied first where pads are uneven."""
    count = len(pads) // 2
    if symmetric_pads(pads):
        return list(pads[:count]), []
    return [0] * count, torch_padding(pads)


@torch_impl(grad.ConvWeightGradOp)
def conv_weight_grad(op: grad.ConvWeightGradOp) -> TorchImpl:
    kernel, strides, dilations = ints(op.kernel), list(ints(op.strides)), list(ints(op.dilations))
    padding, spec = _padding(ints(op.pads))
    groups = op.groups.value.data

    def run(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, spec) if any(spec) else x
        weight = torch.empty((dy.shape[1], x.shape[1] // groups, *kernel), dtype=x.dtype)
        _, dw, _ = torch.ops.aten.convolution_backward(
            dy, x, weight, None, strides, padding, dilations, False, [0] * len(kernel), groups, [False, True, False]
        )
        return dw

    return TorchImpl(run)


@torch_impl(grad.MaxPoolGradOp)
def max_pool_grad(op: grad.MaxPoolGradOp) -> TorchImpl:
    kernel, strides, dilations = list(ints(op.kernel)), list(ints(op.strides)), list(ints(op.dilations))
    padding, spec = _padding(ints(op.pads))
    ceil_mode = bool(op.ceil_mode.value.data)
    forward = getattr(torch.ops.aten, f"max_pool{len(kernel)}d_with_indices")
    backward = getattr(torch.ops.aten, f"max_pool{len(kernel)}d_with_indices_backward")

    def run(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        # The forward pass's winners, found again: cheaper than keeping an index tensor per pooled element alive
        # from the forward pass to the backward.
        padded = F.pad(x, spec, value=-torch.inf) if any(spec) else x
        _, indices = forward(padded, kernel, strides, padding, dilations, ceil_mode)
        dx = backward(dy, padded, kernel, strides, padding, dilations, ceil_mode, indices)
        if not any(spec):
            return dx
        crop = [slice(None), slice(None)]
        for i in range(len(kernel)):
            begin, end = spec[2 * (len(kernel) - 1 - i)], spec[2 * (len(kernel) - 1 - i) + 1]
            crop.append(slice(begin, dx.shape[2 + i] - end))
        return dx[tuple(crop)]

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        dy, x = args

        def launch() -> None:
            _, indices = forward(x, kernel, strides, padding, dilations, ceil_mode)
            backward.grad_input(dy, x, kernel, strides, padding, dilations, ceil_mode, indices, grad_input=results[0])

        return launch

    return TorchImpl(run, None if any(spec) else into)


@torch_impl(grad.AvgPoolGradOp)
def avg_pool_grad(op: grad.AvgPoolGradOp) -> TorchImpl:
    kernel, strides, pads = list(ints(op.kernel)), list(ints(op.strides)), ints(op.pads)
    count = len(kernel)
    if not symmetric_pads(pads):
        raise NotImplementedError("graph.avg_pool_grad with uneven pads")  # torch.export's graphs have even ones
    ceil_mode, include = bool(op.ceil_mode.value.data), bool(op.count_include_pad.value.data)
    backward = getattr(torch.ops.aten, f"avg_pool{count}d_backward")

    def run(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return backward(dy, x, kernel, strides, list(pads[:count]), ceil_mode, include, None)

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        dy, x = args
        grad_input = backward.grad_input
        return partial(grad_input, dy, x, kernel, strides, list(pads[:count]), ceil_mode, include, None,
                       grad_input=results[0])  # fmt: skip

    return TorchImpl(run, into)


def _bag_rows(dy: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, weights: Sequence[torch.Tensor],
              mean: bool, factor: float = 1.0) -> torch.Tensor:  # fmt: skip
    """Each looked-up row's share of its bag's gradient, times `factor`. The per-row scale is applied only where
    rows differ (mean mode, per-sample weights, indices past the last bag): broadcasting it costs more than the
    gather (2 ms against 0.04 for 10k rows of 64 here)."""
    bags, count = dy.shape[0], indices.shape[0]
    positions = torch.arange(count)
    bag = (torch.searchsorted(offsets[:bags].contiguous(), positions, right=True) - 1).clamp(min=0)
    end = int(offsets[bags]) if offsets.shape[0] > bags else count
    rows = dy.index_select(0, bag)
    if not (mean or weights or end < count):
        return rows.mul_(factor) if factor != 1.0 else rows
    scale = (positions < end).to(dy.dtype)  # indices after the last bag's end (`include_last_offset`)
    if mean:
        sizes = torch.bincount(bag, weights=scale, minlength=bags).clamp(min=1)
        scale = scale / sizes.index_select(0, bag)
    if weights:
        scale = scale * weights[0]
    return rows.mul_((scale * factor).unsqueeze(1))


@torch_impl(grad.EmbeddingBagGradOp)
def embedding_bag_grad(op: grad.EmbeddingBagGradOp) -> TorchImpl:
    rows, mean = op.rows.value.data, op.mode.data == "mean"

    def rows_of(dy: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, weights: Sequence[torch.Tensor]):
        return _bag_rows(dy, indices, offsets, weights, mean)

    def run(dy: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
        table = torch.zeros((rows, dy.shape[1]), dtype=dy.dtype)
        return table.index_add_(0, indices, rows_of(dy, indices, offsets, weights))

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        dy, indices, offsets, *weights = args
        table = results[0]

        def launch() -> None:
            table.zero_()
            table.index_add_(0, indices, rows_of(dy, indices, offsets, weights))

        return launch

    return TorchImpl(run, into)


@torch_impl(grad.EmbeddingBagUpdateOp)
def embedding_bag_update(op: grad.EmbeddingBagUpdateOp) -> TorchImpl:
    mean, scale = op.mode.data == "mean", op.scale.value.data

    def run(table: torch.Tensor, dy: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor,
            *weights: torch.Tensor) -> torch.Tensor:  # fmt: skip
        return table.index_add(0, indices, _bag_rows(dy, indices, offsets, weights, mean, scale))

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        table, dy, indices, offsets, *weights = args
        out = results[0]
        # The step's update in place (`rt.UPDATES`): the result is the table's own memory, and only its looked-up
        # rows change; elsewhere the table is copied first.
        aliased = out.data_ptr() == table.data_ptr()

        def launch() -> None:
            if not aliased:
                out.copy_(table)
            # The scale folded into the rows: index_add_'s alpha takes a slow path (5x, 10k rows of 64 here).
            out.index_add_(0, indices, _bag_rows(dy, indices, offsets, weights, mean, scale))

        return launch

    return TorchImpl(run, into)


@torch_impl(grad.EmbeddingBagAdamUpdateOp)
def embedding_bag_adam_update(op: grad.EmbeddingBagAdamUpdateOp) -> TorchImpl:
    mean = op.mode.data == "mean"
    beta1, beta2, eps = op.beta1.value.data, op.beta2.value.data, op.eps.value.data

    def step(table: torch.Tensor, m: torch.Tensor, v: torch.Tensor, dy: torch.Tensor, indices: torch.Tensor,
             offsets: torch.Tensor, step_size: torch.Tensor, weights: Sequence[torch.Tensor]) -> None:  # fmt: skip
        """SparseAdam's step on the looked-up rows of `table`, `m` and `v`, in place, with torch's own arithmetic
        (`torch.optim._functional.sparse_adam`)."""
        bags = dy.shape[0]
        end = int(offsets[bags]) if offsets.shape[0] > bags else indices.shape[0]
        # The gradient coalesced, one row per distinct looked-up row, as torch coalesces the sparse gradient:
        # the step is not linear in it. Lookups past the last bag's end are in no bag.
        rows, inverse = torch.unique(indices[:end], return_inverse=True)
        g = torch.zeros((rows.shape[0], dy.shape[1]), dtype=dy.dtype)
        g.index_add_(0, inverse, _bag_rows(dy, indices, offsets, weights, mean)[:end])
        old_m, old_v = m.index_select(0, rows), v.index_select(0, rows)
        new_m = (g - old_m).mul_(1 - beta1).add_(old_m)
        new_v = g.mul_(g).sub_(old_v).mul_(1 - beta2).add_(old_v)
        m.index_copy_(0, rows, new_m)
        v.index_copy_(0, rows, new_v)
        # The rows are distinct: index_add_ adds each one's update once, as torch's dense += sparse does.
        table.index_add_(0, rows, new_m.div_(new_v.sqrt_().add_(eps)).mul_(-step_size))

    def run(table: torch.Tensor, m: torch.Tensor, v: torch.Tensor, *rest: torch.Tensor) -> tuple[torch.Tensor, ...]:
        dy, indices, offsets, step_size, *weights = rest
        table, m, v = table.clone(), m.clone(), v.clone()
        step(table, m, v, dy, indices, offsets, step_size, weights)
        return table, m, v

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        table, m, v, dy, indices, offsets, step_size, *weights = args
        # The step's update in place: each result may be its input's own memory, and then only the looked-up rows
        # change; elsewhere the input is copied first.
        copies = [(out, x) for out, x in zip(results, (table, m, v), strict=True) if out.data_ptr() != x.data_ptr()]
        new_table, new_m, new_v = results

        def launch() -> None:
            for out, x in copies:
                out.copy_(x)
            step(new_table, new_m, new_v, dy, indices, offsets, step_size, weights)

        return launch

    return TorchImpl(run, into)
