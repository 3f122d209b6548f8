"""Large recomputation problems for Z3: windows of decisions searched in turn, the rest held at the best plan found.

The whole formulation has a term for every node live at every check point, quadratic in the graph: at a thousand
nodes building it takes longer than solving should. A window W of decisions only moves the liveness of W's nodes
and of the nodes they read (`A`); every other node's bytes at each check point, at each gap and in each forward
group are constants of the held plan (difference arrays over the points, a sparse product for the groups). A's
liveness changes only at a few check points (uses, copies), so one constraint per stretch between them, at its
busiest point, stands for all, and a constraint that cannot bind (its constants and every term within the budget)
is left out. Within a window a copy is made between the first point that a recomputation reading it may need it
and its own first backward use: no earlier (the whole-problem search allows that too). The encoding is SMT-LIB
text that Z3 parses once per window: a Python call into Z3 per term would take most of the time.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from gnomon.passes.graph_recompute.formulation import Formulation
from gnomon.passes.graph_recompute.heuristics import unsaved_chain

__all__ = ["HeldPlan", "binding_windows", "cheapest", "improve_window"]


class HeldPlan:
    """A plan in the formulation's terms (recomputed nodes, each copy's check point index) and, for it, every
    tracked node's live interval over the check points and bytes in each forward group."""

    def __init__(self, form: Formulation, plan: frozenset[int], starts: dict[int, int]) -> None:
        self.form = form
        self.plan = set(plan)
        self.starts = dict(starts)
        self.tracked = form.tracked()
        self.sizes = np.array([form.problem.nodes[c].size for c in range(len(form.problem.nodes))], dtype=np.int64)
        rows, cols = [], []
        for g, (_, kept) in enumerate(form.forward_groups):
            rows += [g] * len(kept)
            cols += kept
        from scipy.sparse import csr_array

        shape = (len(form.forward_groups), len(self.sizes))
        self.groups = csr_array((np.ones(len(rows), dtype=np.int64), (rows, cols)), shape=shape)
        self.group_most = np.array([most for most, _ in form.forward_groups], dtype=np.int64)
        self.refresh()

    def interval(self, c: int) -> tuple[int, int]:
        """The check points (first, last) at which `c` is live under the plan; last < first if none."""
        form = self.form
        last = form.last_use.get(c, -1)
        for u in form.decided_consumers[c]:
            if u in self.plan:
                last = max(last, self.starts[u])
        return (self.starts[c] if c in self.plan else 0), last

    def held(self, c: int) -> bool:
        """Whether keeping `c` holds its bytes past its forward uses (forward groups)."""
        if c in self.plan:
            return False
        return c in self.form.first_use or any(u in self.plan for u in self.form.decided_consumers[c])

    def refresh(self) -> None:
        count = len(self.form.points)
        live, both = np.zeros(count + 1, np.int64), np.zeros(count + 1, np.int64)
        for c in self.tracked:
            first, last = self.interval(c)
            if last >= first:
                live[first] += self.sizes[c]
                live[last + 1] -= self.sizes[c]
            if last - 1 >= first:
                both[first] += self.sizes[c]
                both[last] -= self.sizes[c]
        self.live_diff, self.both_diff = live, both
        self.held_bytes = np.array([self.sizes[c] if self.held(c) else 0 for c in range(len(self.sizes))], np.int64)

    def without(self, affected: set[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The bytes live under the plan at each check point, at each gap (live at both its ends; the gap's
        busiest step's other bytes included) and in each forward group, the `affected` nodes left out."""
        live_diff, both_diff = self.live_diff.copy(), self.both_diff.copy()
        for c in affected:
            first, last = self.interval(c)
            if last >= first:
                live_diff[first] -= self.sizes[c]
                live_diff[last + 1] += self.sizes[c]
            if last - 1 >= first:
                both_diff[first] -= self.sizes[c]
                both_diff[last] += self.sizes[c]
        form, count = self.form, len(self.form.points)
        at_points = np.array(form.fixed, dtype=np.int64)[list(form.points)] + np.cumsum(live_diff)[:count]
        no_gap = np.iinfo(np.int64).min // 4  # adjacent points: no step between them to constrain
        gap_base = np.array([base if step >= 0 else no_gap for step, base in form.gaps] + [0], dtype=np.int64)
        at_gaps = (gap_base + np.cumsum(both_diff)[:count])[: count - 1]
        outside = self.held_bytes.copy()
        outside[list(affected)] = 0
        return at_points, at_gaps, self.group_most + self.groups @ outside

    def cost(self, nodes: list[int], cost: dict[int, int]) -> int:
        return sum(cost[c] for c in nodes if c in self.plan)


def cheapest(
    solver: Any, terms: list[tuple[Any, int]], high: int, remaining_ms: Callable[[], int], tolerance: float
) -> tuple[Any, int, bool]:
    """Binary search on `sum(weight for literal, weight in terms if literal) <= k` below `high` (a plan known to
    cost that much), to within `tolerance` of the cheapest (0: exactly): (the cheapest model found or None, the
    largest cost proven to have no plan or -1, whether the search got there before the time limit).
    It first asks for anything cheaper than `high` by the tolerance (or 0.1%): a good plan is often proven so at
    once."""
    import z3

    low, best = -1, None

    def open_gap() -> bool:
        return low + 1 < high and high - low > int(high * tolerance)

    first = True
    while open_gap():
        middle = high - max(int(high * max(tolerance, 0.001)), 1) if first else (low + high) // 2
        first = False
        solver.push()
        solver.add(z3.PbLe(terms, middle))
        solver.set("timeout", remaining_ms())
        verdict = solver.check()
        if verdict == z3.sat:
            best = solver.model()
            high = sum(w for v, w in terms if z3.is_true(best.eval(v, model_completion=True)))
        solver.pop()
        if verdict == z3.unsat:
            low = middle
        elif verdict != z3.sat:
            break
    return best, low, not open_gap()


def binding_windows(held: HeldPlan, cost: dict[int, int], size: int, points: int = 3) -> list[list[int]]:
    """Windows that trade decisions across the whole graph at its busiest check points (consecutive windows only
    trade within a stretch of the forward pass): for each of the `points` busiest, pairs of a kept value live there
    (cheapest to recompute per byte first) and a recomputed one (dearest first), each with the unsaved chain it is
    recomputed from, until the window holds about `size` decisions."""
    form, plan = held.form, held.plan
    decided = set(form.decided)

    def chain(c: int) -> set[int]:
        return {c} | (unsaved_chain(form.problem, c) & decided)

    readers = [c for c in form.decided if c in form.first_use]
    at_points = held.without(set())[0]
    windows = []
    for point in np.argsort(-at_points, kind="stable")[:points]:
        live = [c for c in readers if c not in plan and held.interval(c)[0] <= point <= held.interval(c)[1]]
        keep = sorted(live, key=lambda c: sum(cost[m] for m in chain(c)) / max(form.problem.nodes[c].size, 1))
        drop = sorted((c for c in readers if c in plan), key=lambda c: -sum(cost[m] for m in chain(c) if m in plan))
        window: set[int] = set()
        for kept, recomputed in zip(keep, drop, strict=False):
            window |= chain(kept) | chain(recomputed)
            if len(window) >= size:
                break
        if window:
            windows.append(sorted(window))
    return windows


def improve_window(
    held: HeldPlan, window: list[int], budget: int, cost: dict[int, int], remaining_ms: Callable[[], int]
) -> tuple[bool, bool]:
    """Search `window` for a plan cheaper by more than 0.1% with everything else held; update `held` where one is
    found. Returns (improved, finished in time)."""
    import z3

    form = held.form
    count = len(form.points)
    inside = set(window)
    plan, starts = held.plan, held.starts
    affected = set(window) | {c for c in held.tracked if any(u in inside for u in form.decided_consumers[c])}

    # The check points where each window node's copy may be made (consumers come after what they read): from the
    # earliest chain point (a recomputation reading it, or its own first use) to its own first use.
    choices: dict[int, list[int]] = {}
    for c in sorted(window, reverse=True):
        limit = form.first_use.get(c, count)
        found = {form.first_use[c]} if c in form.first_use else set()
        for u in form.decided_consumers[c]:
            if u in inside:
                found.update(k for k in choices.get(u, ()) if k <= limit)
            elif u in plan and starts[u] <= limit:
                found.add(starts[u])
        if found:
            found.update(range(min(found), max(found) + 1))
            choices[c] = sorted(found)
    free = [c for c in window if c in choices]
    # Literals: Python's True and False where the held plan decides them, else SMT-LIB terms.
    names: list[str] = []
    asserts: list[str] = []

    def declare(name: str) -> str:
        names.append(name)
        return name

    x = {c: declare(f"x{c}") for c in free}
    by = {c: [declare(f"b{c}_{j}") for j in range(len(choices[c]))] for c in free}
    for c in free:
        asserts += [f"(=> {by[c][j]} {by[c][j + 1]})" for j in range(len(by[c]) - 1)]
        asserts.append(f"(= {by[c][-1]} {x[c]})")

    def both(a: str | bool, b: str | bool) -> str | bool:
        if a is False or b is False:
            return False
        if a is True or a == b:
            return b
        return a if b is True else f"(and {a} {b})"

    def negate(a: str | bool) -> str | bool:
        return (not a) if isinstance(a, bool) else f"(not {a})"

    def recomputed(c: int) -> str | bool:
        return x[c] if c in x else (c in plan and c not in inside)

    def started(c: int, i: int) -> str | bool:
        """The copy of c is made by point i."""
        if c in x:
            j = bisect.bisect_right(choices[c], i) - 1
            return by[c][j] if j >= 0 else False
        return c in plan and c not in inside and starts[c] <= i

    def kept_or_started(c: int, i: int) -> str | bool:
        if c in x:
            j = bisect.bisect_right(choices[c], i) - 1
            return f"(or (not {x[c]}) {by[c][j]})" if j >= 0 else f"(not {x[c]})"
        return c not in plan or c in inside or starts[c] <= i

    def still_to_start(u: int, i: int) -> str | bool:
        if u in x:
            return x[u] if i == 0 else both(x[u], negate(started(u, i - 1)))
        return u in plan and u not in inside and starts[u] >= i

    for c in affected:  # a copy is made no later than any recomputation that reads it
        for u in form.decided_consumers[c]:
            if c in x and u in x:
                for j, point in enumerate(choices[u]):
                    if point < choices[c][-1]:
                        asserts.append(f"(=> (and {x[c]} {by[u][j]}) {started(c, point)})")
            elif c in x and u in plan and u not in inside and starts[u] < choices[c][-1]:
                asserts.append(f"(=> {x[c]} {started(c, starts[u])})")
            elif u in x and c in plan and c not in inside:
                asserts += [f"(not {by[u][j]})" for j, point in enumerate(choices[u]) if point < starts[c]]

    lives: dict[tuple[str | bool, ...], str] = {}

    def live(c: int, i: int) -> str | bool:
        if c in form.first_use and form.first_use[c] <= i <= form.last_use[c]:
            return True
        kept = kept_or_started(c, i)
        if c in form.first_use and i < form.first_use[c]:
            return kept
        reasons = [r for r in (still_to_start(u, i) for u in form.decided_consumers[c]) if r is not False]
        if kept is False or not reasons:
            return False
        if any(r is True for r in reasons):
            return kept
        key = (kept, *sorted(map(str, reasons)))
        if key not in lives:
            lives[key] = declare(f"l{c}_{len(lives)}")
            asserts.extend(f"(=> {both(reason, kept)} {lives[key]})" for reason in reasons)
        return lives[key]

    at_points, at_gaps, at_groups = held.without(affected)

    changes = {0}
    for c in affected:
        if c in form.first_use:
            changes.update((form.first_use[c], form.last_use[c] + 1))
        if c in x:
            for point in choices[c]:
                changes.update((point, point + 1))
        elif c in plan and c not in inside:
            changes.add(starts[c])
        for u in form.decided_consumers[c]:
            if u not in x and u in plan and u not in inside:
                changes.add(starts[u] + 1)
    bounds = [*sorted(p for p in changes if 0 <= p < count), count]
    constraints: dict[tuple[tuple[str, int], ...], int] = {}

    def require(terms: list[tuple[str | bool, int]], room: int) -> None:
        room -= sum(size for lit, size in terms if lit is True)
        varying = tuple(sorted((lit, size) for lit, size in terms if isinstance(lit, str)))
        if sum(size for _, size in varying) > room and constraints.get(varying, room + 1) > room:
            constraints[varying] = room

    ordered = sorted(affected)
    sizes = {c: int(held.sizes[c]) for c in ordered}
    previous: list[str | bool] | None = None
    for start, end in itertools.pairwise(bounds):
        here = [live(c, start) for c in ordered]
        terms = [(lit, sizes[c]) for c, lit in zip(ordered, here, strict=True)]
        require(terms, budget - int(at_points[start:end].max()))
        if end - 1 > start:  # gaps with both ends inside the stretch
            require(terms, budget - int(at_gaps[start : end - 1].max()))
        if previous is not None and form.gaps[start - 1][0] >= 0:  # the gap across the stretches' border
            crossing = []
            for c, left, right in zip(ordered, previous, here, strict=True):
                joint = both(left, right)
                if isinstance(joint, str) and joint not in (left, right):
                    # A variable the pair implies: a conjunction inside a sum would not propagate.
                    if (joint,) not in lives:
                        lives[(joint,)] = declare(f"j{c}_{len(lives)}")
                        asserts.append(f"(=> {joint} {lives[(joint,)]})")
                    joint = lives[(joint,)]
                crossing.append((joint, sizes[c]))
            require(crossing, budget - int(at_gaps[start - 1]))
        previous = here

    holds: dict[int, str | bool] = {}
    for c in affected:
        if c in plan and c not in inside:
            holds[c] = False
        elif c not in x and (c in form.first_use or any(recomputed(u) is True for u in form.decided_consumers[c])):
            holds[c] = True
        else:
            reasons = [r for r in map(recomputed, form.decided_consumers[c]) if r is not False]
            if c in form.first_use:
                reasons.append(True)
            if not reasons:
                holds[c] = False
                continue
            holds[c] = declare(f"h{c}")
            asserts.extend(f"(=> {both(reason, negate(recomputed(c)))} {holds[c]})" for reason in reasons)
    for g, (_, kept) in enumerate(form.forward_groups):
        require([(holds[c], sizes[c]) for c in kept if c in affected], budget - int(at_groups[g]))

    for varying, room in constraints.items():
        if room < 0:  # the held plan leaves no room the window could make
            return False, True
        weights = " ".join(str(size) for _, size in varying)
        asserts.append(f"((_ pble {room} {weights}) {' '.join(lit for lit, _ in varying)})")
    solver = z3.SolverFor("QF_FD")
    text = "".join(f"(declare-const {name} Bool)" for name in names)
    solver.from_string(text + "".join(f"(assert {a})" for a in asserts))
    chosen = {c: z3.Bool(x[c]) for c in free}
    terms = [(chosen[c], cost[c]) for c in free]
    best, _, finished = cheapest(solver, terms, held.cost(window, cost), remaining_ms, 0.001)
    if best is None:
        return False, finished
    for c in window:
        plan.discard(c)
        starts.pop(c, None)
    for c in free:
        if z3.is_true(best.eval(chosen[c], model_completion=True)):
            plan.add(c)
            starts[c] = next(
                point
                for point, name in zip(choices[c], by[c], strict=True)
                if z3.is_true(best.eval(z3.Bool(name), model_completion=True))
            )
    held.refresh()
    return True, finished
