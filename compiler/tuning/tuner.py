"""Tuning a compiled program's generated kernels: the cost model ranks each kernel's schedules, the best few run.

For each distinct generated kernel of a loaded `Program` (distinct by its tuning key: a block that recurs in a
network is tuned once), in program order:

1. the launches before it run, so its inputs hold what the model computes there (the arena is shared: a later
   launch may have overwritten them);
2. every schedule of its space (`gnomon.tuning.space`) is priced by the cost package (`gnomon.cost.schedules`) and
   the `top` cheapest are compiled (into the kernel cache), with the default schedule as the baseline;
3. each is checked against the default's results (relative L2 at most 1e-5: a schedule changes the order of a
   sum, never the result) and timed in the launch's own arrays: rounds of `median_time`, candidates interleaved
   within a round, the smallest median kept;
4. the fastest is stored in the tuning database unless it is within `NOISE` of the default, which then stays;
   a kernel whose budget ran out before a second schedule was measured stores nothing.

A kernel computed in place (its result over an input) runs on copies, and its in-place variant of the winner is
compiled afterwards, so that `gnomon run` finds every kernel it needs in the kernel cache. Tuning stops measuring
when the budget is spent; the kernels left keep their default schedules and are reported as such.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

import numpy as np

from gnomon.cost.devices import Device
from gnomon.cost.schedules import predicted_s
from gnomon.dialects import kernel
from gnomon.dialects.kernel import ScheduleAttr
from gnomon.errors import GnomonError
from gnomon.passes.kernel_tuned_schedules.database import Entry, Trial, TuningDatabase, best_trial, kernel_key
from gnomon.runtime.calibration.timing import median_time
from gnomon.runtime.executor import Launch, Program
from gnomon.tuning.space import candidates

__all__ = ["NOISE", "KernelResult", "Progress", "tune_program"]

NOISE = 0.03
"""A candidate must beat the default schedule by this fraction to replace it (run-to-run spread of one kernel's
smallest median here is 1-3%)."""
ROUNDS = 3
ROUND_SECONDS = 0.005
"""Each candidate's median in a round is taken over calls lasting about this long (at least 5 calls)."""


class Progress(Protocol):
    def __call__(self, done: int, total: int, kernel: str) -> None: ...


@dataclass(frozen=True)
class KernelResult:
    """What tuning did for one kernel."""

    kernel: str
    key: str
    launches: int
    """Launches of the program that run this kernel (or one identical to it)."""
    entry: Entry | None
    status: str
    """`tuned`, `cached` (the database had it), `budget` (not reached) or `untunable` (one schedule only)."""


def _relative_l2(value: np.ndarray, reference: np.ndarray) -> float:
    value, reference = value.astype(np.float64), reference.astype(np.float64)
    scale = float(np.linalg.norm(reference))
    error = float(np.linalg.norm(value - reference))
    return error / scale if scale else error


def _with_schedule(kernel_func: kernel.FuncOp, schedule: ScheduleAttr) -> kernel.FuncOp:
    candidate = kernel_func.clone()
    candidate.schedule = schedule
    return candidate


def _in_place(launch: Launch) -> int | None:
    if len(launch.results) != 1:
        return None
    result = launch.results[0]
    return next((i for i, a in enumerate(launch.args) if a.ctypes.data == result.ctypes.data), None)


def _arrays(launch: Launch) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The launch's own arrays, or, for an in-place launch, copies that a repeated call cannot corrupt."""
    if _in_place(launch) is None:
        return list(launch.args), list(launch.results)
    return [a.copy() for a in launch.args], [np.empty_like(r) for r in launch.results]


class _Kernel:
    """One kernel being tuned: its launch, its candidates' bound calls."""

    def __init__(self, launch: Launch, device: Device, lanes: int, top: int):
        from gnomon.passes.kernel_to_linalg.conv import packing
        from gnomon.runtime.codegen import compile_kernel

        self.launch = launch
        self.default = default = launch.kernel
        # As the runtime binds it: a convolution's constant weights packed once (`Program`).
        layout = packing(default)
        prepacked = layout is not None and bool(launch.constants) and launch.constants[layout.weight]
        self.compile = partial(compile_kernel, prepacked=prepacked)
        space = candidates(default, device, lanes)
        priced = [(predicted_s(_with_schedule(default, s), default, device, lanes), s) for s in space]
        ranked = sorted(priced[1:], key=lambda pair: pair[0])
        self.chosen = [priced[0], *ranked[:top]]
        self.space = len(space)

    def measure(self, deadline: float) -> list[Trial]:
        args, results = _arrays(self.launch)
        calls: list[tuple[float, ScheduleAttr, Callable[[], None]]] = []
        trials: dict[ScheduleAttr, Trial] = {}
        reference: list[np.ndarray] | None = None
        for predicted, schedule in self.chosen:
            if calls and time.monotonic() > deadline:
                break
            trial = Trial(str(schedule), predicted)
            try:
                call = self.compile(_with_schedule(self.default, schedule)).bind(args, results)
                call()
            except GnomonError as error:
                trials[schedule] = replace(trial, error=str(error).splitlines()[0])
                continue
            outputs = [r.copy() for r in results]
            if reference is None:
                reference = outputs
            else:
                worst = max(_relative_l2(o, r) for o, r in zip(outputs, reference, strict=True))
                if not worst <= 1e-5:
                    trials[schedule] = replace(trial, error=f"results differ from the default's (rel. L2 {worst:.1e})")
                    continue
            calls.append((predicted, schedule, call))
            trials[schedule] = trial
        best: dict[ScheduleAttr, float] = {}
        for _ in range(ROUNDS):
            for _, schedule, call in calls:
                start = time.perf_counter()
                call()
                once = max(time.perf_counter() - start, 1e-7)
                seconds = median_time(call, max(5, min(1000, int(ROUND_SECONDS / once))))
                best[schedule] = min(best.get(schedule, seconds), seconds)
        return [replace(trials[s], measured_s=best.get(s)) for _, s in self.chosen if s in trials]

    def finish(self, trials: Sequence[Trial]) -> Entry | None:
        """The entry to store (the winner, or the default within the noise), its in-place variant compiled."""
        default = next((t for t in trials if t.schedule == str(self.default.schedule)), None)
        winner = best_trial(trials)
        measured = sum(t.measured_s is not None for t in trials)
        if default is None or default.measured_s is None or winner is None or winner.measured_s is None or measured < 2:
            return None  # nothing to compare the default with: the budget ran out
        default_s, best_s = default.measured_s, winner.measured_s
        if best_s > default_s * (1 - NOISE):
            winner, best_s = default, default_s
        in_place = _in_place(self.launch)
        chosen = next(s for _, s in self.chosen if str(s) == winner.schedule)
        if in_place is not None:
            self.compile(_with_schedule(self.default, chosen), in_place)
        return Entry(
            self.default.sym_name.data,
            winner.schedule,
            default.schedule,
            default_s,
            best_s,
            tuple(trials),
        )


def tune_program(
    program: Program,
    inputs: Sequence[np.ndarray],
    device: Device,
    database: TuningDatabase,
    *,
    budget_s: float,
    top: int = 4,
    lanes: int,
    retune: bool = False,
    progress: Progress | None = None,
) -> list[KernelResult]:
    """Tune `program`'s generated kernels on `inputs` within `budget_s` seconds; see the module's docstring.
    `device` prices the candidates; `top`: how many besides the default each kernel measures; `retune` measures
    kernels that the database has already."""
    program.load(inputs)
    program.run_in_place()
    deadline = time.monotonic() + budget_s
    order: list[tuple[int, str]] = []
    counts: dict[str, int] = {}
    for index, launch in enumerate(program.launches):
        if not launch.kernel.is_generated:
            continue
        key = kernel_key(launch.kernel)
        if key not in counts:
            order.append((index, key))
        counts[key] = counts.get(key, 0) + 1
    results: list[KernelResult] = []
    for done, (index, key) in enumerate(order):
        launch = program.launches[index]
        name = launch.kernel.sym_name.data
        if progress is not None:
            progress(done, len(order), name)
        cached = None if retune else database.lookup(key)
        if cached is not None:
            results.append(KernelResult(name, key, counts[key], cached[0], "cached"))
            continue
        if time.monotonic() > deadline:
            results.append(KernelResult(name, key, counts[key], None, "budget"))
            continue
        tuning = _Kernel(launch, device, lanes, top)
        if tuning.space == 1:
            results.append(KernelResult(name, key, counts[key], None, "untunable"))
            continue
        program.run_launches(index)
        entry = tuning.finish(tuning.measure(deadline))
        if entry is None:
            results.append(KernelResult(name, key, counts[key], None, "budget"))
            continue
        database.store(key, entry)
        results.append(KernelResult(name, key, counts[key], entry, "tuned"))
    if progress is not None:
        progress(len(order), len(order), "")
    return results
