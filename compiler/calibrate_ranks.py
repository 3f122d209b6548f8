"""The device one rank sees when N ranks share this machine: `gnomon calibrate` run in N processes at once, each
pinned to its own cores with as many torch threads, and rank 0's figures kept (`gnomon calibrate --collectives`
writes them as `rank.toml` beside the collectives; the `Nxlocal` system runs its ranks on it).

A share of the machine is not its figures divided by N: a thread alone on its core runs a mid-size GEMM at about half
the two-core peak, but an L2-sized copy at three quarters of the two-thread rate (no split to join), and the ranks
share DRAM and L3 as they stream at once. So the share is measured as the ranks run: each one's peaks, bandwidths,
overheads and eager training costs under the other ranks' load, as a data-parallel step runs; fbgemm's embedding
kernels timed on all ranks at once, as a sharded step's ranks run them (`gnomon.cost.tbe`); the caches its cores
share with the other ranks cut to its share (`cache_share`); its GEMM fraction set from mid-size products timed on
every rank at once (a thread alone on its core runs them at about its peak, where the two-thread fit says 0.85 of
it); its other efficiency factors are the `local` device's (`RANK_FITTED`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Block

from gnomon.cost.devices import Device, DeviceError, load_device, save_device
from gnomon.cost.tbe import fit_tbe
from gnomon.cost.topology.measured import local_rank_device_path
from gnomon.errors import GnomonError
from gnomon.runtime.calibration.tbe import measure_tbe
from gnomon.runtime.distributed import free_port, rank_cores, run_ranks
from gnomon.runtime.distributed.group import process_group, slowest_rank_times

__all__ = ["RankCalibrationError", "cache_share", "calibrate_rank_device", "write_rank_device"]


RANK_FITTED: tuple[str, ...] = ()
"""The efficiency factors a rank's calibration fits; the others are the `local` device's (a quiet machine's fit).
None: fitted under the other ranks' load, all of them moved by up to 3x between two runs, and a few of them (GEMM,
packing, elementwise, streams) still moved a rank's predicted training steps by 10-14 points between runs; the measured
peaks and bandwidths alone are reproducible. GEMM's fraction is measured directly instead (`gemm_fraction`)."""

GEMM_SHAPES: tuple[tuple[int, int, int], ...] = ((512, 512, 512), (2000, 300, 700), (384, 1200, 600), (1500, 700, 200))
"""(m, k, n) of the products that set a rank's GEMM fraction: mid-size, of several aspect ratios (none of
`bench/multidevice.py`'s layers), large enough to run at the core's rate and small enough to time in milliseconds."""


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
        import torch.distributed as dist

        from gnomon.calibrate import calibrate

        threads = len(plan.cores[rank])
        torch.set_num_threads(threads)
        device = calibrate(quick=plan.quick, log=lambda _: None, start=plan.start, fitted=RANK_FITTED, tbe=False).device
        evict_bytes = 2 * device.capacity(device.last_cache)  # a measured device has its caches
        device = cache_share(device, len(plan.cores))
        with process_group(rank, len(plan.cores), plan.port, timeout_s=600.0, threads=threads):
            points = measure_tbe(plan.quick, 3 if plan.quick else 10, evict_bytes, _together)
            dist.barrier()  # then each rank times its own: the products of all ranks still run at once
            gemm = gemm_fraction(device, _alone)
        return replace(device, efficiency=device.efficiency | fit_tbe(points, device) | {"gemm": gemm})


def cache_share(device: Device, ranks: int) -> Device:
    """`device` with each cache level that its cores share cut to one of `ranks` ranks' share: the ranks' lookups
    and streams run at once and evict each other's lines. (With the whole 32 MiB L3, a rank's 33 MB of column
    shards was priced as cache-resident, and the column-wise plan of a 4-table DLRM 0.1 ms faster than the
    table-wise one, where it measured 7.5-11% slower in three runs; with its share, and a device's shards priced
    together, 1.1 ms slower.) Main memory is kept whole: what fits a rank is checked against it."""
    last = len(device.memory) - 1
    memory = [
        level if level.per_core or index == last else replace(level, capacity_bytes=level.capacity_bytes // ranks)
        for index, level in enumerate(device.memory)
    ]
    return replace(device, memory=tuple(memory))


GEMM_ROUNDS = 7
"""Rounds over `GEMM_SHAPES` that time them: a slow spell of the host reaches a round, not every timing of a shape
(timed three times in a row, the fraction came out 0.754 in one calibration, where a later run of the same code on
the same device file gave 1.02-1.05 three times)."""


def gemm_fraction(device: Device, timer: Callable[[Callable[[], object], int], float]) -> float:
    """The GEMM fraction with which the cost model gives the times `timer` measures of `GEMM_SHAPES` (each the
    smallest of `GEMM_ROUNDS` medians of 10 calls, taken in rounds over the shapes), as the median over the shapes.
    Their compute goes as one over the fraction, the rest of their time does not: a few rescalings settle it."""
    import torch

    from gnomon.cost.analytical import op_cost
    from gnomon.cost.efficiency import efficiency
    from gnomon.dialects.graph.linalg import MatmulOp

    operands = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in GEMM_SHAPES]
    measured = [float("inf")] * len(GEMM_SHAPES)
    for _ in range(GEMM_ROUNDS):
        for index, (a, b) in enumerate(operands):
            measured[index] = min(measured[index], timer(lambda a=a, b=b: torch.mm(a, b), 10))
    products: list[tuple[MatmulOp, float]] = []
    for (m, k, n), seconds in zip(GEMM_SHAPES, measured, strict=True):
        inputs = Block(arg_types=[TensorType(f32, [m, k]), TensorType(f32, [k, n])])
        products.append((MatmulOp.build(operands=list(inputs.args), result_types=[TensorType(f32, [m, n])]), seconds))
    fraction = efficiency(device).gemm
    for _ in range(5):
        trial = replace(device, efficiency=device.efficiency | {"gemm": fraction})
        fraction *= statistics.median(op_cost(op, trial).kernel_s / seconds for op, seconds in products)
    return fraction


def _alone(call: Callable[[], object], trials: int) -> float:
    """The median over `trials` calls in a row. Not `_together`'s barrier before each call: right after one, a
    rank ran these products 20% slower than with the ranks merely running at once (gloo's threads still on its core,
    it seems), and a training step does not run its products right after a barrier."""
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _together(call: Callable[[], object], trials: int, before: Callable[[], object] | None = None) -> float:
    """The median over `trials` calls made by every rank at once, each the slowest rank's (`before` untimed ahead
    of each)."""
    return statistics.median(slowest_rank_times(call, trials, before))


def write_rank_device(device: Device) -> None:
    path = local_rank_device_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_device(device, path)
    except OSError as error:
        raise DeviceError(f"cannot write the rank device file {path}: {error.strerror or error}") from error
