"""How much of what a rank receives it pays as if sent: the share that prices an uneven all-to-all.

Over a full-duplex link (NVLink, PCIe, InfiniBand) a device sends and receives at full bandwidth at once, so an
all-to-all takes as long as its busiest rank's larger direction. Ranks on one host over gloo's loopback move both
directions through their own cores (each copies what it sends into the kernel's socket buffers and what it
receives out of them), so receiving takes from sending. On this 2-core VM, rank 0 sending 0.5 MiB and rank 1 3.5 MiB
took 1.61 ms, as long as 2 MiB each way (1.62 ms); priced by the larger direction, 3.5 MiB each way, it would take
about 2.8 ms. `gnomon.cost.collectives.uneven_all_to_all_s` gives a rank the load max(sent, received) + h x
min(sent, received), and a uniform all-to-all the load (1 + h) x sent, for the share h measured here.

Three all-to-alls, timed in rounds as the collectives are (`gnomon.runtime.distributed.collectives`): uniform with S
bytes sent by each rank to the others, uniform with 2S, and one-way, rank 0 sending 2S and no other rank anything.
Where time is linear in load (S is bandwidth-bound), the one-way call takes the uniform one's time at 2S / (1 + h)
sent (`send_receive_share`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.distributed as dist

from gnomon.errors import GnomonError
from gnomon.runtime.distributed.collectives import faster_half_mean
from gnomon.runtime.distributed.group import process_group, slowest_rank_times
from gnomon.runtime.distributed.ranks import free_port, run_ranks

__all__ = ["DuplexMeasureError", "measure_send_receive_share", "send_receive_share"]

SENT_BYTES = 1 << 20
"""What each rank sends to the others in the smaller uniform all-to-all: bandwidth-bound here (0.9-1.2 ms; 64 KiB
took 0.24 ms). At S of 0.5, 1 and 2 MiB one run here read h at 1.18, 1.07 and 1.14 before the clamp to 1: the
uniform calls also copy each rank's own chunk, the one-way call none."""
_WARMUP_CALLS = 3


class DuplexMeasureError(GnomonError):
    """The share could not be measured (bad arguments, a rank that failed, a wrong result)."""


@dataclass(frozen=True)
class _Plan:
    ranks: int
    port: int
    sent_bytes: int
    repeats: int
    iterations: int
    threads_per_rank: int
    timeout_s: float


def measure_send_receive_share(
    ranks: int,
    *,
    sent_bytes: int = SENT_BYTES,
    repeats: int = 10,
    iterations: int = 40,
    threads_per_rank: int = 1,
    timeout_s: float = 300.0,
) -> float:
    """The share h (0 to 1) of what a rank receives that it pays as if sent, measured on `ranks` local ranks over
    gloo: each figure the mean of the faster half of `repeats` medians of `iterations` calls, in rounds over the
    three all-to-alls."""
    if ranks < 2:
        raise DuplexMeasureError(f"send/receive share measurement: ranks must be at least 2, got {ranks}")
    if sent_bytes < 4 * (ranks - 1):
        raise DuplexMeasureError(f"send/receive share measurement: sent_bytes must be at least {4 * (ranks - 1)}")
    plan = _Plan(ranks, free_port(), sent_bytes, max(1, repeats), max(1, iterations), threads_per_rank, timeout_s)
    uniform, double, one_way = run_ranks(
        _rank_main, plan, ranks, timeout_s=timeout_s, what="send/receive share measurement", error=DuplexMeasureError
    )
    return send_receive_share(uniform, double, one_way)


def send_receive_share(uniform_s: float, double_s: float, one_way_s: float) -> float:
    """h from the uniform all-to-all's time at S and at 2S sent per rank and the one-way one's at 2S: with time
    a + b x load, one_way = a + b 2S / (1 + h). 0 (full duplex) where the two uniform times do not tell a slope."""
    slope = double_s - uniform_s  # b S
    if slope <= 0:
        return 0.0
    beyond_latency = one_way_s - (uniform_s - slope)  # one_way - a
    if beyond_latency <= 0:
        return 1.0
    return min(1.0, max(0.0, 2 * slope / beyond_latency - 1))


def _rank_main(rank: int, plan: _Plan) -> tuple[float, float, float]:
    with process_group(rank, plan.ranks, plan.port, timeout_s=plan.timeout_s, threads=plan.threads_per_rank):
        return _measure(rank, plan)


def _measure(rank: int, plan: _Plan) -> tuple[float, float, float]:
    n = plan.ranks
    each = plan.sent_bytes // 4 // (n - 1)  # fp32 elements to each other rank, S in all

    def uniform(per_peer: int) -> Callable[[], object]:
        sent, received = torch.zeros(n * per_peer), torch.empty(n * per_peer)
        return partial(dist.all_to_all_single, received, sent)

    # One-way: rank 0 sends 2S to the others, nobody sends rank 0 anything, and no rank sends anything else.
    to_peers = [0] + [2 * each] * (n - 1) if rank == 0 else [0] * n
    from_peers = [0] * n if rank == 0 else [2 * each] + [0] * (n - 1)
    sent = torch.full((sum(to_peers),), float(rank + 1))
    received = torch.empty(sum(from_peers))

    def one_way() -> None:
        dist.all_to_all_single(received, sent, from_peers, to_peers)

    one_way()
    if rank != 0 and not torch.all(received == 1.0):
        raise DuplexMeasureError(f"send/receive share measurement: rank {rank} did not receive what rank 0 sent")
    calls = [uniform(each), uniform(2 * each), one_way]
    medians: list[list[float]] = [[] for _ in calls]
    for _ in range(plan.repeats):
        for index, call in enumerate(calls):
            for _ in range(_WARMUP_CALLS):
                call()
            medians[index].append(statistics.median(slowest_rank_times(call, plan.iterations)))
    uniform_s, double_s, one_way_s = (faster_half_mean(found) for found in medians)
    return uniform_s, double_s, one_way_s
