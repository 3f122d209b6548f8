"""The device one rank sees when N ranks share this machine: `gnomon calibrate` run in N processes at once, each
pinned to its own cores with as many torch threads, and rank 0's figures kept (`gnomon calibrate --collectives`
writes them as `rank.toml` beside the collectives; the `Nxlocal` system runs its ranks on it).

A share of the machine is not its figures divided by N: a thread alone on its core runs a mid-size GEMM at about half
the two-core peak, but an L2-sized copy at three quarters of the two-thread rate (no split to join), and the ranks
share DRAM and L3 as they stream at once. So the share is measured as the ranks run: each one's peaks, bandwidths,
overheads and eager training costs under the other ranks' load, as a data-parallel step runs; fbgemm's embedding
kernels timed on all ranks at once, as a sharded step's ranks run them (`gnomon.cost.tbe`); its other efficiency
factors are the `local` device's (`RANK_FITTED`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace

from gnomon.cost.devices import Device, DeviceError, load_device, save_device
from gnomon.cost.tbe import fit_tbe
from gnomon.cost.topology.measured import local_rank_device_path
from gnomon.errors import GnomonError
from gnomon.runtime.calibration.tbe import measure_tbe
from gnomon.runtime.distributed import free_port, rank_cores, run_ranks
from gnomon.runtime.distributed.group import process_group, slowest_rank_times

__all__ = ["RankCalibrationError", "calibrate_rank_device", "write_rank_device"]


RANK_FITTED: tuple[str, ...] = ()
"""The efficiency factors a rank's calibration fits; the others are the `local` device's (a quiet machine's fit).
None: fitted under the other ranks' load, all of them moved by up to 3x between two runs, and a few of them (GEMM,
packing, elementwise, streams) still moved a rank's predicted training steps by 10-14 points between runs; the measured
peaks and bandwidths alone are reproducible."""


class RankCalibrationError(GnomonError):
    """The ranks could not be calibrated (too few cores, a rank failed)."""


@dataclass(frozen=True)
class _Plan:
    cores: tuple[tuple[int, ...], ...]
    """Each rank's cores."""
    port: int
    """Where the ranks meet to time fbgemm's embedding kernels together."""
    quick: bool
    start: dict[str, float]
    """The efficiency factors a rank keeps (those `RANK_FITTED` does not fit): the `local` device's, fitted on a quiet
    machine."""


def calibrate_rank_device(ranks: int, threads_per_rank: int = 1, quick: bool = False) -> Device:
    """One of `ranks` ranks of `threads_per_rank` threads, measured while all of them measure at once."""
    cores = rank_cores(ranks, threads_per_rank, what="rank calibration", error=RankCalibrationError)
    try:  # not the embedding kernels' factors: a rank measures its own, as the ranks run them together
        start = {k: v for k, v in load_device("local").efficiency.items() if not k.startswith("tbe_")}
    except DeviceError:
        start = {}
    device = run_ranks(_calibrate_rank, _Plan(cores, free_port(), quick, start), ranks, timeout_s=1800.0,
                       what="rank calibration", error=RankCalibrationError)  # fmt: skip
    return replace(
        device,
        name="local-rank",
        source=f"one of {ranks} ranks of {threads_per_rank} thread(s), measured while all ran at once: {device.source}",
    )


def _calibrate_rank(rank: int, plan: _Plan) -> Device:
    """In rank `rank`'s process: pinned to its cores, with a kernel cache of its own (ranks compile at once)."""
    os.sched_setaffinity(0, set(plan.cores[rank]))
    with tempfile.TemporaryDirectory(prefix=f"gnomon-rank{rank}-") as cache:
        os.environ["GNOMON_CACHE_DIR"] = cache  # before gnomon's runtime reads it
        import torch

        from gnomon.calibrate import calibrate

        threads = len(plan.cores[rank])
        torch.set_num_threads(threads)
        device = calibrate(quick=plan.quick, log=lambda _: None, start=plan.start, fitted=RANK_FITTED, tbe=False).device
        with process_group(rank, len(plan.cores), plan.port, timeout_s=600.0, threads=threads):
            points = measure_tbe(plan.quick, 3 if plan.quick else 10, _together)
        return replace(device, efficiency=device.efficiency | fit_tbe(points, device))


def _together(call: Callable[[], object], trials: int) -> float:
    """The median over `trials` calls made by every rank at once, each the slowest rank's."""
    return statistics.median(slowest_rank_times(call, trials))


def write_rank_device(device: Device) -> None:
    path = local_rank_device_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_device(device, path)
    except OSError as error:
        raise DeviceError(f"cannot write the rank device file {path}: {error.strerror or error}") from error
