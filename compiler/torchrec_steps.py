"""Timing sharded DLRM training steps on local gloo ranks: TorchRec runs a gnomon sharding plan, and this times it
(for `bench/multidevice.py`, and for `gnomon calibrate --collectives`, which fits TorchRec's host cost per sharding
group from a few small ones).

Each rank is a spawned process pinned to its own cores, with the same DLRM (built by the caller's factory from a
fixed seed), its own batch, and TorchRec's DistributedModelParallel over `gnomon.torchrec_plan.sharding_plan`'s
export of the plan: the tables on TorchRec's fused kernel with plain SGD applied in the backward pass, the dense
MLPs in the DDP that DistributedModelParallel wraps them in, trained by torch.optim.SGD at the same rate. Before
timing, each rank checks that the sharded forward of its batch equals the unsharded model's: a plan exported wrong
would otherwise be timed as right.

A step's time is the time until every rank has finished it: each timed step starts after a barrier, and the step's
time is the largest of the ranks' (`slowest_rank_times`). Several plans are measured in the same ranks, one round of
each in turn, so that load that drifts during the run hits them alike (on this 2-core machine a plan's medians
spread by 10-50% between rounds; plans measured one after another were ranked by the drift). A plan's figure is the
mean of the faster half of all its steps: single steps of one plan ranged over 1.5-2x, and the smallest of a few
rounds' medians fell as rounds were added (a 12-table case: 9.4 ms over 5 rounds, 6.7 ms over 25).

The processes are `gnomon.runtime.distributed.run_ranks`'s: a parent that never outlives its ranks nor lets them
outlive it, and one line of error for a rank that fails, dies or runs past the timeout.
"""

from __future__ import annotations

import copy
import gc
import itertools
import os
import random
import statistics
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnomon.cost.sharding.plan import Placement, ShardingError
from gnomon.errors import GnomonError
from gnomon.models import DLRM
from gnomon.runtime.distributed import free_port, rank_cores, run_ranks
from gnomon.runtime.distributed.collectives import faster_half_mean
from gnomon.runtime.distributed.group import process_group, slowest_rank_times, step_timing_problem
from gnomon.runtime.distributed.paired import contenders
from gnomon.torchrec_plan import CpuRowWiseSharder, TorchRecDLRM, sharding_plan, to_kjt

if TYPE_CHECKING:
    from torchrec.distributed.types import ModuleSharder

__all__ = ["ShardedMeasureError", "ShardedTiming", "measure_sharded", "training_batches", "training_step"]

_PREFIX = "sharded measurement"
_LR = 0.01
_TOLERANCE = 1e-5
_EBC_PATH = "ebc"  # TorchRecDLRM's EmbeddingBagCollection
_BLOCK = 10  # rounds between two choices of the plans that go on
BATCHES = 32
"""Batches each rank cycles through, one a step, as a training loop feeds fresh ones: steps that look up the same ids
every time find their rows in cache, where training (and the cost model, `gnomon.cost.tbe`) fetches a fresh batch's
rows from the level that holds the table."""


class ShardedMeasureError(GnomonError):
    """The sharded steps could not be measured (bad arguments, a plan TorchRec cannot run, a sharded forward that
    differs from the unsharded one, a rank that died or failed, a run past its timeout)."""


@dataclass(frozen=True)
class ShardedTiming:
    """A DLRM's sharded training step on `ranks` local ranks."""

    plan: dict[str, str]
    """Each table's placement, as `Placement.describe` writes it."""
    ranks: int
    batch: int
    """Samples per rank."""
    step_s: float
    """The training step: the mean of the faster half of all `repeats` x `steps` steps (`faster_half_mean`), each
    step's time the largest over ranks."""
    spread: float
    """(largest round median - smallest) / smallest: how much the host disturbed the rounds."""
    rounds: tuple[tuple[float, ...], ...]
    """Each round's steps, in order: the plans measured together ran their rounds in turn, so round i of one plan
    is comparable with round i of another (a paired comparison, `gnomon.runtime.distributed.paired`); a round the
    plan sat out (told apart from the fastest already) is empty."""
    check_error: float
    """The largest difference, over the ranks, of the sharded forward from the unsharded DLRM's, before timing."""


def measure_sharded(
    make_model: Callable[[], DLRM],
    batch: int,
    assignments: Sequence[Mapping[str, Placement]],
    *,
    zipf: float = 0.0,
    ranks: int = 2,
    threads_per_rank: int = 1,
    steps: int = 10,
    repeats: int = 5,
    warmup: int = 3,
    until_apart: int = 0,
    timeout_s: float = 600.0,
) -> list[ShardedTiming]:
    """The training step time of the DLRM `make_model` builds (a module-level, picklable factory that gives the same
    model on every call) sharded as each of `assignments` says, at `batch` samples per rank with ids drawn at
    `zipf`. The plans are measured in the same ranks, their rounds interleaved, so that load that drifts during the
    run hits them alike: their order is the measurement's to trust. After `repeats` rounds, up to `until_apart`
    more go to the plans not yet told apart from the fastest (`paired.contenders`, every ten rounds), until one is
    left. Raises ShardedMeasureError for bad arguments, a plan TorchRec cannot run, a sharded forward that differs
    from the unsharded one, a rank that fails or dies, or no result within timeout_s; the ranks never outlive the
    call."""
    problem = step_timing_problem(ranks, batch, threads_per_rank, steps, repeats, warmup, timeout_s)
    if problem is None and until_apart < 0:
        problem = f"until_apart must be at least 0, got {until_apart}"
    if problem is not None:
        raise ShardedMeasureError(f"{_PREFIX}: {problem}")
    cores = rank_cores(ranks, threads_per_rank, what=_PREFIX, error=ShardedMeasureError)
    if not assignments:
        raise ShardedMeasureError(f"{_PREFIX}: no plan to measure")
    model = make_model()
    try:  # the parent checks the plans, so that a bad one is one line before any rank starts
        for assignment in assignments:
            sharding_plan(_EBC_PATH, TorchRecDLRM(model).ebc, assignment, ranks)
    except ShardingError as error:
        raise ShardedMeasureError(f"{_PREFIX}: {error}") from error
    plan = _Plan(free_port(), make_model, batch, [dict(a) for a in assignments], zipf, ranks, threads_per_rank,
                 cores, steps, repeats, until_apart, warmup, timeout_s)  # fmt: skip
    return run_ranks(_rank_main, plan, ranks, timeout_s=timeout_s, what=_PREFIX, error=ShardedMeasureError)


@dataclass(frozen=True)
class _Plan:
    """What every rank measures, sent to each spawned process."""

    port: int
    make_model: Callable[[], DLRM]
    batch: int
    assignments: list[dict[str, Placement]]
    zipf: float
    ranks: int
    threads_per_rank: int
    cores: tuple[tuple[int, ...], ...]
    """Each rank's cores, as `gnomon.calibrate_ranks` pins its ranks: the rank device's figures were measured so."""
    steps: int
    repeats: int
    until_apart: int
    warmup: int
    timeout_s: float


def _rank_main(rank: int, plan: _Plan) -> list[ShardedTiming]:
    """One rank's work, in its own process: its timing (rank 0's is the result)."""
    os.sched_setaffinity(0, set(plan.cores[rank]))
    warnings.filterwarnings("ignore")  # TorchRec's deprecation notes, once per rank and table group
    with process_group(rank, plan.ranks, plan.port, timeout_s=plan.timeout_s, threads=plan.threads_per_rank):
        timing = _measure(rank, plan)
        # TorchRec's sharded modules hold the group in reference cycles: a group that outlives its leaving is torn
        # down at interpreter exit, where gloo now and then aborts the rank.
        gc.collect()
        return timing


def _measure(rank: int, plan: _Plan) -> list[ShardedTiming]:
    model = plan.make_model()
    batches, expected = training_batches(model, plan.batch, plan.zipf, rank, plan.ranks)
    steps: list[Callable[[], None]] = []
    errors: list[float] = []
    for assignment in plan.assignments:
        step, error = training_step(model, assignment, plan.ranks, expected, batches)
        steps.append(step)
        errors.append(error)
    for _ in range(plan.warmup):
        for step in steps:
            step()
    rounds: list[list[tuple[float, ...]]] = [[] for _ in steps]
    running = list(range(len(steps)))
    for done in range(plan.repeats + plan.until_apart):
        if done >= plan.repeats and done % _BLOCK == plan.repeats % _BLOCK:
            # Every rank holds the same times (the slowest rank's), so every rank picks the same plans to go on.
            running = [p for p in contenders(rounds) if p in running]
            if len(running) < 2:
                break
        # One round of each plan, then the next round, the plans in a fresh order each round (the same on every
        # rank): in a fixed order each plan always ran after the same one, in the caches and memory it left.
        order = list(range(len(steps)))
        random.Random(done).shuffle(order)
        for index in order:
            rounds[index].append(tuple(slowest_rank_times(steps[index], plan.steps)) if index in running else ())
    return [
        ShardedTiming(
            plan={name: placement.describe() for name, placement in assignment.items()},
            ranks=plan.ranks,
            batch=plan.batch,
            step_s=faster_half_mean([t for one in times for t in one]),
            spread=_spread([statistics.median(one) for one in times if one]),
            rounds=tuple(times),
            check_error=error,
        )
        for assignment, times, error in zip(plan.assignments, rounds, errors, strict=True)
    ]


def training_batches(
    model: DLRM, batch: int, zipf: float, rank: int, ranks: int
) -> tuple[list[tuple[torch.Tensor, Any, torch.Tensor]], torch.Tensor]:
    """Rank `rank`'s `BATCHES` batches of `batch` samples (ids at `zipf`) as TorchRec takes them (dense features,
    KeyedJaggedTensor, targets), and `model`'s unsharded output on the first, which a sharded forward must give."""
    seeds = [rank + ranks * k for k in range(BATCHES)]  # rank r's k-th batch: apart between ranks and batches
    inputs = [model.example_inputs(batch, zipf=zipf, seed=1000 + seed) for seed in seeds]
    with torch.no_grad():
        expected = model(*inputs[0])
    batches = [
        (dense, to_kjt(indices, offsets), _targets(batch, 2000 + seed))
        for (dense, indices, offsets), seed in zip(inputs, seeds, strict=True)
    ]
    return batches, expected


def _targets(batch: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2, (batch, 1), generator=torch.Generator().manual_seed(seed)).float()


def training_step(
    model: DLRM,
    assignment: Mapping[str, Placement],
    ranks: int,
    expected: torch.Tensor,
    batches: Sequence[tuple[torch.Tensor, Any, torch.Tensor]],
) -> tuple[Callable[[], None], float]:
    """A training step of `model` sharded by `assignment` under TorchRec, each call on the next of `batches` (its
    forward checked first, on the first batch, against `expected`), and the check's largest difference."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    wrapped = TorchRecDLRM(copy.deepcopy(model)).train()
    reference = copy.deepcopy(wrapped)
    sharder = CpuRowWiseSharder(fused_params={"optimizer": EmbOptimType.EXACT_SGD, "learning_rate": _LR})
    sharded = DistributedModelParallel(
        wrapped,
        device=torch.device("cpu"),
        plan=sharding_plan(_EBC_PATH, wrapped.ebc, assignment, ranks),
        sharders=[cast("ModuleSharder[torch.nn.Module]", sharder)],
    )
    # Sharding initializes the tables afresh; DMP's load_state_dict renames the keys of the dict it is given.
    sharded.load_state_dict(OrderedDict(reference.state_dict()))
    check_error = _check_forward(sharded, reference, expected, batches[0][0], batches[0][1])
    del reference
    # The tables' optimizer is fused into their backward; the rest (the MLPs, in DDP) is torch's.
    dense_parameters = [p for _, p in in_backward_optimizer_filter(sharded.named_parameters())]
    optimizer = torch.optim.SGD(dense_parameters, lr=_LR)

    turn = itertools.count()

    def step() -> None:
        dense, features, target = batches[next(turn) % len(batches)]
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(sharded(dense, features), target)
        loss.backward()
        optimizer.step()

    return step, check_error


def _check_forward(
    sharded: torch.nn.Module,
    reference: torch.nn.Module,
    expected: torch.Tensor,
    dense: torch.Tensor,
    features: Any,
) -> float:
    """The sharded forward of this rank's batch against the unsharded TorchRecDLRM's and DLRM's: the largest
    difference over the ranks, or a one-line error past the tolerance."""
    with torch.no_grad():
        got = sharded(dense, features)
        unsharded = reference(dense, features)
    errors = torch.stack([(got - unsharded).abs().max(), (got - expected).abs().max()]).double()
    dist.all_reduce(errors, op=dist.ReduceOp.MAX)
    worst = errors.max().item()
    if worst > _TOLERANCE:
        against = "TorchRecDLRM's" if errors[0] >= errors[1] else "DLRM's"
        raise ShardedMeasureError(
            f"{_PREFIX}: the sharded forward differs from the unsharded {against} by {worst:.3g} "
            f"(tolerance {_TOLERANCE:g}) on some rank's first batch"
        )
    return worst


def _spread(medians: Sequence[float]) -> float:
    return (max(medians) - min(medians)) / min(medians)
