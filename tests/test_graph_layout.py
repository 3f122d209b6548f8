"""`graph-layout`: channels-last regions give torch's numbers for any convolution, pool and the ops between them;
the decision is priced; the `layout` property is verified; `--explain` prints it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import make_onnx, relative_l2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import VerifyException

from gnomon import cli
from gnomon.cost.convs import gemm_conv
from gnomon.dialects.graph import nn as graph_nn
from gnomon.dialects.graph.layout import channels_last
from gnomon.executable import Executable, load_compiled
from gnomon.passes.graph_layout import layout_decisions
from gnomon.passes.graph_to_kernel import Kind, default_kind, kernel_ops, library_kind, set_groups
from gnomon.pipeline import PIPELINES, load, run_pipeline


def _lowered(model: nn.Module, x: torch.Tensor, layout: str) -> ModuleOp:
    module = run_pipeline(load(model, example_inputs=(x,)), "inference", "model")
    spec = PIPELINES["lowering"].replace("graph-layout", f"graph-layout{{layout={layout} device=generic-cpu}}")
    return run_pipeline(module, "lowering", "model", spec=spec)


def _laid_out(model: nn.Module, x: torch.Tensor) -> ModuleOp:
    """The graph after `graph-layout`, which records its decisions on the graph ops."""
    module = run_pipeline(load(model, example_inputs=(x,)), "inference", "model")
    return run_pipeline(module, "lowering", "model", spec="graph-layout{device=generic-cpu}")


def _run(model: nn.Module, x: torch.Tensor, layout: str) -> tuple[np.ndarray, ModuleOp]:
    module = _lowered(model, x, layout)
    return Executable(module)(x.numpy())[0], module


def _channels_last_ops(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if channels_last(op)]


class Block(nn.Module):
    """conv -> act -> [depthwise -> act] -> [1x1 + residual] -> pool -> [squeeze-excite]: what a region holds."""

    def __init__(self, channels: int, conv: tuple[int, int, int, int], groups: int, pool: str, excite: bool):
        super().__init__()
        kernel, stride, padding, dilation = conv
        self.conv = nn.Conv2d(channels, channels, kernel, stride, padding, dilation, groups=groups)
        self.depthwise = nn.Conv2d(channels, channels, 3, 1, 1, groups=channels)
        self.project = nn.Conv2d(channels, channels, 1)
        self.pool = {
            "max": nn.MaxPool2d(3, 2, 1),
            "max_ceil": nn.MaxPool2d(2, 2, ceil_mode=True),
            "avg": nn.AvgPool2d(3, 1, 1, count_include_pad=False),
            "none": nn.Identity(),
        }[pool]
        self.excite = excite

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = nn.functional.hardswish(self.depthwise(y))
        if y.shape == x.shape:
            y = self.project(y) + x
        y = self.pool(y)
        if self.excite:
            y = y * torch.sigmoid(y.mean((2, 3), keepdim=True))
        return torch.cat([y, -y], 1)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    channels=st.sampled_from([3, 8, 16, 24]),
    size=st.integers(5, 20),
    kernel=st.sampled_from([1, 3, 5]),
    stride=st.integers(1, 2),
    padding=st.integers(0, 2),
    dilation=st.integers(1, 2),
    grouped=st.booleans(),
    pool=st.sampled_from(["max", "max_ceil", "avg", "none"]),
    excite=st.booleans(),
)
def test_channels_last_matches_torch(
    channels: int, size: int, kernel: int, stride: int, padding: int, dilation: int, grouped: bool, pool: str,
    excite: bool,
) -> None:  # fmt: skip
    if dilation * (kernel - 1) + 1 > size + 2 * padding:
        return  # no output: torch refuses it too
    torch.manual_seed(0)
    groups = channels if grouped and channels > 3 else 1
    model = Block(channels, (kernel, stride, padding, dilation), groups, pool, excite).eval()
    x = torch.randn(1, channels, size, size)
    with torch.no_grad():
        expected = model(x).numpy()
    output, module = _run(model, x, "nhwc")
    assert "graph.conv" in _channels_last_ops(module)
    assert relative_l2(output, expected) <= 1e-5


def test_channels_first_and_last_agree_on_a_resnet_block() -> None:
    """The same program both ways, forced: the rewrite changes layouts, never values."""
    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 7, 2, 3), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    ).eval()  # fmt: skip
    x = torch.randn(2, 3, 64, 64)
    first, first_module = _run(model, x, "nchw")
    last, last_module = _run(model, x, "nhwc")
    assert not _channels_last_ops(first_module)
    assert _channels_last_ops(last_module) == ["graph.conv", "graph.max_pool", "graph.conv"]
    with torch.no_grad():
        assert relative_l2(last, model(x).numpy()) <= 1e-5
    assert relative_l2(last, first) <= 1e-5


def test_decision_is_priced_both_ways() -> None:
    """A 3x3 convolution and pool over a large map turn (oneDNN's reorders cost more than the two transposes); a
    lone 1x1 convolution, which BLAS multiplies in either layout, does not."""
    torch.manual_seed(0)
    big = nn.Sequential(nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2)).eval()
    module = _laid_out(big, torch.randn(1, 32, 56, 56))
    (decision,) = layout_decisions(module)
    assert decision.layout == "nhwc"
    assert decision.nhwc_s < decision.nchw_s
    assert (decision.entries, decision.exits) == (1, 1)
    pointwise = nn.Conv2d(64, 128, 1).eval()
    module = _laid_out(pointwise, torch.randn(1, 64, 28, 28))
    (decision,) = layout_decisions(module)
    assert decision.layout == "nchw"
    assert decision.nhwc_s >= decision.nchw_s


def test_layout_property_is_verified() -> None:
    model = nn.Conv2d(4, 4, 3).eval()
    module = run_pipeline(load(model, example_inputs=(torch.randn(1, 4, 8, 8),)), "inference", "model")
    conv = next(op for op in module.walk() if isinstance(op, graph_nn.ConvOp))
    conv.properties["layout"] = StringAttr("nchw16c")
    with pytest.raises(VerifyException, match=re.escape('graph.conv: layout must be "nhwc", got "nchw16c"')):
        conv.verify()
    conv.properties["layout"] = StringAttr("nhwc")
    with pytest.raises(
        VerifyException, match=re.escape("graph.conv: input has 8 channels but weight expects 4 x 1 groups")
    ):
        conv.verify()  # its types are still channels-first: (1, 4, 8, 8) read as (N, H, W, C)


def test_unknown_layout_option() -> None:
    model = nn.Conv2d(4, 4, 3).eval()
    module = run_pipeline(load(model, example_inputs=(torch.randn(1, 4, 8, 8),)), "inference", "model")
    with pytest.raises(Exception, match="graph-layout: layout must be one of auto, nhwc, nchw, got 'nchw16c'"):
        run_pipeline(module, "lowering", "model", spec="graph-layout{layout=nchw16c}")


class ShuffleUnit(nn.Module):
    """ShuffleNet's unit: grouped 1x1, channel shuffle, depthwise 3x3, grouped 1x1, residual."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.groups = groups
        self.reduce = nn.Conv2d(channels, channels, 1, groups=groups)
        self.depthwise = nn.Conv2d(channels, channels, 3, 1, 1, groups=channels)
        self.expand = nn.Conv2d(channels, channels, 1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.reduce(x))
        n, c, h, w = y.shape
        y = y.reshape(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)
        return torch.relu(x + self.expand(self.depthwise(y)))


def test_channel_shuffle_stays_channels_last() -> None:
    """The shuffle is rewritten on the channels-last dim, so one region spans the unit: one transpose in, one out."""
    torch.manual_seed(2)
    model = ShuffleUnit(24, 3).eval()
    x = torch.randn(1, 24, 28, 28)
    output, module = _run(model, x, "nhwc")
    assert _channels_last_ops(module) == ["graph.conv"] * 3
    with torch.no_grad():
        assert relative_l2(output, model(x).numpy()) <= 1e-5
    (decision,) = layout_decisions(_laid_out(model, x))
    assert (decision.entries, decision.exits) == (1, 1)


@pytest.mark.parametrize(("groups", "bias"), [(1, True), (2, False), (4, True)])
@pytest.mark.parametrize("kind", ["library", "generated"])
def test_channels_last_grouped_1x1_matches_torch_both_ways(groups: int, bias: bool, kind: str) -> None:
    """A channels-last 1x1 convolution with groups, at batch 2, as the library runs it (one BLAS product per group
    over all pixels, on strided views of the activations, not through oneDNN) and as gnomon generates it
    (`conv_nhwc`): torch's numbers both ways."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 24, 1, groups=groups, bias=bias))
    x = torch.randn(2, 3, 9, 9)
    module = run_pipeline(load(model.eval(), example_inputs=(x,)), "inference", "model")
    module = run_pipeline(module, "lowering", "model", spec="graph-layout{layout=nhwc device=generic-cpu}")
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ops, _ = kernel_ops(function)
    projection = next(i for i, op in enumerate(ops) if isinstance(op, graph_nn.ConvOp) and gemm_conv(op))
    kinds: list[Kind] = [default_kind(op) for op in ops]
    kinds[projection] = "generated" if kind == "generated" else library_kind(ops[projection])
    set_groups(function, list(range(len(ops))), kinds)
    module = run_pipeline(module, "lowering", "model", spec="graph-to-kernel,kernel-to-rt")
    assert _channels_last_ops(module) == ["graph.conv", "graph.conv"]
    assert ('callee = "aten.mm"' in str(module)) == (kind == "library")
    output = Executable(module)(x.numpy())[0]
    with torch.no_grad():
        assert relative_l2(output, model(x).numpy()) <= 1e-5


def test_compile_explains_each_region(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = make_onnx("conv_block", tmp_path / "conv_block.onnx")
    program = tmp_path / "m.mlir"
    assert cli.main(["compile", str(model), "-o", str(program), "--device", "generic-cpu", "--explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("layout decisions (1 regions), predicted on generic-cpu: datasheet figures")
    assert lines[1].split() == ["region", "in", "out", "nchw", "nhwc", "layout"]
    region, entries, exits, first, _, last, _, layout = lines[2].split()
    assert (region, entries, exits) == ("0", "1", "1")
    assert layout == ("nhwc" if float(last) < float(first) else "nchw")


def test_run_profile_says_which_convolutions_run_channels_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = make_onnx("conv_block", tmp_path / "conv_block.onnx")
    assert cli.main(["run", str(model), "--profile", "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)["profile"]
    program = tmp_path / "m.mlir"
    assert cli.main(["compile", str(model), "-o", str(program)]) == 0
    lowered = [op for op in load_compiled(program).module.walk() if isinstance(op, graph_nn.ConvOp)]
    assert profile["convolutions_and_pools"] >= len(lowered) > 0
    assert profile["channels_last"] == sum(channels_last(op) for op in lowered)
    assert cli.main(["run", str(model), "--profile"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("layout: "))
    assert line.startswith(f"layout: {profile['channels_last']} of {profile['convolutions_and_pools']} convolutions")
