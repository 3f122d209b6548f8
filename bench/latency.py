"""Inference latency: gnomon's native runtime next to PyTorch eager and ONNX Runtime, in one process.

Models: the onnx package's light networks (batch 1, as shipped), and gnomon's torch models
(a transformer block, a ViT-S block with its attention written out, a DLRM-style recommender, an MLP, MobileNet-V2
and an EfficientNet-B0-style network at 224x224, batch 1) at benchmark sizes. The systems:

- gnomon: `gnomon.compile(...)`, native backend;
- torch eager: the torch module itself where one exists; for the ONNX networks, which have no
  torch module, the imported graph run op by op through torch's ATen ops (`TorchEagerProgram`:
  what an ONNX-to-torch converter would execute, with no fusion and no batch-norm folding);
- ONNX Runtime: the .onnx file (the torch models exported with torch.onnx, TorchScript path),
  default graph optimizations.

Every system gets the same inputs and both cores (torch.set_num_threads, ORT intra-op threads).
The figure is warm, back-to-back latency, as a serving loop sees it. Systems take turns, round-robin,
so that machine noise hits all of them alike; in each turn a system gets a pause (for the other
systems' spinning worker threads to sleep), one untimed call that wakes its own threads, then
`BURST` timed calls back to back. The untimed call matters on this machine: OpenMP workers that
have slept (after ~50 ms idle) take ~10 ms to come back, so a 60 us addmm measured 9.8 ms when each
call followed a 50 ms pause, for torch and for gnomon's library kernels alike, but not for ORT's
own thread pool. The table shows medians, the ratios gnomon/torch and gnomon/ORT, and their
geometric means.

    python bench/latency.py [--repeat 20] [--models resnet50,mlp]
"""

from __future__ import annotations

import argparse
import gc
import io
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import onnxruntime
import torch

import gnomon
from gnomon.bundled import light_models
from gnomon.models import DLRM, MLP, EfficientNetB0, MobileNetV2, TransformerBlock
from gnomon.runtime.torch_eager import TorchEagerProgram

THREADS = os.cpu_count() or 1
COOLDOWN_S = 0.05
"""Longer than OpenMP's and ORT's worker threads spin after a call."""
BURST = 3


@dataclass
class Case:
    name: str
    inputs: list[np.ndarray]
    systems: dict[str, Callable[[], Any]]


def ort_session(model: bytes | str) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def ort_call(session: onnxruntime.InferenceSession, inputs: Sequence[np.ndarray]) -> Callable[[], Any]:
    feed = {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)}
    return lambda: session.run(None, feed)


def onnx_case(path: str) -> Case:
    name = os.path.basename(path).removeprefix("light_").removesuffix(".onnx")
    exe = gnomon.compile(path)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(dtype) for shape, dtype in zip(exe.input_shapes, exe.input_dtypes)]
    eager = TorchEagerProgram(gnomon.load(path))
    session = ort_session(path)
    return Case(
        name,
        inputs,
        {"gnomon": lambda: exe(*inputs), "torch": lambda: eager(*inputs), "ort": ort_call(session, inputs)},
    )


def torch_case(name: str, model: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> Case:
    exe = gnomon.compile(model, example_inputs=example)
    inputs = [x.numpy() for x in example]
    buffer = io.BytesIO()
    torch.onnx.export(model, example, buffer, dynamo=False)
    session = ort_session(buffer.getvalue())

    def eager() -> Any:
        with torch.inference_mode():
            return model(*example)

    return Case(name, inputs, {"gnomon": lambda: exe(*inputs), "torch": eager, "ort": ort_call(session, inputs)})


def transformer_case() -> Case:
    transformer = TransformerBlock(d_model=256, heads=8, seq=128)
    return torch_case("transformer_block", transformer, transformer.example_inputs(8))


def vit_block_case() -> Case:
    """A ViT-S/16 encoder block (384 wide, 6 heads, 197 tokens) with its attention written out, as timm's ViT runs
    without `fused_attn` (and as ONNX exports it): graph-fuse prices it as one graph.attention."""
    block = TransformerBlock(d_model=384, heads=6, seq=197, explicit_attention=True)
    return torch_case("vit_s_block", block, block.example_inputs(1))


def dlrm_case() -> Case:
    dlrm = DLRM(dense_features=13, tables=8, rows=100_000, dim=64, pooling=20)
    return torch_case("dlrm", dlrm, dlrm.example_inputs(256))


def mobilenet_v2_case() -> Case:
    model = MobileNetV2()
    return torch_case("mobilenet_v2", model, model.example_inputs(1))


def efficientnet_case() -> Case:
    model = EfficientNetB0()
    return torch_case("efficientnet_b0", model, model.example_inputs(1))


def mlp_case() -> Case:
    mlp = MLP(sizes=(1024, 2048, 2048, 1000))
    return torch_case("mlp", mlp, mlp.example_inputs(64))


def relative_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def measure(case: Case, repeat: int) -> dict[str, float]:
    for call in case.systems.values():
        for _ in range(3):
            call()
    samples: dict[str, list[float]] = {system: [] for system in case.systems}
    for _ in range(repeat):
        for system, call in case.systems.items():
            time.sleep(COOLDOWN_S)
            call()
            for _ in range(BURST):
                start = time.perf_counter()
                call()
                samples[system].append(time.perf_counter() - start)
    return {system: statistics.median(times) * 1e3 for system, times in samples.items()}


def check(case: Case) -> float:
    """gnomon's first output against ONNX Runtime's (relative L2), so the table never times a wrong answer.
    SqueezeNet's light network shows 0.09, and no wrong answer: its last convolution's weights are one constant, so
    its 1000 logits are equal up to rounding, at 6.8e9 on these inputs; gnomon's product rounds the last 8
    columns differently (the logits agree with ORT's to 8e-7, relative L2) and the softmax turns those 8 into 0."""
    ours = case.systems["gnomon"]()[0]
    theirs = case.systems["ort"]()[0]
    return relative_l2(ours, theirs)


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--models", help="comma-separated subset of model names")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    wanted = set(args.models.split(",")) if args.models else None
    # Each case is built just before it is measured and dropped after: a process holding twelve
    # models' sessions, arenas and weights at once measured the first ones up to 5x slower.
    factories: dict[str, Callable[[], Case]] = {
        p.stem.removeprefix("light_"): partial(onnx_case, str(p)) for p in light_models()
    }
    factories |= {"transformer_block": transformer_case, "vit_s_block": vit_block_case}
    factories |= {"dlrm": dlrm_case, "mlp": mlp_case}
    factories |= {"mobilenet_v2": mobilenet_v2_case, "efficientnet_b0": efficientnet_case}
    print(f"threads: {THREADS}; median of {args.repeat} turns x {BURST} back-to-back calls, interleaved; times in ms")
    print("torch = the torch module in eager mode; for ONNX networks, the graph op by op through ATen")
    header = f"{'model':<20}{'gnomon':>10}{'torch':>10}{'ORT':>10}{'g/torch':>9}{'g/ORT':>8}{'rel L2 vs ORT':>15}"
    print(header)
    to_torch: list[float] = []
    to_ort: list[float] = []
    for name, factory in factories.items():
        if wanted is not None and name not in wanted:
            continue
        case = factory()
        error = check(case)
        ms = measure(case, args.repeat)
        del case
        gc.collect()
        to_torch.append(ms["gnomon"] / ms["torch"])
        to_ort.append(ms["gnomon"] / ms["ort"])
        print(
            f"{name:<20}{ms['gnomon']:>10.3f}{ms['torch']:>10.3f}{ms['ort']:>10.3f}"
            f"{to_torch[-1]:>9.2f}{to_ort[-1]:>8.2f}{error:>15.2e}"
        )
    print(f"{'geomean':<50}{geomean(to_torch):>9.2f}{geomean(to_ort):>8.2f}")


if __name__ == "__main__":
    main()
