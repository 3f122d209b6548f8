"""Timing PyTorch DistributedDataParallel training steps across local ranks over gloo: the measurement side of
`bench/multidevice.py`.

Each rank is a spawned process with its replica of a `multidevice_cases.DATA_PARALLEL` case (built from seed 0,
so the replicas start equal), its own batch, and DDP as users get it (default bucket caps, no gradient-as-bucket
view). It also trains a copy of the same model without DDP on the same batch: that step's time is the compute
alone under the same load (every rank busy at once), the baseline the all-reduce's cost is read against.

A step's time is the time until every rank has finished it: each timed step starts after a barrier, each rank
times its own, and the step's time is the largest of the ranks' (an all_reduce MAX after the round's steps).
Local and DDP rounds alternate, so that load that drifts during the run hits both alike.

The processes are `gnomon.runtime.distributed.run_ranks`'s: a parent that never outlives its ranks nor lets them
outlive it, and one line of error for a rank that fails, dies or runs past the timeout.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from multidevice_cases import DATA_PARALLEL, OPTIMIZER, Batch, DataParallelCase
from torch.nn.parallel import DistributedDataParallel

from gnomon.errors import GnomonError
from gnomon.frontends.torch_training import with_loss
from gnomon.pytorch_memory import eager_training_step
from gnomon.runtime.distributed import free_port, run_ranks
from gnomon.runtime.distributed.group import process_group, slowest_rank_times, step_timing_problem

__all__ = ["DataParallelMeasureError", "StepTiming", "measure_data_parallel"]

_PREFIX = "data-parallel measurement"


class DataParallelMeasureError(GnomonError):
    """The DDP steps could not be measured (bad arguments, replicas that diverge, a rank that died or failed, a run
    past its timeout)."""


@dataclass(frozen=True)
class StepTiming:
    """One case's training step on `ranks` local ranks, with and without DDP."""

    case: str
    ranks: int
    batch: int
    """Samples per rank."""
    ddp_step_s: float
    """The DDP step: the smallest of `repeats` medians of `steps` steps, each step's time the largest over ranks."""
    ddp_spread: float
    """(largest median - smallest) / smallest: how much the host disturbed the DDP rounds."""
    local_step_s: float
    """The same step without DDP (no gradient all-reduce), every rank running it at once, timed the same way."""
    local_spread: float
    gradient_bytes: int
    """The bytes DDP all-reduces per step: the trained parameters' sizes, summed."""
    buckets: list[list[str]]
    """DDP's buckets after its rebuild, as parameter names (the model's own, without `with_loss`'s `model.`
    prefix), in the order the reducer all-reduces them; [] where torch does not expose them."""


def measure_data_parallel(
    case: str,
    batch: int,
    *,
    ranks: int = 2,
    threads_per_rank: int = 1,
    steps: int = 10,
    repeats: int = 5,
    warmup: int = 3,
    timeout_s: float = 600.0,
) -> StepTiming:
    """The DDP and local step times of `case` at `batch` samples per rank. Raises DataParallelMeasureError for bad
    arguments, replicas unequal after the warmup, a rank that fails or dies, or no result within timeout_s; the
    ranks never outlive the call."""
    _validate(case, batch, ranks, threads_per_rank, steps, repeats, warmup, timeout_s)
    plan = _Plan(free_port(), case, batch, ranks, threads_per_rank, steps, repeats, warmup, timeout_s)
    return run_ranks(_rank_main, plan, ranks, timeout_s=timeout_s, what=_PREFIX, error=DataParallelMeasureError)


def _validate(
    case: str, batch: int, ranks: int, threads_per_rank: int, steps: int, repeats: int, warmup: int, timeout_s: float
) -> None:
    if case not in DATA_PARALLEL:
        raise DataParallelMeasureError(f"{_PREFIX}: unknown case '{case}' (known: {', '.join(DATA_PARALLEL)})")
    problem = step_timing_problem(ranks, batch, threads_per_rank, steps, repeats, warmup, timeout_s)
    if problem is not None:
        raise DataParallelMeasureError(f"{_PREFIX}: {problem}")


@dataclass(frozen=True)
class _Plan:
    """What every rank measures, sent to each spawned process."""

    port: int
    case: str
    batch: int
    ranks: int
    threads_per_rank: int
    steps: int
    repeats: int
    warmup: int
    timeout_s: float


def _rank_main(rank: int, plan: _Plan) -> StepTiming:
    """One rank's work, in its own process: its timing (rank 0's is the result)."""
    with process_group(rank, plan.ranks, plan.port, timeout_s=plan.timeout_s, threads=plan.threads_per_rank):
        return _measure(rank, plan)


def _measure(rank: int, plan: _Plan) -> StepTiming:
    case = DATA_PARALLEL[plan.case]
    torch.manual_seed(0)
    model = case.build()
    inputs = _rank_batch(case, model, plan.batch, rank)  # before training mode, as a user's data pipeline would
    wrapped = with_loss(model, case.loss).train()
    local = copy.deepcopy(wrapped)
    ddp = DistributedDataParallel(wrapped)
    ddp_step = eager_training_step(ddp, inputs, OPTIMIZER)
    local_step = eager_training_step(local, inputs, OPTIMIZER)
    for _ in range(plan.warmup):
        ddp_step()
        local_step()
    _check_replicas(wrapped, plan)
    ddp_medians: list[float] = []
    local_medians: list[float] = []
    for _ in range(plan.repeats):
        local_medians.append(_round_median(local_step, plan.steps))
        ddp_medians.append(_round_median(ddp_step, plan.steps))
    trained = [p for p in wrapped.parameters() if p.requires_grad]
    return StepTiming(
        case=plan.case,
        ranks=plan.ranks,
        batch=plan.batch,
        ddp_step_s=min(ddp_medians),
        ddp_spread=_spread(ddp_medians),
        local_step_s=min(local_medians),
        local_spread=_spread(local_medians),
        gradient_bytes=sum(p.numel() * p.element_size() for p in trained),
        buckets=_buckets(ddp),
    )


def _rank_batch(case: DataParallelCase, model: torch.nn.Module, size: int, rank: int) -> Batch:
    """The rank's own batch. The models' `example_inputs` seed their generator themselves, so `case.batch` gives
    every rank the same data: each rank redraws its floating tensors (all drawn from randn in these cases) and
    shuffles its integer ones (class labels: still valid) from a generator seeded by its rank."""
    generator = torch.Generator().manual_seed(rank)
    tensors: list[torch.Tensor] = []
    for tensor in case.batch(model, size):
        if tensor.is_floating_point():
            tensors.append(torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype))
        else:
            tensors.append(tensor[torch.randperm(tensor.shape[0], generator=generator)])
    return tuple(tensors)


def _check_replicas(module: torch.nn.Module, plan: _Plan) -> None:
    """DDP keeps the replicas equal: each parameter's checksums (sum, sum of squares, in float64) agree across the
    ranks, else a training step that skips the all-reduce would be timed as DDP's."""
    names = [name for name, _ in module.named_parameters()]
    sums = torch.stack([torch.stack([p.double().sum(), p.double().square().sum()]) for p in module.parameters()])
    high, low = sums.detach().clone(), sums.detach().clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    differ = (high != low).any(dim=1).nonzero().flatten().tolist()
    if differ:
        first = differ[0]
        raise DataParallelMeasureError(
            f"{_PREFIX}: after {plan.warmup} DDP steps of {plan.case}, the replicas' {names[first]} differ across "
            f"{plan.ranks} ranks (sum {low[first, 0].item():.9g} to {high[first, 0].item():.9g}; "
            f"{len(differ)} of {len(names)} parameters differ)"
        )


def _round_median(step: Callable[[], Any], steps: int) -> float:
    """The median over `steps` steps of each step's time, the largest over the ranks (the ranks start each step
    together, as DDP's all-reduces make them run)."""
    return statistics.median(slowest_rank_times(step, steps))


def _spread(medians: Sequence[float]) -> float:
    return (max(medians) - min(medians)) / min(medians)


def _buckets(ddp: DistributedDataParallel) -> list[list[str]]:
    """The reducer's buckets by index, the order it launches their all-reduces in (bucket i+1's never before
    bucket i's), as parameter names; [] for a torch without the reducer's private bucket view."""
    read = getattr(ddp.reducer, "_get_zeros_like_grad_buckets", None)
    if read is None:
        return []
    names = {p.data_ptr(): name.removeprefix("model.") for name, p in ddp.module.named_parameters()}
    buckets = sorted(read(), key=lambda bucket: bucket.index())
    return [[names[p.data_ptr()] for p in bucket.parameters()] for bucket in buckets]
