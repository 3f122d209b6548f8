"""`graph-layout`'s decisions, predicted against measured: each CNN compiled with every region channels-first
(`layout=nchw`), every region channels-last (`layout=nhwc`) and as the pass chooses (`auto`), run interleaved with
ONNX Runtime in one process (bench/latency.py's turns: a pause, an untimed call, back-to-back timed calls).

Per model: both forced layouts' median times, their measured ratio next to the ratio the cost model predicted for
the same regions (the sum over regions of `nhwc_s` against `nchw_s`, on the pass's device), the layout `auto` took
and whether it was the faster one, and the chosen program against ORT. The same inputs go to both layouts, whose
outputs are compared (relative L2; the light networks' splat weights make SqueezeNet's softmax ill-conditioned,
see tests/test_backends.py).

    python bench/layout.py [--repeat 10] [--models shufflenet,resnet50] [--device auto]
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import gnomon
from gnomon import pipeline
from gnomon.bundled import light_models
from gnomon.models import EfficientNetB0, MobileNetV2
from gnomon.passes.graph_layout import LayoutDecision

sys.path.insert(0, str(Path(__file__).parent))

from latency import BURST, THREADS, Case, measure, ort_call, ort_session, relative_l2

TORCH_MODELS = {"mobilenet_v2": MobileNetV2, "efficientnet_b0": EfficientNetB0}
DEFAULT_MODELS = (
    "shufflenet,mobilenet_v2,efficientnet_b0,densenet121,squeezenet,resnet50,inception_v1,inception_v2,vgg19"
)

Compile = Callable[[list[LayoutDecision]], Any]


def compiled(build: Compile, layout: str, device: str) -> tuple[Any, list[LayoutDecision]]:
    """The model compiled with `graph-layout{layout=... device=...}`, and the decisions the pass recorded."""
    base = pipeline.PIPELINES["lowering"]
    pipeline.PIPELINES["lowering"] = base.replace("graph-layout", f'graph-layout{{layout={layout} device="{device}"}}')
    try:
        layouts: list[LayoutDecision] = []
        return build(layouts), layouts
    finally:
        pipeline.PIPELINES["lowering"] = base


def model_case(name: str) -> tuple[Compile, Any]:
    """How to compile the model, and an ONNX Runtime session for it."""
    paths = {os.path.basename(p).removeprefix("light_").removesuffix(".onnx"): p for p in light_models()}
    if name in paths:
        path = paths[name]
        return (lambda layouts: gnomon.compile(path, layouts=layouts)), ort_session(path)
    model = TORCH_MODELS[name]()
    example = model.example_inputs(1)
    buffer = io.BytesIO()
    torch.onnx.export(model, example, buffer, dynamo=False)
    session = ort_session(buffer.getvalue())
    return (lambda layouts: gnomon.compile(model, example_inputs=example, layouts=layouts)), session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--device", default="auto", help="the device graph-layout prices on")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    print(f"threads: {THREADS}; median of {args.repeat} turns x {BURST} calls, interleaved; ms")
    print(
        f"{'model':<16} {'nchw':>8} {'nhwc':>8} {'ORT':>8}  {'measured':>8} {'predicted':>9}  {'chose':<5} "
        f"{'right':<5} {'chosen/ORT':>10}  {'rel L2':>8}"
    )
    rows: list[tuple[dict[str, float], str, str]] = []
    for name in args.models.split(","):
        build, session = model_case(name)
        first, _ = compiled(build, "nchw", args.device)
        last, _ = compiled(build, "nhwc", args.device)
        _, decisions = compiled(build, "auto", args.device)
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(s).astype(d) for s, d in zip(first.input_shapes, first.input_dtypes)]
        error = relative_l2(last(*inputs)[0], first(*inputs)[0])
        systems = {
            "nchw": lambda first=first: first(*inputs),
            "nhwc": lambda last=last: last(*inputs),
            "ort": ort_call(session, inputs),
        }
        times = measure(Case(name, inputs, systems), args.repeat)
        predicted = sum(d.nhwc_s for d in decisions) / sum(d.nchw_s for d in decisions)
        chose = "nhwc" if any(d.layout == "nhwc" for d in decisions) else "nchw"
        faster = "nhwc" if times["nhwc"] < times["nchw"] else "nchw"
        rows.append((times, chose, faster))
        print(
            f"{name:<16} {times['nchw']:>8.2f} {times['nhwc']:>8.2f} {times['ort']:>8.2f}  "
            f"{times['nhwc'] / times['nchw']:>8.2f} {predicted:>9.2f}  {chose:<5} "
            f"{'yes' if chose == faster else 'NO':<5} "
            f"{times[chose] / times['ort']:>10.2f}  {error:>8.1e}",
            flush=True,
        )

    def geomean(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))

    right = sum(chose == faster for _, chose, faster in rows)
    print(
        f"geomean chosen/ORT {geomean([t[c] / t['ort'] for t, c, _ in rows]):.2f}, channels-first/ORT "
        f"{geomean([t['nchw'] / t['ort'] for t, _, _ in rows]):.2f}; faster layout chosen on {right} of {len(rows)}"
    )


if __name__ == "__main__":
    main()
