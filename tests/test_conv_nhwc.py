"""gnomon's channels-last generated convolutions (`kernel_to_linalg.conv_nhwc`): a depthwise one, a 1x1 one, or one of
any other window, dense or grouped, with elementwise ops after it, give torch's numbers for any channel count,
stride, padding and dilation, with weights packed once or by every call; `graph-fuse` prices them against the
library."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import relative_l2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.nn import ConvOp
from gnomon.passes.graph_fuse import fusion_decisions
from gnomon.passes.graph_to_kernel import Kind, default_kind, kernel_ops, set_groups
from gnomon.passes.kernel_to_linalg.conv_rows import Packing
from gnomon.pipeline import load, run_pipeline
from gnomon.runtime.codegen.jit import packed_weights
from gnomon.runtime.executor import Program

ACTIVATIONS = {
    "relu": torch.relu,
    "hardswish": nn.functional.hardswish,
    "silu": nn.functional.silu,
    "gelu": nn.functional.gelu,
    "sigmoid": torch.sigmoid,
    "softsign": nn.functional.softsign,  # not on vectors: through the tile buffer
    "none": lambda v: v,
}


class ConvAct(nn.Module):
    """conv -> activation [-> + x]: the kernel graph-fuse can give one generated kernel."""

    def __init__(self, conv: nn.Conv2d, act: str, residual: bool):
        super().__init__()
        self.conv, self.act, self.residual = conv, act, residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = ACTIVATIONS[self.act](y)
        return y + x if self.residual else y


def _channels_last_module(model: nn.Module, x: torch.Tensor) -> ModuleOp:
    module = run_pipeline(load(model.eval(), example_inputs=(x,)), "inference", "model")
    return run_pipeline(module, "lowering", "model", spec="graph-layout{layout=nhwc device=generic-cpu}")


def _generated(module: ModuleOp) -> Program:
    """The convolution and every op after it that may join it as one generated kernel; the rest alone."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ops, _ = kernel_ops(function)
    conv = next(i for i, op in enumerate(ops) if isinstance(op, ConvOp))
    assert channels_last(ops[conv])
    groups, kinds = [], list[Kind]()
    for i, op in enumerate(ops):
        joins = conv < i and op.name.removeprefix("graph.") in (*ACTIVATIONS, "add") and groups[-1] == len(kinds) - 1
        if joins and kinds[-1] == "generated" and all(o.name != "graph.transpose" for o in ops[conv + 1 : i]):
            groups.append(len(kinds) - 1)
            continue
        groups.append(len(kinds))
        kinds.append("generated" if i == conv else default_kind(op))
    set_groups(function, groups, kinds)
    return Program(run_pipeline(module, "lowering", "model", spec="graph-to-kernel,kernel-to-rt"))


def _check(model: nn.Module, x: torch.Tensor) -> None:
    program = _generated(_channels_last_module(model, x))
    (output,) = program.run([x.numpy()], profile=True)
    kinds = [timing.kind for timing in program.profile.timings]
    assert kinds.count("generated") == len(kinds)  # the transposes in and out, and the convolution
    with torch.no_grad():
        expected = model(x).numpy()
    # Or every element within float32's rounding at 1: an output of one element far down gelu's tail (-1.27e-5)
    # differed by 1.7e-8, a relative 1.3e-3, where the pre-activations are of order 1.
    assert relative_l2(output, expected) <= 1e-5 or float(np.abs(output - expected).max()) <= 1e-7


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.integers(1, 2),
    channels=st.integers(1, 40),
    size=st.integers(1, 17),
    kernel=st.sampled_from([1, 3, 5]),
    stride=st.integers(1, 2),
    padding=st.integers(0, 2),
    dilation=st.integers(1, 2),
    act=st.sampled_from(sorted(ACTIVATIONS)),
    bias=st.booleans(),
)
def test_depthwise_matches_torch(
    batch: int, channels: int, size: int, kernel: int, stride: int, padding: int, dilation: int, act: str, bias: bool
) -> None:
    if size + 2 * padding < dilation * (kernel - 1) + 1:
        return
    torch.manual_seed(0)
    conv = nn.Conv2d(channels, channels, kernel, stride, padding, dilation, groups=channels, bias=bias)
    _check(ConvAct(conv, act, residual=False), torch.randn(batch, channels, size, size))


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.integers(1, 2),
    groups=st.sampled_from([1, 2, 3, 4, 8]),
    per_group=st.integers(1, 40),
    size=st.integers(1, 20),
    act=st.sampled_from(sorted(ACTIVATIONS)),
    residual=st.booleans(),
    bias=st.booleans(),
)
def test_1x1_matches_torch(
    batch: int, groups: int, per_group: int, size: int, act: str, residual: bool, bias: bool
) -> None:
    """Every group count, with a group's channels a whole number of vectors or not (the last block masked)."""
    torch.manual_seed(1)
    channels = groups * per_group
    conv = nn.Conv2d(channels, channels, 1, groups=groups, bias=bias)
    _check(ConvAct(conv, act, residual), torch.randn(batch, channels, size, size))


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.integers(1, 2),
    groups=st.sampled_from([1, 1, 2, 3]),
    in_per_group=st.sampled_from([1, 3, 4, 5, 16, 37]),
    out_per_group=st.integers(1, 40),
    size=st.integers(1, 19),
    kernel=st.sampled_from([(3, 3), (5, 5), (7, 7), (1, 3), (3, 1), (2, 2)]),
    stride=st.integers(1, 3),
    padding=st.integers(0, 3),
    dilation=st.integers(1, 2),
    act=st.sampled_from(sorted(ACTIVATIONS)),
    bias=st.booleans(),
)
def test_dense_matches_torch(
    batch: int, groups: int, in_per_group: int, out_per_group: int, size: int, kernel: tuple[int, int], stride: int,
    padding: int, dilation: int, act: str, bias: bool,
) -> None:  # fmt: skip
    """Windows of every shape over rows of every width (whole register tiles or not, borders on both sides or all
    border), a stem's few input channels (unrolled) or many (a loop), grouped or not."""
    if size + 2 * padding < dilation * (max(kernel) - 1) + 1:
        return
    torch.manual_seed(2)
    conv = nn.Conv2d(
        groups * in_per_group, groups * out_per_group, kernel, stride, padding, dilation, groups=groups, bias=bias
    )
    _check(ConvAct(conv, act, residual=False), torch.randn(batch, groups * in_per_group, size, size))


def test_dense_over_a_wide_row_with_a_residual() -> None:
    """A 56-wide row (dynamic tiles between the borders) with a residual add after the convolution."""
    torch.manual_seed(3)
    _check(ConvAct(nn.Conv2d(24, 24, 3, 1, 1), "relu", residual=True), torch.randn(1, 24, 56, 56))


@pytest.mark.parametrize(
    ("channels", "groups", "kernel"), [(136, 4, 1), (48, 1, 1), (40, 40, 3), (24, 1, 3), (36, 3, 5)]
)
def test_weights_given_at_run_time_are_packed_by_each_call(channels: int, groups: int, kernel: int) -> None:
    """A weight that is a program input, not a constant, is packed by the kernel on every call; new numbers on a
    second call give new outputs."""
    padding = kernel // 2

    class Given(nn.Module):
        def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            return nn.functional.conv2d(x, weight, padding=padding, groups=groups)

    shape = (channels, channels // groups, kernel, kernel)
    x, weight = torch.randn(1, channels, 7, 7), torch.randn(shape)
    module = run_pipeline(load(Given(), example_inputs=(x, weight)), "inference", "model")
    module = run_pipeline(module, "lowering", "model", spec="graph-layout{layout=nhwc device=generic-cpu}")
    program = _generated(module)
    for _ in range(2):
        weight = torch.randn(shape)
        (output,) = program.run([x.numpy(), weight.numpy()])
        expected = nn.functional.conv2d(x, weight, padding=padding, groups=groups)
        assert relative_l2(output, expected.numpy()) <= 1e-5


def test_grouped_packing_keeps_each_block_in_its_group() -> None:
    """Packed weights of 2 groups of 3 channels in blocks of 2: a group's last block repeats its last channel, never
    the next group's first."""
    weight = np.arange(6 * 4, dtype=np.float32).reshape(6, 4, 1, 1)  # channel c's row is 4c .. 4c + 3
    packed = packed_weights(weight, Packing(0, (4, 4, 2), groups=2))
    channel_of_lane = packed[:, 0, :] // 4  # [block][lane]
    assert channel_of_lane.tolist() == [[0, 1], [2, 2], [3, 4], [5, 5]]


def test_graph_fuse_prices_channels_last_depthwise_and_grouped_kinds() -> None:
    """graph-fuse prices a channels-last depthwise and a grouped 1x1 convolution generated against the library and
    records both figures."""
    model = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1, groups=32), nn.Conv2d(32, 32, 1, groups=4), nn.ReLU())
    module = _channels_last_module(model, torch.randn(1, 32, 14, 14))
    module = run_pipeline(module, "lowering", "model", spec="graph-fuse{device=generic-cpu}")
    kinds = [d for d in fusion_decisions(module) if d.question == "kind"]
    assert [d.op for d in kinds] == ["conv", "conv"]
    for decision in kinds:
        (_, generated), (_, library) = decision.options
        assert generated > 0
        assert library > 0
        assert decision.decision == ("generated" if generated < library else "library")
