"""`gnomon calibrate`: measure this machine into a device file, the `local` device of the cost model.

It measures (`gnomon.runtime.calibration`), in one to two minutes (`quick` shrinks every problem, for tests):

- peak fp32 (and fp64) FLOP/s: a large `torch.mm`, the library GEMM the runtime's linear/matmul kernels call, on
  torch's threads (the runtime's); gnomon's generated matmul on the same problem, reported beside it;
- the streaming bandwidth of each memory level: cache sizes from sysfs, DRAM's from `/proc/meminfo`;
- the runtime's launch overhead of a tiny kernel, PyTorch eager's per-op dispatch overhead, and the wait of a
  generated kernel split over threads after a library kernel (reported, not modelled);
- a suite of kernels profiled through the runtime, for the analytical models' efficiency factors
  (`gnomon.cost.analytical.Efficiency`) and the per-kernel fixed cost.

Then it fits (`gnomon.cost.fit`): DRAM is the lower quantile of its rounds, the fp32 peak the best of its rounds,
the efficiency factors and the per-kernel fixed cost minimize the suite's prediction error.

The device file says `calibrated = true`; its `source` names the machine and what was measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gnomon.cost.devices import Device, MemoryLevel, local_device_path, save_device
from gnomon.cost.fit import DRAM_QUANTILE, FitResult, fit_efficiency, lower_quantile, median_of_rounds
from gnomon.executable import lower
from gnomon.runtime.calibration import CalibrationError
from gnomon.runtime.calibration.host import dram_bytes
from gnomon.runtime.calibration.measure import Measurements, measure
from gnomon.runtime.calibration.rounds import Rounds

__all__ = ["Calibration", "calibrate", "calibrate_command"]


@dataclass(frozen=True)
class Calibration:
    device: Device
    measured: dict[str, float] = field(default_factory=dict[str, float])
    """Every figure measured, by name (also in the device's `source`)."""
    fit: FitResult | None = None
    notes: tuple[str, ...] = ()
    """What could not be measured, and why."""


def calibrate(quick: bool = False, fit: bool = True, log: Callable[[str], None] = print) -> Calibration:
    """Measure this machine (see the module docstring); `log` gets each figure as it is measured."""
    m, rounds = measure(quick, fit, log, lambda module: lower(module, "the calibration suite"))
    device = _measured_device(m, rounds, log)
    result = None
    if fit:
        result = fit_efficiency(device, median_of_rounds(rounds.suite_rounds))
        device = replace(device, efficiency=result.factors, launch_overhead_s=result.launch_overhead_s)
        m.measured["fitted_launch_overhead_s"] = result.launch_overhead_s
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
    )


def _log_fit(result: FitResult, log: Callable[[str], None]) -> None:
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


def _spread(rounds: Sequence[float]) -> str:
    """`34 rounds, 39-76 G`: how many, and their range in units of 1e9."""
    return f"{len(rounds)} rounds, {min(rounds) / 1e9:.0f}-{max(rounds) / 1e9:.0f} G"


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
