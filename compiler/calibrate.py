"""`gnomon calibrate`: measure this machine into a device file, the `local` device of the cost model.

It measures (`gnomon.runtime.calibration`), in under a minute (`quick` shrinks every problem, for tests):

- peak fp32 (and fp64) FLOP/s: a large `torch.mm`, the library GEMM the runtime's linear/matmul kernels call, on
  torch's threads (the runtime's); gnomon's generated matmul on the same problem, reported beside it;
- the streaming bandwidth of each memory level: cache sizes from sysfs, DRAM's from `/proc/meminfo`;
- the runtime's launch overhead of a tiny kernel, PyTorch eager's per-op dispatch overhead, and the wait of a
  generated kernel split over threads after a library kernel (reported, not modelled);
- the page faults of fresh memory per 4 KiB page (`page_fault_s`: eager's results above glibc's mmap threshold),
  what a post-op adds to oneDNN's convolution call (`post_op_s`),
  and eager's host costs in a training step (autograd, the optimizers' Python);
- fbgemm's embedding kernels, where installed, on tables in each memory level (`gnomon.cost.tbe`'s factors);
- a suite of kernels profiled through the runtime, for the analytical models' efficiency factors
  (`gnomon.cost.analytical.Efficiency`), the library calls' fixed costs among them, and tiny calls of the library
  functions models call most, each function's own warm call (`Device.call_warm_s`);
- a small program of tiny generated kernels after library calls, for a thin call's misses (`thin_call_cold_s`).

Then it fits (`gnomon.cost.fit`): DRAM is the lower quantile of its rounds, the fp32 peak the best of its rounds,
the efficiency factors minimize the suite's prediction error.

The device file says `calibrated = true`; its `source` names the machine and what was measured, its
`[steadiness]` table how steady the machine was meanwhile (`STEADINESS`). A calibration taken while other processes
used the CPUs describes them, not this machine: a device fitted while a test suite ran on the other core predicted
models 1.7-2.5x too slow afterwards. So a disturbed calibration (`Calibration.disturbed`) does not replace a steady
one: `gnomon calibrate` keeps the previous device file, writes the new one beside it, and says so (`--force`
takes it anyway).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gnomon.cost.devices import Device, DeviceError, MemoryLevel, load_device, local_device_path, save_device
from gnomon.cost.fit import (
    DRAM_QUANTILE,
    FITTED,
    FitResult,
    call_warm_costs,
    fastest_of_rounds,
    fit_efficiency,
    lower_quantile,
    round_spread,
    spread,
    thin_call_cold,
)
from gnomon.cost.tbe import fit_tbe
from gnomon.executable import lower
from gnomon.runtime.calibration import CalibrationError
from gnomon.runtime.calibration.host import dram_bytes
from gnomon.runtime.calibration.measure import Measurements, measure
from gnomon.runtime.calibration.rounds import Rounds

__all__ = ["STEADINESS", "Calibration", "calibrate", "calibrate_command"]

STEADINESS = {"others_busy": 0.10, "suite_spread": 0.60}
"""The steadiness figures a device file records, and the most a steady calibration shows of each:
`others_busy`, the share of all CPUs' time other processes took while it measured; `suite_spread`, the median over
the fitting suite's kernels of how far apart a kernel's rounds are (`gnomon.cost.fit.round_spread`). The file also
records `peak_spread` and `dram_spread`, the spread of those rounds, which a shared host moves even when idle. On a
quiet 2-core cloud host the suite spread 32% and others took 2%; with a busy loop on one core, others took 41% and
the suite spread 25% (a steady load slows every round alike): the CPU share is what detects a busy machine, the
spread a load that comes and goes."""


@dataclass(frozen=True)
class Calibration:
    device: Device
    measured: dict[str, float] = field(default_factory=dict[str, float])
    """Every figure measured, by name (also in the device's `source`)."""
    fit: FitResult | None = None
    notes: tuple[str, ...] = ()
    """What could not be measured, and why."""

    @property
    def disturbed(self) -> list[str]:
        """Why the machine was not steady while measuring (`STEADINESS`), in words; empty if it was."""
        figures = self.device.steadiness
        reasons = []
        if figures.get("others_busy", 0.0) > STEADINESS["others_busy"]:
            reasons.append(f"other processes used {figures['others_busy']:.0%} of the CPUs' time")
        if figures.get("suite_spread", 0.0) > STEADINESS["suite_spread"]:
            reasons.append(f"the suite's kernels moved {figures['suite_spread']:.0%} between rounds")
        return reasons


def calibrate(
    quick: bool = False,
    fit: bool = True,
    log: Callable[[str], None] = print,
    start: Mapping[str, float] | None = None,
    fitted: Sequence[str] = FITTED,
    tbe: bool = True,
) -> Calibration:
    """Measure this machine (see the module docstring); `log` gets each figure as it is measured. The fit moves the
    factors `fitted`, from `start`'s values where given (a steadier calibration's), else from the models' defaults.
    `tbe`: also fbgemm's embedding kernels (ranks measure them together instead)."""
    m, rounds = measure(quick, fit, log, lambda module: lower(module, "the calibration suite", layout="nchw"), tbe)
    return calibration_of(m, rounds, fit, log, start, fitted)


def calibration_of(
    m: Measurements,
    rounds: Rounds,
    fit: bool,
    log: Callable[[str], None],
    start: Mapping[str, float] | None = None,
    fitted: Sequence[str] = FITTED,
) -> Calibration:
    """The device of what `measure` took: its measured figures, its steadiness, and (with `fit`) the factors
    `fitted` fitted to its rounds, from `start`'s where given."""
    device = _measured_device(m, rounds, log)
    tbe = fit_tbe(m.tbe, device)
    if tbe:
        device = replace(device, efficiency=device.efficiency | tbe)
        log(
            f"  fbgemm embedding kernels: forward {tbe['tbe_lookup_s'] * 1e9:.1f} ns per id, rows at"
            f" {tbe['tbe_read']:.0%} of their level's bandwidth; backward with SGD"
            f" {tbe['tbe_update_lookup_s'] * 1e9:.1f} ns per id, rows read and written at {tbe['tbe_update']:.0%},"
            f" {tbe['tbe_update_spread']:.0%} longer per doubling of the table beyond the last cache; per distinct"
            f" row {tbe['tbe_row_s'] * 1e9:.1f} ns forward, {tbe['tbe_update_row_s'] * 1e9:.1f} ns backward, and"
            f" {tbe['tbe_row_outgrown_s'] * 1e9:.1f} and {tbe['tbe_update_row_outgrown_s'] * 1e9:.1f} ns more per"
            f" doubling; per id and column {tbe['tbe_lookup_byte_s'] * 4e9:.2f} ns forward,"
            f" {tbe['tbe_update_lookup_byte_s'] * 4e9:.2f} ns backward"
        )
    if start:
        device = replace(device, efficiency=dict(start) | device.efficiency)
    device = replace(
        device,
        steadiness={
            "others_busy": m.measured["others_busy"],
            "suite_spread": round_spread(rounds.suite_rounds),
            "peak_spread": spread(rounds.peak),
            "dram_spread": spread(rounds.dram),
        },
    )
    _log_steadiness(device.steadiness, log)
    result = None
    if fit:
        thin = thin_call_cold(device, m.thin_probes)
        if thin > 0:  # else the default: no probe saw traffic beyond L1
            device = replace(device, efficiency=device.efficiency | {"thin_call_cold_s": thin})
        log(f"  a thin call's misses (tiny generated kernels after library traffic): {thin * 1e6:.1f} us cold")
        if rounds.probe_rounds and rounds.probe_rounds[0]:
            # First: a tiny call's kernel takes next to nothing whatever the factors, and the factors' fit then
            # prices each probed function's calls at its own warm cost.
            device = replace(device, call_warm_s=call_warm_costs(device, fastest_of_rounds(rounds.probe_rounds)))
            warm = ", ".join(f"{name} {seconds * 1e6:.1f}" for name, seconds in device.call_warm_s.items())
            log(f"  warm library calls, us (tiny calls back to back, beyond launch and kernel): {warm}")
        result = fit_efficiency(device, fastest_of_rounds(rounds.suite_rounds), names=fitted)
        device = replace(device, efficiency=device.efficiency | result.factors)
        _log_fit(result, log)
    summary = ", ".join(f"{key} {value:.4g}" for key, value in m.measured.items())
    source = f"gnomon calibrate on {m.cpu}, {m.cores} cores, torch {m.threads} threads, "
    device = replace(device, source=source + f"{time.strftime('%Y-%m-%d %H:%M')}: {summary}")
    return Calibration(device, m.measured, result, tuple(m.notes))


def _measured_device(m: Measurements, rounds: Rounds, log: Callable[[str], None]) -> Device:
    """The device of the measured figures, its efficiency factors the defaults; DRAM and the fp32 peak from their
    rounds."""
    bandwidth = m.measured["bandwidth_dram"] = lower_quantile(rounds.dram, DRAM_QUANTILE)
    log(
        f"  bandwidth dram ({rounds.dram_working_set >> 20} MiB working set): {bandwidth / 1e9:.1f} GB/s "
        f"({DRAM_QUANTILE:.0%} up {_spread(rounds.dram)})"
    )
    m.measured["peak_fp32"] = max(rounds.peak)
    log(
        f"  peak fp32, torch.mm {rounds.peak_n}^3 on {m.threads} threads: {m.measured['peak_fp32'] / 1e9:.1f} "
        f"GFLOP/s (best of {_spread(rounds.peak)})"
    )
    return Device(
        name="local",
        kind="cpu",
        calibrated=True,
        peak_flops={"fp32": m.measured["peak_fp32"], "fp64": m.measured["peak_fp64"]},
        cores=m.cores,
        memory=(*m.caches, MemoryLevel("dram", dram_bytes(), bandwidth)),
        launch_overhead_s=m.measured["launch_overhead_s"],
        dispatch_overhead_s=m.measured["dispatch_overhead_s"],
        module_call_s=m.measured["module_call_s"],
        host_branch_s=m.measured["host_branch_s"],
        efficiency={"page_fault_s": m.measured["page_fault_s"], "post_op_s": m.measured["post_op_s"]},
        eager_training={
            key.removeprefix("eager_training."): value
            for key, value in m.measured.items()
            if key.startswith("eager_training.")
        },
    )


def _log_fit(result: FitResult, log: Callable[[str], None]) -> None:
    fitted = ", ".join(f"{k} {v:.3g}" for k, v in result.factors.items())
    log(f"  efficiency fitted on {result.kernels} kernels: {fitted}")
    log(
        f"    per-kernel geomean error {result.error_before:.1%} with the default factors, "
        f"{result.error_after:.1%} fitted"
    )


def _log_steadiness(figures: dict[str, float], log: Callable[[str], None]) -> None:
    log(
        f"  steadiness: other processes used {figures['others_busy']:.0%} of the CPUs' time; rounds spread: suite "
        f"{figures['suite_spread']:.0%} (median kernel), fp32 peak {figures['peak_spread']:.0%}, "
        f"DRAM {figures['dram_spread']:.0%}"
    )


def _spread(rounds: Sequence[float]) -> str:
    """`34 rounds, 39-76 G`: how many, and their range in units of 1e9."""
    return f"{len(rounds)} rounds, {min(rounds) / 1e9:.0f}-{max(rounds) / 1e9:.0f} G"


def calibrate_command(output: Path | None, quick: bool, fit: bool, force: bool = False) -> None:
    """`gnomon calibrate`: measure, print, and write the device file (by default, the `local` device). A disturbed
    calibration does not replace a steady device file unless `force`: it is written beside it, and a
    CalibrationError says so."""
    path = output if output is not None else local_device_path()
    calibration = calibrate(quick=quick, fit=fit)
    disturbed = calibration.disturbed
    kept = not force and disturbed and _steady_file(path)
    target = path.with_name(f"{path.stem}.disturbed{path.suffix}") if kept else path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        save_device(calibration.device, target)
    except OSError as error:
        raise CalibrationError(f"cannot write the device file {target}: {error.strerror or error}") from error
    if kept:
        raise CalibrationError(
            f"the machine was busy while calibrating ({'; '.join(disturbed)}): kept the previous calibration "
            f"{path}, wrote this one to {target} (`gnomon calibrate --force` takes it)"
        )
    if disturbed:
        print(f"warning: the machine was busy while calibrating ({'; '.join(disturbed)}): predictions will be off")
    print(f"wrote {path}" + (" (the `local` device)" if output is None else ""))


def _steady_file(path: Path) -> bool:
    """Whether `path` holds a device file from a calibration that was steady (or that recorded nothing of it)."""
    try:
        device = load_device(str(path.resolve()))
    except DeviceError:
        return False
    return not Calibration(device).disturbed
