"""`gnomon calibrate --collectives --ranks N`: time the collectives between N processes on this machine, over
torch.distributed (gloo on a CPU), into the `local` system (`gnomon.cost.topology.measured`).

Each collective is timed at message sizes from 4 KiB to 64 MiB (x4 apart): the mean of the faster half of ten medians
of calls that end when the last rank is done, the medians taken in rounds over all the points
(`gnomon.runtime.distributed`), and up to ten more, in rounds over them, for the points whose figure has not
settled. The collective model interpolates between them (`gnomon.cost.collectives`); the table printed gives each
size's time, the bus bandwidth it reached (nccl-tests' `busbw`: the bytes through each rank's link per second) and how
far apart the medians were, then the latency and bandwidth of a link that fits each collective's times, what a
collective reached from compute costs beyond its own time (`gnomon.runtime.distributed.sync`), and how much of what
a rank receives it pays as if sent, which prices an uneven all-to-all (`gnomon.runtime.distributed.duplex`).
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import replace
from pathlib import Path

from gnomon.cost.collectives import COLLECTIVES, fit_latency_bandwidth, model_s
from gnomon.cost.topology import TopologyError
from gnomon.cost.topology.measured import (
    MeasuredCollectives,
    local_collectives_path,
    local_rank_device_path,
    write_collectives,
)
from gnomon.runtime.distributed import measure_collectives, measure_send_receive_share, measure_sync_s

__all__ = ["SIZES", "calibrate_collectives", "calibrate_collectives_command"]

SIZES = tuple(4096 * 4**k for k in range(8))
"""4 KiB to 64 MiB: latency-bound to bandwidth-bound on loopback."""
QUICK_SIZES = (65536, 1 << 20, 1 << 22)
MIN_MEDIAN_S = 0.2
"""Each median spans this long at least: on this 2-core VM, a small collective takes 0.2-0.6 ms or, in bursts of tens
of milliseconds, 3-4 ms; medians of 20 calls moved by up to 60% between two calibrations."""
UNTIL_SETTLED = 10
SETTLED = 0.03
"""Up to `UNTIL_SETTLED` more medians for a point whose figure's 90% interval over resampled medians is wider than
+-`SETTLED` of it: ten medians left 1-4 of 32 points up to 12-23% apart in two calibrations in a row (five pairs)."""
TIMEOUT_S = 1200.0  # ten medians of every point took 210 s here; up to twenty, at most twice that


def calibrate_collectives(ranks: int, quick: bool = False, threads_per_rank: int = 1) -> MeasuredCollectives:
    sizes = QUICK_SIZES if quick else SIZES
    repeats, iterations, min_median_s = (2, 5, 0.0) if quick else (10, 20, MIN_MEDIAN_S)
    until_settled = 0 if quick else UNTIL_SETTLED
    start = time.perf_counter()
    timings = measure_collectives(
        ranks,
        sizes,
        repeats=repeats,
        until_settled=until_settled,
        settled=SETTLED,
        iterations=iterations,
        timeout_s=TIMEOUT_S,
        min_median_s=min_median_s,
        threads_per_rank=threads_per_rank,
    )
    sync_s = measure_sync_s(ranks, threads_per_rank=threads_per_rank, repeats=3 if quick else 11)
    share = measure_send_receive_share(ranks, repeats=3 if quick else 10, threads_per_rank=threads_per_rank)
    took = time.perf_counter() - start
    points = {
        collective: tuple(
            (t.message_bytes, t.seconds, t.spread)
            for t in sorted((t for t in timings if t.collective == collective), key=lambda t: t.message_bytes)
        )
        for collective in COLLECTIVES
    }
    source = (
        f"gloo over loopback on {platform.node() or 'this machine'} ({os.cpu_count()} cores): {ranks} ranks of "
        f"{threads_per_rank} thread(s), sizes {sizes[0]}..{sizes[-1]} bytes, the faster half's mean of {repeats} "
        f"to {repeats + until_settled} medians of {iterations} calls each, measured by `gnomon calibrate "
        f"--collectives` on {time.strftime('%Y-%m-%d')} in {took:.0f} s"
    )
    return MeasuredCollectives(source, "gloo", ranks, threads_per_rank, sync_s, points, send_receive_share=share)


def _bus_bytes(collective: str, message_bytes: int, ranks: int) -> float:
    """The bytes through each rank's link (nccl-tests' bus bandwidth factor): the model's time at no latency and a
    bandwidth of one byte per second."""
    return model_s(collective, message_bytes, ranks, 0.0, 1.0)[0]


def render(measured: MeasuredCollectives) -> str:
    lines = [f"collectives over {measured.backend}, {measured.ranks} ranks:"]
    lines.append(f"  {'collective':<15} {'bytes':>10} {'seconds':>11} {'busbw GB/s':>11} {'spread':>7}")
    for collective, points in measured.points.items():
        for size, seconds, spread in points:
            busbw = _bus_bytes(collective, size, measured.ranks) / seconds / 1e9
            lines.append(f"  {collective:<15} {size:>10} {seconds:>11.3e} {busbw:>11.3f} {spread:>6.0%}")
    lines.append("  fitted link (latency per step, bandwidth):")
    for collective, points in measured.points.items():
        try:
            latency, bandwidth = fit_latency_bandwidth(collective, [(s, t) for s, t, _ in points], measured.ranks)
        except TopologyError as error:
            lines.append(f"  {collective:<15} {error}")
            continue
        lines.append(f"  {collective:<15} {latency * 1e6:8.1f} us {bandwidth / 1e9:8.3f} GB/s")
    lines.append(
        f"  a collective right after compute: {measured.sync_s * 1e3:.2f} ms beyond its own time (the ranks' sync)"
    )
    lines.append(
        f"  an uneven all-to-all: a rank pays {measured.send_receive_share:.0%} of what it receives as if sent"
        " (0%: full duplex)"
    )
    return "\n".join(lines)


def calibrate_collectives_command(output: Path | None, ranks: int, quick: bool) -> None:
    """Measure the collectives and, unless `output` names another file, the device each rank sees
    (`gnomon.calibrate_ranks`): the two halves of the `Nxlocal` system."""
    from gnomon.calibrate_ranks import calibrate_rank_device, write_rank_device

    path = output if output is not None else local_collectives_path()
    measured = calibrate_collectives(ranks, quick=quick)
    print(render(measured))
    try:
        write_collectives(measured, path)
    except OSError as error:
        raise TopologyError(f"cannot write the collective file {path}: {error.strerror or error}") from error
    print(f"wrote {path}" + (" (the `local` system's collectives)" if output is None else ""))
    if output is not None:
        return
    print(f"calibrating the device one of {ranks} ranks sees, all ranks at once ...")
    device = calibrate_rank_device(ranks, quick=quick)
    write_rank_device(device)
    peak, dram = device.peak("fp32"), device.dram.bandwidth_bytes_per_s
    print(f"  per rank: peak fp32 {peak / 1e9:.1f} GFLOP/s, DRAM {dram / 1e9:.1f} GB/s, {device.cores} core(s)")
    print(f"wrote {local_rank_device_path()} (the device of the `local` system's ranks)")
    _calibrate_torchrec(measured, path, ranks, quick)


def _calibrate_torchrec(measured: MeasuredCollectives, path: Path, ranks: int, quick: bool) -> None:
    """TorchRec's cost per sharding group (`gnomon.calibrate_torchrec`), where TorchRec is installed."""
    from importlib.util import find_spec

    if find_spec("torchrec") is None or find_spec("fbgemm_gpu") is None:
        print("TorchRec is not installed: its sharded steps' host cost is not measured (0 is assumed)")
        return
    from gnomon.calibrate_torchrec import fit_embedding_group_s
    from gnomon.cost.topology.measured import local_system

    print(f"fitting TorchRec's costs a step, a sharding group and a pooled byte on {ranks} ranks ...")
    fit = fit_embedding_group_s(local_system(ranks), ranks, quick=quick)
    for point in fit.points:
        print(f"  {point.name:<22} {point.groups} group(s), {point.pooled_bytes / 2**20:5.2f} MiB pooled: measured "
              f"{point.measured_s * 1e3:7.2f} ms, predicted without it {point.predicted_s * 1e3:7.2f} ms")  # fmt: skip
    print(f"  per step: {fit.embedding_step_s * 1e3:.2f} ms, per sharding group: "
          f"{max(fit.embedding_group_s.values()) * 1e3:.2f} ms, per MiB pooled: "
          f"{fit.embedding_pooled_byte_s * 2**20 * 1e3:.2f} ms")  # fmt: skip
    fitted = replace(measured, embedding_group_s=fit.embedding_group_s, embedding_step_s=fit.embedding_step_s,
                     embedding_pooled_byte_s=fit.embedding_pooled_byte_s)  # fmt: skip
    write_collectives(fitted, path)
    print(f"wrote {path} (with TorchRec's cost per group)")
