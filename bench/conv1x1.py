"""1x1 convolutions on contiguous NCHW buffers at batch 1: oneDNN's convolution against a BLAS product.

`gemm_conv` in gnomon/runtime/library/nn.py runs a 1x1, stride-1 convolution as W @ x into the
output buffer, because of this table. Each row is a 1x1 convolution + bias + ReLU of ResNet-50,
SqueezeNet or DenseNet, written into a preallocated output:

- `aten.convolution + copy`: what the runtime did before (aten's convolution has no out= kernel);
- `oneDNN fused relu + copy`: mkldnn._convolution_pointwise with its ReLU post-op;
- `addmm + relu_`: bias and product in one BLAS call into the output, then an in-place ReLU.

Medians of `--repeat` calls after a warm-up, torch on all cores.

    python bench/conv1x1.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

SHAPES = [  # (input channels, output channels, height = width)
    (64, 256, 56), (256, 64, 56), (256, 128, 56), (512, 128, 28), (128, 512, 28), (1024, 256, 14),
    (256, 1024, 14), (2048, 512, 7), (512, 2048, 7), (96, 16, 55), (16, 64, 55), (64, 128, 27),
]  # fmt: skip


def median_us(call: Callable[[], object], repeat: int) -> float:
    for _ in range(5):
        call()
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    fused = torch.ops.mkldnn._convolution_pointwise.default
    print(f"torch threads: {torch.get_num_threads()}; median us per call")
    print(f"{'conv':>22}{'aten + copy':>14}{'oneDNN + copy':>15}{'addmm + relu_':>15}{'BLAS/aten':>11}")
    with torch.inference_mode():
        for cin, cout, hw in SHAPES:
            x, w, b = torch.randn(1, cin, hw, hw), torch.randn(cout, cin, 1, 1), torch.randn(cout)
            out = torch.empty(1, cout, hw, hw)
            matrix, columns, into, bias = w.view(cout, cin), x.view(cin, -1), out.view(cout, -1), b.view(cout, 1)

            def aten() -> None:
                out.copy_(F.conv2d(x, w, b))
                torch.relu_(out)

            def onednn() -> None:
                out.copy_(fused(x, w, b, [0, 0], [1, 1], [1, 1], 1, "relu", [], ""))

            def blas() -> None:
                torch.addmm(bias, matrix, columns, out=into)
                torch.relu_(out)

            t_aten, t_onednn, t_blas = (median_us(f, args.repeat) for f in (aten, onednn, blas))
            name = f"{cin}->{cout} @ {hw}x{hw}"
            print(f"{name:>22}{t_aten:>14.1f}{t_onednn:>15.1f}{t_blas:>15.1f}{t_blas / t_aten:>11.2f}")


if __name__ == "__main__":
    main()
