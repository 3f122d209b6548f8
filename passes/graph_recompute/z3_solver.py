"""The recomputation problem (`formulation`) for Z3's finite-domain solver: Booleans and pseudo-Boolean sums.

Each decided node has `x[c]` (recompute it) and an order encoding of the check point its copy is made at
(`by[c][i]`: made at point i or before, monotone in i, true at its first backward use exactly when recomputed), so
that "started by i" is one literal and "a consumer still to start at or after i" two. A node's liveness at a point
is a Boolean that clauses force true wherever a rule makes it live; each memory constraint is a pseudo-Boolean sum
of sizes. The cost is minimized by a binary search on `sum(cost[c] for recomputed c) <= k` (integer nanoseconds).
Problems of more than `WINDOW` decisions are searched first by windows of decisions (`z3_windows`), growing while
time remains; the whole problem last, where it is small enough to encode (`WHOLE_TERMS`).
"""

from __future__ import annotations

import time
from typing import Any

from gnomon.passes.graph_recompute.formulation import ExactResult, Formulation, live_rule
from gnomon.passes.graph_recompute.problem import evaluate
from gnomon.passes.graph_recompute.z3_windows import HeldPlan, binding_windows, cheapest, improve_window

__all__ = ["WINDOW", "first_plan", "solve_z3"]

NANOSECOND = 1e-9
"""The cost is integer nanoseconds of recomputation."""


def solve_z3(
    form: Formulation, budget: int, time_limit_s: float, incumbent: frozenset[int] | None = None
) -> ExactResult:
    """The cheapest plan within `budget`; `incumbent`, a plan known to fit (a heuristic's), bounds the search from
    above and is the answer if nothing cheaper is found in time; without one the search starts from Z3's first."""
    import z3

    problem, points = form.problem, form.points
    started_at = time.perf_counter()
    if form.tail > budget:
        return ExactResult(None, {}, "infeasible", None, time.perf_counter() - started_at)

    def remaining_ms() -> int:
        return max(int((time_limit_s - (time.perf_counter() - started_at)) * 1000), 1)

    cost = {c: round(problem.nodes[c].recompute_s / NANOSECOND) + 1 for c in form.decided}
    encoded = _encode(form, budget) if incumbent is None else None
    if encoded is not None:  # the first plan Z3 finds is where the search starts
        encoded[0].set("timeout", remaining_ms())
        verdict = encoded[0].check()
        if verdict != z3.sat:
            status = "infeasible" if verdict == z3.unsat else "unknown"
            return ExactResult(None, {}, status, None, time.perf_counter() - started_at)
        first = _result(encoded[0].model(), None, encoded[2], points, "", None, started_at)
        incumbent, placed = first.plan, first.starts
    else:
        placed = None
    searched = None
    if incumbent is not None and len(form.decided) > WINDOW:
        # Windows first, growing while time remains (each is cheap to encode, and a good plan makes the next
        # search short); where the whole problem is small enough to encode, its search comes last.
        incumbent, placed, searched, finished = _search_windows(form, budget, cost, incumbent, placed, remaining_ms)
        if not finished or _whole_terms(form) > WHOLE_TERMS:
            return ExactResult(incumbent, placed, searched, None, time.perf_counter() - started_at)
    encoded = encoded or _encode(form, budget)
    assert incumbent is not None
    opt, x, by = encoded
    for c in x:
        opt.set_initial_value(x[c], c in incumbent)
    result = _minimize_cost(opt, x, by, cost, points, remaining_ms, started_at, incumbent, searched)
    if result.plan == incumbent and not result.starts and placed:  # nothing cheaper: where its copies were
        return ExactResult(incumbent, placed, result.status, result.bound_s, result.solve_s)
    return result


def first_plan(form: Formulation, budget: int, time_limit_s: float) -> ExactResult | None:
    """Any plan within `budget` (status `feasible`), or none (`infeasible`, `unknown`): one check of the whole
    problem. None where the whole problem is too large to encode (`WHOLE_TERMS`)."""
    import z3

    started_at = time.perf_counter()
    if form.tail > budget:
        return ExactResult(None, {}, "infeasible", None, 0.0)
    if _whole_terms(form) > WHOLE_TERMS:
        return None
    solver, _, by = _encode(form, budget)
    solver.set("timeout", max(int((time_limit_s - (time.perf_counter() - started_at)) * 1000), 1))
    verdict = solver.check()
    if verdict != z3.sat:
        status = "infeasible" if verdict == z3.unsat else "unknown"
        return ExactResult(None, {}, status, None, time.perf_counter() - started_at)
    return _result(solver.model(), None, by, form.points, "feasible", None, started_at)


def _encode(form: Formulation, budget: int) -> tuple[Any, dict[int, Any], dict[int, list[Any]]]:
    """The whole problem for Z3: (solver, x, by)."""
    import z3

    problem, points = form.problem, form.points
    opt = z3.SolverFor("QF_FD")  # Booleans and pseudo-Boolean sums: Z3's SAT core with cardinality reasoning
    decided = set(form.decided)
    x = {c: z3.Bool(f"x{c}") for c in form.decided}
    # Order encoding of each copy's check point: by[c][i] = "the copy of c is made at point i or before".
    by = {c: [z3.Bool(f"by{c}_{i}") for i in range(form.first_use.get(c, len(points) - 1) + 1)] for c in form.decided}
    for c in form.decided:
        for i in range(len(by[c]) - 1):
            opt.add(z3.Implies(by[c][i], by[c][i + 1]))
        opt.add(by[c][-1] == x[c])
        for u in form.decided_consumers[c]:
            for i in range(min(len(by[c]), len(by[u]))):
                opt.add(z3.Implies(z3.And(x[c], by[u][i]), by[c][i]))

    true, false = z3.BoolVal(True), z3.BoolVal(False)
    memo: dict[tuple[str, int, int], Any] = {}  # each expression built once: building dominates big solves

    def started(c: int, i: int) -> z3.BoolRef:
        return by[c][min(i, len(by[c]) - 1)]

    def still_to_start(u: int, i: int) -> z3.BoolRef:
        if i >= len(by[u]):
            return false
        if ("still", u, i) not in memo:
            memo[("still", u, i)] = x[u] if i == 0 else z3.And(x[u], z3.Not(by[u][i - 1]))
        return memo[("still", u, i)]

    def kept_or_started(c: int, i: int) -> z3.BoolRef:
        if c not in decided:
            return true
        key = ("kept", c, min(i, len(by[c]) - 1))
        if key not in memo:
            memo[key] = z3.Or(z3.Not(x[c]), started(c, i))
        return memo[key]

    live_of: dict[tuple[int, int], z3.BoolRef] = {}

    def live(c: int, i: int) -> z3.BoolRef:
        """A Boolean that the constraints force true wherever the node is live at point i."""
        if (c, i) in live_of:
            return live_of[(c, i)]
        rule = live_rule(form, c, i)
        if rule == "always" or (rule == "before" and c not in decided):
            value = true
        elif rule == "consumers" and not form.decided_consumers[c]:
            value = false
        elif rule == "before":
            value = kept_or_started(c, i)  # an expression already: no variable of its own
        else:
            value = z3.Bool(f"live{c}_{i}")
            for u in form.decided_consumers[c]:
                opt.add(z3.Implies(z3.And(still_to_start(u, i), kept_or_started(c, i)), value))
        live_of[(c, i)] = value
        return value

    tracked = form.tracked()
    sizes = {c: problem.nodes[c].size for c in tracked}
    for i, step in enumerate(points):
        _add_memory(opt, [(live(c, i), sizes[c]) for c in tracked], budget - form.fixed[step])
    for i, (step, base) in enumerate(form.gaps):
        if step < 0:
            continue
        terms = []
        for c in tracked:
            left, right = live(c, i), live(c, i + 1)
            if z3.is_false(left) or z3.is_false(right):
                continue
            if z3.is_true(left) or (live_rule(form, c, i) == "before" and live_rule(form, c, i + 1) != "consumers"):
                # Before its first backward use a node's liveness only grows (kept, or its copy made by then), so
                # live at both ends is live at the left one; and where the left end is certain, the right one.
                terms.append((right if z3.is_true(left) else left, sizes[c]))
                continue
            if z3.is_true(right):
                terms.append((left, sizes[c]))
                continue
            both = z3.Bool(f"both{c}_{i}")
            opt.add(z3.Implies(z3.And(left, right), both))
            terms.append((both, sizes[c]))
        _add_memory(opt, terms, budget - base)
    for most, kept in form.forward_groups:
        terms = []
        for c in kept:
            if c in form.first_use and c not in decided:
                terms.append((true, sizes[c]))
                continue
            held = z3.Bool(f"held{c}")
            if c in form.first_use:
                opt.add(z3.Implies(z3.Not(x[c]), held))
            for u in form.decided_consumers[c]:
                opt.add(z3.Implies(z3.And(x[u], z3.Not(x[c])) if c in decided else x[u], held))
            terms.append((held, sizes[c]))
        _add_memory(opt, terms, budget - most)
    return opt, x, by


WINDOW = 24
"""The decisions one Z3 search first takes at a time on a larger problem (`z3_windows`): the others are held at the
best plan found, and windows of consecutive forward nodes (overlapping by half), and windows trading decisions at
the busiest check points (`binding_windows`), are searched in turn until a pass finds nothing cheaper (a large
neighbourhood search); then windows twice as large, and so on while time remains. The status names the largest
windows searched through."""

WHOLE_TERMS = 40_000
"""After the windows, the whole problem is searched (and its optimum proven) only where its memory constraints have
at most this many terms (nodes live at check points): building the encoding is O(terms) Z3 calls, about 5 s per
100,000. Where no heuristic plan fits, Z3's first plan comes from the whole problem whatever its size."""


def _search_windows(
    form: Formulation, budget: int, cost: dict[int, int], incumbent: frozenset[int], placed: dict[int, int] | None,
    remaining_ms: Any,
) -> tuple[frozenset[int], dict[int, int], str, bool]:  # fmt: skip
    """The large neighbourhood search by windows from `incumbent` (its copies at the steps `placed`, or where
    `evaluate` puts them): (plan, each copy's step, status, whether the search finished before the time limit)."""
    problem, points = form.problem, form.points
    index_of = {step: i for i, step in enumerate(points)}
    if placed is None:
        placed = evaluate(problem, incumbent).at
    held = HeldPlan(form, frozenset(placed), {c: index_of[step] for c, step in placed.items()})
    order = list(form.decided)
    size, finished, searched = WINDOW, True, 0
    while finished and size < len(order):
        windows = [order[i : i + size] for i in range(0, len(order), size // 2)]
        improved = True
        while improved and finished:
            improved = False
            for window in [*windows, *binding_windows(held, cost, size)]:
                better, finished = improve_window(held, window, budget, cost, remaining_ms)
                improved |= better
                if not finished:
                    break
        if finished:
            searched = size
            size *= 2
    plan = frozenset(held.plan)
    status = f"windows of {searched}" if searched else "feasible"
    return plan, {c: points[held.starts[c]] for c in plan}, status, finished


def _whole_terms(form: Formulation) -> int:
    """How many terms the whole problem's memory constraints have, about: each tracked node at each check point up
    to its last backward use or its last consumer's."""
    last = {c: form.last_use.get(c, -1) for c in form.tracked()}
    for c in form.decided:
        for source in form.problem.nodes[c].inputs:
            if source in last:
                last[source] = max(last[source], form.first_use.get(c, len(form.points) - 1))
    return sum(end + 1 for end in last.values())


def _minimize_cost(
    solver: Any, x: dict[int, Any], by: dict[int, list[Any]], cost: dict[int, int], points: tuple[int, ...],
    remaining_ms: Any, started_at: float, incumbent: frozenset[int], searched: str | None,
) -> ExactResult:  # fmt: skip
    """The cheapest plan, by binary search on the recomputations' total cost (integer nanoseconds) with Z3's
    finite-domain solver over the whole problem: each probe adds `sum(cost[c] for recomputed c) <= k` and asks for a
    plan. The smallest k with a plan is the optimum, and the largest without one a proven bound. `searched` is the
    windows' status where they ran before."""
    import z3

    terms = [(x[c], cost[c]) for c in x]

    def chosen(model: Any) -> frozenset[int]:
        return frozenset(c for c in x if z3.is_true(model.eval(x[c], model_completion=True)))

    model, low, finished = cheapest(solver, terms, sum(cost[c] for c in incumbent), remaining_ms, 0.0)
    plan = chosen(model) if model is not None else incumbent
    status = "optimal" if finished else (searched or "feasible")
    return _result(model, plan, by, points, status, (low + 1) * NANOSECOND if low >= 0 else None, started_at)


def _result(
    model: Any, plan: frozenset[int] | None, by: dict[int, list[Any]], points: tuple[int, ...], status: str,
    bound_s: float | None, started_at: float,
) -> ExactResult:  # fmt: skip
    """The plan, with each copy's check point where a model gives them (else `evaluate` places them)."""
    import z3

    starts: dict[int, int] = {}
    in_model = frozenset(c for c in by if z3.is_true(model.eval(by[c][-1], model_completion=True))) if model else None
    plan = in_model if plan is None else plan
    assert plan is not None
    if model is not None and plan == in_model:
        for c in plan:
            starts[c] = points[next(i for i, b in enumerate(by[c]) if z3.is_true(model.eval(b, model_completion=True)))]
    return ExactResult(plan, starts, status, bound_s, time.perf_counter() - started_at)


def _add_memory(opt: object, terms: list[tuple[object, int]], room: int) -> None:
    """sum(size for live, size in terms if live) <= room, as a pseudo-Boolean constraint."""
    import z3

    fixed = sum(size for live, size in terms if z3.is_true(live))  # pyright: ignore[reportArgumentType]
    varying = [(live, size) for live, size in terms if not z3.is_true(live) and not z3.is_false(live)]  # pyright: ignore
    if not varying:
        if fixed > room:
            opt.add(z3.BoolVal(False))  # pyright: ignore[reportAttributeAccessIssue]
        return
    opt.add(z3.PbLe(varying, room - fixed))  # pyright: ignore[reportAttributeAccessIssue]
