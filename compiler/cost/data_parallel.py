"""A data-parallel training step on several devices, as PyTorch's DistributedDataParallel runs it: each rank runs
the step on its share of the batch (`gnomon.cost.eager_training`), and DDP all-reduces the gradients in buckets
while the backward pass goes on.

- Buckets: DDP rebuilds its buckets after the first step in the order the gradients became ready, the first up to
  1 MiB and the rest up to 25 MiB (a bucket closes at the first gradient that takes it to its cap or past it). The
  ready order and times come from the rank's predicted step: a gradient is ready when the op computing it ends.
- Each bucket is all-reduced (`gnomon.cost.collectives`) once its last gradient is ready and the bucket before it
  has started, one after another. Beside it DDP copies each gradient into its bucket, divides the bucket by the
  ranks and copies it back (`gradient_as_bucket_view=False`, its default): three passes over the gradients.
- Where the collectives run beside the compute (a GPU's NCCL kernels; a CPU with cores to spare for gloo's
  threads), a bucket's all-reduce overlaps the backward ops after it, and the optimizer waits for the last one.
  Where every core already computes (one rank per core here), gloo's threads take their time from the ranks': the
  all-reduces add to the step.
- The all-reduces are asynchronous: a rank blocks only where DDP's reducer waits for all of them after backward,
  and there it pays the wait for the slowest rank and its wake-up once (`System.sync_s`, measured by `gnomon
  calibrate --collectives`; charging it to every bucket predicted the small models' communication 2x slow).

The predicted step is the longest rank's: the ranks run the same program on equal shares, so any one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation

from gnomon.cost.analytical import pass_cost
from gnomon.cost.collectives import collective_s
from gnomon.cost.eager_training import priced_ops
from gnomon.cost.report import Report
from gnomon.cost.steps import program_function
from gnomon.cost.topology import System
from gnomon.cost.values import nbytes

__all__ = ["BUCKET_BYTES", "FIRST_BUCKET_BYTES", "Bucket", "DataParallelStep", "data_parallel_step"]

FIRST_BUCKET_BYTES = 1 << 20
"""DDP's first bucket cap (`torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`)."""
BUCKET_BYTES = 25 << 20
"""DDP's default `bucket_cap_mb` (25)."""


@dataclass(frozen=True)
class Bucket:
    parameters: tuple[str, ...]
    bytes: int
    ready_s: float
    """When its last gradient is ready, from the step's start."""
    start_s: float
    all_reduce_s: float


@dataclass(frozen=True)
class DataParallelStep:
    """The predicted step and where its time goes."""

    system: str
    ranks: int
    compute_s: float
    """One rank's step alone: forward, backward and optimizer, no communication."""
    backward_end_s: float
    """When the last backward op ends (the optimizer starts after it and after the last all-reduce)."""
    buckets: tuple[Bucket, ...]
    copies_s: float
    """DDP's copies of the gradients into their buckets and back, and the division by the ranks."""
    sync_s: float
    """The ranks' wait for each other where the reducer waits for the all-reduces (`System.sync_s`, once)."""
    overlapped: bool
    """Whether the all-reduces run beside the compute."""
    step_s: float

    @property
    def all_reduce_s(self) -> float:
        return sum(b.all_reduce_s for b in self.buckets)

    @property
    def exposed_s(self) -> float:
        """Collectives on the critical path: what the step takes beyond the compute, the copies and the syncs."""
        return max(0.0, self.step_s - self.compute_s - self.copies_s - self.sync_s)


def data_parallel_step(
    module: ModuleOp,
    report: Report,
    parameters: Sequence[str],
    system: System,
    ranks: int | None = None,
    overlapped: bool | None = None,
) -> DataParallelStep:
    """The DDP step on `ranks` of `system`'s devices, from one rank's training step: `module` its graph (the joint
    graph with the optimizer appended, keeping the gradients: its last results, one per trained parameter, named
    `parameters`), `report` its torch-eager prediction on the device one rank sees (`system.device`). `overlapped`
    defaults to whether the collectives have engines or cores of their own."""
    n = system.ranks if ranks is None else ranks
    device = report.device
    if overlapped is None:
        overlapped = device.kind == "gpu" or n * device.cores < len(os.sched_getaffinity(0))
    block = program_function(module).body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    gradients = list(ret.operands[len(ret.operands) - len(parameters) :])
    ends: dict[Operation | Block, float] = {
        op: record.end_s for op, record in zip(priced_ops(module), report.records, strict=False)
    }
    ready_at = [ends.get(g.owner, 0.0) for g in gradients]  # a gradient no op computes (zeros) is ready at once
    backward_end = max(ready_at, default=0.0)
    ready = sorted(
        (when, -index, name, nbytes(g))
        for index, (when, name, g) in enumerate(zip(ready_at, parameters, gradients, strict=True))
    )
    buckets: list[Bucket] = []
    names: list[str] = []
    size, last_ready, free_at = 0, 0.0, 0.0
    for position, (when, _, name, gradient_bytes) in enumerate(ready):
        names.append(name)
        size += gradient_bytes
        last_ready = when
        if size >= (FIRST_BUCKET_BYTES if not buckets else BUCKET_BYTES) or position == len(ready) - 1:
            seconds = collective_s(system, "all_reduce", size, n).seconds
            start = max(last_ready, free_at) if overlapped else last_ready
            buckets.append(Bucket(tuple(names), size, last_ready, start, seconds))
            free_at = start + seconds
            names, size = [], 0
    total = sum(b.bytes for b in buckets)
    # Into the bucket, divided in place, back out: each reads and writes the gradients once.
    copies_s = 3 * pass_cost(total, total, 0, device, in_place=False).kernel_s if n > 1 else 0.0
    compute_s = report.predicted_e2e_s
    communication = sum(b.all_reduce_s for b in buckets)
    # DDP launches each bucket's all-reduce asynchronously; a rank blocks only where the reducer waits for them all,
    # after backward: there it waits for the slowest rank, once.
    sync_s = system.sync_s if buckets and n > 1 else 0.0
    if overlapped:
        optimizer_s = max(0.0, compute_s - backward_end)
        step = max(backward_end, buckets[-1].start_s + buckets[-1].all_reduce_s if buckets else 0.0)
        step_s = step + sync_s + optimizer_s + copies_s
    else:
        step_s = compute_s + communication + sync_s + copies_s
    return DataParallelStep(
        system.name, n, compute_s, backward_end, tuple(buckets), copies_s, sync_s, overlapped, step_s
    )
