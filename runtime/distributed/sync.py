"""What a collective costs right after compute, beyond its own time: the ranks' synchronization.

A collective timed alone starts with every rank waiting at a barrier. In a training step it starts when each rank
reaches it from its own compute: the first to arrive blocks until the last arrives and its wake-up, and the
collective's threads must be scheduled on cores the compute just held. Each rank here runs ~20 ms of matrix
products, then a 4 KiB all-reduce; the sync cost is that step's time less the products' and the all-reduce's, each
timed alone the same way (the slowest rank's, after a barrier), as the median over rounds of the difference of the
rounds' medians. On this 2-core VM with one rank per core it was 1.5-2.5 ms a collective (three runs), then 3.7 and
1.0 ms in two calibrations half an hour apart.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gnomon.errors import GnomonError
from gnomon.runtime.distributed.group import process_group, slowest_rank_times
from gnomon.runtime.distributed.ranks import free_port, run_ranks

__all__ = ["SyncMeasureError", "measure_sync_s"]

_SYNC_BYTES = 4096
_COMPUTE_S = 0.02


class SyncMeasureError(GnomonError):
    """The ranks' synchronization could not be measured."""


@dataclass(frozen=True)
class _Plan:
    ranks: int
    port: int
    threads_per_rank: int
    repeats: int
    iterations: int
    timeout_s: float


def measure_sync_s(
    ranks: int, *, threads_per_rank: int = 1, repeats: int = 11, iterations: int = 15, timeout_s: float = 300.0
) -> float:
    """Seconds a small collective right after compute costs beyond the compute and the collective alone."""
    if ranks < 2:
        raise SyncMeasureError(f"sync measurement: ranks must be at least 2, got {ranks}")
    plan = _Plan(ranks, free_port(), threads_per_rank, max(1, repeats), max(1, iterations), timeout_s)
    return run_ranks(_rank_main, plan, ranks, timeout_s=timeout_s, what="sync measurement", error=SyncMeasureError)


def _rank_main(rank: int, plan: _Plan) -> float:
    with process_group(rank, plan.ranks, plan.port, timeout_s=plan.timeout_s, threads=plan.threads_per_rank):
        return _measure(plan)


def _measure(plan: _Plan) -> float:
    a = torch.randn(384, 384)
    start = time.perf_counter()
    torch.mm(a, a)
    each = max(time.perf_counter() - start, 1e-5)
    count = torch.tensor([max(1.0, _COMPUTE_S / each)])
    dist.all_reduce(count, op=dist.ReduceOp.MIN)  # every rank runs as many products
    products = int(count.item())
    message = torch.zeros(_SYNC_BYTES // 4)

    def compute() -> None:
        for _ in range(products):
            torch.mm(a, a)

    def collective() -> None:
        dist.all_reduce(message)

    def both() -> None:
        compute()
        dist.all_reduce(message)

    for call in (compute, collective, both):
        call()
    costs = []
    for _ in range(plan.repeats):
        alone, small, after = (_median(call, plan.iterations) for call in (compute, collective, both))
        costs.append(after - alone - small)
    return max(0.0, statistics.median(costs))


def _median(call: Callable[[], object], iterations: int) -> float:
    return statistics.median(slowest_rank_times(call, iterations))
