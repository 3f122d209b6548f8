"""Convolution epilogues on ResNet-50 shapes: aten conv then a separate ReLU, against oneDNN's fused call.

Each row is one of ResNet-50's convolutions with its epilogue (bias, ReLU; `+add` rows add the
bottleneck's skip connection before the ReLU), computed into a preallocated output as the runtime's
arena holds it. Columns:

- `aten, relu`: two library kernels: aten.convolution (and, on `+add` rows, the skip added in place)
  into one buffer, then ReLU (clamp_min out=) from there into the output: the unfused schedule;
- `aten+relu_`: `library_kernel(block, onednn="never")`: aten.convolution copied into the output
  (aten has no real convolution.out), then the epilogue in place there;
- `mkldnn`: `library_kernel(block, onednn="always")`: one `mkldnn._convolution_pointwise` call
  (overload `binary` on `+add` rows) with the epilogue as oneDNN post-ops, copied into the output;
- `mkldnn packed`: the same call on a weight reordered once to oneDNN's blocked layout (the library
  does not do this: it cannot know that a weight operand stays constant between runs).

The default, `onednn="residual"`, takes `mkldnn` on `+add` rows and `aten+relu_` on the others.
Variants run interleaved, round after round, so that drift in the machine's load hits them alike; the
table shows each one's median per call in milliseconds.

    python bench/library_epilogue.py [--batch 1] [--runs 30] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Block
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.runtime.library import library_kernel


@dataclass(frozen=True)
class ConvShape:
    name: str
    channels: int
    size: int
    out_channels: int
    kernel: int
    stride: int
    residual: bool = False

    def blocks(self, batch: int) -> tuple[Block, Block, Block]:
        """conv + bias (+ skip) + relu; the same without the relu; and the relu alone: graph IR blocks."""
        pad, out = self.kernel // 2, (self.size + 2 * (self.kernel // 2) - self.kernel) // self.stride + 1
        x = f"tensor<{batch}x{self.channels}x{self.size}x{self.size}xf32>"
        w = f"tensor<{self.out_channels}x{self.channels}x{self.kernel}x{self.kernel}xf32>"
        y, b = f"tensor<{batch}x{self.out_channels}x{out}x{out}xf32>", f"tensor<{self.out_channels}xf32>"
        lines = [
            f"%c = graph.conv %x, %w, %b {{strides = array<i64: {self.stride}, {self.stride}>,"
            f" pads = array<i64: {pad}, {pad}, {pad}, {pad}>, dilations = array<i64: 1, 1>, groups = 1 : i64}}"
            f" : ({x}, {w}, {b}) -> {y}"
        ]
        if self.residual:
            lines.append(f"%c_ = graph.add %c, %s : ({y}, {y}) -> {y}")
        last = lines[-1].split(" = ")[0]
        relu = f"%r = graph.relu {last} : ({y}) -> {y}"

        def function(args: str, body: list[str], result: str) -> Block:
            text = f"func.func @main({args}) -> {y} {{\n" + "\n".join(body) + f"\nfunc.return {result} : {y}\n}}"
            module = Parser(gnomon_context(), text).parse_module()
            return cast(func.FuncOp, module.body.block.first_op).body.block

        args = f"%x: {x}, %w: {w}, %b: {b}, %s: {y}"
        return (
            function(args, [*lines, relu], "%r"),
            function(args, lines, last),
            function(f"{last}: {y}", [relu], "%r"),
        )


# The distinct convolutions of ResNet-50 (torchvision layout: the stride sits on the 3x3 conv).
RESNET50 = (
    ConvShape("conv1 7x7/2", 3, 224, 64, 7, 2),
    ConvShape("layer1 1x1", 256, 56, 64, 1, 1),
    ConvShape("layer1 3x3", 64, 56, 64, 3, 1),
    ConvShape("layer1 1x1 +add", 64, 56, 256, 1, 1, residual=True),
    ConvShape("layer2 3x3", 128, 28, 128, 3, 1),
    ConvShape("layer2 1x1 +add", 128, 28, 512, 1, 1, residual=True),
    ConvShape("layer3 3x3", 256, 14, 256, 3, 1),
    ConvShape("layer3 1x1 +add", 256, 14, 1024, 1, 1, residual=True),
    ConvShape("layer4 3x3", 512, 7, 512, 3, 1),
    ConvShape("layer4 1x1 +add", 512, 7, 2048, 1, 1, residual=True),
)
NAMES = ("aten, relu", "aten+relu_", "mkldnn", "mkldnn packed")


def shape_of(tensor: Attribute) -> tuple[int, ...]:
    assert isinstance(tensor, TensorType)
    return tensor.get_shape()


def variants(shape: ConvShape, batch: int) -> tuple[dict[str, Callable[[], object]], torch.Tensor, list[str]]:
    """The four ways to compute the row, the output tensor they share, and the library kernels' names."""
    fused_block, conv_block, relu_block = shape.blocks(batch)
    generator = torch.Generator().manual_seed(0)
    args = [torch.randn(shape_of(arg.type), generator=generator) for arg in fused_block.args]
    x, w, b, skip = args
    w.mul_(0.05)
    out, between = torch.empty_like(skip), torch.empty_like(skip)
    kernels = [library_kernel(conv_block, onednn="never"), library_kernel(relu_block)]
    kernels += [library_kernel(fused_block, onednn="never"), library_kernel(fused_block, onednn="always")]
    conv, relu, inplace, fused = (k for k in kernels if k is not None)
    conv_launch, relu_launch = conv.bind(args, [between]), relu.bind([between], [out])

    def two_kernels() -> None:
        conv_launch()
        relu_launch()

    pad, stride = [shape.kernel // 2] * 2, [shape.stride] * 2
    packed = torch.ops.mkldnn._reorder_convolution_weight(w, pad, stride, [1, 1], 1, list(x.shape))

    def packed_call() -> object:
        if shape.residual:
            binary = torch.ops.mkldnn._convolution_pointwise.binary
            return out.copy_(binary(x, skip, packed, b, pad, stride, [1, 1], 1, "add", None, "relu", [], None))
        unary = torch.ops.mkldnn._convolution_pointwise.default
        return out.copy_(unary(x, packed, b, pad, stride, [1, 1], 1, "relu", [], ""))

    launches = (two_kernels, inplace.bind(args, [out]), fused.bind(args, [out]), packed_call)
    calls: dict[str, Callable[[], object]] = dict(zip(NAMES, launches, strict=True))
    return calls, out, [f"{conv.name}, {relu.name}", inplace.name, fused.name]


def check(calls: dict[str, Callable[[], object]], out: torch.Tensor) -> float:
    """The largest difference between the variants' outputs (they must agree before their times mean anything)."""
    outputs: list[torch.Tensor] = []
    for call in calls.values():
        out.fill_(float("nan"))
        call()
        outputs.append(out.clone())
    return max(float((o - outputs[0]).abs().max()) for o in outputs)


def medians(calls: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(3):
        for call in calls.values():
            call()
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, batch {args.batch}; median ms per call of {args.runs}")
    header = "".join(f"{n:>15}" for n in NAMES)
    print(f"{'shape':<18}{header}{'mkldnn/aten+relu_':>19}{'max |diff|':>12}")
    kernel_names: set[str] = set()
    with torch.inference_mode():
        for shape in RESNET50:
            calls, out, names = variants(shape, args.batch)
            kernel_names.update(names)
            difference = check(calls, out)
            ms = medians(calls, args.runs)
            ratio = ms[NAMES[2]] / ms[NAMES[1]]
            row = "".join(f"{ms[n]:>15.3f}" for n in NAMES)
            print(f"{shape.name:<18}{row}{ratio:>19.2f}{difference:>12.1e}")
    print("library kernels:", "; ".join(sorted(kernel_names)))


if __name__ == "__main__":
    main()
