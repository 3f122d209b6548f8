"""A convolution fused with the depthwise convolution after it (`kernel_to_linalg.conv`): the same numbers as torch
for any stride, padding, dilation and channel count, the decision priced by `graph-fuse`, and illegal groups refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import relative_l2
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch import nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

import gnomon
from gnomon.errors import GnomonError
from gnomon.executable import lower
from gnomon.models import MobileNetV2
from gnomon.passes import graph_to_kernel
from gnomon.passes.graph_fuse import fusion_decisions
from gnomon.passes.graph_to_kernel import Kind, kernel_ops, set_groups
from gnomon.pipeline import load, run_pipeline
from gnomon.runtime.executor import Program

ACTIVATIONS = {"relu": nn.ReLU, "relu6": nn.ReLU6, "silu": nn.SiLU, "hardswish": nn.Hardswish, "none": nn.Identity}


class ConvPair(nn.Module):
    """conv -> act -> [depthwise conv -> act]."""

    def __init__(
        self,
        in_channels: int,
        channels: int,
        conv: tuple[int, int, int, int],
        depthwise: tuple[int, int, int, int] | None,
        act: str,
        bias: bool = True,
    ):
        super().__init__()
        kernel, stride, padding, dilation = conv
        self.conv = nn.Conv2d(in_channels, channels, kernel, stride, padding, dilation, bias=bias)
        self.act = ACTIVATIONS[act]()
        self.dw: nn.Module | None = None
        if depthwise is not None:
            kernel, stride, padding, dilation = depthwise
            self.dw = nn.Conv2d(channels, channels, kernel, stride, padding, dilation, groups=channels, bias=bias)
        self.dw_act = ACTIVATIONS[act]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.conv(x))
        return self.dw_act(self.dw(y)) if self.dw is not None else y


def _graph(model: nn.Module, x: torch.Tensor) -> ModuleOp:
    return run_pipeline(load(model, example_inputs=(x,)), "inference", "pair")


def _program(module: ModuleOp, groups: list[int], kinds: list[Kind]) -> Program:
    return Program(_lowered(module, groups, kinds))


def _lowered(module: ModuleOp, groups: list[int], kinds: list[Kind]) -> ModuleOp:
    module = module.clone()
    set_groups(next(op for op in module.ops if isinstance(op, func.FuncOp)), groups, kinds)
    return run_pipeline(module, "lowering", "pair", spec="graph-to-kernel,kernel-to-rt")


def _fused_output(model: nn.Module, x: torch.Tensor) -> np.ndarray:
    module = _graph(model, x)
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    count = len(kernel_ops(function)[0])
    program = _program(module, [0] * count, ["generated"])
    (output,) = program.run([x.numpy()], profile=True)
    assert [timing.kind for timing in program.profile.timings] == ["generated"]
    return output


window = st.tuples(st.sampled_from([1, 3, 5]), st.integers(1, 2), st.integers(0, 2), st.integers(1, 2))


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.integers(1, 2),
    in_channels=st.integers(1, 20),
    channels=st.integers(1, 40),
    size=st.integers(5, 19),
    conv=window,
    depthwise=st.one_of(st.none(), window),
    act=st.sampled_from(sorted(ACTIVATIONS)),
    bias=st.booleans(),
)
def test_fused_conv_matches_torch(
    batch: int,
    in_channels: int,
    channels: int,
    size: int,
    conv: tuple[int, int, int, int],
    depthwise: tuple[int, int, int, int] | None,
    act: str,
    bias: bool,
) -> None:
    kernel, stride, padding, dilation = conv
    produced = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if depthwise is not None:
        kernel, stride, padding, dilation = depthwise
        assume(produced + 2 * padding - dilation * (kernel - 1) - 1 >= 0)
    assume(produced >= 1)
    torch.manual_seed(0)
    model = ConvPair(in_channels, channels, conv, depthwise, act, bias).eval()
    x = torch.randn(batch, in_channels, size, size)
    with torch.inference_mode():
        expected = model(x).numpy()
    assert relative_l2(_fused_output(model, x), expected) <= 1e-5


@pytest.mark.parametrize(
    ("in_channels", "channels", "conv", "depthwise", "size"),
    [
        (24, 144, (1, 1, 0, 1), (3, 1, 1, 1), 56),  # MobileNet-V2 expand + depthwise
        (3, 32, (3, 2, 1, 1), (3, 1, 1, 1), 64),  # a stem
        (40, 120, (1, 1, 0, 1), (5, 2, 2, 1), 28),  # MnasNet, 120 channels: a partial last block
        (160, 960, (1, 1, 0, 1), (3, 1, 1, 1), 7),  # seven columns: only the masked tile
    ],
)
def test_fused_and_separate_agree_on_network_shapes(
    in_channels: int, channels: int, conv: tuple[int, int, int, int], depthwise: tuple[int, int, int, int], size: int
) -> None:
    torch.manual_seed(1)
    model = ConvPair(in_channels, channels, conv, depthwise, "relu6").eval()
    x = torch.randn(1, in_channels, size, size)
    module = _graph(model, x)
    fused = _program(module, [0, 0, 0, 0], ["generated"]).run([x.numpy()])[0]
    separate = _program(module, [0, 0, 1, 1], ["anchor", "anchor"]).run([x.numpy()])[0]
    assert relative_l2(fused, separate) <= 1e-5


@pytest.mark.parametrize("channels", [40, 96])  # a partial last block of 16 or 32 channels, and whole blocks
def test_constant_weights_are_packed_once_when_bound_with_the_same_numbers(channels: int) -> None:
    """The runtime binds a generated convolution whose weights are a program constant to the kernel variant that
    reads them packed for every block (`packed_weights`, made at bind time); a kernel bound to weights that
    change packs each block's on every call. Both compute the same numbers as torch."""
    from gnomon.runtime.codegen import compile_kernel
    from gnomon.runtime.codegen.jit import packed_weights

    torch.manual_seed(2)
    model = ConvPair(24, channels, (1, 1, 0, 1), (3, 1, 1, 1), "relu6").eval()
    x = torch.randn(1, 24, 14, 14)
    with torch.inference_mode():
        expected = model(x).numpy()
    module = _graph(model, x)
    program = _program(module, [0, 0, 0, 0], ["generated"])
    assert relative_l2(program.run([x.numpy()])[0], expected) <= 1e-5
    program.load([x.numpy()])
    (launch,) = program.launches
    prepacked, per_call = (compile_kernel(launch.kernel, prepacked=flag) for flag in (True, False))
    assert per_call.packing is None
    assert prepacked.packing is not None
    blocks, reduction, block = prepacked.packing.shape
    weight = launch.args[prepacked.packing.weight]
    assert (blocks, reduction) == (-(-channels // block), 24)
    packed = packed_weights(weight, prepacked.packing)
    assert packed[0, :, 1].tolist() == weight[1].reshape(-1).tolist()  # [block][k][channel]
    assert packed[-1, :, -1].tolist() == weight[-1].reshape(-1).tolist()  # past the end: the last channel's
    outputs = []
    for kernel in (prepacked, per_call):
        out = np.zeros_like(expected)
        kernel.bind(list(launch.args), [out])()
        outputs.append(out)
    assert outputs[0].tolist() == outputs[1].tolist()
    assert relative_l2(outputs[0], expected) <= 1e-5


def test_graph_fuse_prices_the_pair_and_fuses_it() -> None:
    model = ConvPair(24, 96, (1, 1, 0, 1), (3, 1, 1, 1), "relu6").eval()
    x = torch.randn(1, 24, 28, 28)
    module = load(model, example_inputs=(x,))
    lowered = lower(module, device="generic-cpu")
    decisions = fusion_decisions(
        run_pipeline(_graph(model, x), "lowering", "pair", spec="graph-fuse{device=generic-cpu}")
    )
    kind = next(d for d in decisions if d.question == "kind")
    assert kind.op == "conv"
    assert [name for name, _ in kind.options] == ["generated", "library"]
    assert kind.decision == ("generated" if kind.options[0][1] < kind.options[1][1] else "library")
    joins = [d for d in decisions if d.question == "join"]
    assert [d.op for d in joins] == ["clip", "conv", "clip"]
    text = str(lowered)
    assert "conv_clip_conv_clip" in text  # one kernel, as decided on generic-cpu
    exe = gnomon.compile(model, example_inputs=(x,), device="generic-cpu")
    with torch.inference_mode():
        assert relative_l2(exe(x.numpy())[0], model(x).numpy()) <= 1e-5


def test_a_dense_conv_cannot_join_a_generated_conv() -> None:
    model = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)).eval()
    x = torch.randn(1, 8, 10, 10)
    module = _graph(model, x)
    message = (
        "graph-to-kernel: graph.conv at 2 is in fusion group 0, but cannot join that kernel "
        "(it must be the only user of the kernel's result)"
    )
    with pytest.raises(GnomonError, match=re.escape(message)):
        _program(module, [0, 0, 0], ["generated"])


class ProjectResidual(nn.Module):
    """An inverted-residual block's projection: a 1x1 convolution, then the block's input added."""

    def __init__(self, in_channels: int, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 1)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + residual


@pytest.mark.parametrize(
    ("in_channels", "channels", "size"),
    [(144, 24, 56), (576, 96, 14), (960, 160, 7), (5, 3, 4)],  # MobileNet-V2's projections; a tiny one: one unit
)
def test_a_generated_1x1_convolution_takes_its_residual_add(in_channels: int, channels: int, size: int) -> None:
    """A 1x1 convolution alone (no depthwise convolution after it) as one generated kernel with the residual add,
    as graph-fuse may choose it (`pointwise_choice`): torch's numbers, and the threads the cost model prices are
    those its work earns (its multiply-adds, as the runtime counts them)."""
    from gnomon.cost.devices import load_device
    from gnomon.cost.threads import generated_threads, parts_for
    from gnomon.dialects import kernel

    torch.manual_seed(3)
    model = ProjectResidual(in_channels, channels).eval()
    x, residual = torch.randn(1, in_channels, size, size), torch.randn(1, channels, size, size)
    with torch.inference_mode():
        expected = model(x, residual).numpy()
    module = run_pipeline(load(model, example_inputs=(x, residual)), "inference", "projection")
    lowered = _lowered(module, [0, 0], ["generated"])
    program = Program(lowered)
    (got,) = program.run([x.numpy(), residual.numpy()], profile=True)
    assert [t.kind for t in program.profile.timings] == ["generated"]
    assert relative_l2(got, expected) <= 1e-5
    (generated,) = [op for op in lowered.walk() if isinstance(op, kernel.FuncOp) and op.is_generated]
    cpu = load_device("generic-cpu")
    schedule = generated.schedule
    assert schedule is not None
    multiply_adds = channels * size * size * in_channels
    assert generated_threads(generated, cpu) == parts_for(multiply_adds, schedule.threads.data, cpu.cores)


def test_avx2_vectors_compute_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without AVX-512 gets 8-lane vectors (two per block of 16 channels): the same numbers."""
    monkeypatch.setattr(graph_to_kernel, "host_vector_lanes", lambda: 8)
    torch.manual_seed(2)
    model = ConvPair(12, 40, (3, 2, 1, 1), (5, 1, 2, 2), "silu").eval()
    x = torch.randn(2, 12, 17, 17)
    with torch.inference_mode():
        expected = model(x).numpy()
    module = _graph(model, x)
    lowered = _lowered(module, [0, 0, 0, 0], ["generated"])
    assert "vector = 8" in str(lowered)
    assert relative_l2(Program(lowered).run([x.numpy()])[0], expected) <= 1e-5


@pytest.mark.parametrize(("layout", "choices"), [("nchw", 35), ("nhwc", 52)])
def test_mobilenet_v2_runs_its_generated_convolutions_and_matches_torch(layout: str, choices: int) -> None:
    """The whole network, each layout. Channels-first: each of the 17 conv + depthwise pairs (the stem, 16 expand
    layers) and each of the 18 1x1 convolutions after them (16 projections, the head's) is a priced choice, and
    each one decided generated runs as one kernel, a pair's holding both convolutions. Channels-last: each of the
    stem, the 17 depthwise and the 34 1x1 convolutions is one (`conv_nhwc`), each generated one a kernel of its
    own."""
    model = MobileNetV2()
    (x,) = model.example_inputs(1)
    module = run_pipeline(load(model, example_inputs=(x,)), "inference", "mobilenet_v2")
    spec = f"graph-layout{{layout={layout} device=generic-cpu}},graph-fuse{{device=generic-cpu}}"
    module = run_pipeline(module, "lowering", "mobilenet_v2", spec=spec)
    kinds = [d for d in fusion_decisions(module) if d.op == "conv" and d.question == "kind"]
    program = Program(run_pipeline(module, "lowering", "mobilenet_v2", spec="graph-to-kernel,kernel-to-rt"))
    (got,) = program.run([x.numpy()], profile=True)
    generated = [t.source_ops.count("graph.conv") for t in program.profile.timings if t.kind == "generated"]
    assert len(kinds) == choices
    assert (generated.count(2) > 0) == (layout == "nchw")
    assert generated.count(1) > 0
    assert generated.count(1) + generated.count(2) == sum(d.decision == "generated" for d in kinds)
    with torch.inference_mode():
        assert relative_l2(got, model(x).numpy()) <= 1e-5


@pytest.mark.parametrize(
    ("shape", "packed"),
    [
        ((1, 256, 7, 7, 256, 3, 1, 1), True),  # a late layer: its weight outweighs its activations
        ((1, 64, 14, 14, 64, 3, 1, 64), True),  # depthwise
        ((1, 16, 56, 56, 16, 3, 1, 1), False),  # an early layer: its activations outweigh its weight
        ((1, 64, 9, 9, 256, 3, 2, 1), True),  # strided
    ],
)
def test_library_convolutions_pack_a_constant_weight_where_it_pays(
    shape: tuple[int, int, int, int, int, int, int, int], packed: bool
) -> None:
    """A library convolution whose weight is a program constant runs on oneDNN's packed copy of it where the
    weight outweighs the activations (or it is depthwise), and gives torch's numbers either way."""
    from gnomon.runtime.library import kernel as library

    batch, channels, height, width, outputs, size, stride, groups = shape
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(channels, outputs, size, stride, size // 2, groups=groups), nn.ReLU()).eval()
    x = torch.randn(batch, channels, height, width)
    with torch.inference_mode():
        expected = model(x).numpy()
    module = _graph(model, x)
    lowered = _lowered(module, [0, 0], ["library"])
    made: list[bool] = []
    original = library._packed_weight

    def spy(*args: object) -> object:
        result = original(*args)  # pyright: ignore[reportArgumentType]
        made.append(result is not None)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(library, "_packed_weight", spy)
        program = Program(lowered)
    assert made == [packed]
    assert relative_l2(program.run([x.numpy()])[0], expected) <= 1e-5


def test_onnx_silu_is_one_op_that_joins_the_convolution(tmp_path: Path) -> None:
    """ONNX writes SiLU as x * sigmoid(x); imported, it is `graph.silu`, so that an ONNX EfficientNet block's
    convolutions take it as their epilogue (or their generated kernel) rather than running it as a third kernel."""
    torch.manual_seed(4)
    model = ConvPair(8, 24, (1, 1, 0, 1), (3, 1, 1, 1), "silu").eval()
    x = torch.randn(1, 8, 12, 12)
    path = tmp_path / "pair.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False)
    with torch.inference_mode():
        expected = model(x).numpy()
    module = load(path)
    text = str(module)
    assert "graph.sigmoid" not in text
    assert text.count("graph.silu") == 2
    exe = gnomon.compile(path)
    assert relative_l2(exe(x.numpy())[0], expected) <= 1e-5
    exe.run([x.numpy()], profile=True)
    assert len(exe.profile().timings) <= 2  # each silu in its convolution's kernel


@pytest.mark.parametrize(
    ("units", "rows", "stride", "span", "bands"),
    [
        (1, 112, 1, 3, 2),  # a stem: 2 bands recompute 2 rows, 8 would recompute 14
        (2, 56, 2, 3, 1),  # two blocks already keep both threads busy
        (1, 7, 1, 3, 2),  # the most bands a 7-row map splits into
        (1, 112, 1, 1, 8),  # no overlap: bands are free, up to 4 units a thread
        (36, 7, 1, 5, 1),
    ],
)
def test_bands_balance_threads_against_recomputed_rows(units: int, rows: int, stride: int, span: int, bands: int):
    from gnomon.passes.kernel_to_linalg.conv import band_count

    assert band_count(units, 2, rows, stride, span) == bands
