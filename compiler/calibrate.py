"""`gnomon calibrate`: measure this machine into a device file, the `local` device of the cost model.

What it measures, in under a minute (`quick` shrinks every problem, for tests):

- peak fp32 (and fp64) FLOP/s: a large `torch.mm`, the library GEMM the runtime's linear/matmul kernels call, on
  torch's threads (the runtime's); gnomon's generated matmul on the same problem where the code generator has one
  (`MATMUL_GENERATED`), reported beside it. Best of a few calls: a peak is what the machine can do, and noise from
  other processes only ever slows a call down, so the best call is the reproducible figure.
- streaming bandwidth of each memory level: cache sizes from sysfs (`/sys/devices/system/cpu/cpu0/cache`), DRAM's
  from `/proc/meminfo`; one NumPy thread per core sums a stride-0 view of its own array into an accumulator
  (`acc += x`, again and again: two reads and a write per element), with working sets of half of each cache level
  and eight times the last one for DRAM. Best of a few passes; DRAM and the fp32 peak are measured in rounds
  spread over `SPAN_S` seconds: a shared host's other tenants take a share of the cores, the shared cache and the
  memory bus that changes every few seconds. DRAM's figure is the lower quintile of its rounds (`DRAM_QUANTILE`):
  they fell into two regimes here, a floor of 45-47 GB/s that every calibration saw, and stretches of 55-84 GB/s
  whose share of a run varied from a quarter to three quarters, so the median landed in either (61 against 48
  GB/s in two runs back to back, whose lower quintiles were 47 and 46). Neither the best nor the worst round is
  reproducible. The peak is the best of its rounds (86 to 159 GFLOP/s in one calibration): nothing runs faster
  than the hardware, and over some thirty rounds the best is reproducible where the median was not (150 against
  129 GFLOP/s).
- the runtime's launch overhead of a tiny kernel: a program of one-element kernels (generated adds alternating with
  library max-pools, the two kinds the runtime launches) minus a program of one, per launch; median of many runs.
- PyTorch eager's per-op dispatch overhead: tiny torch ops called one by one from Python; median per op.
- the wait of a generated kernel split over threads that follows a library kernel: both run on torch's OpenMP
  team, so it should be ~0; measured and reported, not modelled.
- the analytical models' efficiency factors (`gnomon.passes.cost.analytical.Efficiency`) and the per-kernel fixed
  cost: a suite of kernels (GEMMs, convolutions, a depthwise convolution, elementwise, broadcast affine, transpose,
  softmax, normalization, 2-D and 3-D pooling, concatenation, each family at a large and a small size, so that the
  fixed costs and the rates separate; see `suite_program` for how its kernels are ordered, fed and repeated) is
  profiled through the runtime in five rounds spread over the calibration (each kernel's time is its median
  within a round, then the median of the rounds: one round taken while a neighbour thrashed the shared cache, or
  while it idled, must not set the factors). The factors named in `FITTED` and the launch overhead are fitted by
  coordinate descent to minimize the mean absolute log error of the per-kernel predictions (launch overhead plus
  kernel time, as `gnomon analyze` predicts them). The launch overhead only grows from the tiny kernel's. The
  suite's shapes are not the benchmark models' own.

The device file says `calibrated = true`; its `source` names the machine and what was measured.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnomon.devices import Device, MemoryLevel, load_device, local_device_path, save_device
from gnomon.errors import GnomonError
from gnomon.passes.cost import efficiency

if TYPE_CHECKING:
    from gnomon.executable import Executable

__all__ = [
    "Calibration",
    "FitResult",
    "busy_fraction",
    "calibrate",
    "calibrate_command",
    "fit_efficiency",
    "fitted_launches",
    "lower_quantile",
    "median_of_rounds",
    "pool_handoff",
    "profile_suite",
    "smooth",
    "suite_prediction",
    "suite_program",
]

FITTED = (
    "gemm", "conv", "conv_call_s", "gemm_k_overhead", "gemm_pack", "vector", "depthwise", "pool", "pool3d", "stream",
    "stream_dram", "transpose", "library_call_s", "lookup_s", "libm_call_s", "library_call_warm_s",
)  # fmt: skip
"""The `Efficiency` factors a calibration fits; the others (tile shapes, access granule) keep their defaults."""
LAUNCH = "launch_overhead_s"
SPAN_S = 40.0
"""Seconds over which DRAM and peak rounds are spread (the calibration's length); 0 for a quick one."""
DRAM_QUANTILE = 0.2
"""Where in the sorted DRAM rounds the DRAM figure is taken: a shared host's floor (see the module docstring)."""
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm": (0.02, 1.0),
    "conv": (0.02, 1.0),
    "conv_call_s": (1e-7, 1e-3),
    "gemm_k_overhead": (1, 1024),  # a device file's factors are positive
    "gemm_pack": (0.01, 2.0),
    "vector": (0.005, 1.0),
    "depthwise": (0.005, 1.0),
    "pool": (0.002, 1.0),
    "pool3d": (0.001, 1.0),
    "stream": (0.02, 2.0),  # relative to the measured bandwidth, which NumPy's loop may not saturate
    "stream_dram": (0.02, 2.0),
    "transpose": (0.01, 2.0),
    "library_call_s": (1e-7, 2e-4),
    "lookup_s": (1e-10, 1e-6),
    "libm_call_s": (1e-10, 1e-6),
    "library_call_warm_s": (1e-7, 2e-4),
}


class CalibrationError(GnomonError):
    """The machine could not be measured (no cache information, an output file that cannot be written)."""


@dataclass(frozen=True)
class FitResult:
    """How well the fitted factors predict the suite's kernels."""

    factors: dict[str, float]
    launch_overhead_s: float
    """The fitted per-kernel fixed cost: a launch, and waking the threads of a kernel that runs on several."""
    kernels: int
    error_before: float
    """Geomean absolute percentage error with the default factors."""
    error_after: float


@dataclass(frozen=True)
class Calibration:
    device: Device
    measured: dict[str, float] = field(default_factory=dict[str, float])
    """Every figure measured, by name (also in the device's `source`)."""
    fit: FitResult | None = None
    notes: tuple[str, ...] = ()
    """What could not be measured, and why."""


# ---- timing ----


def _best(call: Callable[[], object], trials: int) -> float:
    call()
    times: list[float] = []
    for _ in range(trials):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _median(call: Callable[[], object], trials: int) -> float:
    call()
    times: list[float] = []
    for _ in range(trials):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ---- compute ----


def peak_flops(n: int, dtype: str, trials: int) -> float:
    """FLOP/s of an n x n x n torch.mm on torch's threads (the library GEMM the runtime calls)."""
    import torch

    torch_dtype = {"fp32": torch.float32, "fp64": torch.float64}[dtype]
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator, dtype=torch_dtype)
    b = torch.randn(n, n, generator=generator, dtype=torch_dtype)
    c = torch.empty(n, n, dtype=torch_dtype)
    return 2 * n**3 / _best(lambda: torch.mm(a, b, out=c), trials)


def generated_matmul_flops(n: int, trials: int) -> float | None:
    """FLOP/s of gnomon's generated n x n x n f32 matmul on all cores; None where the code generator has none."""
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.dialects import kernel
    from gnomon.runtime.codegen import MATMUL_GENERATED, compile_kernel

    if not MATMUL_GENERATED:
        return None
    t = f"tensor<{n}x{n}xf32>"
    schedule = f"#kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = {_cores()}>"
    text = (
        f'kernel.func @calibrate_matmul(%a: {t}, %b: {t}) -> {t} attributes {{kind = "generated", '
        f"schedule = {schedule}}} {{\n  %r = graph.matmul %a, %b : ({t}, {t}) -> {t}\n  kernel.yield %r : {t}\n}}\n"
    )
    module = Parser(gnomon_context(), text).parse_module()
    (kernel_op,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    c = np.empty((n, n), np.float32)
    run = compile_kernel(kernel_op).bind([a, b], [c])
    return 2 * n**3 / _best(run, trials)


# ---- memory ----


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _size(text: str) -> int:
    """sysfs's cache sizes: `32K`, `1024K`, `32M`."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def cache_levels(cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> list[tuple[str, int, bool]]:
    """(name, capacity in bytes, per core) of each data cache level, innermost first, from sysfs."""
    levels: dict[int, tuple[str, int, bool]] = {}
    for index in sorted(cache_dir.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            capacity = _size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        levels[level] = (f"l{level}", capacity, cpu_list_count(shared) == 1)
    return [levels[level] for level in sorted(levels)]


def cpu_list_count(cpu_list: str) -> int:
    """How many CPUs a sysfs list such as `0-1,4` names."""
    count = 0
    for part in cpu_list.split(","):
        first, _, last = part.partition("-")
        count += int(last) - int(first) + 1 if last else 1
    return count


def dram_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return load_device("generic-cpu").dram.capacity_bytes


def stream_bandwidth(per_thread_bytes: int, threads: int, trials: int, moved_per_call: int) -> float:
    """Bytes per second of `threads` NumPy threads, each summing a stride-0 view of its own array into an
    accumulator; each thread's array and accumulator together take `per_thread_bytes`."""
    n = max(per_thread_bytes // 8, 64)
    rows = max(2, moved_per_call // (12 * n))
    arrays = [np.ones(n, np.float32) for _ in range(threads)]
    sums = [np.zeros(n, np.float32) for _ in range(threads)]
    views = [np.lib.stride_tricks.as_strided(x, (rows, n), (0, x.itemsize)) for x in arrays]
    best = math.inf
    for _ in range(trials + 1):  # the first pass faults the pages in
        start, done = threading.Barrier(threads + 1), threading.Barrier(threads + 1)

        def work(i: int, start: threading.Barrier = start, done: threading.Barrier = done) -> None:
            start.wait()
            np.add.reduce(views[i], axis=0, out=sums[i])
            done.wait()

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        done.wait()
        best = min(best, time.perf_counter() - began)
        for worker in workers:
            worker.join()
    # The first row is copied into the accumulator (a read, a write); each later one is added (two reads, a write).
    return threads * n * 4 * (2 + 3 * (rows - 1)) / best


# ---- overheads ----


def _tiny_chain(launches: int) -> str:
    """A program of `launches` one-element kernels, alternating generated adds and library max-pools; each add
    reads its input twice, so that no two kernels fuse."""
    t = "tensor<1x1x1x1xf32>"
    pool = (
        "{kernel = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, "
        "dilations = array<i64: 1, 1>, ceil_mode = false}"
    )
    lines = [f"func.func @main(%v0: {t}) -> {t} {{"]
    for i in range(launches):
        if i % 2 == 0:
            lines.append(f"  %v{i + 1} = graph.add %v{i}, %v{i} : ({t}, {t}) -> {t}")
        else:
            lines.append(f"  %v{i + 1} = graph.max_pool %v{i} {pool} : ({t}) -> {t}")
    lines.append(f"  func.return %v{launches} : {t}\n}}")
    return "\n".join(lines)


def executable_of(text: str) -> Executable:
    """A graph function's text, lowered and loaded by the native runtime."""
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.executable import Executable, lower

    module = Parser(gnomon_context(), text).parse_module()
    return Executable(lower(module, "the calibration suite"))


def launch_overhead(launches: int, trials: int) -> float:
    """Seconds per launch of gnomon's runtime, from a long and a one-kernel program of tiny kernels."""
    x = [np.ones((1, 1, 1, 1), np.float32)]
    long, short = executable_of(_tiny_chain(launches)), executable_of(_tiny_chain(1))
    spread = _median(lambda: long.run(x), trials) - _median(lambda: short.run(x), trials)
    return max(spread, 0.0) / (launches - 1)


def dispatch_overhead(ops: int, trials: int) -> float:
    """Seconds per op of PyTorch eager: tiny ops (add, relu, softmax, a reshape) called one by one."""
    import torch

    x = torch.ones(1)

    def run() -> None:
        with torch.inference_mode():
            y = x
            for _ in range(ops // 4):
                y = torch.add(y, y)
                y = torch.relu(y)
                y = torch.softmax(y, 0)
                y = y.reshape(1)

    return _median(run, trials) / (ops // 4 * 4)


# ---- fitting the analytical models' factors ----


def _conv(name: str, x: tuple[int, ...], w: tuple[int, ...], stride: int, pad: int, groups: int = 1) -> list[str]:
    out = (x[0], w[0], (x[2] + 2 * pad - w[2]) // stride + 1, (x[3] + 2 * pad - w[3]) // stride + 1)
    tx, tw, ty = (_tensor(s) for s in (x, w, out))
    return [
        f"%{name} = graph.conv %{name}_x, %{name}_w {{strides = array<i64: {stride}, {stride}>, "
        f"pads = array<i64: {pad}, {pad}, {pad}, {pad}>, dilations = array<i64: 1, 1>, groups = {groups} : i64}} "
        f": ({tx}, {tw}) -> {ty}",
        f"{name}_x: {tx}",
        f"{name}_w: {tw}",
        ty,
    ]


def _tensor(shape: Sequence[int]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _linear(name: str, m: int, n: int, k: int) -> list[str]:
    tx, tw, tb, ty = _tensor((m, k)), _tensor((n, k)), _tensor((n,)), _tensor((m, n))
    line = f"%{name} = graph.linear %{name}_x, %{name}_w, %{name}_b : ({tx}, {tw}, {tb}) -> {ty}"
    return [line, f"{name}_x: {tx}", f"{name}_w: {tw}", f"{name}_b: {tb}", ty]


def _unary(name: str, op: str, shape: tuple[int, ...], attributes: str = "", result: tuple[int, ...] = ()) -> list[str]:
    tx, ty = _tensor(shape), _tensor(result or shape)
    return [f"%{name} = graph.{op} %{name}_x {attributes} : ({tx}) -> {ty}", f"{name}_x: {tx}", ty]


def _layer_norm(name: str, rows: int, columns: int) -> list[str]:
    tx, tc = _tensor((rows, columns)), _tensor((columns,))
    line = (
        f"%{name} = graph.layer_norm %{name}_x, %{name}_g, %{name}_b {{axis = 1 : i64, epsilon = 1.000000e-05 : f64}} "
        f": ({tx}, {tc}, {tc}) -> {tx}"
    )
    return [line, f"{name}_x: {tx}", f"{name}_g: {tc}", f"{name}_b: {tc}", tx]


def _embedding_bag(name: str, rows: int, dim: int, bags: int, pooling: int) -> list[str]:
    """Sum bags of `pooling` rows each, their indices distinct rows spread over the table, as a recommender's sparse
    features are (a lowered kernel receives its indices as an argument, so its model assumes them distinct)."""
    lookups = bags * pooling
    indices = ", ".join(str(i * 7919 % rows) for i in range(lookups))
    offsets = ", ".join(str(b * pooling) for b in range(bags))
    ti, to, tt, ty = f"tensor<{lookups}xi64>", f"tensor<{bags}xi64>", _tensor((rows, dim)), _tensor((bags, dim))
    lines = (
        f"%{name}_i = graph.constant {{value = dense<[{indices}]> : {ti}}} : () -> {ti}\n"
        f"  %{name}_o = graph.constant {{value = dense<[{offsets}]> : {to}}} : () -> {to}\n"
        f"  %{name} = graph.embedding_bag %{name}_t, %{name}_i, %{name}_o "
        f'{{mode = "sum", include_last_offset = false}} : ({tt}, {ti}, {to}) -> {ty}'
    )
    return [lines, f"{name}_t: {tt}", ty]


def _broadcast_affine(name: str, shape: tuple[int, ...]) -> list[str]:
    """x * scale + shift, then relu, with per-channel operands: an unfolded batch norm, one generated kernel."""
    tx, tc = _tensor(shape), _tensor((shape[1], 1, 1))
    return [
        f"%{name}_m = graph.mul %{name}_x, %{name}_s : ({tx}, {tc}) -> {tx}\n"
        f"  %{name}_a = graph.add %{name}_m, %{name}_b : ({tx}, {tc}) -> {tx}\n"
        f"  %{name} = graph.relu %{name}_a : ({tx}) -> {tx}",
        f"{name}_x: {tx}",
        f"{name}_s: {tc}",
        f"{name}_b: {tc}",
        tx,
    ]


def _lrn_scale(name: str, shape: tuple[int, ...]) -> list[str]:
    """x / (k + alpha * pooled)^beta: a local response norm after its channel pool (AlexNet's k, alpha and beta,
    constants, so that pow's base is positive as there), one generated kernel whose pow is a libm call per element."""
    t, s = _tensor(shape), "tensor<f32>"
    constants = "".join(
        f"%{name}_{c} = graph.constant {{value = dense<{value:e}> : {s}}} : () -> {s}\n  "
        for c, value in (("a", 1e-4), ("c", 2.0), ("b", 0.75))
    )
    return [
        f"{constants}%{name}_m = graph.mul %{name}_p, %{name}_a : ({t}, {s}) -> {t}\n"
        f"  %{name}_k = graph.add %{name}_m, %{name}_c : ({t}, {s}) -> {t}\n"
        f"  %{name}_w = graph.pow %{name}_k, %{name}_b : ({t}, {s}) -> {t}\n"
        f"  %{name} = graph.div %{name}_x, %{name}_w : ({t}, {t}) -> {t}",
        f"{name}_p: {t}",
        f"{name}_x: {t}",
        t,
    ]


def _concat(name: str, shape: tuple[int, ...], parts: int) -> list[str]:
    tx, ty = _tensor(shape), _tensor((shape[0], shape[1] * parts, *shape[2:]))
    operands = ", ".join(f"%{name}_x{i}" for i in range(parts))
    line = f"%{name} = graph.concat {operands} {{axis = 1 : i64}} : ({', '.join([tx] * parts)}) -> {ty}"
    return [line, *(f"{name}_x{i}: {tx}" for i in range(parts)), ty]


_MAX_POOL = (
    "{kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, "
    "dilations = array<i64: 1, 1>, ceil_mode = false}"
)


_AVG_POOL = (
    "{kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, "
    "count_include_pad = true, ceil_mode = false}"
)
"""A 3x3 stride-1 average, as Inception's branches pool."""

_TRANSITION_POOL = (
    "{kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, "
    "count_include_pad = false, ceil_mode = false}"
)
"""A 2x2 stride-2 average, as DenseNet's transitions pool."""

_CHANNEL_POOL = (
    "{kernel = array<i64: 5, 1, 1>, strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, "
    "count_include_pad = true, ceil_mode = false}"
)
"""A 3-D average over 5 channels: the pool of a local response norm (AlexNet, GoogLeNet) as torch-mlir lowers it."""


def _suite_ops(quick: bool) -> tuple[list[list[str]], list[list[str]]]:
    """The calibration kernels, generated ones and library ones: each [op lines, its arguments (`name: type`)...,
    its result type]."""
    if quick:
        generated = [_unary("relu", "relu", (1, 16, 28, 28)), _broadcast_affine("affine", (1, 16, 28, 28))]
        library = [_linear("linear", 64, 256, 256), _conv("conv", (1, 16, 28, 28), (16, 16, 3, 3), 1, 1)]
        return generated, library
    generated = [
        _unary("relu", "relu", (1, 64, 56, 56)),
        _unary("gelu", "gelu", (256, 1024), '{approximate = "none"}'),
        _unary("sigmoid", "sigmoid", (1, 128, 28, 28)),
        _unary("transpose", "transpose", (512, 2048), "{permutation = array<i64: 1, 0>}", (2048, 512)),
        _unary("softmax", "softmax", (256, 1000), "{axis = 1 : i64}"),
        _broadcast_affine("affine", (1, 128, 28, 28)),
        _broadcast_affine("affine_large", (1, 64, 112, 112)),
        _lrn_scale("lrn", (1, 96, 27, 27)),
        _unary("relu_small", "relu", (1, 64, 14, 14)),
        _broadcast_affine("affine_small", (1, 32, 14, 14)),
        _unary("transpose_small", "transpose", (64, 256), "{permutation = array<i64: 1, 0>}", (256, 64)),
        # Attention's head split: the innermost axis stays, rows of 32 move.
        _unary("permute", "transpose", (4, 128, 8, 32), "{permutation = array<i64: 0, 2, 1, 3>}", (4, 8, 128, 32)),
    ]
    library = [
        _linear("linear_large", 256, 1024, 1024),
        _linear("linear_tall", 1024, 256, 256),  # a transformer's projection: small weights, many rows
        _linear("linear_wide", 64, 2048, 512),
        _linear("linear_small", 16, 256, 256),
        _linear("linear_vector", 1, 4096, 4096),  # batch 1: a matrix-vector product, bound by its weights' traffic
        _linear("linear_vector_small", 1, 2048, 1536),
        _conv("conv3x3", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
        _conv("conv1x1", (1, 256, 56, 56), (64, 256, 1, 1), 1, 0),
        _conv("conv7x7", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
        _conv("conv_deep", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1),
        _conv("conv_large", (1, 128, 56, 56), (128, 128, 3, 3), 1, 1),
        _conv("conv_wide", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1),  # ResNet's last stage: 9.4 MB of weights
        _conv("depthwise", (1, 128, 28, 28), (128, 1, 3, 3), 1, 1, groups=128),
        _conv("conv_small", (1, 32, 14, 14), (32, 32, 3, 3), 1, 1),
        _unary("max_pool", "max_pool", (1, 64, 112, 112), _MAX_POOL, (1, 64, 56, 56)),
        _unary("max_pool_small", "max_pool", (1, 64, 28, 28), _MAX_POOL, (1, 64, 14, 14)),
        _unary("avg_pool", "avg_pool", (1, 96, 56, 56), _AVG_POOL, (1, 96, 56, 56)),
        _unary("avg_pool_2x2", "avg_pool", (1, 128, 56, 56), _TRANSITION_POOL, (1, 128, 28, 28)),
        _unary("channel_pool", "avg_pool", (1, 1, 68, 40, 40), _CHANNEL_POOL, (1, 1, 64, 40, 40)),
        _unary("global_avg_pool", "global_avg_pool", (1, 2048, 7, 7), "", (1, 2048, 1, 1)),
        _concat("concat", (1, 128, 28, 28), 3),
        _concat("concat_small", (1, 32, 14, 14), 2),
        _layer_norm("layer_norm", 1024, 256),
        # Tiny library calls: what they take is almost all the call's fixed cost (`library_call_s`).
        _layer_norm("layer_norm_small", 64, 192),
        _unary("softmax_small", "softmax", (4, 500), "{axis = 1 : i64}"),
        _embedding_bag("embedding_bag", 60_000, 32, 512, 15),
        _embedding_bag("embedding_bag_small", 60_000, 32, 64, 15),
    ]
    return generated, library


CALL_BOUND = (
    "%max_pool_small", "%global_avg_pool", "%concat_small", "%layer_norm_small", "%softmax_small",
)  # fmt: skip
"""The suite's library calls whose time is mostly the call's fixed cost."""


def _result_name(entry: list[str]) -> str:
    """The SSA name an entry's last line defines."""
    return entry[0].rsplit("\n", 1)[-1].split(" = ")[0].strip()


def _program(ops: Sequence[list[str]]) -> str:
    """One function of `ops`: every kernel reads its own inputs and returns its result, so none fuse."""
    arguments = [f"%{arg}" for entry in ops for arg in entry[1:-1]]
    results = [_result_name(entry) for entry in ops]
    result_types = [entry[-1] for entry in ops]
    lines = [f"func.func @main({', '.join(arguments)}) -> ({', '.join(result_types)}) {{"]
    lines += [f"  {entry[0]}" for entry in ops]
    lines.append(f"  func.return {', '.join(results)} : {', '.join(result_types)}\n}}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Suite:
    """The calibration suite: one program, and which of its launches the fit uses."""

    text: str
    fitted: tuple[bool, ...]
    """Per launch, in order: False for the first of a kernel's two runs (but a small call's)."""


def suite_program(quick: bool) -> Suite:
    """The calibration suite: its generated and library kernels alternate, as in a model (a kernel's time depends on
    what ran before it: a parallel kernel after a serial one waits for the thread team to wake).

    A model's activations are in cache when the next kernel reads them: their producer just wrote them. So a kernel
    runs twice on the same inputs, and the fit takes the second run, with its inputs in cache (on this project's
    machine, a relu of 200K elements took 84 us cold and 20 us warm), except:
    - GEMMs, convolutions and embedding bags: their weights and tables, read once per inference, are not in cache
      in a model either;
    - the small library calls (`CALL_BOUND`): their time is mostly the call's fixed cost, which depends on the
      kernel before, as in a model. The fit takes both runs: the first, after another kernel, prices a call
      (`library_call_s`); the second, straight after itself, a warm one (`library_call_warm_s`): it took a fifth
      of the first."""
    generated, library = _suite_ops(quick)
    small_calls = [entry for entry in library if _result_name(entry) in CALL_BOUND]
    entries: list[list[str]] = []
    fitted: list[bool] = []
    for entry in (entry for pair in zip_longest(library, generated) for entry in pair if entry is not None):
        entries.append(entry)
        if any(f"graph.{op} " in entry[0] for op in ("linear", "conv", "embedding_bag")):
            fitted.append(True)
        else:
            entries.append(_rerun(entry))
            fitted += [entry in small_calls, True]
    return Suite(_program(entries), tuple(fitted))


def _rerun(entry: list[str]) -> list[str]:
    """`entry` again on the same arguments, its results renamed."""
    arguments = {argument.split(":")[0] for argument in entry[1:-1]}

    def rename(match: re.Match[str]) -> str:
        return match.group(0) if match.group(1) in arguments else f"%{match.group(1)}_again"

    return [re.sub(r"%(\w+)", rename, entry[0]), entry[-1]]


def fitted_launches(suite: Suite, measured: Sequence[Measured]) -> list[Measured]:
    """The launches of a profiled run of `suite` that the fit uses."""
    if len(measured) != len(suite.fitted):
        raise CalibrationError(f"the calibration suite ran {len(measured)} launches, expected {len(suite.fitted)}")
    return [m for m, fit in zip(measured, suite.fitted, strict=True) if fit]


def pool_handoff(trials: int) -> float:
    """Extra seconds a generated kernel split over two threads takes when it follows a library (OpenMP) kernel: a
    broadcast affine of two slices (`PART_WORK` results each) after a 1x1 convolution, against the same kernel after
    a generated one. Both run on torch's OpenMP team, so this should be ~0; it was 80-240 us when generated kernels
    had a thread pool of their own, whose threads waited for torch's spinning workers to give up the cores."""
    from gnomon.runtime.codegen.threads import PART_WORK

    shape = (1, 64, 2 * PART_WORK // (64 * 64), 64)
    t, tw, tc = _tensor(shape), _tensor((64, 64, 1, 1)), _tensor((64, 1, 1))
    affine = _broadcast_affine("a", shape)[0].replace("%a_x", "%c")
    conv = (
        f"%c = graph.conv %x, %w {{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, "
        f"dilations = array<i64: 1, 1>, groups = 1 : i64}} : ({t}, {tw}) -> {t}"
    )
    seconds: list[float] = []
    for first in (conv, f"%c = graph.relu %x : ({t}) -> {t}"):
        text = (
            f"func.func @main(%x: {t}, %w: {tw}, %a_s: {tc}, %a_b: {tc}) -> {t} {{\n"
            f"  {first}\n  {affine}\n  func.return %a : {t}\n}}"
        )
        measured = profile_suite(executable_of(text), trials)
        seconds.append(measured[-1].seconds)
    return max(seconds[0] - seconds[1], 0.0)


@dataclass(frozen=True)
class Measured:
    """One kernel of a profiled program: the median of its launch times, and the kernel it launched."""

    kernel: Any
    """The `kernel.func`."""
    seconds: float
    previous: Any = None
    """The `kernel.func` launched before it, if any: whether a library call is warm (`gnomon.analysis.warm_call`)."""


def smooth(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """Smoothly varying values, like a network's activations. Not noise: random values are the worst case for a
    kernel whose branches depend on the data (ATen's max pooling ran 1.8x slower on noise than on smooth input)."""
    index = np.arange(math.prod(shape), dtype=np.float64)
    return (np.sin(index / 7.0) * np.cos(index / 131.0)).reshape(shape).astype(dtype)


def profile_suite(executable: Executable, runs: int) -> list[Measured]:
    """Median per-launch times of `runs` profiled runs (after a warm-up), one per launch, in order."""
    from gnomon.dialects import kernel

    shapes = zip(executable.input_shapes, executable.input_dtypes, strict=True)
    inputs = [smooth(shape, dtype) for shape, dtype in shapes]
    executable.run(inputs)
    samples: list[list[float]] = []
    for _ in range(runs):
        executable.run(inputs, profile=True)
        samples.append([t.seconds for t in executable.profile().timings])
    kernels = {op.sym_name.data: op for op in executable.module.ops if isinstance(op, kernel.FuncOp)}
    timings = executable.profile().timings
    launched = [kernels[timing.kernel] for timing in timings]
    return [
        Measured(kernel, statistics.median(run[i] for run in samples), launched[i - 1] if i else None)
        for i, kernel in enumerate(launched)
    ]


def median_of_rounds(rounds: Sequence[Sequence[Measured]]) -> list[Measured]:
    """Each kernel's median time over rounds of the same suite."""
    return [replace(same[0], seconds=statistics.median(m.seconds for m in same)) for same in zip(*rounds, strict=True)]


def suite_prediction(measured: Measured, device: Device) -> float:
    """A suite launch's predicted time. The suite's weights are not in cache when its GEMMs and convolutions run:
    the program's inputs, well over the last cache level, were all copied in before."""
    from gnomon.analysis import kernel_cost, same_library_function, warm_call

    before = measured.previous
    previous = None
    if before is not None and same_library_function(before, measured.kernel):  # else no need to price it
        previous = (before, kernel_cost(before, device, weights_in_dram=True))
    warm = warm_call(previous, measured.kernel, device)
    return kernel_cost(measured.kernel, device, weights_in_dram=True, warm_call=warm).predicted_s


def _log_error(device: Device, measured: Sequence[Measured]) -> float:
    # Absolute, not squared: a kernel the models cannot describe (a slow library path) must not drag the rest.
    return statistics.fmean(abs(math.log(suite_prediction(m, device) / m.seconds)) for m in measured)


def geomean_error(device: Device, measured: Sequence[Measured]) -> float:
    """Geometric mean of |predicted / measured - 1| over the kernels."""
    errors = [abs(suite_prediction(m, device) / m.seconds - 1) for m in measured]
    return math.exp(statistics.fmean(math.log(max(e, 1e-6)) for e in errors))


def _fitted_device(device: Device, values: dict[str, float]) -> Device:
    """`device` with the fitted efficiency factors and per-kernel launch overhead of `values`."""
    factors = {name: values[name] for name in FITTED}
    return replace(device, efficiency=factors, launch_overhead_s=values[LAUNCH])


def fit_efficiency(device: Device, measured: Sequence[Measured], sweeps: int = 3) -> FitResult:
    """Coordinate descent on `FITTED` and the launch overhead: each in turn takes the best of a geometric grid
    around its value. The launch overhead starts at, and stays above, the device's (a tiny kernel's launch): what
    it gains above that is the fixed cost of a kernel that wakes the thread pools."""
    defaults = efficiency(device)
    values: dict[str, float] = {name: float(getattr(defaults, name)) for name in FITTED}
    values[LAUNCH] = device.launch_overhead_s
    bounds = BOUNDS | {LAUNCH: (device.launch_overhead_s, 2e-4)}
    before = geomean_error(_fitted_device(device, values), measured)
    for sweep in range(sweeps):
        step = 2.0 ** (1 / (2 << sweep))  # finer each sweep: 2^(1/2), 2^(1/4), 2^(1/8)
        for name in (*FITTED, LAUNCH):
            low, high = bounds[name]
            candidates = {min(high, max(low, values[name] * step**k)) for k in range(-12, 13)}
            if name == "gemm_k_overhead":
                candidates = {float(round(c)) for c in candidates}

            def error(value: float, name: str = name) -> float:
                return _log_error(_fitted_device(device, values | {name: value}), measured)

            values[name] = min(sorted(candidates), key=error)
    after = geomean_error(_fitted_device(device, values), measured)
    return FitResult({name: values[name] for name in FITTED}, values[LAUNCH], len(measured), before, after)


def busy_fraction(seconds: float) -> float:
    """The share of all CPUs' time spent busy over the next `seconds` (Linux's /proc/stat; 0 elsewhere)."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    try:
        total, idle = sample()
        time.sleep(seconds)
        total_after, idle_after = sample()
    except (OSError, ValueError):
        return 0.0
    return 1 - (idle_after - idle) / max(total_after - total, 1)


# ---- the whole calibration ----


def calibrate(quick: bool = False, fit: bool = True, log: Callable[[str], None] = print) -> Calibration:
    """Measure this machine (see the module docstring); `log` gets each figure as it is measured."""
    import torch

    began = time.perf_counter()
    cores = _cores()
    threads = torch.get_num_threads()
    trials = 3 if quick else 10
    measured: dict[str, float] = {}
    notes: list[str] = []
    log(
        f"gnomon calibrate: {_cpu_name()}, {cores} cores, torch on {threads} threads"
        f"{' (quick: small problems, few repeats)' if quick else ''}"
    )
    log("peaks and bandwidths: best of several calls; overheads: medians")
    busy = busy_fraction(0.5)
    if busy > 0.15:
        notes.append(f"the CPUs were {busy:.0%} busy with other work before measuring: figures will be noisy")
        log(f"  warning: {notes[-1]}")

    # A shared host lends this machine its cores, its shared cache and its memory unevenly over seconds. Peak FLOP/s,
    # DRAM bandwidth and the fitting suite are measured in rounds between the other measurements (see the module
    # docstring for how each figure is taken from its rounds).
    n = 384 if quick else 1536
    peak_rounds: list[float] = []
    dram_rounds: list[float] = []
    suite = suite_program(quick)
    program = executable_of(suite.text) if fit else None
    suite_rounds: list[list[Measured]] = []
    n64 = 256 if quick else 1024
    measured["peak_fp64"] = peak_flops(n64, "fp64", trials)
    log(f"  peak fp64, torch.mm {n64}^3: {measured['peak_fp64'] / 1e9:.1f} GFLOP/s")
    n_generated = 256 if quick else 1024
    generated = generated_matmul_flops(n_generated, trials)
    if generated is None:
        notes.append("generated matmul: not available (gnomon.runtime.codegen.MATMUL_GENERATED is False)")
        log(f"  {notes[-1]}")
    else:
        measured["generated_matmul_fp32"] = generated
        library = peak_flops(n_generated, "fp32", trials)
        log(
            f"  generated matmul (gnomon codegen) {n_generated}^3 on {cores} threads: {generated / 1e9:.1f} GFLOP/s "
            f"({generated / library:.0%} of torch.mm's on the same problem; the device's peak is torch.mm's)"
        )

    caches = cache_levels()
    if not caches:
        generic = load_device("generic-cpu")
        caches = [(level.name, level.capacity_bytes, level.per_core) for level in generic.memory[:-1]]
        notes.append("no cache sizes in sysfs: generic-cpu's cache sizes are assumed")
        log(f"  {notes[-1]}")
    levels: list[MemoryLevel] = []
    moved = (64 if quick else 256) << 20
    for name, capacity, per_core in caches:
        per_thread = capacity // 2 if per_core else capacity // (2 * cores)
        bandwidth = stream_bandwidth(per_thread, cores, trials, moved)
        measured[f"bandwidth_{name}"] = bandwidth
        levels.append(MemoryLevel(name, capacity, bandwidth, per_core))
        scope = "per core" if per_core else "shared"
        log(
            f"  bandwidth {name} ({capacity >> 10} KiB {scope}; {per_thread >> 10} KiB per thread): "
            f"{bandwidth / 1e9:.1f} GB/s"
        )
    last_cache = caches[-1][1] * (cores if caches[-1][2] else 1)
    dram_working_set = (2 if quick else 8) * last_cache

    def rounds(with_suite: bool = True) -> None:
        for _ in range(2):
            # Eight passes per call: one pass (a copy) measured 30% below the steady add loop, and less reproducibly.
            dram_rounds.append(stream_bandwidth(dram_working_set // cores, cores, 3, 8 * dram_working_set))
            peak_rounds.append(peak_flops(n, "fp32", max(trials // 2, 2)))
        if with_suite and program is not None:
            suite_rounds.append(fitted_launches(suite, profile_suite(program, 5 if quick else 15)))

    rounds()
    rounds(with_suite=False)

    launch = launch_overhead(16 if quick else 64, 50 if quick else 300)
    measured["launch_overhead_s"] = launch
    rounds()
    log(f"  runtime launch overhead (tiny generated and library kernels): {launch * 1e6:.2f} us per kernel")
    dispatch = dispatch_overhead(40 if quick else 400, 20 if quick else 50)
    measured["dispatch_overhead_s"] = dispatch
    rounds(with_suite=False)
    log(f"  PyTorch eager dispatch overhead (tiny ops): {dispatch * 1e6:.2f} us per op")
    handoff = pool_handoff(5 if quick else 20)
    measured["pool_handoff_s"] = handoff
    log(
        f"  thread handoff (not modelled): a generated kernel split over threads after a library one takes "
        f"{handoff * 1e6:.0f} us longer than after a generated one"
    )
    rounds()
    # Two more suite rounds, at about two thirds and the end of the span, so that the suite's five rounds spread over
    # the whole calibration as the DRAM and peak rounds do.
    span = 0.0 if quick else SPAN_S
    for until in (span * 2 / 3, span):
        while time.perf_counter() - began < until:
            rounds(with_suite=False)
        rounds()
    bandwidth = measured["bandwidth_dram"] = lower_quantile(dram_rounds, DRAM_QUANTILE)
    levels.append(MemoryLevel("dram", dram_bytes(), bandwidth))
    log(
        f"  bandwidth dram ({dram_working_set >> 20} MiB working set): {bandwidth / 1e9:.1f} GB/s "
        f"({DRAM_QUANTILE:.0%} up {_spread(dram_rounds)})"
    )
    measured["peak_fp32"] = max(peak_rounds)
    log(
        f"  peak fp32, torch.mm {n}^3 on {threads} threads: {measured['peak_fp32'] / 1e9:.1f} GFLOP/s "
        f"(best of {_spread(peak_rounds)})"
    )

    device = Device(
        name="local",
        kind="cpu",
        calibrated=True,
        peak_flops={"fp32": measured["peak_fp32"], "fp64": measured["peak_fp64"]},
        cores=cores,
        memory=tuple(levels),
        launch_overhead_s=launch,
        dispatch_overhead_s=dispatch,
    )
    result = None
    if fit:
        result = fit_efficiency(device, median_of_rounds(suite_rounds))
        device = replace(device, efficiency=result.factors, launch_overhead_s=result.launch_overhead_s)
        measured["fitted_launch_overhead_s"] = result.launch_overhead_s
        fitted = ", ".join(f"{k} {v:.3g}" for k, v in result.factors.items())
        log(f"  efficiency fitted on {result.kernels} kernels: {fitted}")
        log(
            f"    and the per-kernel fixed cost (launch, waking the thread pools): "
            f"{result.launch_overhead_s * 1e6:.1f} us (the device's launch overhead)"
        )
        log(
            f"    per-kernel geomean error {result.error_before:.1%} with the default factors, "
            f"{result.error_after:.1%} fitted"
        )
    summary = ", ".join(f"{key} {value:.4g}" for key, value in measured.items())
    source = f"gnomon calibrate on {_cpu_name()}, {cores} cores, torch {threads} threads, "
    device = replace(device, source=source + f"{time.strftime('%Y-%m-%d %H:%M')}: {summary}")
    return Calibration(device, measured, result, tuple(notes))


def lower_quantile(values: Sequence[float], fraction: float) -> float:
    """The value `fraction` of the way up the sorted `values`, interpolated between neighbours."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _spread(rounds: Sequence[float]) -> str:
    """`34 rounds, 39-76 G`: how many, and their range in units of 1e9."""
    return f"{len(rounds)} rounds, {min(rounds) / 1e9:.0f}-{max(rounds) / 1e9:.0f} G"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def calibrate_command(output: Path | None, quick: bool, fit: bool) -> None:
    """`gnomon calibrate`: measure, print, and write the device file (by default, the `local` device)."""
    path = output if output is not None else local_device_path()
    calibration = calibrate(quick=quick, fit=fit)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_device(calibration.device, path)
    except OSError as error:
        raise CalibrationError(f"cannot write the device file {path}: {error.strerror or error}") from error
    print(f"wrote {path}" + (" (the `local` device)" if output is None else ""))
