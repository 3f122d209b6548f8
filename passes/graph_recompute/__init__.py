"""`graph-recompute{budget=... solver=z3|milp|greedy|sqrt|none time-limit=...}`: recompute forward values in the
backward pass of a training step so that its peak memory fits a budget, at the least predicted extra time.

It runs after `graph-fuse`, on the kernels `graph-to-kernel` will build: each forward kernel whose results the
backward pass reads is kept, or launched again just before the first step that needs it (recomputations chain: a
copy may be made from other copies). The memory is the arena's: every kernel's results from the step that writes
them to the last that reads them, on the step's real schedule, including the inputs a recomputation keeps alive
(`gnomon.passes.graph_recompute.problem`). The extra time is the recomputed kernels' predicted launches
(`gnomon.cost`, as `graph-fuse` prices kernels). The solvers:

- `z3`: the exact choice over keep/recompute decisions and where each copy is made (`formulation`, `z3_solver`), with
  Z3's finite-domain solver and a binary search on the cost, from the greedy plan (or the least-memory plan, or
  Z3's first); on a large problem by windows of decisions, the rest held (`z3_windows`), that grow while time
  remains, then the whole problem where it is small enough. At its time limit it returns the best plan found, and
  its status says how far the search got.
- `milp`: the same problem as a MILP solved by HiGHS (scipy), the reference.
- `greedy`: XLA-style rematerialization at the peak; `sqrt`: Chen et al.'s sqrt(n) checkpoints (budget-blind);
  `none`: keep everything (reports the peak).

The budget is bytes (`budget=268435456`, or with a unit: `256MiB`) or a share of the peak without recomputation
(`budget=40%`). The cloned kernels carry `gnomon.recompute`, as does the function (`RECOMPUTE_ATTR`: the solver,
its status, the budget, both peaks, the predicted overhead, the solve time and the gap). A budget below every plan
found is an error naming the smallest budget found feasible.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr, IntegerAttr, ModuleOp, StringAttr, f64, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.errors import GnomonError
from gnomon.passes.graph_fuse import AUTO_DEVICE, Fuser, fusion_device
from gnomon.passes.graph_recompute.formulation import formulate
from gnomon.passes.graph_recompute.heuristics import greedy, sqrt_checkpoints
from gnomon.passes.graph_recompute.milp import solve_milp
from gnomon.passes.graph_recompute.problem import Evaluation, Problem, evaluate
from gnomon.passes.graph_recompute.schedule import Schedule, read_schedule, view_source
from gnomon.passes.graph_recompute.z3_solver import first_plan, solve_z3
from gnomon.passes.graph_to_kernel import FUSION_ATTR, Group, fusion_group

__all__ = ["RECOMPUTE_ATTR", "SOLVER_NAMES", "GraphRecomputePass", "RecomputeError", "RecomputePlan", "parse_budget"]

RECOMPUTE_ATTR = "gnomon.recompute"
SOLVER_NAMES = ("z3", "milp", "greedy", "sqrt", "none")
MIN_SHARE = 1000
"""The exact solvers keep every node smaller than 1/MIN_SHARE of the budget: a decision about it moves less than
0.1% of the budget, and such nodes (a layer norm's row statistics) multiply the decisions."""
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


class RecomputeError(GnomonError):
    """No plan fits the budget, or the pass was given what it cannot take."""

    smallest_bytes: int | None = None
    """The smallest peak a plan found reaches, where the budget was below it."""


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """(bytes, None) or (None, share of the peak without recomputation) from `256MiB`, `268435456` or `40%`."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%|[kmg]i?b|b)?\s*", text.lower())
    if match is None:
        raise RecomputeError(f"memory budget {text!r}: expected bytes (268435456, 256MiB) or a share of the peak (40%)")
    number, unit = float(match.group(1)), match.group(2) or ""
    if unit == "%":
        if not 0 < number <= 100:
            raise RecomputeError(f"memory budget {text!r}: a share of the peak is between 0% and 100%")
        return None, number / 100
    if number <= 0:
        raise RecomputeError(f"memory budget {text!r}: must be more than 0 bytes")
    return math.floor(number * _UNITS[unit]), None


@dataclass(frozen=True)
class RecomputePlan:
    """What `graph-recompute` decided for one function."""

    solver: str
    status: str
    """`optimal`; `windows of N` (no window of N decisions, consecutive or trading at the busiest check points, the
    rest held, has a plan cheaper by more than 0.1%: a local optimum, not the whole problem's);
    `feasible` (the time limit ended the search: `gap`, where known, says how far from the bound); `fits` or
    `over budget` (a heuristic's plan); `greedy (...)` (the exact solver found no plan, in time or in its model, and
    the greedy plan fits)."""
    budget_bytes: int
    peak_bytes: int
    """The predicted peak of the arena with the plan."""
    peak_bytes_without_recompute: int
    predicted_overhead_s: float
    solve_s: float
    gap: float | None
    """(plan's extra time - proven bound) / plan's extra time, where the solver proved a bound."""
    recomputed: tuple[tuple[str, float], ...]
    """Each recomputed kernel's first op and location, and its predicted launch in seconds."""

    def attribute(self) -> DictionaryAttr:
        entries: dict[str, Attribute] = {
            "solver": StringAttr(self.solver),
            "status": StringAttr(self.status),
            "budget_bytes": IntegerAttr(self.budget_bytes, i64),
            "peak_bytes": IntegerAttr(self.peak_bytes, i64),
            "peak_bytes_without_recompute": IntegerAttr(self.peak_bytes_without_recompute, i64),
            "predicted_overhead_s": FloatAttr(self.predicted_overhead_s, f64),
            "solve_s": FloatAttr(self.solve_s, f64),
            "recomputed": ArrayAttr(
                [DictionaryAttr({"kernel": StringAttr(name), "predicted_s": FloatAttr(seconds, f64)})
                 for name, seconds in self.recomputed]
            ),
        }  # fmt: skip
        if self.gap is not None:
            entries["gap"] = FloatAttr(self.gap, f64)
        return DictionaryAttr(entries)


def _bytes(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"


def solve(
    problem: Problem, budget: int, solver: str, time_limit_s: float
) -> tuple[Evaluation, str, float, float | None]:
    """The plan `solver` picks for `budget`: its evaluation, status, solve time and gap."""
    started = time.perf_counter()
    if solver == "none":
        plan: frozenset[int] = frozenset()
    elif solver == "sqrt":
        plan = sqrt_checkpoints(problem)
    elif solver == "greedy":
        plan = greedy(problem, budget)
    else:
        form = formulate(problem, min_bytes=budget // MIN_SHARE)
        start = _starting_plan(problem, budget, set(form.decided)) if solver == "z3" else None
        left = max(time_limit_s - (time.perf_counter() - started), 0.1 * time_limit_s)  # the limit covers it all
        if solver == "z3":
            result = solve_z3(form, budget, left, start)
        else:
            result = solve_milp(form, budget, left)
        if result.plan is None:
            # The formulation leaves out what `evaluate` credits a plan with (a pointwise kernel writing over a
            # forward input that dies, nodes below `MIN_SHARE`): where it finds no plan, a greedy one may fit.
            fallback = evaluate(problem, greedy(problem, budget))
            if fallback.peak <= budget:
                return fallback, f"greedy ({solver}: {result.status})", time.perf_counter() - started, None
            if result.status == "infeasible":  # Z3 also looks for the smallest budget, in as long again at most
                raise _infeasible(problem, budget, time_limit_s if solver == "z3" else 0.0)
            raise RecomputeError(
                f"graph-recompute: {solver} found no plan for a budget of {budget} bytes in {time_limit_s:g} s, "
                f"and the greedy plan does not fit ({fallback.peak} bytes): give it more time or more memory"
            )
        found = settle(problem, result.plan, result.starts, budget)
        gap = None
        if result.bound_s is not None and found.extra_s > 0:
            gap = max(found.extra_s - result.bound_s, 0.0) / found.extra_s
        status = result.status if found.peak <= budget else "over budget"
        return found, status, time.perf_counter() - started, gap
    found = evaluate(problem, plan)
    return found, "fits" if found.peak <= budget else "over budget", time.perf_counter() - started, None


def _starting_plan(problem: Problem, budget: int, decided: set[int]) -> frozenset[int] | None:
    """A plan within `budget` that decides only `decided` nodes, for Z3 to start from: the greedy one, else the one
    with the least memory gnomon's heuristics find (Z3's windows then make it cheaper); None if neither fits."""
    for plan in (lambda: greedy(problem, budget), lambda: _least_memory(problem)[0]):
        chosen = plan() & decided
        if evaluate(problem, chosen).peak <= budget:
            return chosen
    return None


def _least_memory(problem: Problem) -> tuple[frozenset[int], Evaluation]:
    """The plan with the smallest peak the heuristics find: recomputing every candidate, or greedily down to
    nothing, whichever is lower."""
    every = frozenset(problem.candidates())
    least = greedy(problem, 0)
    return min(((every, evaluate(problem, every)), (least, evaluate(problem, least))), key=lambda p: p[1].peak)


def settle(problem: Problem, plan: frozenset[int], starts: dict[int, int], budget: int) -> Evaluation:
    """`plan` with each copy moved as late as the budget allows (an exact solver's starts are only as early as its
    constraints need, and often earlier than that): a later copy lives less long."""
    current = dict(starts)
    best = evaluate(problem, plan, current)
    for node in sorted(current, key=lambda n: -problem.nodes[n].step):
        trial = {k: v for k, v in current.items() if k != node}
        evaluation = evaluate(problem, plan, trial)
        if evaluation.peak <= max(budget, best.peak):
            current, best = trial, evaluation
    return best


def smallest_budget(problem: Problem, time_limit_s: float = 0.0) -> tuple[int, int]:
    """The smallest peak a plan gnomon can find reaches, and how many kernels it recomputes: recomputing every
    candidate, or greedily down to nothing, whichever is lower; then, given time, lower by a binary search of Z3
    feasibility checks (to within 1%) where the whole problem is small enough to encode."""
    started = time.perf_counter()
    best = _least_memory(problem)[1]
    low = max(formulate(problem).fixed) - 1  # no plan goes below the bytes no plan changes
    while best.peak - low > best.peak // 100:
        left = time_limit_s - (time.perf_counter() - started)
        if left <= 0:
            break
        trial = (low + best.peak) // 2
        found = first_plan(formulate(problem, min_bytes=trial // MIN_SHARE), trial, left)
        if found is None or found.status == "unknown":
            break
        evaluation = evaluate(problem, found.plan, found.starts) if found.plan is not None else None
        if evaluation is not None and evaluation.peak <= trial:
            best = evaluation
        else:
            low = trial
    return best.peak, len(best.recomputed)


def _infeasible(problem: Problem, budget: int, time_limit_s: float = 0.0) -> RecomputeError:
    peak, count = smallest_budget(problem, time_limit_s)
    error = RecomputeError(
        f"graph-recompute: no plan fits a budget of {budget} bytes: the smallest feasible budget found is {peak} "
        f"bytes ({_bytes(peak)}, recomputing {count} kernels)"
    )
    error.smallest_bytes = peak
    return error


def _clone_group(schedule: Schedule, node: int, copies: dict[SSAValue, SSAValue], at: Operation, group: int) -> None:
    """Clone the kernel ops that compute node `node` before `at`, reading the copies made so far, in kernel group
    `group`; the copy of the node's value is recorded in `copies` (the kernel's other results are left unused)."""
    value = schedule.values[node]
    made: dict[SSAValue, SSAValue] = {}
    for op in schedule.groups[schedule.problem.nodes[node].step].all_ops():
        clone = op.clone()
        Rewriter.insert_op(clone, InsertPoint.before(at))
        for index, operand in enumerate(op.operands):
            source = view_source(operand)
            if operand in made:
                clone.operands[index] = made[operand]
            elif source in copies:
                clone.operands[index] = _view_like(operand, copies[source], clone)
        fusion = op.attributes.get(FUSION_ATTR)
        if isinstance(fusion, DictionaryAttr):
            clone.attributes[FUSION_ATTR] = DictionaryAttr({**fusion.data, "group": IntegerAttr(group, i64)})
        clone.attributes[RECOMPUTE_ATTR] = StringAttr("copy")
        made.update(zip(op.results, clone.results, strict=True))
    copies[value] = made[value]


def _view_like(original: SSAValue, copy: SSAValue, before: Operation) -> SSAValue:
    """`copy` seen through the same reshapes as `original` is of its source (new reshapes placed before `before`)."""
    if not isinstance(original.owner, ReshapeOp):
        return copy
    inner = _view_like(original.owner.operands[0], copy, before)
    reshape = ReshapeOp.build(operands=[inner], result_types=[original.type])
    Rewriter.insert_op(reshape, InsertPoint.before(before))
    return reshape.result


def apply_plan(schedule: Schedule, evaluation: Evaluation) -> None:
    """Clone each recomputed node's kernel before the step that first needs it, and point the uses at or after that
    step at the copy (through the same views)."""
    next_group = 1 + max((g for op in schedule.step_of if (g := fusion_group(op)) is not None), default=-1)
    copies: dict[SSAValue, SSAValue] = {}
    by_step = sorted(evaluation.at.items(), key=lambda item: (item[1], item[0]))
    for node, step in by_step:
        _clone_group(schedule, node, copies, schedule.groups[step].all_ops()[0], next_group)
        next_group += 1
    for node, step in by_step:
        value = schedule.values[node]
        _redirect(schedule, value, copies[value], step)


def _redirect(schedule: Schedule, value: SSAValue, copy: SSAValue, from_step: int) -> None:
    """Make every reader of `value` (or of a view of it) at `from_step` or later read `copy` (or the same view)."""
    for use in list(value.uses):
        user = use.operation
        if isinstance(user, ReshapeOp):
            if not _read_from(schedule, user.result, from_step):
                continue
            view = ReshapeOp.build(operands=[copy], result_types=[user.result.type])
            Rewriter.insert_op(view, InsertPoint.after(copy.owner))  # pyright: ignore[reportArgumentType]
            _redirect(schedule, user.result, view.result, from_step)
            continue
        if schedule.step_of.get(user, -1) >= from_step:
            user.operands[use.index] = copy


def _read_from(schedule: Schedule, value: SSAValue, from_step: int) -> bool:
    for use in value.uses:
        user = use.operation
        if isinstance(user, ReshapeOp):
            if _read_from(schedule, user.result, from_step):
                return True
        elif schedule.step_of.get(user, -1) >= from_step:
            return True
    return False


@dataclass(frozen=True)
class GraphRecomputePass(ModulePass):
    """Recompute a training step's forward kernels in its backward pass to fit a memory budget."""

    name = "graph-recompute"

    budget: str = "100%"
    """Bytes (`268435456`, `256MiB`) or a share of the peak without recomputation (`40%`)."""

    solver: str = "z3"
    """`z3`, `milp`, `greedy`, `sqrt` or `none`."""

    time_limit: float = 10.0
    """Seconds an exact solver may search before it returns the best plan found."""

    device: str = AUTO_DEVICE
    """The device whose predicted kernel times price a recomputation, as `graph-fuse`'s option."""

    threads: int = 0
    """Threads per generated kernel, as `graph-to-kernel`'s option; 0 means all of this machine's cores."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.solver not in SOLVER_NAMES:
            raise RecomputeError(f"graph-recompute: unknown solver {self.solver!r}; one of {', '.join(SOLVER_NAMES)}")
        fuser = Fuser(fusion_device(self.device), self.threads or os.cpu_count() or 1)
        for function in op.ops:
            if isinstance(function, func.FuncOp) and function.body.blocks:
                plan = recompute(function, self.budget, self.solver, self.time_limit, fuser.price)
                function.attributes[RECOMPUTE_ATTR] = plan.attribute()


def recompute(
    function: func.FuncOp, budget: str, solver: str, time_limit_s: float, price: Callable[[Group], float]
) -> RecomputePlan:
    """Decide and apply `function`'s recomputations (see the module docstring)."""
    schedule = read_schedule(function, price)
    problem = schedule.problem
    without = evaluate(problem, ()).peak
    given, share = parse_budget(budget)
    budget_bytes = given if given is not None else math.floor(without * (share or 1.0))
    evaluation, status, solve_s, gap = solve(problem, budget_bytes, solver, time_limit_s)
    if status == "over budget" and solver == "greedy":
        raise _infeasible(problem, budget_bytes)
    apply_plan(schedule, evaluation)
    names = tuple((problem.nodes[i].name, problem.nodes[i].recompute_s) for i in sorted(evaluation.recomputed))
    return RecomputePlan(
        solver, status, budget_bytes, evaluation.peak, without, evaluation.extra_s, solve_s, gap, names
    )
