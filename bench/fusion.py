"""Convolution + depthwise-convolution layer pairs: gnomon fused, gnomon separate, PyTorch, ONNX Runtime.

Every pair of MobileNet-V1, MobileNet-V2, MnasNet-B1 (torchvision's mnasnet1_0) and EfficientNet-B0 where a
convolution feeds a depthwise one, at batch 1 and the networks' 224x224 input (`PAIRS`: the producer's input
channels, the depthwise channels, their kernels and strides, the spatial size, the activation; each pair once,
with how often it occurs). Each pair is a module `conv -> act -> depthwise conv -> act` (batch norm folded into
the convolutions, as gnomon's inference pipeline and ORT both do), run by:

- gnomon fused: both convolutions and their activations in one generated kernel (`kernel_to_linalg.conv`);
- gnomon separate: two library kernels, each convolution with its activation fused (oneDNN through ATen);
- gnomon channels-last: the pair through `graph-layout{layout=nhwc}` and the rest of the lowering: two library
  kernels on channels-last activations (no reorder), with the transposes in and out of the pair;
- torch: the module in eager mode (oneDNN);
- ORT: the module exported to ONNX, default graph optimizations (its NCHWc kernels).

The systems take turns, as in bench/latency.py (a pause, one untimed call, `BURST` timed calls); each figure is
the smallest of `--rounds` medians, with the spread of the medians. The table also shows `graph-fuse`'s prediction
for the pair (fused and separate, on `--device`, default this machine's calibration if any) and whether its
sign agrees with the measured one. Before timing, every output is checked against torch's (relative L2).

    python bench/fusion.py [--repeat 20] [--rounds 3] [--nets v1,v2,mnas,effnet] [--device auto]

Run it alone on the machine (never beside the tests or another benchmark).
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from gnomon.passes.graph_fuse import AUTO_DEVICE, Fuser, fusion_device
from gnomon.passes.graph_to_kernel import Group, Kind, kernel_ops, library_kind, set_groups
from gnomon.pipeline import load, run_pipeline
from gnomon.runtime.executor import Program

sys.path.insert(0, str(Path(__file__).parent))

from latency import BURST, THREADS, Case, geomean, measure, ort_session, relative_l2


@dataclass(frozen=True)
class Pair:
    """conv(in_channels -> channels, kernel, stride) -> act -> depthwise(channels, dw_kernel, dw_stride) -> act."""

    net: str
    in_channels: int
    channels: int
    kernel: int
    stride: int
    dw_kernel: int
    dw_stride: int
    size: int
    act: str
    count: int = 1

    @property
    def name(self) -> str:
        conv = f"{self.in_channels}>{self.channels} k{self.kernel}s{self.stride}"
        return f"{self.net} {conv} dw{self.dw_kernel}s{self.dw_stride} @{self.size}"


def _net(net: str, act: str, rows: Sequence[tuple[int, int, int, int, int, int, int, int]]) -> list[Pair]:
    return [Pair(net, *row[:7], act, row[7]) for row in rows]


# (in, channels, kernel, stride, dw kernel, dw stride, size, count); the first row of each is the stem.
PAIRS = [
    *_net(
        "v1",
        "relu",
        [
            (3, 32, 3, 2, 3, 1, 224, 1),
            (32, 64, 1, 1, 3, 2, 112, 1),
            (64, 128, 1, 1, 3, 1, 56, 1),
            (128, 128, 1, 1, 3, 2, 56, 1),
            (128, 256, 1, 1, 3, 1, 28, 1),
            (256, 256, 1, 1, 3, 2, 28, 1),
            (256, 512, 1, 1, 3, 1, 14, 1),
            (512, 512, 1, 1, 3, 1, 14, 4),
            (512, 512, 1, 1, 3, 2, 14, 1),
            (512, 1024, 1, 1, 3, 1, 7, 1),
        ],
    ),
    *_net(
        "v2",
        "relu6",
        [
            (3, 32, 3, 2, 3, 1, 224, 1),
            (16, 96, 1, 1, 3, 2, 112, 1),
            (24, 144, 1, 1, 3, 1, 56, 1),
            (24, 144, 1, 1, 3, 2, 56, 1),
            (32, 192, 1, 1, 3, 1, 28, 2),
            (32, 192, 1, 1, 3, 2, 28, 1),
            (64, 384, 1, 1, 3, 1, 14, 4),
            (96, 576, 1, 1, 3, 1, 14, 2),
            (96, 576, 1, 1, 3, 2, 14, 1),
            (160, 960, 1, 1, 3, 1, 7, 3),
        ],
    ),
    *_net(
        "mnas",
        "relu",
        [
            (3, 32, 3, 2, 3, 1, 224, 1),
            (16, 48, 1, 1, 3, 2, 112, 1),
            (24, 72, 1, 1, 3, 1, 56, 2),
            (24, 72, 1, 1, 5, 2, 56, 1),
            (40, 120, 1, 1, 5, 1, 28, 2),
            (40, 240, 1, 1, 5, 2, 28, 1),
            (80, 480, 1, 1, 5, 1, 14, 2),
            (80, 480, 1, 1, 3, 1, 14, 1),
            (96, 576, 1, 1, 3, 1, 14, 1),
            (96, 576, 1, 1, 5, 2, 14, 1),
            (192, 1152, 1, 1, 5, 1, 7, 3),
            (192, 1152, 1, 1, 3, 1, 7, 1),
        ],
    ),
    *_net(
        "effnet",
        "silu",
        [
            (3, 32, 3, 2, 3, 1, 224, 1),
            (16, 96, 1, 1, 3, 2, 112, 1),
            (24, 144, 1, 1, 3, 1, 56, 1),
            (24, 144, 1, 1, 5, 2, 56, 1),
            (40, 240, 1, 1, 5, 1, 28, 1),
            (40, 240, 1, 1, 3, 2, 28, 1),
            (80, 480, 1, 1, 3, 1, 14, 2),
            (80, 480, 1, 1, 5, 1, 14, 1),
            (112, 672, 1, 1, 5, 1, 14, 2),
            (112, 672, 1, 1, 5, 2, 14, 1),
            (192, 1152, 1, 1, 5, 1, 7, 3),
            (192, 1152, 1, 1, 3, 1, 7, 1),
        ],
    ),
]

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"relu": nn.ReLU, "relu6": nn.ReLU6, "silu": nn.SiLU}


class PairModule(nn.Module):
    def __init__(self, pair: Pair):
        super().__init__()
        self.conv = nn.Conv2d(pair.in_channels, pair.channels, pair.kernel, pair.stride, pair.kernel // 2)
        self.act = ACTIVATIONS[pair.act]()
        self.dw = nn.Conv2d(
            pair.channels, pair.channels, pair.dw_kernel, pair.dw_stride, pair.dw_kernel // 2, groups=pair.channels
        )
        self.dw_act = ACTIVATIONS[pair.act]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dw_act(self.dw(self.act(self.conv(x))))


def graph_module(model: nn.Module, x: torch.Tensor) -> ModuleOp:
    """The pair in the graph dialect, through the inference pipeline, ready for `graph-to-kernel`."""
    module = load(model, example_inputs=(x,))
    return run_pipeline(module, "inference", "pair")


def ways(module: ModuleOp) -> dict[str, tuple[tuple[int, ...], tuple[Kind, ...]]]:
    """Each op's group and each group's kind: all in one generated kernel, or each conv a library call with its
    activation."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ops, _ = kernel_ops(function)
    first = ops.index(next(op for op in ops[1:] if op.name == "graph.conv"))
    separate = tuple(0 if i < first else 1 for i in range(len(ops)))
    kinds = (library_kind(ops[0]), library_kind(ops[first]))
    return {"fused": ((0,) * len(ops), ("generated",)), "separate": (separate, kinds)}


def lowered(module: ModuleOp, groups: tuple[int, ...], kinds: tuple[Kind, ...]) -> Program:
    module = module.clone()
    set_groups(next(op for op in module.ops if isinstance(op, func.FuncOp)), groups, kinds)
    return Program(run_pipeline(module, "lowering", "pair", spec="graph-to-kernel,kernel-to-rt"))


def channels_last(module: ModuleOp) -> Program:
    """The pair lowered channels-last, as `graph-layout` would where it chose so, `graph-fuse` deciding the rest."""
    spec = "graph-layout{layout=nhwc},graph-fuse,graph-to-kernel,kernel-to-rt"
    return Program(run_pipeline(module.clone(), "lowering", "pair", spec=spec))


def predicted(module: ModuleOp, groups: tuple[int, ...], kinds: tuple[Kind, ...], fuser: Fuser) -> float:
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ops, _ = kernel_ops(function)
    members = [Group([o for o, g in zip(ops, groups) if g == i], kinds[i], []) for i in range(len(kinds))]
    return sum(fuser.price(group) for group in members)


SYSTEMS = ("fused", "separate", "nhwc", "torch", "ort")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nets", default="v1,v2,mnas,effnet")
    parser.add_argument("--device", default=AUTO_DEVICE)
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    nets = set(args.nets.split(","))
    device = fusion_device(args.device)
    fuser = Fuser(device, THREADS)
    print(f"threads: {THREADS}; smallest of {args.rounds} medians of {args.repeat} turns x {BURST} calls; times in us")
    print(f"predictions on {device.name} ({device.provenance})")
    print(
        f"{'pair':<40}{'fused':>8}{'separate':>9}{'nhwc':>8}{'torch':>8}{'ORT':>8}{'torch/f':>8}{'ORT/f':>7}"
        f"{'ORT/nhwc':>9}{'spread':>7}"
        f"{'pred f/s':>9}{'meas f/s':>9}{'sign':>5}{'rel L2':>9}"
    )
    to_torch: list[float] = []
    to_ort: list[float] = []
    ort_to_channels_last: list[float] = []
    agree = 0
    for pair in [p for p in PAIRS if p.net in nets]:
        model = PairModule(pair).eval()
        x = torch.randn(1, pair.in_channels, pair.size, pair.size)
        module = graph_module(model, x)
        inputs = [x.numpy()]
        both = ways(module)
        programs = {name: lowered(module, *way) for name, way in both.items()}
        programs["nhwc"] = channels_last(module)
        prediction = {name: predicted(module, *way, fuser) for name, way in both.items()}
        exported = io.BytesIO()
        torch.onnx.export(model, (x,), exported, dynamo=False)
        session = ort_session(exported.getvalue())
        feed = {session.get_inputs()[0].name: inputs[0]}
        with torch.inference_mode():
            reference = model(x).numpy()
        errors = [relative_l2(programs[name].run(inputs)[0], reference) for name in ("fused", "separate", "nhwc")]
        errors.append(relative_l2(session.run(None, feed)[0], reference))

        def eager(model: nn.Module = model, x: torch.Tensor = x) -> Any:
            with torch.inference_mode():
                return model(x)

        systems: dict[str, Callable[[], Any]] = {
            "fused": lambda p=programs["fused"]: p.run(inputs),
            "separate": lambda p=programs["separate"]: p.run(inputs),
            "nhwc": lambda p=programs["nhwc"]: p.run(inputs),
            "torch": eager,
            "ort": lambda: session.run(None, feed),
        }
        rounds = [measure(Case(pair.name, inputs, systems), args.repeat) for _ in range(args.rounds)]  # ms
        best = {name: min(r[name] for r in rounds) for name in SYSTEMS}
        spread = max(max(r[name] for r in rounds) / best[name] - 1 for name in SYSTEMS)
        predicted_ratio = prediction["fused"] / prediction["separate"]
        measured_ratio = best["fused"] / best["separate"]
        same_sign = (predicted_ratio < 1) == (measured_ratio < 1)
        agree += same_sign
        to_torch.append(best["torch"] / best["fused"])
        to_ort.append(best["ort"] / best["fused"])
        ort_to_channels_last.append(best["ort"] / best["nhwc"])
        us = {name: best[name] * 1e3 for name in SYSTEMS}
        print(
            f"{pair.name:<40}{us['fused']:>8.0f}{us['separate']:>9.0f}{us['nhwc']:>8.0f}{us['torch']:>8.0f}"
            f"{us['ort']:>8.0f}{to_torch[-1]:>8.2f}{to_ort[-1]:>7.2f}{ort_to_channels_last[-1]:>9.2f}{spread:>7.0%}"
            f"{predicted_ratio:>9.2f}{measured_ratio:>9.2f}"
            f"{'yes' if same_sign else 'NO':>5}{max(errors):>9.1e}",
            flush=True,
        )
    print(
        f"{'geomean speedup of gnomon fused':<40}{'':>41}{geomean(to_torch):>8.2f}{geomean(to_ort):>7.2f}"
        f"{geomean(ort_to_channels_last):>9.2f} (ORT/nhwc: gnomon channels-last)"
    )
    print(f"fusion decisions whose predicted sign agrees with the measured one: {agree}/{len(to_torch)}")


if __name__ == "__main__":
    main()
