"""`gnomon tune MODEL`: tune a model's generated kernels into the tuning database, and report what it measured.

The model compiles with default schedules; `tune_program` tunes each distinct generated kernel within the budget,
with a progress bar on a terminal's stderr. The report lists every kernel: how it ended (tuned, already in the
database, left at its default by the budget), its default and best measured times, the cost model's predicted
speedup beside the measured one, and the schedule kept. Last, the whole model runs with the default and the tuned
schedules, interleaved (smallest of several medians, spread shown), so that the effect on the model is measured
too. A later `gnomon compile` or `gnomon run` of the model finds every tuned kernel compiled in the kernel cache.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np

from gnomon.errors import GnomonError
from gnomon.passes.kernel_tuned_schedules.database import Entry, TuningDatabase
from gnomon.tuning.tuner import KernelResult, tune_program

if TYPE_CHECKING:
    from gnomon.runtime.executor import Program

__all__ = ["render", "tune_command"]

MODEL_ROUNDS = 7
MODEL_RUNS = 10


class _Bar:
    """`[#####.....] 5/17 kernels  conv_relu_conv_3`, redrawn in place; silent when stderr is not a terminal."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.live = stream.isatty()
        self.started = time.monotonic()

    def __call__(self, done: int, total: int, kernel: str) -> None:
        if not self.live:
            return
        width = 30
        filled = width * done // max(total, 1)
        elapsed = time.monotonic() - self.started
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} kernels {elapsed:5.0f} s  {kernel[:40]}"
        self.stream.write(f"\r{line:<100}")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


def _predicted_speedup(entry: Entry) -> float:
    default = next((t for t in entry.trials if t.schedule == entry.default), None)
    chosen = next((t for t in entry.trials if t.schedule == entry.schedule), None)
    if default is None or chosen is None or chosen.predicted_s <= 0:
        return 1.0
    return default.predicted_s / chosen.predicted_s


def render(results: Sequence[KernelResult]) -> str:
    lines = [
        f"{'kernel':<34} {'runs':>4} {'status':<9} {'tried':>5} {'default us':>10} {'tuned us':>9} "
        f"{'measured':>8} {'predicted':>9}  schedule"
    ]
    for r in results:
        e = r.entry
        if e is None:
            lines.append(f"{r.kernel[:34]:<34} {r.launches:>4} {r.status:<9}")
            continue
        tried = sum(t.measured_s is not None for t in e.trials)
        kept = " (the default)" if e.schedule == e.default else ""
        lines.append(
            f"{r.kernel[:34]:<34} {r.launches:>4} {r.status:<9} {tried:>5} {e.default_s * 1e6:>10.1f} "
            f"{e.best_s * 1e6:>9.1f} {e.speedup:>7.2f}x {_predicted_speedup(e):>8.2f}x  {e.schedule}{kept}"
        )
    counts = {s: sum(r.status == s for r in results) for s in ("tuned", "cached", "budget", "untunable")}
    lines.append(
        f"{len(results)} distinct generated kernels: {counts['tuned']} tuned now, {counts['cached']} from the tuning "
        f"database, {counts['budget']} left at their default by the budget, {counts['untunable']} with one schedule"
    )
    return "\n".join(lines)


def _model_times(default: Program, tuned: Program, arrays: list[np.ndarray]) -> tuple[list[float], list[float]]:
    """Medians of `MODEL_RUNS` runs of each program, per round, the two interleaved."""
    from gnomon.runtime.calibration.timing import median_time

    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(MODEL_ROUNDS):
        for program, found in ((default, times[0]), (tuned, times[1])):
            found.append(median_time(lambda program=program: program.run(arrays), MODEL_RUNS))
    return times


def tune_command(
    model: Path,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    budget_s: float,
    top: int,
    retune: bool,
    device: str,
    seed: int,
) -> None:
    from gnomon.context import gnomon_context
    from gnomon.executable import Executable, compile_model
    from gnomon.passes.graph_fuse import fusion_device
    from gnomon.passes.graph_to_kernel import host_vector_lanes
    from gnomon.passes.kernel_tuned_schedules import KernelTunedSchedulesPass
    from gnomon.run_report import random_inputs

    if not budget_s > 0:
        raise GnomonError(f"--budget-s {budget_s}: the budget is a positive number of seconds")
    if top < 1:
        raise GnomonError(f"--top {top}: at least one schedule besides the default must be measured")
    pricing = fusion_device(device)
    if pricing.kind != "cpu":
        raise GnomonError(f"--device {device}: tuning measures on this machine, so it prices on a CPU device")
    database = TuningDatabase()
    database.check_writable()
    executable = compile_model(model, input_shapes=input_shapes, device=device, tuned=False)
    program = executable.program
    assert program is not None
    arrays = random_inputs(executable, seed)
    print(f"tuning {model} on this machine; candidates priced on {pricing.provenance}", file=sys.stderr)
    results = tune_program(
        program,
        arrays,
        pricing,
        database,
        budget_s=budget_s,
        top=top,
        lanes=host_vector_lanes(),
        retune=retune,
        progress=_Bar(sys.stderr),
    )
    print(render(results))
    print(f"tuning database: {database.directory}")
    # The lowered program again, its kernels now taking the database's schedules: the pass, not a second import.
    module = executable.module.clone()
    KernelTunedSchedulesPass(database=str(database.directory)).apply(gnomon_context(), module)
    tuned = Executable(module)
    assert tuned.program is not None
    before, after = _model_times(program, tuned.program, arrays)
    best_before, best_after = min(before), min(after)

    def spread(times: list[float]) -> str:
        return f"spread {(max(times) / min(times) - 1):.0%}"

    print(
        f"model: default schedules {best_before * 1e3:.3f} ms ({spread(before)}), tuned {best_after * 1e3:.3f} ms "
        f"({spread(after)}): {best_before / best_after:.2f}x (smallest of {MODEL_ROUNDS} medians, interleaved; "
        f"median of medians {statistics.median(before) * 1e3:.3f} and {statistics.median(after) * 1e3:.3f} ms)"
    )
