"""Attention in a training step: PyTorch eager's CPU flash kernels each way (`graph.attention_train`,
`graph.attention_grad`), imported from the joint graph, run by the reference interpreter and the native runtime,
and priced as one kernel each."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import relative_l2
from torch import nn
from torch.utils.flop_counter import sdpa_backward_flop_count
from xdsl.parser import Parser

import gnomon
from gnomon.analysis import eager_training_graph
from gnomon.context import gnomon_context
from gnomon.cost.devices import load_device
from gnomon.cost.graph import graph_ops
from gnomon.cost.roofline import gemm_shapes
from gnomon.dialects.graph.attention_train import AttentionGradOp, AttentionTrainOp
from gnomon.dialects.graph.nn import SoftmaxOp
from gnomon.frontends.torch_training import import_torch_training
from gnomon.models import TransformerBlock
from gnomon.optimizers import SGD
from gnomon.pipeline import to_graph
from gnomon.reference import run_reference


class Attention(nn.Module):
    """Projections into heads, scaled dot-product attention under one of several masks, a projection out."""

    def __init__(self, mask: str, causal: bool = False, dropout: float = 0.0, dim: int = 16, heads: int = 2):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.mask, self.causal, self.dropout, self.heads = mask, causal, dropout, heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        mask: torch.Tensor | None = None
        if self.mask == "float":
            mask = torch.linspace(-1.0, 1.0, length * length).reshape(length, length)
        elif self.mask == "bool":  # the second query attends no key: its output and gradients are zeros
            mask = torch.ones(length, length, dtype=torch.bool).tril()
            mask[1] = False
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal, dropout_p=self.dropout)
        return self.out(z.transpose(1, 2).reshape(batch, length, dim))


_T5, _T7 = "tensor<2x3x5x8xf32>", "tensor<2x3x7x8xf32>"

CASES = [("none", False), ("none", True), ("float", False), ("float", True), ("bool", False)]


def _ops(module: object) -> list[object]:
    return list(graph_ops(module))  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(("mask", "causal"), CASES)
def test_flash_attention_trains_as_autograd(mask: str, causal: bool) -> None:
    """The joint graph keeps eager's flash kernels (no softmax left), and the reference interpreter and the
    compiled step give autograd's gradients."""
    model = Attention(mask, causal)
    x, target = torch.randn(2, 6, 16), torch.randn(2, 6, 16)
    wrapped = gnomon.with_loss(copy.deepcopy(model), "mse")
    module = to_graph(import_torch_training(copy.deepcopy(wrapped), (x, target), "Attention"))
    kinds = [type(op) for op in _ops(module)]
    assert kinds.count(AttentionTrainOp) == 1
    assert kinds.count(AttentionGradOp) == 1
    assert SoftmaxOp not in kinds

    wrapped(x, target).backward()
    parameters = [p.detach().numpy() for p in model.parameters()]
    reference = run_reference(module, [*parameters, x.numpy(), target.numpy()])
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "mse"), (x, target), train=True)
    step.step(x.numpy(), target.numpy())
    for index, (name, p) in enumerate(wrapped.model.named_parameters()):
        assert p.grad is not None
        assert relative_l2(reference[1 + index], p.grad.numpy()) <= 1e-5, name
        assert relative_l2(step.gradients()[name], p.grad.numpy()) <= 1e-5, name


def test_attention_with_dropout_keeps_torchs_math() -> None:
    """Eager's flash kernel takes no dropout, so torch's math stays (a softmax and its mask's draw)."""
    model = Attention("none", dropout=0.1)
    module = to_graph(import_torch_training(gnomon.with_loss(model, "mse"), (torch.randn(2, 6, 16),) * 2, "A"))
    kinds = {type(op) for op in _ops(module)}
    assert AttentionTrainOp not in kinds
    assert SoftmaxOp in kinds


def test_the_backward_kernel_counts_flop_counter_modes_five_products() -> None:
    model = TransformerBlock(d_model=32, heads=4, seq=8)
    batch = (*model.example_inputs(2), torch.randn(2, 8, 32))
    module = to_graph(import_torch_training(gnomon.with_loss(model, "mse"), batch, "block"))
    (grad,) = [op for op in _ops(module) if isinstance(op, AttentionGradOp)]
    shapes = [tuple(v.type.get_shape()) for v in (grad.grad_output, grad.query, grad.key, grad.value)]
    expected = sdpa_backward_flop_count(shapes[0], shapes[1], shapes[2], shapes[3])
    assert sum(s.flops for s in gemm_shapes(grad)) == expected


def test_eager_training_prices_one_kernel_each_way() -> None:
    """torch-eager's step of a transformer block: one attention kernel forward and one backward, as eager's
    profile shows (`_scaled_dot_product_flash_attention_for_cpu` and its `_backward`), no softmax."""
    model = TransformerBlock(d_model=32, heads=4, seq=8)
    batch = (*model.example_inputs(2), torch.randn(2, 8, 32))
    graph = eager_training_graph(gnomon.with_loss(model, "mse"), batch, None, None, SGD(lr=0.1))
    records = graph.report(load_device("generic-cpu")).records
    ops = [r.op for r in records]
    assert ops.count("attention_train") == 1
    assert ops.count("attention_grad") == 1
    assert "softmax" not in ops
    assert all(r.model == "attention" for r in records if r.op.startswith("attention"))


def test_the_reference_backward_matches_torchs_kernel() -> None:
    """`graph.attention_grad`'s reference semantics against the flash backward kernel itself, causal and masked."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    mask, do = torch.randn(5, 7), torch.randn(2, 3, 5, 8)
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    out, lse = kernel(q, k, v, 0.0, True, attn_mask=mask, scale=0.3)
    grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        do, q, k, v, out, lse, 0.0, True, attn_mask=mask, scale=0.3
    )
    text = f"""
    func.func @main(%do: tensor<2x3x5x8xf32>, %q: tensor<2x3x5x8xf32>, %k: tensor<2x3x7x8xf32>,
                    %v: tensor<2x3x7x8xf32>, %m: tensor<5x7xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>,
                    tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>) {{
      %o:2 = graph.attention_train %q, %k, %v, %m {{scale = 0.3 : f64, is_causal = true}} : ({_T5}, {_T7}, {_T7},
        tensor<5x7xf32>) -> ({_T5}, tensor<2x3x5xf32>)
      %g:3 = graph.attention_grad %do, %q, %k, %v, %o#0, %o#1, %m {{scale = 0.3 : f64, is_causal = true}}
        : ({_T5}, {_T5}, {_T7}, {_T7}, {_T5}, tensor<2x3x5xf32>, tensor<5x7xf32>) -> ({_T5}, {_T7}, {_T7})
      func.return %o#0, %o#1, %g#0, %g#1, %g#2 : {_T5}, tensor<2x3x5xf32>, {_T5}, {_T7}, {_T7}
    }}"""
    results = run_reference(Parser(gnomon_context(), text).parse_module(), [t.numpy() for t in (do, q, k, v, mask)])
    for got, expected in zip(results, (out, lse, *grads), strict=True):
        assert relative_l2(np.asarray(got), expected.numpy()) <= 1e-5
