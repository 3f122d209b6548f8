"""How well gnomon's cost model predicts this machine: predicted against measured, per kernel and end to end.

After calibrations (`gnomon calibrate`, run here unless `--device FILE` gives one), for the onnx package's light
networks, gnomon's transformer block, DLRM-style model and MLP, each at two batch sizes:

1. per kernel: each launch of gnomon's runtime, predicted (`gnomon.cost.program_report`: launch overhead and
   library calls plus the cost service's kernel time) against its profiled time;
2. gnomon end to end: the predicted critical path against `Executable.run` (unprofiled);
3. PyTorch eager end to end: the `torch-eager` prediction (the imported graph op by op) against the torch module
   in eager mode, or for the ONNX networks, which have no torch module, `TorchEagerProgram`; beside it, eager's
   predicted ops against the top-level ATen ops torch.profiler sees.

Each measured figure is the smallest of `MEDIANS` medians, and the end-to-end ones print their spread; the noise
floor (`noise_floor`) is the error a perfect predictor of one measurement scores against a repeat of it, the least
a target can be checked at on this host. Every pair is
printed, with the geometric mean of the absolute percentage errors of each group, per model, per kernel kind and
per op family and shape class (`op_families.py`: which kernels carry the error, and whether they are predicted too
fast or too slow). The light
networks are batch 1 in their files; the second batch size is bound through input shapes (the ONNX frontend makes
the reshapes they spell out for a batch of 1 follow it), and a network that still cannot take it is named.

Timings on a shared machine are noisy: before each case the bench waits (up to `--wait` seconds) for two quiet
seconds, says when it did not get them, and prints the load average before and after. The host's other tenants also
slow every kernel for minutes, which no idle CPU shows (its fp32 peak and last-cache bandwidth drift by a quarter),
and a calibration describes the minute it ran in. So the cases are measured in `--rounds` rounds over all of them,
each round predicted with a calibration made just before it (or, with `--device FILE` or `--calibrate-once`, one
device for all, and the host's peak and bandwidths measured again each round, against that device's); each figure
is the median of its rounds' predictions against the median of their measurements.

The cases above are the TUNING suite: the cost model has been refined against them. `--validate` measures the
VALIDATION set instead (bench/validation_set.py: 32 models in 9 families, two batch sizes each), which the model is
never tuned on; a change to the model is judged there. Its errors are also printed per family.

    python bench/predict_accuracy.py [--device FILE | --calibrate-once] [--models resnet50,mlp] [--rounds 5]
    python bench/predict_accuracy.py --validate [--models vit_p4_d64,...]
    python bench/predict_accuracy.py --both    # both, in one run, each printed apart
    python bench/predict_accuracy.py --validate --device A.toml --compare B.toml  # two devices, one measurement
    python bench/predict_accuracy.py --train [--optimizer adam]   # training steps (bench/training_cases.py)

`--train` measures training steps instead: gnomon's compiled step against its prediction, and PyTorch eager's
step (zero_grad, forward, backward, torch.optim's foreach step) against `gnomon.cost.eager_training`'s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from op_families import shape_class
from training_cases import TRAINING_SET, TRAINING_VALIDATION, StepRunner, TrainingEntry, training_cases
from xdsl.dialects.builtin import ModuleOp

import gnomon
from gnomon.analysis import onnx_batch_shapes
from gnomon.bundled import light_models
from gnomon.calibrate import calibrate
from gnomon.cost.devices import Device, load_device, save_device
from gnomon.cost.eager import eager_report
from gnomon.cost.fit import spread
from gnomon.cost.program import program_report
from gnomon.cost.report import Report
from gnomon.dialects import kernel
from gnomon.errors import GnomonError
from gnomon.executable import Executable
from gnomon.models import DLRM, MLP, TransformerBlock
from gnomon.optimizers import SGD, Adam
from gnomon.runtime.calibration.host import busy_fraction
from gnomon.runtime.calibration.probe import peak_flops, stream_bandwidth
from gnomon.runtime.torch_eager import TorchEagerProgram

BATCHES = {"onnx": (1, 2), "transformer_block": (1, 8), "dlrm": (32, 256), "mlp": (1, 64)}


@dataclass
class Case:
    name: str
    family: str
    batch: int
    executable: Executable | StepRunner
    inputs: list[np.ndarray]
    eager: Callable[[], Any] | None
    """PyTorch eager's run, timed in this process; None where `eager_timer` times it elsewhere."""
    eager_prediction: Callable[[Device], Report]
    """The `torch-eager` prediction with a device: the imported graph op by op (inference), or the training step's
    graph as eager trains (`gnomon.cost.eager_training`)."""
    eager_timer: Callable[[int, float], list[float]] | None = None
    """Where `eager` is None: eager's medians (`runs`, `budget_s`) measured in a process of its own (a training
    step: `training_cases.EagerProcess`)."""
    eager_profile: Callable[[], tuple[int, float]] | None = None
    """Where `eager` is None: its `aten_profile`, taken there."""


def _eager_of(graph: ModuleOp, name: str) -> Callable[[Device], Report]:
    return lambda device: eager_report(graph, device, name)


class Launch(NamedTuple):
    """One launch's prediction against its measurement."""

    kernel: str
    kind: str
    """Its name in profiles: `aten.linear+gelu`, `generated`."""
    shape_class: str
    """Its op family and shape class (`op_families.shape_class`)."""
    predicted: float
    measured: float


@dataclass
class Result:
    case: str
    family: str
    kernels: list[Launch]
    gnomon: tuple[float, float]
    """(predicted, measured) end to end."""
    eager: tuple[float, float]
    eager_ops: tuple[int, float, float] = (0, 0.0, 0.0)
    """The `torch-eager` prediction's ops: how many, their host overheads (dispatch and call) and kernels together."""
    aten: tuple[int, float] = (0, 0.0)
    """What torch's profiler saw of eager (`aten_profile`)."""
    spread: tuple[float, float] = (0.0, 0.0)
    """How steady the end-to-end measurements were, gnomon's and eager's: the largest spread of a round's medians,
    or of the rounds' figures, whichever is larger."""
    repeats: tuple[list[float], list[float], list[list[float]]] = ([], [], [])
    """The same figures measured again (`Sample.repeats`): gnomon's end to end, eager's, and each launch's, for the
    noise floor (`noise_floor`)."""


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


def onnx_cases(path: Path) -> tuple[list[Case], list[str]]:
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
        eager = _eager_of(graph, name)
        cases.append(Case(name, name, batch, executable, inputs, lambda p=eager_program, x=inputs: p(*x), eager))
    return cases, skipped


def torch_case(name: str, family: str, model: torch.nn.Module, batch: int, example: tuple[torch.Tensor, ...]) -> Case:
    executable = gnomon.compile(model, example_inputs=example)
    graph = gnomon.load(model, example)

    def eager() -> Any:
        with torch.inference_mode():
            return model(*example)

    return Case(name, family, batch, executable, [x.numpy() for x in example], eager, _eager_of(graph, name))


def torch_cases(wanted: set[str] | None) -> list[Case]:
    models: dict[str, torch.nn.Module] = {
        "transformer_block": TransformerBlock(d_model=256, heads=8, seq=128),
        "dlrm": DLRM(dense_features=13, tables=8, rows=100_000, dim=64, pooling=20),
        "mlp": MLP(sizes=(1024, 2048, 2048, 1000)),
    }
    return [
        torch_case(name, name, model, batch, getattr(model, "example_inputs")(batch))
        for name, model in models.items()
        if wanted is None or name in wanted
        for batch in BATCHES[name]
    ]


def validation_cases(wanted: set[str] | None) -> list[Case]:
    """The validation set's models at their two batch sizes (bench/validation_set.py)."""
    path = Path(__file__).with_name("validation_set.py")
    spec = importlib.util.spec_from_file_location("validation_set", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    cases: list[Case] = []
    for name, entry in module.VALIDATION_SET.items():
        if wanted is not None and name not in wanted:
            continue
        model = entry.build()
        cases += [torch_case(name, entry.family, model, b, entry.example_inputs(model, b)) for b in entry.batches]
    return cases


def runs_for(call: Callable[[], Any], runs: int, budget_s: float) -> int:
    """`runs`, or fewer for a slow model (at least 3), so that one measurement takes about `budget_s`."""
    start = time.perf_counter()
    call()
    once = time.perf_counter() - start
    return max(3, min(runs, int(budget_s / max(once, 1e-9))))


MEDIANS = 3
"""Each measured figure is the smallest of this many medians, taken back to back with the thread pools warm, as a
serving loop sees them: a median is robust to a slow call, the smallest median to a slow stretch."""


def timed_medians(call: Callable[[], Any], runs: int) -> list[float]:
    """`MEDIANS` medians of `runs` calls each, back to back."""
    medians: list[float] = []
    for _ in range(MEDIANS):
        times: list[float] = []
        for _ in range(runs):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return medians


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
    """One round's measurement of a case: per-launch profile times and end-to-end times, each the smallest of
    `MEDIANS` medians, with the end-to-end figures' spread."""

    kernels: list[float]
    gnomon_s: float
    eager_s: float
    device: Device
    """The calibration the round is predicted with."""
    gnomon_medians: list[float] = field(default_factory=list[float])
    eager_medians: list[float] = field(default_factory=list[float])
    kernel_medians: list[list[float]] = field(default_factory=list[list[float]])
    """Each launch's `MEDIANS` medians."""

    @property
    def gnomon_spread(self) -> float:
        return spread(self.gnomon_medians)

    @property
    def eager_spread(self) -> float:
        return spread(self.eager_medians)


def sample(case: Case, runs: int, budget_s: float, device: Device) -> Sample:
    executable, inputs = case.executable, case.inputs
    executable.run(inputs)
    count = runs_for(lambda: executable.run(inputs), runs, budget_s)
    medians: list[list[float]] = []
    for _ in range(MEDIANS):
        profiles: list[list[float]] = []
        for _ in range(count):
            executable.run(inputs, profile=True)
            profiles.append([t.seconds for t in executable.profile().timings])
        medians.append([statistics.median(run[i] for run in profiles) for i in range(len(profiles[0]))])
    per_launch = [list(column) for column in zip(*medians, strict=True)]
    time.sleep(0.2)  # torch's OpenMP workers spin after a call: let them sleep before the next system runs
    executable.run(inputs)
    gnomon = timed_medians(lambda: executable.run(inputs), count)
    time.sleep(0.2)
    if case.eager is None:
        assert case.eager_timer is not None, "a case without eager in this process times it elsewhere"
        eager = case.eager_timer(runs, budget_s)
    else:
        case.eager()
        eager = timed_medians(case.eager, runs_for(case.eager, runs, budget_s))
    return Sample([min(m) for m in per_launch], min(gnomon), min(eager), device, gnomon, eager, per_launch)


def aten_profile(eager: Callable[[], Any]) -> tuple[int, float]:
    """PyTorch eager's top-level ATen ops in one call (torch.profiler, after a warm-up): how many, and their CPU
    time together (dispatch, checks and kernels), the smallest of three profiled calls. What eager spends outside
    them is Python's: module calls and the forward's own code."""
    from torch.profiler import ProfilerActivity, profile

    eager()
    best: tuple[int, float] | None = None
    for _ in range(3):
        with profile(activities=[ProfilerActivity.CPU]) as profiled:
            eager()
        top = [e for e in profiled.events() if e.name.startswith("aten::") and not _inside_aten(e)]
        figures = (len(top), sum(e.cpu_time_total for e in top) * 1e-6)
        best = figures if best is None or figures[1] < best[1] else best
    assert best is not None
    return best


def _inside_aten(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def _eager_profile(case: Case) -> tuple[int, float]:
    if case.eager is not None:
        return aten_profile(case.eager)
    assert case.eager_profile is not None, "a case timed elsewhere is profiled there"
    return case.eager_profile()


def result(case: Case, samples: Sequence[Sample]) -> Result:
    """The median of the case's rounds' predictions, each with its round's calibration, against the median of their
    measurements."""
    timings = case.executable.profile().timings
    predicted = [program_report(case.executable.module, s.device, case.name) for s in samples]
    launches = [[r.predicted_s for r in report.records if r.kind != "runtime"] for report in predicted]
    assert all(len(row) == len(timings) for row in launches), "the prediction and the profile list the same launches"
    funcs = {op.sym_name.data: op for op in case.executable.module.ops if isinstance(op, kernel.FuncOp)}
    kernels: list[Launch] = []
    for i, timing in enumerate(timings):
        predicted_s = statistics.median(row[i] for row in launches)
        measured_s = statistics.median(x.kernels[i] for x in samples)
        kernels.append(Launch(timing.kernel, timing.kind, shape_class(funcs[timing.kernel]), predicted_s, measured_s))
    eager_reports = [case.eager_prediction(s.device) for s in samples]
    eager = [report.predicted_e2e_s for report in eager_reports]
    ops = eager_reports[len(eager_reports) // 2].records
    eager_ops = (len(ops), sum(r.overhead_s for r in ops), sum(r.kernel_s for r in ops))
    return Result(
        f"{case.name} b{case.batch}",
        case.family,
        kernels,
        (statistics.median(r.predicted_e2e_s for r in predicted), statistics.median(s.gnomon_s for s in samples)),
        (statistics.median(eager), statistics.median(s.eager_s for s in samples)),
        eager_ops,
        _eager_profile(case),
        (_spread([s.gnomon_s for s in samples], [s.gnomon_spread for s in samples]),
         _spread([s.eager_s for s in samples], [s.eager_spread for s in samples])),
        _repeats(samples),
    )  # fmt: skip


def _repeats(samples: Sequence[Sample]) -> tuple[list[float], list[float], list[list[float]]]:
    """The same figures measured again: each round's (its smallest median) where there are several rounds, else the
    one round's medians."""
    if len(samples) > 1:
        launches = list(zip(*(s.kernels for s in samples), strict=True))
        return [s.gnomon_s for s in samples], [s.eager_s for s in samples], [list(k) for k in launches]
    only = samples[0]
    return only.gnomon_medians, only.eager_medians, only.kernel_medians


def noise_floor(repeats: Sequence[Sequence[float]]) -> float:
    """What a perfect predictor of one measurement would score against another of the same thing: the geometric
    mean, over every ordered pair of repeats of every figure, of their absolute percentage error. Below it, a
    prediction's error cannot be told from the measurement's."""
    pairs = [(a, b) for figures in repeats for i, a in enumerate(figures) for j, b in enumerate(figures) if i != j]
    return geomean_ape(pairs)


def _spread(figures: Sequence[float], within: Sequence[float]) -> float:
    return max(spread(figures), *within)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def print_results(results: Sequence[Result], show_kernels: bool) -> None:
    print("\nper kernel (gnomon runtime): predicted vs measured median, ms")
    for result in results:
        pairs = [(k.predicted, k.measured) for k in result.kernels]
        print(f"  {result.case}: {len(pairs)} launches, geomean APE {geomean_ape(pairs):.1%}")
        if show_kernels:
            for k in result.kernels:
                p, m = k.predicted, k.measured
                print(f"    {k.kernel[:32]:<32} {k.kind[:36]:<36} {_ms(p):>9} {_ms(m):>9} {ape(p, m):>7.1%}")
    by_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_class: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for result in results:
        for k in result.kernels:
            by_kind[k.kind].append((k.predicted, k.measured))
            by_class[k.shape_class].append((k.predicted, k.measured))
    total_measured = sum(m for pairs in by_kind.values() for _, m in pairs)
    print("\nper kernel kind: launches, share of measured kernel time, geomean APE, median predicted/measured")
    for kind, pairs in sorted(by_kind.items(), key=lambda item: -sum(m for _, m in item[1])):
        share = sum(m for _, m in pairs) / total_measured
        ratio = statistics.median(p / m for p, m in pairs)
        print(f"  {kind[:44]:<44} {len(pairs):>5} {share:>7.1%} {geomean_ape(pairs):>8.1%} {ratio:>8.2f}")
    total_error = sum(abs(p - m) for pairs in by_class.values() for p, m in pairs)
    print(
        "\nper op family and shape class, by share of the summed |predicted - measured| (what carries the end-to-end"
        " error): launches, error share, geomean APE, median predicted/measured"
    )
    for name, pairs in sorted(by_class.items(), key=lambda item: -sum(abs(p - m) for p, m in item[1]))[:20]:
        share = sum(abs(p - m) for p, m in pairs) / total_error
        ratio = statistics.median(p / m for p, m in pairs)
        print(f"  {name[:44]:<44} {len(pairs):>5} {share:>7.1%} {geomean_ape(pairs):>8.1%} {ratio:>8.2f}")
    print(
        f"\nend to end, ms: gnomon predicted, measured (smallest of {MEDIANS} medians), spread, APE | "
        "torch eager the same"
    )
    for result in results:
        (gp, gm), (ep, em), (gs, es) = result.gnomon, result.eager, result.spread
        print(
            f"  {result.case:<24} {_ms(gp):>10} {_ms(gm):>10} {gs:>6.0%} {ape(gp, gm):>7.1%} | "
            f"{_ms(ep):>10} {_ms(em):>10} {es:>6.0%} {ape(ep, em):>7.1%}"
        )
    spreads = [figure for result in results for figure in result.spread]
    print(f"  measurement spread: median {statistics.median(spreads):.0%}, largest {max(spreads):.0%}")
    print(
        "\ntorch eager, ms: predicted ops, their overheads (dispatch, calls) and kernels | torch.profiler's top-level"
        " ATen ops and their time (the profiler's own included) | measured, and what it spent outside ATen (Python)"
    )
    for result in results:
        (count, overhead, kernels), (aten_ops, aten_s), measured = result.eager_ops, result.aten, result.eager[1]
        print(
            f"  {result.case:<24} {count:>4} {_ms(overhead):>8} {_ms(kernels):>8} | {aten_ops:>4} {_ms(aten_s):>8} | "
            f"{_ms(measured):>8} {_ms(max(measured - aten_s, 0.0)):>8}"
        )
    print_summary(results)


def print_summary(results: Sequence[Result]) -> None:
    """The errors per family and over all cases, and the noise floor."""
    families: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        families[result.family].append(result)
    if len(families) < len(results):
        print("\nper family: cases, geomean APE per kernel, end to end gnomon, end to end eager")
        for family, members in sorted(families.items()):
            pairs = [(k.predicted, k.measured) for r in members for k in r.kernels]
            gnomon_e2e, eager_e2e = geomean_ape([r.gnomon for r in members]), geomean_ape([r.eager for r in members])
            print(f"  {family:<24} {len(members):>4} {geomean_ape(pairs):>8.1%} {gnomon_e2e:>8.1%} {eager_e2e:>8.1%}")
    all_kernels = [(k.predicted, k.measured) for result in results for k in result.kernels]
    weighted = sum(abs(p - m) for p, m in all_kernels) / sum(m for _, m in all_kernels)
    print("\ngeomean absolute percentage error (targets: per kernel <= 15%, end to end <= 10%)")
    print(f"  per kernel, gnomon runtime:   {geomean_ape(all_kernels):.1%} over {len(all_kernels)} launches")
    print(f"    (time-weighted: sum |predicted - measured| / sum measured = {weighted:.1%})")
    print(f"  end to end, gnomon runtime:   {geomean_ape([r.gnomon for r in results]):.1%} over {len(results)} cases")
    print(f"  end to end, PyTorch eager:    {geomean_ape([r.eager for r in results]):.1%} over {len(results)} cases")
    gnomon_floor = noise_floor([r.repeats[0] for r in results])
    eager_floor = noise_floor([r.repeats[1] for r in results])
    kernel_floor = noise_floor([k for r in results for k in r.repeats[2]])
    print(
        "  noise floor (one measurement scored against a repeat of it, as a prediction would be; each figure above is"
        f"\n    a median of rounds, a little steadier): per kernel {kernel_floor:.1%}, end to end gnomon "
        f"{gnomon_floor:.1%}, eager {eager_floor:.1%}"
    )


def calibrated(round_: int, save: Path | None) -> Device:
    """A fresh calibration, summarized in one line (and written to `save`, numbered by round)."""
    began = time.perf_counter()
    calibration = calibrate(log=lambda line: None)
    device = calibration.device
    cache = device.memory[-2]
    fit = f", suite fit {calibration.fit.error_after:.1%}" if calibration.fit is not None else ""
    print(
        f"  round {round_}: calibrated in {time.perf_counter() - began:.0f} s: fp32 peak "
        f"{device.peak('fp32') / 1e9:.0f} GFLOP/s, {cache.name} {cache.bandwidth_bytes_per_s / 1e9:.0f} GB/s, "
        f"DRAM {device.dram.bandwidth_bytes_per_s / 1e9:.1f} GB/s{fit}",
        flush=True,
    )
    if save is not None:
        save_device(device, save.with_name(f"{save.stem}.r{round_}{save.suffix}"))
    return device


def print_host_speed(round_: int, device: Device) -> None:
    peak, cache, dram = host_speed(device)
    print(
        f"  round {round_}: the host at {peak:.0%} of the calibrated fp32 peak (a best round), {cache:.0%} of its "
        f"{device.memory[-2].name} bandwidth, {dram:.0%} of its DRAM bandwidth"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="a calibrated device file for every round (default: calibrate each round)")
    parser.add_argument("--calibrate-once", action="store_true", help="one calibration, before the first round")
    parser.add_argument("--save-device", type=Path, help="write the calibrations made here to FILE.rN.toml")
    parser.add_argument("--models", help="comma-separated subset, e.g. resnet50,squeezenet,mlp")
    parser.add_argument("--runs", type=int, default=7, help="profiled and timed runs per case (fewer for slow ones)")
    parser.add_argument("--budget", type=float, default=0.4, help="seconds one median of a case may take")
    parser.add_argument("--rounds", type=int, default=5, help="rounds over all cases (each figure: their median)")
    parser.add_argument("--no-kernels", action="store_true", help="do not print every kernel's pair")
    parser.add_argument("--validate", action="store_true", help="measure the validation set, not the tuning suite")
    parser.add_argument("--both", action="store_true", help="measure the validation set and the tuning suite")
    parser.add_argument(
        "--train", action="store_true", help="measure training steps (bench/training_cases.py), not inference"
    )
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="--train's: SGD(momentum=0.9)")
    parser.add_argument("--wait", type=float, default=60, help="seconds to wait for a quiet machine before a case")
    parser.add_argument(
        "--compare",
        action="append",
        metavar="FILE",
        help="also predict with this device file (repeatable), on the same measurements, and print its summary: an "
        "A/B of calibrations that the host's noise does not decide",
    )
    parser.add_argument("--save-measurements", type=Path, metavar="FILE", help="write the measurements as JSON")
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="FILE",
        help="measure nothing: predict with --device against the measurements of a --save-measurements FILE (a "
        "model change judged on the same measurements; not a licence to tune on the validation set)",
    )
    args = parser.parse_args()
    if args.replay and not args.device:
        parser.error("--replay needs --device FILE: the calibration to predict with")
    print(f"load average before: {os.getloadavg()[0]:.2f}; torch threads {torch.get_num_threads()}")
    fixed: Device | None = None
    if args.device:
        fixed = load_device(args.device)
        print(f"device: {fixed.provenance} ({args.device})")
    elif args.calibrate_once:
        fixed = calibrated(1, args.save_device)
    wanted = set(args.models.split(",")) if args.models else None
    sets: dict[str, list[Case]] = {}
    if args.train:
        optimizer = SGD(lr=0.01, momentum=0.9) if args.optimizer == "sgd" else Adam()
        chosen: list[tuple[str, dict[str, TrainingEntry]]] = []
        if args.validate or args.both:
            chosen.append(("TRAINING VALIDATION steps: never refined against", TRAINING_VALIDATION))
        if not args.validate or args.both:
            chosen.append(("TRAINING steps: the suite the training prediction was refined against", TRAINING_SET))
        for title, entries in chosen:
            sets[f"{title} ({optimizer})"] = [
                Case(c.name, c.family, c.batch, c.runner, c.inputs, None, c.eager_prediction, c.timer, c.profile)
                for c in training_cases(wanted, optimizer, entries)
            ]
    elif args.validate or args.both:
        sets["VALIDATION set (bench/validation_set.py): models the cost model is never tuned on"] = validation_cases(
            wanted
        )
    if not args.train and (not args.validate or args.both):
        sets["TUNING suite: the models the cost model was refined against"] = tuning_cases(wanted)
    cases = [case for members in sets.values() for case in members]
    samples: list[list[Sample]] = [[] for _ in cases]
    if args.replay:
        assert fixed is not None
        samples = replayed(cases, args.replay, fixed)
    for round_ in range(1, 0 if args.replay else args.rounds + 1):
        if fixed is None:
            device = calibrated(round_, args.save_device)
        else:
            device = fixed
            print_host_speed(round_, device)
        for case, taken in zip(cases, samples, strict=True):
            quiet = wait_until_quiet(args.wait)
            taken.append(sample(case, args.runs, args.budget, device))
            note = "" if quiet else f" (the machine was busy after waiting {args.wait:.0f} s)"
            print(f"  round {round_}: {case.name} b{case.batch}, gnomon {_ms(taken[-1].gnomon_s)} ms{note}", flush=True)
    if args.save_measurements:
        save_measurements(cases, samples, args.save_measurements)
    taken_by_case = dict(zip(map(id, cases), samples, strict=True))
    for title, members in sets.items():
        print(f"\n==== {title}")
        print_results([result(case, taken_by_case[id(case)]) for case in members], not args.no_kernels)
        for path in args.compare or []:
            other = load_device(path)
            print(f"\n==== {title}: predicted with {path} instead, on the same measurements")
            print_summary(
                [result(case, [replace(s, device=other) for s in taken_by_case[id(case)]]) for case in members]
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _case_key(case: Case) -> str:
    return f"{case.name} b{case.batch}"


def save_measurements(cases: Sequence[Case], samples: Sequence[Sequence[Sample]], path: Path) -> None:
    """Every case's rounds of measurements, as JSON, for `--replay`."""
    fields = ("kernels", "gnomon_s", "eager_s", "gnomon_medians", "eager_medians", "kernel_medians")
    rounds = {_case_key(c): [{f: getattr(s, f) for f in fields} for s in taken] for c, taken in zip(cases, samples)}
    path.write_text(json.dumps(rounds))


def replayed(cases: Sequence[Case], path: Path, device: Device) -> list[list[Sample]]:
    """The measurements `save_measurements` wrote for `cases`, each round predicted with `device`."""
    rounds = json.loads(path.read_text())
    missing = [_case_key(c) for c in cases if _case_key(c) not in rounds]
    if missing:
        sys.exit(f"{path} has no measurements of {', '.join(missing)}")
    for case in cases:
        case.executable.run(case.inputs, profile=True)  # its profile names the launches the figures are of
    return [[Sample(device=device, **figures) for figures in rounds[_case_key(c)]] for c in cases]


def tuning_cases(wanted: set[str] | None) -> list[Case]:
    """The tuning suite: the onnx package's light networks at their batch sizes, and gnomon's torch models."""
    cases: list[Case] = []
    skipped: list[str] = []
    for path in light_models():
        if wanted is None or path.stem.removeprefix("light_") in wanted:
            onnx, missing = onnx_cases(path)
            cases += onnx
            skipped += missing
    if skipped:
        print("batch sizes the models cannot take:")
        for line in skipped:
            print(f"  {line}")
    return cases + torch_cases(wanted)


if __name__ == "__main__":
    main()
