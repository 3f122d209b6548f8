"""Recomputation under a memory budget: every solver at 1/2 and 1/3 of the arena and at the smallest budget found
feasible, measured; then the exact solvers against each other on graphs of growing size.

    python bench/recompute.py [--models lstm,transformer,long_context,resnet] [--repeat 5] [--time-limit 10]
        [--no-scaling]

Part 1, per model (a 2-layer LSTM language model; transformer encoders of 6 and 4 layers, the second at a
4,096-token context; a ResNet-18-style CNN; all built from code; on request `explicit_attention`, GPT-2 small's
layers with the attention written out, about 1.2 s a step), trained with SGD with momentum, gradients released as
their parameter is updated: one row per solver and budget with the budget, the planned arena (measured: what the
runtime allocates) against the pass's predicted peak, the arena's reduction, the activation memory (the arena's
bytes live at the loss: what the forward pass leaves for the backward pass) and its reduction, the step's measured
time against the step without recomputation (each the smallest of `repeat` medians, the steps taking turns) and the
pass's predicted overhead, the solve time and the status.
`none` and `sqrt` do not look at the budget: one row each.

Part 2: the training graphs of transformer encoders of 1 to 40 layers (forward kernels' values, the nodes a plan
decides on, from about 30 to 1,000), each at half its peak: the greedy plan, Z3 at `--time-limit` and at 6x that,
and the MILP (HiGHS, 6x the time, up to `--milp-nodes`): the predicted extra time each plan costs, the solve times
and statuses, and Z3's gap to the MILP's plan and to its own with 6x the time. Run it alone on the machine: never
beside the tests or another benchmark.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from xdsl.dialects import func

import gnomon
from gnomon.errors import GnomonError
from gnomon.models import LSTMLanguageModel, ResNet18, TransformerEncoder
from gnomon.passes.graph_fuse import AUTO_DEVICE, Fuser, fusion_device
from gnomon.passes.graph_recompute import RecomputeError, solve
from gnomon.passes.graph_recompute.heuristics import greedy
from gnomon.passes.graph_recompute.problem import evaluate
from gnomon.passes.graph_recompute.schedule import read_schedule
from gnomon.pipeline import run_pipeline
from gnomon.recompute import RecomputeReport
from gnomon.training import TrainingExecutable, training_graph

LR, MOMENTUM = 0.01, 0.9
BUDGETED = ("z3", "milp", "greedy")
Batch = tuple[torch.Tensor, ...]


def models() -> dict[str, Callable[[], tuple[torch.nn.Module, Batch, str]]]:
    def lstm() -> tuple[torch.nn.Module, Batch, str]:
        model = LSTMLanguageModel(vocab=2000, hidden=128, layers=2, steps=35)
        return model, (model.example_inputs(32)[0], torch.randint(0, 2000, (32 * 35,))), "cross_entropy"

    def transformer() -> tuple[torch.nn.Module, Batch, str]:
        model = TransformerEncoder(layers=6, d_model=64, heads=4, seq=64)
        return model, (model.example_inputs(16)[0], torch.randn(16, 64, 64)), "mse"

    def long_context() -> tuple[torch.nn.Module, Batch, str]:
        # Flash attention's time grows with the sequence per token, its activations do not: recomputing the
        # projections and the MLP is a small share of this step, where it is a large one of `transformer`'s.
        model = TransformerEncoder(layers=4, d_model=128, heads=2, seq=4096)
        return model, (model.example_inputs(1)[0], torch.randn(1, 4096, 128)), "mse"

    def explicit_attention() -> tuple[torch.nn.Module, Batch, str]:
        # GPT-2 small's layer at its context, the attention written out: the probabilities are half the activations.
        model = TransformerEncoder(layers=4, d_model=768, heads=12, seq=1024, explicit_attention=True)
        return model, (model.example_inputs(1)[0], torch.randn(1, 1024, 768)), "mse"

    def resnet() -> tuple[torch.nn.Module, Batch, str]:
        model = ResNet18(width=16, classes=10, image=32).train()
        return model, (model.example_inputs(32)[0], torch.randint(0, 10, (32,))), "cross_entropy"

    return {
        "lstm": lstm,
        "transformer": transformer,
        "long_context": long_context,
        "explicit_attention": explicit_attention,
        "resnet": resnet,
    }


def compiled(model: torch.nn.Module, batch: Batch, loss: str, budget: float | int | None, solver: str,
             time_limit: float) -> TrainingExecutable:  # fmt: skip
    optimizer = gnomon.SGD(lr=LR, momentum=MOMENTUM)
    options: dict[str, Any] = {}
    if budget is not None:
        options = {"memory_budget": budget, "recompute": solver, "recompute_time_limit": time_limit}
    return gnomon.compile(
        gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer, keep_gradients=False, **options
    )


def saved(step: TrainingExecutable) -> int:
    """The activations the forward pass leaves for the backward pass: the arena's bytes live at the loss."""
    profile = step.memory()
    assert profile.forward_end is not None
    return profile.live[profile.forward_end]


def step_times(steps: list[TrainingExecutable], batch: Batch, repeat: int) -> list[float]:
    """Each step's time: the smallest of `repeat` medians of 5 steps, the steps taking turns."""
    inputs = [x.numpy() for x in batch]
    for step in steps:
        step.step(*inputs)
    medians: list[list[float]] = [[] for _ in steps]
    for _ in range(repeat):
        for index, step in enumerate(steps):
            times = []
            for _ in range(5):
                start = time.perf_counter()
                step.step(*inputs)
                times.append(time.perf_counter() - start)
            medians[index].append(statistics.median(times))
    return [min(m) for m in medians]


def smallest_feasible(model: torch.nn.Module, batch: Batch, loss: str, time_limit: float) -> int | None:
    """The smallest arena budget the pass finds feasible (Z3's error for a 1-byte budget says it)."""
    try:
        compiled(model, batch, loss, 1, "z3", time_limit)
    except RecomputeError as e:
        return e.smallest_bytes
    return None


def part_one(names: list[str], repeat: int, time_limit: float, shares: list[str], solvers: list[str]) -> None:
    for name in names:
        model, batch, loss = models()[name]()
        baseline = compiled(model, batch, loss, None, "none", time_limit)
        without = baseline.memory().arena
        smallest = smallest_feasible(model, batch, loss, time_limit)
        budgets: list[tuple[str, int]] = []
        for share in shares:
            if share == "smallest":
                if smallest is not None:
                    budgets.append((share, smallest))
                continue
            numerator, denominator = share.split("/")
            budgets.append((share, without * int(numerator) // int(denominator)))
        rows: list[tuple[str, str, RecomputeReport | None, str, TrainingExecutable | None]] = []
        for solver in ("none", "sqrt"):
            if solver not in solvers:
                continue
            step = compiled(model, batch, loss, without, solver, time_limit)
            rows.append((solver, "-", step.recompute, "", step))
        for label, budget in budgets:
            for solver in (s for s in BUDGETED if s in solvers):
                try:
                    step = compiled(model, batch, loss, budget, solver, time_limit)
                    rows.append((solver, label, step.recompute, "", step))
                except GnomonError as e:
                    rows.append((solver, label, None, str(e).split(": ", 1)[-1][:90], None))
        steps = [baseline, *(row[4] for row in rows if row[4] is not None)]
        times = dict(zip(map(id, steps), step_times(steps, batch, repeat), strict=True))
        base_s = times[id(baseline)]
        least = f"{smallest / 2**20:.2f} MiB" if smallest else "none"
        print(f"\n== {name}: arena without recomputation {without / 2**20:.2f} MiB, step {base_s * 1e3:.2f} ms "
              f"(smallest budget found feasible: {least})")  # fmt: skip
        saved_without = saved(baseline)
        print(f"{'solver':8} {'budget':>9} {'MiB':>7} {'arena MiB':>9} {'predicted':>9} {'less':>6} {'saved MiB':>9} "
              f"{'less':>6} {'step ms':>8} {'overhead':>8} {'predicted':>9} {'solve s':>7}  status")  # fmt: skip
        for solver, label, report, error, step in rows:
            if report is None or step is None:
                print(f"{solver:8} {label:>9}  {error}")
                continue
            step_s = times[id(step)]
            predicted = report.predicted_overhead_s / base_s
            kept = saved(step)
            print(f"{solver:8} {label:>9} {report.budget_bytes / 2**20:7.2f} {report.peak_bytes / 2**20:9.2f} "
                  f"{report.predicted_peak_bytes / 2**20:9.2f} {without / report.peak_bytes:5.2f}x "
                  f"{kept / 2**20:9.2f} {saved_without / max(kept, 1):5.2f}x "
                  f"{step_s * 1e3:8.2f} {step_s / base_s - 1:8.1%} {predicted:9.1%} {report.solve_s:7.2f}  "
                  f"{report.status}")  # fmt: skip


def part_two(layers: list[int], time_limit: float, milp_nodes: int) -> None:
    print("\n== exact solvers on transformer encoders' training graphs, budget 1/2 of the peak (extra ms of the plan, "
          "solve s, status)")  # fmt: skip
    print(f"{'layers':>6} {'nodes':>6} {'greedy':>7} {'z3':>7} {'s':>5} {'z3 status':>14} {'z3 6x':>7} "
          f"{'s':>5} {'z3 6x status':>14} {'milp 6x':>7} {'s':>5} {'milp status':>12} {'z3-milp':>8} "
          f"{'z3-z3 6x':>8}")  # fmt: skip
    for count in layers:
        model = TransformerEncoder(layers=count, d_model=32, heads=4, seq=32)
        batch = (model.example_inputs(8)[0], torch.randn(8, 32, 32))
        module, _ = training_graph(gnomon.with_loss(model, "mse"), batch, gnomon.SGD(lr=LR), keep_gradients=False)
        run_pipeline(module, "lowering", "encoder", spec="graph-layout,graph-fuse")
        function = next(op for op in module.ops if isinstance(op, func.FuncOp))
        problem = read_schedule(function, Fuser(fusion_device(AUTO_DEVICE), 2).price).problem
        budget = evaluate(problem, ()).peak // 2
        start = evaluate(problem, greedy(problem, budget))
        found: dict[str, tuple[float, float, str]] = {}
        for label, solver, limit in (("z3", "z3", time_limit), ("z3 6x", "z3", 6 * time_limit),
                                     ("milp", "milp", 6 * time_limit)):  # fmt: skip
            if solver == "milp" and len(problem.nodes) > milp_nodes:
                found[label] = (float("nan"), float("nan"), "not run")
                continue
            try:
                evaluation, status, seconds, _ = solve(problem, budget, solver, limit)
                found[label] = (evaluation.extra_s, seconds, status)
            except RecomputeError as e:
                found[label] = (float("nan"), float("nan"), str(e)[:12])
        z3_s, long_s, milp_s = found["z3"][0], found["z3 6x"][0], found["milp"][0]
        greedy_ms = start.extra_s * 1e3 if start.peak <= budget else float("nan")
        row = f"{count:6} {len(problem.nodes):6} {greedy_ms:7.3f}"
        for label in ("z3", "z3 6x", "milp"):
            extra_s, seconds, status = found[label]
            row += f" {extra_s * 1e3:7.3f} {seconds:5.1f} {status[:14]:>{12 if label == 'milp' else 14}}"
        print(f"{row} {_gap(z3_s, milp_s):>8} {_gap(z3_s, long_s):>8}", flush=True)


def _gap(ours: float, reference: float) -> str:
    return f"{(ours - reference) / reference:+.1%}" if reference == reference and reference > 0 else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="lstm,transformer,long_context,resnet")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds for Z3 (the MILP gets 6x)")
    parser.add_argument("--layers", default="1,2,4,8,16,40", help="part 2's encoder depths")
    parser.add_argument("--no-scaling", action="store_true", help="skip part 2")
    parser.add_argument("--no-models", action="store_true", help="skip part 1")
    parser.add_argument("--budgets", default="1/2,1/3,smallest", help="part 1's budgets: shares of the arena")
    parser.add_argument("--solvers", default="none,sqrt,z3,milp,greedy", help="part 1's solvers")
    parser.add_argument("--milp-nodes", type=int, default=300, help="part 2 runs the MILP up to this many nodes")
    args = parser.parse_args()
    if not args.no_models:
        part_one(args.models.split(","), args.repeat, args.time_limit, args.budgets.split(","), args.solvers.split(","))
    if not args.no_scaling:
        part_two([int(n) for n in args.layers.split(",")], args.time_limit, args.milp_nodes)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
