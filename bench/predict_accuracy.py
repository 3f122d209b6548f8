"""How well gnomon's cost model predicts this machine: predicted against measured, per kernel and end to end.

After a calibration (`gnomon calibrate`, run here unless `--device FILE` gives one), for the onnx package's light
networks, gnomon's transformer block, DLRM-style model and MLP, each at two batch sizes:

1. per kernel: each launch of gnomon's runtime, predicted (`gnomon.analysis.analyze_program`: launch overhead plus
   the cost service's kernel time) against its profiled time (median over runs);
2. gnomon end to end: the predicted critical path against `Executable.run` (unprofiled, median);
3. PyTorch eager end to end: the `torch-eager` prediction (the imported graph op by op) against the torch module
   in eager mode, or for the ONNX networks, which have no torch module, `TorchEagerProgram` (median).

Every pair is printed, with the geometric mean of the absolute percentage errors of each group, per model, and per
kernel kind (which kernels carry the error, and whether they are predicted too fast or too slow). The light
networks are batch 1 in their files; the second batch size is bound through input shapes (the ONNX frontend makes
the reshapes they spell out for a batch of 1 follow it), and a network that still cannot take it is named.

Timings on a shared machine are noisy: before each case the bench waits (up to `--wait` seconds) for two quiet
seconds, says when it did not get them, and prints the load average before and after. Before each round it measures
the fp32 peak, the last cache level's and DRAM's bandwidths again, as the calibration does, and prints them against
the calibration's: the host's other tenants can slow every kernel for minutes, which no idle CPU shows. Over
seconds they slow it too, so the cases are measured in `--rounds` rounds over all of them, and each measured figure
is the median of its rounds.

    python bench/predict_accuracy.py [--device FILE] [--models resnet50,mlp] [--runs 7] [--rounds 5] [--no-kernels]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import gnomon
from gnomon.analysis import Report, analyze_program, onnx_batch_shapes
from gnomon.bundled import light_models
from gnomon.calibrate import busy_fraction, calibrate, peak_flops, stream_bandwidth
from gnomon.devices import Device, load_device, save_device
from gnomon.errors import GnomonError
from gnomon.executable import Executable
from gnomon.models import DLRM, MLP, TransformerBlock
from gnomon.runtime.torch_eager import TorchEagerProgram

BATCHES = {"onnx": (1, 2), "transformer_block": (1, 8), "dlrm": (32, 256), "mlp": (1, 64)}


@dataclass
class Case:
    name: str
    batch: int
    executable: Executable
    inputs: list[np.ndarray]
    eager: Callable[[], Any]
    eager_report: Report


@dataclass
class Result:
    case: str
    kernels: list[tuple[str, str, float, float]]
    """(kernel, kind, predicted, measured) per launch."""
    gnomon: tuple[float, float]
    """(predicted, measured) end to end."""
    eager: tuple[float, float]


def ape(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured


def geomean_ape(pairs: Sequence[tuple[float, float]]) -> float:
    """The geometric mean of the absolute percentage errors (a perfect pair counts as 0.01%)."""
    if not pairs:
        return math.nan
    return math.exp(statistics.fmean(math.log(max(ape(p, m), 1e-4)) for p, m in pairs))


def _random_inputs(executable: Executable) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(d) for s, d in zip(executable.input_shapes, executable.input_dtypes)]


def onnx_cases(path: Path, device: Device) -> tuple[list[Case], list[str]]:
    name = path.stem.removeprefix("light_")
    cases: list[Case] = []
    skipped: list[str] = []
    for batch in BATCHES["onnx"]:
        shapes = None
        if batch != 1:
            shapes = onnx_batch_shapes(path, batch)  # what `gnomon analyze --batch` binds
        try:
            executable = gnomon.compile(str(path), input_shapes=shapes)
        except GnomonError as error:
            skipped.append(f"{name} batch {batch}: {str(error).splitlines()[0]}")
            continue
        inputs = _random_inputs(executable)
        graph = gnomon.load(str(path), input_shapes=shapes)
        eager_program = TorchEagerProgram(graph)
        report = gnomon.analyze(str(path), device=device, target="torch-eager", input_shapes=shapes)
        cases.append(Case(name, batch, executable, inputs, lambda p=eager_program, x=inputs: p(*x), report))
    return cases, skipped


def torch_case(name: str, model: torch.nn.Module, batch: int, device: Device) -> Case:
    make: Any = getattr(model, "example_inputs")
    example: tuple[torch.Tensor, ...] = make(batch)
    executable = gnomon.compile(model, example_inputs=example)
    report = gnomon.analyze(model, example, device=device, target="torch-eager")

    def eager() -> Any:
        with torch.inference_mode():
            return model(*example)

    return Case(name, batch, executable, [x.numpy() for x in example], eager, report)


def torch_cases(device: Device, wanted: set[str] | None) -> list[Case]:
    models: dict[str, torch.nn.Module] = {
        "transformer_block": TransformerBlock(d_model=256, heads=8, seq=128),
        "dlrm": DLRM(dense_features=13, tables=8, rows=100_000, dim=64, pooling=20),
        "mlp": MLP(sizes=(1024, 2048, 2048, 1000)),
    }
    return [
        torch_case(name, model, batch, device)
        for name, model in models.items()
        if wanted is None or name in wanted
        for batch in BATCHES[name]
    ]


def _runs_for(call: Callable[[], Any], runs: int, budget_s: float) -> int:
    """`runs`, or fewer for a slow model (at least 3), so that one measurement takes about `budget_s`."""
    start = time.perf_counter()
    call()
    once = time.perf_counter() - start
    return max(3, min(runs, int(budget_s / max(once, 1e-9))))


def _median(call: Callable[[], Any], runs: int) -> float:
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def host_speed(device: Device) -> tuple[float, float, float]:
    """The fp32 peak, last-cache and DRAM bandwidths now, measured as `gnomon calibrate` measures them, as fractions
    of the device's: the shared host's state over a round, which moves every measured figure (its other tenants
    share the last cache level as well as the cores)."""
    last_cache = device.memory[-2]
    cache_bytes = last_cache.capacity_bytes * (device.cores if last_cache.per_core else 1)
    per_thread = last_cache.capacity_bytes // 2 if last_cache.per_core else cache_bytes // (2 * device.cores)
    cache = stream_bandwidth(per_thread, device.cores, 3, 256 << 20)
    dram = stream_bandwidth(8 * cache_bytes // device.cores, device.cores, 3, 64 * cache_bytes)
    return (
        peak_flops(1536, "fp32", 3) / device.peak("fp32"),
        cache / last_cache.bandwidth_bytes_per_s,
        dram / device.dram.bandwidth_bytes_per_s,
    )


def wait_until_quiet(max_wait_s: float) -> bool:
    """Wait (up to `max_wait_s`) for two quiet seconds: other processes' load on a shared machine slows torch's
    OpenMP threads by whole scheduler ticks. Whether it got them."""
    deadline = time.monotonic() + max_wait_s
    while time.monotonic() < deadline:
        if busy_fraction(1.0) < 0.15 and busy_fraction(1.0) < 0.15:
            return True
    return False


@dataclass
class Sample:
    """One round's measurement of a case: median per-launch profile times, and median end-to-end times."""

    kernels: list[float]
    gnomon_s: float
    eager_s: float


def sample(case: Case, runs: int, budget_s: float) -> Sample:
    executable, inputs = case.executable, case.inputs
    executable.run(inputs)
    count = _runs_for(lambda: executable.run(inputs), runs, budget_s)
    profiles: list[list[float]] = []
    for _ in range(count):
        executable.run(inputs, profile=True)
        profiles.append([t.seconds for t in executable.profile().timings])
    kernels = [statistics.median(run[i] for run in profiles) for i in range(len(profiles[0]))]
    time.sleep(0.2)  # torch's OpenMP workers spin after a call: let them sleep before the next system runs
    gnomon_s = _median(lambda: executable.run(inputs), count)
    time.sleep(0.2)
    case.eager()
    eager_s = _median(case.eager, _runs_for(case.eager, runs, budget_s))
    return Sample(kernels, gnomon_s, eager_s)


def result(case: Case, samples: Sequence[Sample], device: Device) -> Result:
    """The case's predictions against the median of its rounds' measurements."""
    timings = case.executable.profile().timings
    predicted = analyze_program(case.executable.module, device, case.name)
    launches = [r for r in predicted.records if r.kind != "runtime"]
    assert len(launches) == len(timings), "the prediction and the profile list the same launches"
    measured = [statistics.median(s.kernels[i] for s in samples) for i in range(len(timings))]
    kernels = [(t.kernel, t.kind, r.predicted_s, m) for t, r, m in zip(timings, launches, measured, strict=True)]
    return Result(
        f"{case.name} b{case.batch}",
        kernels,
        (predicted.predicted_e2e_s, statistics.median(s.gnomon_s for s in samples)),
        (case.eager_report.predicted_e2e_s, statistics.median(s.eager_s for s in samples)),
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def print_results(results: Sequence[Result], show_kernels: bool) -> None:
    print("\nper kernel (gnomon runtime): predicted vs measured median, ms")
    for result in results:
        pairs = [(p, m) for _, _, p, m in result.kernels]
        print(f"  {result.case}: {len(pairs)} launches, geomean APE {geomean_ape(pairs):.1%}")
        if show_kernels:
            for kernel, kind, p, m in result.kernels:
                print(f"    {kernel[:32]:<32} {kind[:36]:<36} {_ms(p):>9} {_ms(m):>9} {ape(p, m):>7.1%}")
    by_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for result in results:
        for _, kind, p, m in result.kernels:
            by_kind[kind].append((p, m))
    total_measured = sum(m for pairs in by_kind.values() for _, m in pairs)
    print("\nper kernel kind: launches, share of measured kernel time, geomean APE, median predicted/measured")
    for kind, pairs in sorted(by_kind.items(), key=lambda item: -sum(m for _, m in item[1])):
        share = sum(m for _, m in pairs) / total_measured
        ratio = statistics.median(p / m for p, m in pairs)
        print(f"  {kind[:44]:<44} {len(pairs):>5} {share:>7.1%} {geomean_ape(pairs):>8.1%} {ratio:>8.2f}")
    print("\nend to end, ms: gnomon predicted, measured, APE | torch eager predicted, measured, APE")
    for result in results:
        (gp, gm), (ep, em) = result.gnomon, result.eager
        print(
            f"  {result.case:<24} {_ms(gp):>10} {_ms(gm):>10} {ape(gp, gm):>7.1%} | "
            f"{_ms(ep):>10} {_ms(em):>10} {ape(ep, em):>7.1%}"
        )
    all_kernels = [(p, m) for result in results for _, _, p, m in result.kernels]
    weighted = sum(abs(p - m) for p, m in all_kernels) / sum(m for _, m in all_kernels)
    print("\ngeomean absolute percentage error (targets: per kernel <= 15%, end to end <= 10%)")
    print(f"  per kernel, gnomon runtime:   {geomean_ape(all_kernels):.1%} over {len(all_kernels)} launches")
    print(f"    (time-weighted: sum |predicted - measured| / sum measured = {weighted:.1%})")
    print(f"  end to end, gnomon runtime:   {geomean_ape([r.gnomon for r in results]):.1%} over {len(results)} cases")
    print(f"  end to end, PyTorch eager:    {geomean_ape([r.eager for r in results]):.1%} over {len(results)} cases")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="a calibrated device file (default: calibrate now)")
    parser.add_argument("--save-device", type=Path, help="write the calibration made here to this file")
    parser.add_argument("--models", help="comma-separated subset, e.g. resnet50,squeezenet,mlp")
    parser.add_argument("--runs", type=int, default=7, help="profiled and timed runs per case (fewer for slow ones)")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds one measurement of a case may take")
    parser.add_argument("--rounds", type=int, default=5, help="rounds over all cases (each figure: their median)")
    parser.add_argument("--no-kernels", action="store_true", help="do not print every kernel's pair")
    parser.add_argument("--wait", type=float, default=60, help="seconds to wait for a quiet machine before a case")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; torch threads {torch.get_num_threads()}")
    if args.device:
        device = load_device(args.device)
        print(f"device: {device.provenance} ({args.device})")
    else:
        device = calibrate().device
        if args.save_device:
            save_device(device, args.save_device)
    wanted = set(args.models.split(",")) if args.models else None
    cases: list[Case] = []
    skipped: list[str] = []
    for path in light_models():
        if wanted is None or path.stem.removeprefix("light_") in wanted:
            onnx, missing = onnx_cases(path, device)
            cases += onnx
            skipped += missing
    cases += torch_cases(device, wanted)
    if skipped:
        print("batch sizes the models cannot take:")
        for line in skipped:
            print(f"  {line}")
    samples: list[list[Sample]] = [[] for _ in cases]
    speeds: list[tuple[float, float, float]] = []
    last_cache = device.memory[-2].name
    for round_ in range(1, args.rounds + 1):
        peak, cache, dram = host_speed(device)
        speeds.append((peak, cache, dram))
        speed = (
            f"{peak:.0%} of the calibrated fp32 peak (a best round), {cache:.0%} of its {last_cache} bandwidth, "
            f"{dram:.0%} of its DRAM bandwidth"
        )
        print(f"  round {round_}: the host at {speed}")
        for case, taken in zip(cases, samples, strict=True):
            quiet = wait_until_quiet(args.wait)
            taken.append(sample(case, args.runs, args.budget))
            note = "" if quiet else f" (the machine was busy after waiting {args.wait:.0f} s)"
            print(f"  round {round_}: {case.name} b{case.batch}, gnomon {_ms(taken[-1].gnomon_s)} ms{note}", flush=True)
    results = [result(case, taken, device) for case, taken in zip(cases, samples, strict=True)]
    print_results(results, not args.no_kernels)
    peak, cache, dram = (statistics.median(speed[i] for speed in speeds) for i in (0, 1, 2))
    print(
        f"\nthe host over the rounds (median): {peak:.0%} of the calibration's fp32 peak, {cache:.0%} of its "
        f"{last_cache} bandwidth, {dram:.0%} of its DRAM"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
