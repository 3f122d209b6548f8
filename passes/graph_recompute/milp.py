"""The recomputation problem (`formulation`) as a MILP for scipy's HiGHS: the reference for Z3's plans.

Each decided node has a binary `x[c]` and one-hot binaries `z[c][j]` (its copy is made at check point j), so that
"started by point i" and "some consumer still to start at or after i" are sums; a node's liveness at a point is a
continuous variable bounded below by what makes it live, and each memory constraint is a linear sum of sizes.
"""

from __future__ import annotations

import time

from gnomon.passes.graph_recompute.formulation import ExactResult, Formulation, live_rule

__all__ = ["solve_milp"]


def solve_milp(form: Formulation, budget: int, time_limit_s: float) -> ExactResult:
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    problem, points = form.problem, form.points
    started_at = time.perf_counter()
    if form.tail > budget:
        return ExactResult(None, {}, "infeasible", None, time.perf_counter() - started_at)
    columns: list[tuple[float, bool]] = []  # (objective, integer)

    def column(objective: float = 0.0, integer: bool = True) -> int:
        columns.append((objective, integer))
        return len(columns) - 1

    decided = set(form.decided)
    x = {c: column(problem.nodes[c].recompute_s) for c in form.decided}
    z = {c: [column() for _ in range(form.first_use.get(c, len(points) - 1) + 1)] for c in form.decided}
    rows: list[tuple[dict[int, float], float, float]] = []  # (coefficients, lower, upper)

    def row(coefficients: dict[int, float], lower: float, upper: float) -> None:
        rows.append((coefficients, lower, upper))

    def started(c: int, i: int) -> dict[int, float]:
        return {j: 1.0 for j in z[c][: i + 1]}

    def still_to_start(u: int, i: int) -> dict[int, float]:
        return {j: 1.0 for j in z[u][i:]}

    for c in form.decided:
        row({x[c]: -1.0, **{j: 1.0 for j in z[c]}}, 0.0, 0.0)  # one check point if recomputed
        for u in form.decided_consumers[c]:
            for i in range(min(len(z[c]), len(z[u]))):  # started(c, i) >= started(u, i) + x[c] - 1
                coefficients = {**started(c, i), x[c]: -1.0}
                for j, weight in started(u, i).items():
                    coefficients[j] = coefficients.get(j, 0.0) - weight
                row(coefficients, -1.0, np.inf)

    live: dict[tuple[int, int], int | bool] = {}  # a column, or a constant

    def live_of(c: int, i: int) -> int | bool:
        if (c, i) in live:
            return live[(c, i)]
        rule = live_rule(form, c, i)
        value: int | bool
        if rule == "always" or (rule == "before" and c not in decided):
            value = True
        elif rule == "consumers" and not form.decided_consumers[c]:
            value = False
        else:
            value = column(integer=False)
            if rule == "before":
                row({value: 1.0, x[c]: 1.0}, 1.0, np.inf)  # kept
                row({value: 1.0, **{j: -1.0 for j in started(c, i).keys()}}, 0.0, np.inf)
            else:
                for u in form.decided_consumers[c]:
                    later = still_to_start(u, i)
                    if c not in decided:
                        row({value: 1.0, **{j: -1.0 for j in later}}, 0.0, np.inf)
                        continue
                    row({value: 1.0, x[c]: 1.0, **{j: -1.0 for j in later}}, 0.0, np.inf)
                    both = {value: 1.0, **{j: -1.0 for j in later}}
                    for j in started(c, i):
                        both[j] = both.get(j, 0.0) - 1.0
                    row(both, -1.0, np.inf)
        live[(c, i)] = value
        return value

    tracked = form.tracked()
    sizes = {c: float(problem.nodes[c].size) for c in tracked}

    def memory_row(terms: list[tuple[int | bool, float]], room: float) -> None:
        coefficients: dict[int, float] = {}
        for term, size in terms:
            if term is True:
                room -= size
            elif term is not False:
                coefficients[term] = coefficients.get(term, 0.0) + size
        row(coefficients, -np.inf, room)

    for i, step in enumerate(points):
        memory_row([(live_of(c, i), sizes[c]) for c in tracked], budget - form.fixed[step])
    for i, (step, base) in enumerate(form.gaps):
        if step < 0:
            continue
        terms: list[tuple[int | bool, float]] = []
        for c in tracked:
            left, right = live_of(c, i), live_of(c, i + 1)
            if left is False or right is False:
                continue
            if left is True and right is True:
                terms.append((True, sizes[c]))
                continue
            both = column(integer=False)
            coefficients = {both: 1.0}
            ones = 0.0
            for end in (left, right):
                if end is True:
                    ones += 1.0
                else:
                    coefficients[end] = coefficients.get(end, 0.0) - 1.0
            row(coefficients, ones - 1.0, np.inf)
            terms.append((both, sizes[c]))
        memory_row(terms, budget - base)
    for fixed, kept in form.forward_groups:
        terms = []
        for c in kept:
            if c in form.first_use:
                terms.append((True, sizes[c]) if c not in decided else (column(integer=False), sizes[c]))
                if c in decided:
                    row({terms[-1][0]: 1.0, x[c]: 1.0}, 1.0, np.inf)  # pyright: ignore[reportArgumentType]
                continue
            needed = column(integer=False)
            for u in form.decided_consumers[c]:
                row({needed: 1.0, x[u]: -1.0, **({x[c]: 1.0} if c in decided else {})}, 0.0, np.inf)
            terms.append((needed, sizes[c]))
        memory_row(terms, budget - fixed)

    objective = np.array([c[0] for c in columns])
    integrality = np.array([1 if c[1] else 0 for c in columns])
    data, row_index, column_index, lower, upper = [], [], [], [], []
    for r, (coefficients, low, high) in enumerate(rows):
        for col, weight in coefficients.items():
            row_index.append(r)
            column_index.append(col)
            data.append(weight)
        lower.append(low)
        upper.append(high)
    if not columns:
        return ExactResult(frozenset(), {}, "optimal", 0.0, time.perf_counter() - started_at)
    constraints = []
    if rows:
        matrix = coo_array((data, (row_index, column_index)), shape=(len(rows), len(columns))).tocsr()
        constraints = [LinearConstraint(matrix, np.array(lower), np.array(upper))]  # pyright: ignore[reportArgumentType]
    result = milp(
        objective,
        integrality=integrality,
        bounds=Bounds(np.zeros(len(columns)), np.ones(len(columns))),  # pyright: ignore[reportArgumentType]
        constraints=constraints,
        options={"time_limit": time_limit_s, "mip_rel_gap": 1e-6},
    )
    elapsed = time.perf_counter() - started_at
    if result.status == 2:
        return ExactResult(None, {}, "infeasible", None, elapsed)
    if result.x is None:
        return ExactResult(None, {}, "unknown", None, elapsed)
    plan = frozenset(c for c in form.decided if result.x[x[c]] > 0.5)
    values: list[float] = [float(v) for v in result.x]
    starts = {c: points[max(range(len(z[c])), key=lambda j: values[z[c][j]])] for c in plan}
    bound = getattr(result, "mip_dual_bound", None)
    status = "optimal" if result.status == 0 else "feasible"
    return ExactResult(plan, starts, status, float(bound) if bound is not None else None, elapsed)
