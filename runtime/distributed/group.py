"""What every rank of a measurement does: join a gloo process group, and time calls as the slowest rank sees them."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["process_group", "slowest_rank_times"]


@contextmanager
def process_group(
    rank: int, ranks: int, port: int, *, timeout_s: float, threads: int, backend: str = "gloo"
) -> Generator[None]:
    """The rank in a process group on 127.0.0.1:`port` (torch on `threads` threads), left on the way out."""
    torch.set_num_threads(threads)
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=ranks,
        timeout=timedelta(seconds=timeout_s),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def slowest_rank_times(call: Callable[[], object], iterations: int) -> list[float]:
    """`iterations` calls, each started together after a barrier; each call's time is the largest over the ranks
    (a call is done when every rank is)."""
    times = torch.empty(iterations, dtype=torch.float64)
    for index in range(iterations):
        dist.barrier()
        start = time.perf_counter()
        call()
        times[index] = time.perf_counter() - start
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return times.tolist()
