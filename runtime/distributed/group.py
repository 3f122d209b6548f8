"""What every rank of a measurement does: join a gloo process group, and time calls as the slowest rank sees them;
and the checks that the training-step harnesses (DDP's, TorchRec's) share."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["FIRST_REBUILT_STEP", "process_group", "slowest_rank_times", "step_timing_problem"]


FIRST_REBUILT_STEP = 2
"""DDP rebuilds its buckets in the second step's forward: a step harness's warmup must cover it."""


def step_timing_problem(
    ranks: int, batch: int, threads_per_rank: int, steps: int, repeats: int, warmup: int, timeout_s: float
) -> str | None:
    """What is wrong with the arguments of a training-step measurement over gloo ranks, or None."""
    if not (dist.is_available() and dist.is_backend_available("gloo")):
        return "torch.distributed's gloo backend is not available in this torch build"
    if ranks < 2:
        return f"ranks must be at least 2, got {ranks}"
    counts = {"batch": batch, "threads_per_rank": threads_per_rank, "steps": steps, "repeats": repeats}
    for name, value in counts.items():
        if value < 1:
            return f"{name} must be at least 1, got {value}"
    if warmup < FIRST_REBUILT_STEP:
        return f"warmup must be at least {FIRST_REBUILT_STEP} (DDP rebuilds its buckets in step 2), got {warmup}"
    if timeout_s <= 0:
        return f"timeout_s must be positive, got {timeout_s:g}"
    return None


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


def slowest_rank_times(
    call: Callable[[], object], iterations: int, before: Callable[[], object] | None = None
) -> list[float]:
    """`iterations` calls, each started together after a barrier; each call's time is the largest over the ranks
    (a call is done when every rank is). `before` runs untimed ahead of each call, before the barrier."""
    times = torch.empty(iterations, dtype=torch.float64)
    for index in range(iterations):
        if before is not None:
            before()
        dist.barrier()
        start = time.perf_counter()
        call()
        times[index] = time.perf_counter() - start
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return times.tolist()
