"""One calibration's measurements, in the order they are taken, each logged as it is measured.

Peaks and bandwidths are the best of several calls, overheads medians (`probe`, `overheads`); the figures a shared
host disturbs are taken in rounds between the others (`rounds`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gnomon.cost.devices import MemoryLevel, load_device
from gnomon.cost.fit import Measured
from gnomon.runtime.calibration.host import busy_fraction, cache_levels, cores, cpu_name, cpu_times, others_busy
from gnomon.runtime.calibration.overheads import (
    dispatch_overhead,
    eager_training_overheads,
    host_branch_overhead,
    launch_overhead,
    module_call_overhead,
    page_fault_overhead,
    pool_handoff,
    post_op_overhead,
    thin_call_probe,
)
from gnomon.runtime.calibration.probe import generated_matmul_flops, peak_flops, stream_bandwidth
from gnomon.runtime.calibration.profile import Lower, load
from gnomon.runtime.calibration.rounds import SPAN_S, Rounds
from gnomon.runtime.calibration.suite import suite_program
from gnomon.runtime.calibration.tbe import TbePoint, measure_tbe

__all__ = ["Measurements", "measure"]

Log = Callable[[str], None]


@dataclass
class Measurements:
    """What a calibration measured, for `gnomon.cost.fit` to turn into a device."""

    cpu: str
    cores: int
    threads: int
    """torch's threads, on which the runtime's library kernels run."""
    quick: bool
    """Small problems and few repeats."""
    measured: dict[str, float] = field(default_factory=dict[str, float])
    """Every single figure, by name, in the order measured."""
    notes: list[str] = field(default_factory=list[str])
    """What could not be measured, and why."""
    caches: list[MemoryLevel] = field(default_factory=list[MemoryLevel])
    """The cache levels, innermost first, with their measured bandwidths."""
    thin_probes: list[Measured] = field(default_factory=list[Measured])
    """Tiny generated launches after library traffic (`thin_call_probe`)."""
    tbe: list[TbePoint] = field(default_factory=list[TbePoint])
    """fbgemm's embedding kernels over tables in each memory level (none without fbgemm)."""

    @property
    def trials(self) -> int:
        return 3 if self.quick else 10

    def note(self, text: str, log: Log, prefix: str = "") -> None:
        self.notes.append(text)
        log(f"  {prefix}{text}")


def measure(quick: bool, fit: bool, log: Log, lower: Lower, tbe: bool = True) -> tuple[Measurements, Rounds]:
    """Measure this machine, its programs lowered by `lower`; `fit`: also profile the suite; `tbe`: also fbgemm's
    embedding kernels. The rounds end `SPAN_S` seconds after the start."""
    import torch

    began = time.perf_counter()
    m = Measurements(cpu_name(), cores(), torch.get_num_threads(), quick)
    log(
        f"gnomon calibrate: {m.cpu}, {m.cores} cores, torch on {m.threads} threads"
        f"{' (quick: small problems, few repeats)' if quick else ''}"
    )
    log("peaks and bandwidths: best of several calls; overheads: medians")
    busy = busy_fraction(0.5)
    began_cpu = cpu_times()
    if busy > 0.15:
        noisy = f"the CPUs were {busy:.0%} busy with other work before measuring: figures will be noisy"
        m.note(noisy, log, "warning: ")
    suite = suite_program(quick)
    program = load(suite.module, lower) if fit else None
    _peaks(m, log)
    last_cache = _cache_bandwidths(m, log)
    dram_working_set = (2 if quick else 8) * last_cache
    rounds = Rounds(
        m.cores, 384 if quick else 1536, max(m.trials // 2, 2), dram_working_set, suite, program, 5 if quick else 15
    )
    _overheads(m, rounds, log, lower)
    if tbe:
        _tbe(m, log, 2 * last_cache)
    rounds.spread(began, 0.0 if quick else SPAN_S)
    m.measured["others_busy"] = others_busy(began_cpu, cpu_times())
    return m, rounds


def _tbe(m: Measurements, log: Log, evict_bytes: int) -> None:
    m.tbe = measure_tbe(m.quick, m.trials, evict_bytes)
    if not m.tbe:
        m.note("fbgemm's embedding kernels: not measured (fbgemm is not installed: pip install gnomon[torchrec])", log)
        return
    for p in m.tbe:
        log(
            f"  fbgemm embedding kernel, {p.rows} x {p.columns} table, {p.lookups} ids ({p.distinct} rows):"
            f" forward {p.forward_s * 1e3:.3f} ms, backward with SGD (caches cleared) {p.backward_s * 1e3:.3f} ms"
        )


def _peaks(m: Measurements, log: Log) -> None:
    """The fp64 peak, and gnomon's generated matmul against torch.mm's on the same problem."""
    n64 = 256 if m.quick else 1024
    m.measured["peak_fp64"] = peak_flops(n64, "fp64", m.trials)
    log(f"  peak fp64, torch.mm {n64}^3: {m.measured['peak_fp64'] / 1e9:.1f} GFLOP/s")
    n = 256 if m.quick else 1024
    generated = generated_matmul_flops(n, m.trials)
    if generated is None:
        m.note("generated matmul: not available (gnomon.passes.kernel_to_linalg.MATMUL_GENERATED is False)", log)
        return
    m.measured["generated_matmul_fp32"] = generated
    library = peak_flops(n, "fp32", m.trials)
    log(
        f"  generated matmul (gnomon codegen) {n}^3 on {m.cores} threads: {generated / 1e9:.1f} GFLOP/s "
        f"({generated / library:.0%} of torch.mm's on the same problem; the device's peak is torch.mm's)"
    )


def _cache_bandwidths(m: Measurements, log: Log) -> int:
    """Each cache level's bandwidth, one NumPy thread per core on half the level; the last level's bytes over all
    cores."""
    caches = cache_levels()
    if not caches:
        generic = load_device("generic-cpu")
        caches = [(level.name, level.capacity_bytes, level.per_core) for level in generic.memory[:-1]]
        m.note("no cache sizes in sysfs: generic-cpu's cache sizes are assumed", log)
    moved = (64 if m.quick else 256) << 20
    for name, capacity, per_core in caches:
        per_thread = capacity // 2 if per_core else capacity // (2 * m.cores)
        bandwidth = stream_bandwidth(per_thread, m.cores, m.trials, moved)
        m.measured[f"bandwidth_{name}"] = bandwidth
        m.caches.append(MemoryLevel(name, capacity, bandwidth, per_core))
        scope = "per core" if per_core else "shared"
        log(
            f"  bandwidth {name} ({capacity >> 10} KiB {scope}; {per_thread >> 10} KiB per thread): "
            f"{bandwidth / 1e9:.1f} GB/s"
        )
    return caches[-1][1] * (m.cores if caches[-1][2] else 1)


def _overheads(m: Measurements, rounds: Rounds, log: Log, lower: Lower) -> None:
    """The launch, dispatch and handoff overheads, with rounds between them."""
    rounds.take()
    rounds.take(with_suite=False)
    launch = m.measured["launch_overhead_s"] = launch_overhead(16 if m.quick else 64, 50 if m.quick else 300, lower)
    rounds.take()
    log(f"  runtime launch overhead (tiny generated kernels): {launch * 1e6:.2f} us per kernel")
    branch = m.measured["host_branch_s"] = host_branch_overhead(200 if m.quick else 1000, lower)
    log(f"  host runtime's branch between sub-schedules: {branch * 1e6:.2f} us per decision")
    m.thin_probes = thin_call_probe(5 if m.quick else 15, lower)
    dispatch = m.measured["dispatch_overhead_s"] = dispatch_overhead(40 if m.quick else 400, 20 if m.quick else 50)
    rounds.take(with_suite=False)
    log(f"  PyTorch eager dispatch overhead (tiny ops): {dispatch * 1e6:.2f} us per op")
    module_call = m.measured["module_call_s"] = module_call_overhead(40 if m.quick else 200, 20 if m.quick else 50)
    log(f"  PyTorch eager nn.Module call overhead: {module_call * 1e6:.2f} us per call")
    fault = m.measured["page_fault_s"] = page_fault_overhead(3 if m.quick else 10)
    log(f"  page faults on fresh memory (a new 64 MiB mapping filled): {fault * 1e6:.2f} us per 4 KiB page")
    post_op = m.measured["post_op_s"] = post_op_overhead(50 if m.quick else 300)
    log(f"  oneDNN convolution with a ReLU post-op against none (tiny, channels-last): {post_op * 1e6:.2f} us longer")
    training = eager_training_overheads(40 if m.quick else 400, 10 if m.quick else 30)
    m.measured.update({f"eager_training.{key}": value for key, value in training.items()})
    us = {key: value * 1e6 for key, value in training.items()}
    log(
        f"  PyTorch eager training: autograd records an op in {us['autograd_record_s']:.2f} us, runs a backward node"
        f" in {us['autograd_node_s']:.2f} us; zero_grad and a foreach step: SGD {us['sgd_step_s']:.0f} us +"
        f" {us['sgd_param_s']:.1f} us per parameter, with momentum {us['sgd_momentum_step_s']:.0f} +"
        f" {us['sgd_momentum_param_s']:.1f}, Adam {us['adam_step_s']:.0f} + {us['adam_param_s']:.1f}"
    )
    handoff = m.measured["pool_handoff_s"] = pool_handoff(5 if m.quick else 20, lower)
    log(
        f"  thread handoff (not modelled): a generated kernel split over threads after a library one takes "
        f"{handoff * 1e6:.0f} us longer than after a generated one"
    )
    rounds.take()
