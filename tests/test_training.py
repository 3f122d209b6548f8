"""Training steps: gradients, optimizer steps and batch-norm statistics against torch's autograd and torch.optim;
the gradient ops' reference semantics; FLOPs against FlopCounterMode; errors a user gets for bad training input."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import relative_l2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from xdsl.parser import Parser

import gnomon
from gnomon.context import gnomon_context
from gnomon.cost.analytical import GEMM_OPS
from gnomon.cost.graph import graph_ops
from gnomon.cost.roofline import gemm_shapes
from gnomon.errors import GnomonError, ModelLoadError
from gnomon.frontends.torch_training import import_torch_training
from gnomon.models import DLRM, MLP, LSTMClassifier, ResNet18, SmallCNN, TransformerBlock
from gnomon.pipeline import to_graph
from gnomon.reference import run_reference
from gnomon.runtime.torch_eager import TorchEagerProgram

# ---- models built from code (besides gnomon.models') ----


class CausalAttention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class SequenceModel(nn.Module):
    """An embedding, layer norm, tanh GELU and a GRU."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 16)
        self.norm = nn.LayerNorm(16)
        self.gru = nn.GRU(16, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(F.gelu(self.norm(self.embedding(ids)), approximate="tanh"))[0].mean(1))


class MaskedAttention(nn.Module):
    """Multi-head attention with a key padding mask (its last key padded out) and scaled dot-product attention
    with a boolean mask: the backward pass's attention reads the forward pass's mask."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        padding = torch.zeros(batch, length, dtype=torch.bool)
        padding[:, -1] = True
        y = self.attention(x, x, x, key_padding_mask=padding, need_weights=False)[0]
        q, k, v = self.qkv(y).view(batch, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        keep = torch.ones(length, length).tril().bool()
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return z.transpose(1, 2).reshape(batch, length, dim)


class InstanceNormModel(nn.Module):
    """A convolution, group norm, ReLU and an affine instance norm (batch norm without running statistics over
    the batch's planes, in training), a mean over space."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3)
        self.group = nn.GroupNorm(2, 8)
        self.instance = nn.InstanceNorm2d(8, affine=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.hardswish(self.instance(F.relu(self.group(self.conv(x))))).mean((2, 3)))


class SignalModel(nn.Module):
    """A 1-d convolution, group norm, SiLU and a max over time."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.silu(self.norm(self.conv(x))).amax(-1))


def _case(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], str]:
    """A model, a batch (inputs then target) and its loss, by name."""
    torch.manual_seed(0)
    match name:
        case "mlp":
            model = MLP(sizes=(32, 64, 10))
            return model, (*model.example_inputs(8), torch.randint(0, 10, (8,))), "cross_entropy"
        case "cnn":
            model = SmallCNN()
            return model, (*model.example_inputs(4), torch.randint(0, 10, (4,))), "cross_entropy"
        case "transformer":
            model = TransformerBlock(d_model=32, heads=4, seq=8)
            return model, (*model.example_inputs(2), torch.randn(2, 8, 32)), "mse"
        case "explicit_attention":
            model = TransformerBlock(d_model=32, heads=4, seq=8, explicit_attention=True)
            return model, (*model.example_inputs(2), torch.randn(2, 8, 32)), "mse"
        case "dlrm":
            model = DLRM(dense_features=13, tables=3, rows=100, dim=16, pooling=4)
            return model, (*model.example_inputs(8), torch.rand(8, 1)), "bce_with_logits"
        case "resnet18":
            model = ResNet18(width=8, classes=10, image=32)
            return model, (*model.example_inputs(2), torch.randint(0, 10, (2,))), "cross_entropy"
        case "lstm":
            model = LSTMClassifier(features=8, hidden=16, layers=2, classes=4, steps=5)
            return model, (*model.example_inputs(3), torch.randint(0, 4, (3,))), "cross_entropy"
        case "causal_attention":
            return CausalAttention(), (torch.randn(2, 6, 16), torch.randn(2, 6, 16)), "mse"
        case "masked_attention":
            return MaskedAttention(), (torch.randn(2, 6, 16), torch.randn(2, 6, 16)), "mse"
        case "instance_norm":
            return InstanceNormModel(), (torch.randn(2, 4, 8, 8), torch.randint(0, 3, (2,))), "cross_entropy"
        case "sequence":
            return SequenceModel(), (torch.randint(0, 50, (2, 5)), torch.randint(0, 3, (2,))), "cross_entropy"
        case "signal":
            return SignalModel(), (torch.randn(2, 4, 10), torch.randint(0, 2, (2,))), "nll"
        case _:
            raise KeyError(name)


MODELS = [
    "mlp", "cnn", "transformer", "explicit_attention", "dlrm", "resnet18", "lstm",
    "causal_attention", "masked_attention", "instance_norm", "sequence", "signal",
]  # fmt: skip


def _numpy(batch: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    return [x.numpy() for x in batch]


def _track_torch(step: Any, reference: nn.Module, optimizers: list[torch.optim.Optimizer],
                 batch: tuple[torch.Tensor, ...], steps: int) -> None:  # fmt: skip
    """`steps` steps of gnomon's and of torch's (zero_grad, the loss, backward, each optimizer's step) on the
    batch: the losses within 1e-5 of torch's."""
    for _ in range(steps):
        got = step.step(*_numpy(batch))
        for optimizer in optimizers:
            optimizer.zero_grad()
        expected = reference(*batch)
        expected.backward()
        for optimizer in optimizers:
            optimizer.step()
        assert got == pytest.approx(expected.item(), rel=1e-5)


# ---- gradients ----


@pytest.mark.parametrize("name", MODELS)
def test_first_step_gradients_match_autograd(name: str) -> None:
    """The loss and every parameter's gradient of one step, against torch's autograd. Each gradient is compared
    with float64 autograd and must be within 1e-4 of it, or within 3x as far from it as float32 autograd is (a
    gradient that cancels to near zero is ill-conditioned in float32 for torch too, and another summation order
    lands elsewhere: the CNN's block1 batch-norm weight, 8.9e-4 from float64 in torch, is 1.9e-3 from it once
    gnomon's forward runs its 1x1 convolution as generated loops)."""
    model, batch, loss = _case(name)
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=gnomon.SGD(lr=0.01))
    first_loss = step.step(*_numpy(batch))
    single = gnomon.with_loss(copy.deepcopy(model), loss).train()
    expected_loss = single(*batch)
    expected_loss.backward()
    exact = gnomon.with_loss(copy.deepcopy(model).double(), loss).train()
    exact(*(x.double() if x.is_floating_point() else x for x in batch)).backward()
    assert abs(first_loss - expected_loss.item()) <= 1e-4 * abs(expected_loss.item())
    gradients = step.gradients()
    assert sorted(gradients) == sorted(n for n, _ in model.named_parameters())
    for (name_, p32), (_, p64) in zip(single.model.named_parameters(), exact.model.named_parameters(), strict=True):
        assert p32.grad is not None
        assert p64.grad is not None
        truth = p64.grad.numpy()
        torch_error = relative_l2(p32.grad.numpy(), truth)
        assert relative_l2(gradients[name_], truth) <= max(1e-4, 3 * torch_error), name_


# ---- optimizer steps ----

OPTIMIZERS = [
    pytest.param(
        gnomon.SGD(lr=0.05, momentum=0.9),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=True),
        id="sgd-momentum",
    ),
    pytest.param(
        gnomon.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=True),
        id="sgd-nesterov-decay",
    ),
    pytest.param(
        gnomon.SGD(lr=0.05, momentum=0.5, dampening=0.3),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.3, foreach=True),
        id="sgd-dampening",
    ),
    pytest.param(gnomon.Adam(lr=1e-2), lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True), id="adam"),
    pytest.param(
        gnomon.Adam(lr=1e-2, weight_decay=1e-2),
        lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-2, foreach=True),
        id="adam-decay",
    ),
    pytest.param(gnomon.AdamW(lr=1e-2), lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True), id="adamw"),
]


@pytest.mark.parametrize("name", ["mlp", "cnn"])
@pytest.mark.parametrize(("optimizer", "torch_optimizer"), OPTIMIZERS)
def test_twenty_steps_track_torch(
    name: str, optimizer: Any, torch_optimizer: Callable[[Any], torch.optim.Optimizer]
) -> None:
    """20 steps on one batch: the losses within 1e-4 of torch's, the parameters too, the batch-norm statistics
    within 1e-3, and the optimizer's step count as torch's."""
    model, batch, loss = _case(name)
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer)
    reference = gnomon.with_loss(copy.deepcopy(model), loss).train()
    optim = torch_optimizer(reference.parameters())
    for _ in range(20):
        ours = step.step(*_numpy(batch))
        optim.zero_grad()
        theirs = reference(*batch)
        theirs.backward()
        optim.step()
        assert abs(ours - theirs.item()) <= 1e-4 * abs(theirs.item())
    state = step.state_dict()
    for key, value in reference.model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue  # torch counts batches only for a momentum of None; gnomon does not keep the count
        # Batch statistics follow the activations, which 20 Adam steps move a little apart with the parameters.
        assert relative_l2(state[key], value.numpy()) <= (1e-3 if "running" in key else 1e-4), key
    assert step.steps == 20


def test_batch_norm_statistics_follow_torch() -> None:
    """The running mean and (unbiased) variance after a step, for each batch norm of a ResNet-18-style network."""
    model, batch, loss = _case("resnet18")
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=True)
    step.step(*_numpy(batch))
    reference = gnomon.with_loss(copy.deepcopy(model), loss).train()
    reference(*batch)
    state = step.state_dict()
    statistics = [k for k in reference.model.state_dict() if k.endswith(("running_mean", "running_var"))]
    assert len(statistics) == 2 * 20  # the stem's, two per block, and three shortcuts'
    for key in statistics:
        assert relative_l2(state[key], reference.model.state_dict()[key].numpy()) <= 1e-4, key


def test_state_loads_and_restores() -> None:
    """load_state_dict puts a step back where it was: the same batch then gives the same loss."""
    model, batch, loss = _case("mlp")
    step = gnomon.compile(gnomon.with_loss(model, loss), batch, train=gnomon.Adam(lr=1e-2))
    saved = {**step.state_dict(), **step.optimizer_state()}
    first = step.step(*_numpy(batch))
    step.step(*_numpy(batch))
    step.load_state_dict(saved)
    assert step.step(*_numpy(batch)) == first
    with pytest.raises(GnomonError, match=re.escape("load_state_dict: the training step has no state named 'nope'")):
        step.load_state_dict({"nope": np.zeros(1)})
    with pytest.raises(GnomonError, match=re.escape("load_state_dict: 'layers.0.bias' has shape [64], got [3]")):
        step.load_state_dict({"layers.0.bias": np.zeros(3)})


@pytest.mark.parametrize(("optimizer", "kernels"), [(gnomon.Adam(), 3), (gnomon.SGD(momentum=0.9), 2)])
def test_the_optimizer_update_is_located_and_fused(optimizer: Any, kernels: int) -> None:
    """Each parameter's update is one generated kernel per new tensor (Adam: the two moments, then the parameter;
    SGD: the momentum, then the parameter), located at `optimizer.<name>`, and written into the state in place."""
    model, batch, loss = _case("mlp")
    step = gnomon.compile(gnomon.with_loss(model, loss), batch, train=optimizer)
    step.step(*_numpy(batch))
    program = step.executable.program
    assert program is not None
    launches = [launch for launch in program.launches if launch.location.startswith("optimizer.")]
    parameters = [n for n, _ in model.named_parameters()]
    assert sorted({launch.location for launch in launches}) == sorted(f"optimizer.{n}" for n in parameters)
    assert len(launches) == kernels * len(parameters)
    state = {array.ctypes.data for array in program.inputs}
    assert all(launch.results[0].ctypes.data in state for launch in launches)
    assert step.memory().at_peak["temporaries"] < min(p.numel() * 4 for p in model.parameters() if p.dim() == 2)


def test_the_step_reports_its_memory_by_category() -> None:
    """Parameters, updated buffers, optimizer state and batch outside the arena, by their arrays' sizes; the arena
    planned within 1.05x of its liveness lower bound, and what is live at its peak, split into gradients, saved
    activations and temporaries, adding up to that peak."""
    model, batch, loss = _case("cnn")
    step = gnomon.compile(gnomon.with_loss(model, loss), batch, train=gnomon.Adam())
    memory = step.memory()
    parameter_bytes = sum(p.numel() * 4 for p in model.parameters())
    outside = memory.outside
    assert outside["parameters"] == parameter_bytes
    assert outside["buffers"] == sum(b.numel() * b.element_size() for b in model.buffers())  # batch-norm statistics
    assert outside["optimizer state"] == 2 * parameter_bytes + 4  # Adam's two moments, and the step count
    assert outside["batch"] == sum(x.numel() * x.element_size() for x in batch)
    assert memory.arena_lower_bound <= memory.arena <= 1.05 * memory.arena_lower_bound
    assert sum(memory.at_peak.values()) == memory.arena_lower_bound
    assert memory.at_peak["saved activations"] > 0
    assert 0 < memory.at_peak["gradients"] <= parameter_bytes
    assert memory.total == sum(outside.values()) + memory.arena


# ---- gradient ops: reference semantics ----


class Windows(nn.Module):
    """Strided, padded, dilated and grouped convolutions, max and average pools with uneven coverage, an embedding
    bag with an empty bag."""

    def __init__(self, groups: int, stride: int, padding: int, dilation: int, ceil_mode: bool, include: bool):
        super().__init__()
        self.conv = nn.Conv2d(4, 4 * groups, 3, stride, padding, dilation, groups=groups)
        self.pool = nn.MaxPool2d(3, 2, 1, ceil_mode=ceil_mode)
        self.average = nn.AvgPool2d(3, 2, 1, ceil_mode=ceil_mode, count_include_pad=include)
        self.table = nn.EmbeddingBag(20, 4, mode="mean")

    def forward(self, x: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        pooled = self.pool(y).square().mean() + self.average(y).square().mean()
        return (pooled + self.table(ids, offsets).square().mean()) * 10


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.sampled_from([1, 2, 4]),
    stride=st.integers(1, 2),
    padding=st.integers(0, 2),
    dilation=st.integers(1, 2),
    ceil_mode=st.booleans(),
    include=st.booleans(),
    size=st.integers(7, 12),
)
def test_gradient_ops_reference_and_runtime_match_autograd(
    groups: int, stride: int, padding: int, dilation: int, ceil_mode: bool, include: bool, size: int
) -> None:
    """The training step's graph run by the reference interpreter and by the native runtime, against autograd:
    `graph.conv_weight_grad`, the transposed convolution of the input's gradient, `graph.max_pool_grad`,
    `graph.avg_pool_grad` and `graph.embedding_bag_grad`."""
    torch.manual_seed(0)
    model = Windows(groups, stride, padding, dilation, ceil_mode, include)
    x = torch.randn(2, 4, size, size, requires_grad=True)
    ids, offsets = torch.randint(0, 20, (9,)), torch.tensor([0, 3, 3, 7])
    module = to_graph(import_torch_training(copy.deepcopy(model), (x, ids, offsets), "Windows"))
    parameters = [p.detach().numpy() for p in model.parameters()]
    reference = run_reference(module, [*parameters, x.detach().numpy(), ids.numpy(), offsets.numpy()])
    model(x, ids, offsets).backward()
    for computed, p in zip(reference[1:], model.parameters(), strict=True):
        assert p.grad is not None
        assert relative_l2(computed, p.grad.numpy()) <= 1e-5
    step = gnomon.compile(copy.deepcopy(model), (x.detach(), ids, offsets), train=True)
    step.step(x.detach().numpy(), ids.numpy(), offsets.numpy())
    for name, p in model.named_parameters():
        assert p.grad is not None
        assert relative_l2(step.gradients()[name], p.grad.numpy()) <= 1e-5, name


class Upsampler(nn.Module):
    """A 1x1 convolution into a transposed convolution (so both its input's and its weight's gradients are asked
    for), a tanh."""

    def __init__(self, stride: int, padding: int, output_padding: int, dilation: int, groups: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.pre = nn.Conv2d(4, 4, 1)
        self.up = nn.ConvTranspose2d(4, 6, 3, stride, padding, output_padding, groups, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.up(self.pre(x)))


@pytest.mark.parametrize(
    ("stride", "padding", "output_padding", "dilation", "groups"),
    [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 0, 1, 1, 2), (3, 2, 2, 2, 1), (2, 1, 0, 2, 2)],
)
def test_transposed_convolution_gradients_match_autograd(
    stride: int, padding: int, output_padding: int, dilation: int, groups: int
) -> None:
    """A transposed convolution's backward: its input's gradient a convolution by the same weight, its weight's a
    weight gradient with the roles of input and result swapped, against float64 autograd."""
    model = Upsampler(stride, padding, output_padding, dilation, groups)
    x = torch.randn(2, 4, 5, 6)
    with torch.no_grad():
        target = torch.randn_like(model(x))
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "mse"), (x, target), train=gnomon.SGD(lr=0.1))
    loss = step.step(x.numpy(), target.numpy())
    exact = gnomon.with_loss(copy.deepcopy(model).double(), "mse")
    expected = exact(x.double(), target.double())
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    for name, p in exact.model.named_parameters():
        assert p.grad is not None
        assert relative_l2(step.gradients()[name], p.grad.numpy()) <= 1e-5, name


class AdaptivePooling(nn.Module):
    def __init__(self, output_size: tuple[int, int] | int, one_dimensional: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3)
        self.output_size = output_size
        self.one_dimensional = one_dimensional

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.conv(x))
        if self.one_dimensional:
            return F.adaptive_avg_pool1d(y.flatten(2), self.output_size).square().mean()
        return F.adaptive_avg_pool2d(y, self.output_size).square().mean()


@pytest.mark.parametrize(
    ("output_size", "one_dimensional"), [((3, 3), False), ((3, 4), False), ((4, 2), False), (5, True)]
)
def test_adaptive_average_pooling_gradients_match_autograd(
    output_size: tuple[int, int] | int, one_dimensional: bool
) -> None:
    """Adaptive windows that overlap and differ in size (7 rows into 3 or 4 cells, 5 columns into 2): each cell's
    gradient spread evenly over its window, against float64 autograd."""
    model, x = AdaptivePooling(output_size, one_dimensional), torch.randn(2, 3, 9, 7)
    step = gnomon.compile(copy.deepcopy(model), (x,), train=gnomon.SGD(lr=0.1))
    loss = step.step(x.numpy())
    exact = copy.deepcopy(model).double()
    expected = exact(x.double())
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    for name, p in exact.named_parameters():
        assert p.grad is not None
        assert relative_l2(step.gradients()[name], p.grad.numpy()) <= 1e-5, name


# ---- FLOPs ----


@pytest.mark.parametrize("name", ["mlp", "explicit_attention", "dlrm", "resnet18"])
def test_backward_flops_equal_flop_counter_mode(name: str) -> None:
    """The products of a training step (forward and backward) count as many FLOPs as FlopCounterMode counts for
    torch's step. (Its count of a grouped convolution's weight gradient ignores the groups, and it counts no FLOPs
    for CPU flash attention: those models are left out.)"""
    model, batch, loss = _case(name)
    module = to_graph(import_torch_training(gnomon.with_loss(copy.deepcopy(model), loss), batch, name))
    ours = sum(s.flops for op in graph_ops(module) if isinstance(op, GEMM_OPS) for s in gemm_shapes(op))
    wrapped = gnomon.with_loss(copy.deepcopy(model), loss).train()
    with FlopCounterMode(display=False) as counter:
        wrapped(*batch).backward()
    assert ours == counter.get_total_flops()


# ---- bad input ----


class TwoOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def test_a_model_that_returns_no_loss_is_refused() -> None:
    with pytest.raises(
        ModelLoadError,
        match=re.escape(
            "TwoOutputs returns a tensor of shape [3, 2]: a model trained by gnomon returns its loss, one scalar "
            "(attach a loss with gnomon.with_loss(model, loss_fn))"
        ),
    ):
        gnomon.compile(TwoOutputs(), (torch.randn(3, 4),), train=True)


def test_a_model_without_trainable_parameters_is_refused() -> None:
    model = gnomon.with_loss(TwoOutputs().requires_grad_(False), "mse")
    with pytest.raises(
        ModelLoadError, match=re.escape("WithLoss has no trainable parameter: there is nothing to train")
    ):
        gnomon.compile(model, (torch.randn(3, 4), torch.randn(3, 2)), train=True)


def test_bad_losses_and_optimizers_are_one_line_errors() -> None:
    with pytest.raises(ModelLoadError, match=re.escape("unknown loss 'hinge'; choose one of cross_entropy, mse")):
        gnomon.with_loss(TwoOutputs(), "hinge")
    with pytest.raises(GnomonError, match=re.escape("SGD: lr must be at least 0, got -1.0")):
        gnomon.SGD(lr=-1.0)
    with pytest.raises(GnomonError, match=re.escape("Adam: betas must be in [0, 1), got (0.9, 1.0)")):
        gnomon.Adam(betas=(0.9, 1.0))
    with pytest.raises(GnomonError, match=re.escape("train= takes True, gnomon.SGD(...), gnomon.Adam(...)")):
        gnomon.compile(gnomon.with_loss(TwoOutputs(), "mse"), (torch.randn(3, 4), torch.randn(3, 2)), train="sgd")


class Dropouts(nn.Module):
    """Two dropouts one after the other, so gnomon and eager draw their masks in the same order."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(
            nn.Linear(16, 32), nn.Dropout(0.3), nn.ReLU(), nn.Linear(32, 32), nn.Dropout(0.5), nn.Linear(32, 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def test_dropout_in_training_draws_eagers_masks_under_the_same_seed() -> None:
    """gnomon's dropout draws from torch's generator as eager does: seeded alike, five SGD steps give eager's
    losses and parameters (and a different seed a different loss)."""
    model, batch = Dropouts(), (torch.randn(8, 16), torch.randn(8, 2))
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "mse"), batch, train=gnomon.SGD(lr=0.1))
    reference = gnomon.with_loss(copy.deepcopy(model), "mse").train()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for seed in range(5):
        torch.manual_seed(seed)
        ours = step.step(*_numpy(batch))
        torch.manual_seed(seed)
        optimizer.zero_grad()
        theirs = reference(*batch)
        theirs.backward()
        optimizer.step()
        assert ours == pytest.approx(theirs.item(), rel=1e-5)
    for key, value in reference.model.state_dict().items():
        assert relative_l2(step.state_dict()[key], value.numpy()) <= 1e-5, key
    torch.manual_seed(99)
    assert step.step(*_numpy(batch)) != pytest.approx(theirs.item(), rel=1e-3)


@pytest.mark.parametrize("ratio", [0.0, 0.25, 1.0])
def test_dropout_train_keeps_and_scales_as_its_mask_says(ratio: float) -> None:
    """`graph.dropout_train` in the runtime and in the reference: y = x * mask / (1 - ratio) (zeros at ratio 1),
    and about 1 - ratio of the elements kept."""
    x_type, results = "tensor<200x100xf32>", "tensor<200x100xf32>, tensor<200x100xi1>"
    module = Parser(
        gnomon_context(),
        f"""
    func.func @main(%x: {x_type}) -> ({results}) {{
      %y, %mask = graph.dropout_train %x {{ratio = {ratio} : f64}} : ({x_type}) -> ({results})
      func.return %y, %mask : {results}
    }}""",
    ).parse_module()
    x = np.random.default_rng(0).standard_normal((200, 100)).astype(np.float32) + 5  # no zeros
    for y, mask in (run_reference(module, [x]), TorchEagerProgram(module)(x)):
        assert mask.dtype == np.bool_
        assert abs(mask.mean() - (1 - ratio)) <= 0.02
        expected = np.zeros_like(x) if ratio == 1.0 else x * mask / np.float32(1 - ratio)
        np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_a_wrong_batch_names_the_input() -> None:
    model, batch, loss = _case("mlp")
    step = gnomon.compile(gnomon.with_loss(model, loss), batch, train=True)
    assert step.input_names == ["x", "target"]  # the model's forward names its input; with_loss adds the target
    with pytest.raises(
        GnomonError, match=re.escape("input 'x': expected float32 of shape [8, 32], got float32 of shape [4, 32]")
    ):
        step.step(np.zeros((4, 32), np.float32), batch[1].numpy())
    with pytest.raises(GnomonError, match=re.escape("step takes 2 inputs (x, target), got 1")):
        step.step(batch[0].numpy())


def test_a_training_step_is_predicted_as_compiled() -> None:
    """gnomon.analyze(train=...): the lowered step priced kernel by kernel, the optimizer's updates among them;
    the batch copied in and the loss out, the state updated in place (no copy steps for it)."""
    model, batch, loss = _case("mlp")
    report = gnomon.analyze(
        gnomon.with_loss(model, loss), batch, device="generic-cpu", train=gnomon.SGD(lr=0.1, momentum=0.9)
    )
    assert report.predicted_e2e_s > 0
    assert report.parameters == sum(p.numel() for p in model.parameters())
    locations = [record.location for record in report.records]
    assert {f"optimizer.{n}" for n, _ in model.named_parameters()} <= set(locations)
    copies = [record.name for record in report.records if record.op == "copy"]
    assert copies == ["copy input 9", "copy input 10", "copy output 0"]  # the batch (x, target), the loss


@pytest.mark.parametrize("optimizer", [gnomon.SGD(lr=0.1, momentum=0.9), gnomon.Adam()], ids=["sgd", "adam"])
def test_eager_training_is_priced_op_by_op_with_autograd_and_the_optimizer(optimizer: gnomon.Optimizer) -> None:
    """The torch-eager target of a training step: the forward ops as inference prices them plus autograd's
    recording, the engine's nodes at the first backward op, and zero_grad with the optimizer's foreach step (its
    fixed and per-parameter host costs) at the first of torch's foreach ops, each a pass over every parameter."""
    from gnomon.cost.devices import load_device
    from gnomon.cost.eager_training import DEFAULTS, foreach_ops, optimizer_key

    model, batch, loss = _case("mlp")
    device = load_device("generic-cpu")
    report = gnomon.analyze(gnomon.with_loss(model, loss), batch, device=device, target="torch-eager", train=optimizer)
    assert report.target == "torch-eager"
    assert report.parameters == sum(p.numel() for p in model.parameters())
    trained = len(list(model.parameters()))
    updates = [r for r in report.records if r.location.startswith("optimizer")]  # the step count at `optimizer`
    key = optimizer_key(optimizer)
    assert updates[0].overhead_s == pytest.approx(DEFAULTS[f"{key}_step_s"] + trained * DEFAULTS[f"{key}_param_s"])
    assert all(r.overhead_s == 0 for r in updates[1:])
    assert [r.name for r in updates] == [call.name for call in foreach_ops(optimizer)]
    parameter_bytes = 4 * report.parameters
    assert [r.bytes for r in updates] == [(call.reads + 1) * parameter_bytes for call in foreach_ops(optimizer)]
    assert all(r.kernel_s > 0 for r in updates)
    engine_s = DEFAULTS["autograd_node_s"] * trained  # at least the AccumulateGrad nodes
    engine = [r for r in report.records if r.overhead_s > engine_s and not r.location.startswith("optimizer")]
    assert len(engine) == 1  # every node's cost at the first backward op
    forward = [r for r in report.records if r.location == "layers.0" and r.op == "linear"]
    assert forward[0].overhead_s > device.dispatch_overhead_s


def test_save_and_restore_carry_the_whole_training_state(tmp_path: Path) -> None:
    """A restored step continues where the saved one stopped (SGD's momentum included); a state of another model
    is refused by name."""
    model, batch, loss = _case("mlp")
    optimizer = gnomon.SGD(lr=0.1, momentum=0.9)
    first = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer)
    for _ in range(2):
        first.step(*_numpy(batch))
    first.save(tmp_path / "state.npz")
    expected = first.step(*_numpy(batch))
    second = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer)
    second.restore(tmp_path / "state.npz")
    assert second.steps == 2
    assert second.step(*_numpy(batch)) == pytest.approx(expected, rel=1e-6)
    cnn, cnn_batch, cnn_loss = _case("cnn")
    other = gnomon.compile(gnomon.with_loss(cnn, cnn_loss), cnn_batch, train=optimizer)
    with pytest.raises(GnomonError, match=r"state\.npz holds no '.*': it is the state of another model or optimizer"):
        other.restore(tmp_path / "state.npz")


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_released_gradients_train_alike_in_less_memory(name: str) -> None:
    """keep_gradients=False: each parameter is updated as soon as its gradient is ready, in its own memory, and the
    gradient dies there; the losses and the state are those of a step that keeps its gradients, in a smaller
    arena; gradients() says it has none."""
    model, batch, loss = _case(name)
    steps = {}
    for keep in (True, False):
        step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=gnomon.Adam(lr=1e-2),
                              keep_gradients=keep)  # fmt: skip
        losses = [step.step(*_numpy(batch)) for _ in range(3)]
        steps[keep] = (step, losses)
    (kept, kept_losses), (released, released_losses) = steps[True], steps[False]
    assert released_losses == pytest.approx(kept_losses, rel=1e-6)
    for key, value in kept.state_dict().items():
        np.testing.assert_allclose(released.state_dict()[key], value, rtol=1e-5, atol=1e-7)
    assert released.memory().arena < kept.memory().arena
    program = released.executable.program
    assert program is not None
    state = {array.ctypes.data for array in program.inputs}
    updates = [launch for launch in program.launches if launch.location.startswith("optimizer.")]
    assert all(launch.results[0].ctypes.data in state for launch in updates)  # still written in place
    with pytest.raises(GnomonError, match="compiled with keep_gradients=False"):
        released.gradients()


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_plain_sgd_updates_released_embedding_tables_sparsely(momentum: float) -> None:
    """With released gradients, plain SGD updates each table on its looked-up rows alone
    (`graph.embedding_bag_update`, in the table's own memory; no dense gradient made), and trains as torch's dense
    update does; SGD with momentum changes every row, and keeps the dense gradient."""
    model, batch, loss = _case("dlrm")
    optimizer = gnomon.SGD(lr=0.1, momentum=momentum)
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer, keep_gradients=False)
    reference = gnomon.with_loss(copy.deepcopy(model), loss).train()
    _track_torch(step, reference, [torch.optim.SGD(reference.parameters(), lr=0.1, momentum=momentum)], batch, 3)
    for name, value in reference.model.state_dict().items():
        np.testing.assert_allclose(step.state_dict()[name], value.detach().numpy(), rtol=1e-4, atol=1e-6)
    program = step.executable.program
    assert program is not None
    tables = [launch for launch in program.launches if launch.location.startswith("optimizer.embeddings")]
    sparse = [launch for launch in tables if launch.kernel.sym_name.data.startswith("embedding_bag_update")]
    assert len(sparse) == (3 if momentum == 0 else 0)
    state = {array.ctypes.data for array in program.inputs}
    assert all(launch.results[0].ctypes.data in state for launch in sparse)


@pytest.mark.parametrize("keep_gradients", [True, False])
def test_sparse_adam_updates_tables_as_torch_sparse_adam(keep_gradients: bool) -> None:
    """Adam(sparse=True): the DLRM's tables take torch.optim.SparseAdam's lazy update (as tables with sparse=True
    trained by SparseAdam, the rest by Adam): losses and parameters track torch's over four steps,
    rows never looked up keep their values, and the tables and their moments are updated in their own memory."""
    model, batch, loss = _case("dlrm")
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=gnomon.Adam(lr=1e-2, sparse=True),
                          keep_gradients=keep_gradients)  # fmt: skip
    reference = gnomon.with_loss(copy.deepcopy(model), loss).train()
    for module in reference.modules():
        if isinstance(module, nn.EmbeddingBag | nn.Embedding):
            module.sparse = True
    tables = [p for n, p in reference.named_parameters() if ".embeddings." in n]
    dense = [p for n, p in reference.named_parameters() if ".embeddings." not in n]
    assert tables
    optimizers = [torch.optim.SparseAdam(tables, lr=1e-2), torch.optim.Adam(dense, lr=1e-2, foreach=True)]
    before = {n: p.detach().clone() for n, p in reference.named_parameters()}
    _track_torch(step, reference, optimizers, batch, 4)
    state = step.state_dict()
    for name, value in reference.model.state_dict().items():
        np.testing.assert_allclose(state[name], value.detach().numpy(), rtol=1e-4, atol=1e-6)
    table_name = next(n for n, _ in reference.named_parameters() if ".embeddings." in n)
    table = dict(reference.named_parameters())[table_name]
    untouched = (table.detach() == before[table_name]).all(dim=1)
    assert untouched.any()  # lazy: rows never looked up keep their values (dense Adam's momentum would move them)
    program = step.executable.program
    assert program is not None
    updates = [launch for launch in program.launches if launch.kernel.sym_name.data.startswith("embedding_bag_adam")]
    assert len(updates) == sum(1 for n, _ in reference.named_parameters() if ".embeddings." in n)
    inputs = {array.ctypes.data for array in program.inputs}
    assert all(result.ctypes.data in inputs for launch in updates for result in launch.results)


class UnusedLayer(nn.Module):
    """A model with a layer its forward pass never reads (a head kept for another task)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.used = nn.Linear(6, 3)
        self.unused = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def test_parameters_the_forward_pass_never_reads_stay_frozen() -> None:
    """As in eager, where their gradient stays None and the optimizer skips them: the step trains the rest
    (Adam's losses and parameters track torch's) and returns no gradient for them."""
    model, batch = UnusedLayer(), (torch.randn(4, 6), torch.randint(0, 3, (4,)))
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "cross_entropy"), batch, train=gnomon.Adam(1e-2))
    reference = gnomon.with_loss(copy.deepcopy(model), "cross_entropy").train()
    _track_torch(step, reference, [torch.optim.Adam(reference.parameters(), lr=1e-2, foreach=True)], batch, 3)
    assert sorted(step.gradients()) == ["used.bias", "used.weight"]
    for name, value in step.state_dict().items():
        np.testing.assert_allclose(value, reference.model.state_dict()[name].numpy(), rtol=1e-5, atol=1e-7)


def test_sparse_adam_takes_no_weight_decay() -> None:
    with pytest.raises(GnomonError, match=re.escape("Adam: sparse table updates (torch.optim.SparseAdam's) take no")):
        gnomon.Adam(sparse=True, weight_decay=1e-2)


def test_eager_optimizers_are_torchs_foreach_calls() -> None:
    """torch 2.13's `_multi_tensor_sgd` and `_multi_tensor_adam` after the first step: SGD with momentum scales
    the buffers, adds the gradients and updates in place; Nesterov adds the buffers to the gradients too; a
    coupled weight decay adds the parameters into a new gradient; Adam makes one new tensor (the denominator's
    square root), AdamW scales the parameters in place instead of the coupled decay's new gradient."""
    from gnomon.cost.eager_training import foreach_ops

    def calls(optimizer: gnomon.Optimizer) -> list[tuple[str, int, bool]]:
        return [(call.name, call.reads, call.fresh) for call in foreach_ops(optimizer)]

    assert calls(gnomon.SGD()) == [("_foreach_add_", 2, False)]
    assert calls(gnomon.SGD(momentum=0.9)) == [("_foreach_mul_", 1, False), ("_foreach_add_", 2, False),
                                               ("_foreach_add_", 2, False)]  # fmt: skip
    assert len(foreach_ops(gnomon.SGD(momentum=0.9, nesterov=True))) == 4
    assert calls(gnomon.SGD(weight_decay=1e-4))[0] == ("_foreach_add", 2, True)
    adam = calls(gnomon.Adam())
    assert [name for name, _, fresh in adam if fresh] == ["_foreach_sqrt"]
    assert len(adam) == 7
    assert adam[-1] == ("_foreach_addcdiv_", 3, False)
    assert calls(gnomon.Adam(weight_decay=0.1))[0] == ("_foreach_add", 2, True)
    assert calls(gnomon.AdamW())[0] == ("_foreach_mul_", 1, False)


def test_an_optimizer_reads_back_from_its_spec() -> None:
    """What a compiled training step's file records of its optimizer: every setting, AdamW's decoupled decay and
    Adam's betas among them; text it did not write is refused."""
    from gnomon.optimizers import optimizer_from_spec, optimizer_spec

    for optimizer in (gnomon.SGD(lr=0.1, momentum=0.9, nesterov=True), gnomon.Adam(betas=(0.8, 0.9)), gnomon.AdamW()):
        assert optimizer_from_spec(optimizer_spec(optimizer)) == optimizer
    with pytest.raises(GnomonError, match="not an optimizer gnomon wrote"):
        optimizer_from_spec('{"type": "RMSprop"}')


class _Bilinear(nn.Module):
    """nn.Bilinear on 2-D and 3-D inputs, with and without a bias."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.pair = nn.Bilinear(8, 6, 4)
        self.square = nn.Bilinear(3, 3, 2, bias=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.pair(x, y), self.square(z, z).reshape(x.shape[0], -1)], -1)


def test_bilinear_layers_run_and_train_as_torchs() -> None:
    """`aten.bilinear` (and its autograd form, `aten._trilinear`) imports as a product and a sum
    (`gnomon.frontends.composites`): inference matches torch, and three SGD steps track torch's losses."""
    model = _Bilinear()
    inputs = (torch.randn(5, 8), torch.randn(5, 6), torch.randn(5, 2, 3))
    executable = gnomon.compile(copy.deepcopy(model).eval(), inputs)
    np.testing.assert_allclose(executable(*_numpy(inputs))[0], model(*inputs).detach().numpy(), rtol=1e-5, atol=1e-6)
    batch = (*inputs, torch.randn(5, 8))
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "mse"), batch, train=gnomon.SGD(lr=0.1))
    reference = gnomon.with_loss(model, "mse")
    _track_torch(step, reference, [torch.optim.SGD(reference.parameters(), lr=0.1)], batch, steps=3)
