"""The recomputation problem as constraints over a few check points, shared by the exact solvers (Z3, MILP).

`evaluate`'s rules make every live range in the backward pass an interval whose ends are check points: a kept
node's starts at the backward pass's first step, a recomputed node's at some node's first backward use (where the
chain of recomputations it feeds starts), and each ends at a last backward use or at such a start. So between two
consecutive check points the decision-dependent part of memory is what is live at both: the constraints are the
memory at each check point, at the busiest step strictly between two of them (those live at both ends), and at
each forward step (grouped by which kept nodes are live there).

The decisions: `x[c]` (recompute node c) for the `decided` nodes, recomputable nodes that the backward pass reads or
whose consumers may be recomputed; and, for each, the check point its copy is made at (`start[c]`, at most its
first backward use, and no later than the start of any recomputed node that reads it). Check point indices replace
steps, so a formulation of n nodes has O(n) decisions and O(n) points.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from gnomon.passes.graph_recompute.problem import Problem

__all__ = ["ExactResult", "Formulation", "formulate", "live_rule"]


@dataclass(frozen=True)
class Formulation:
    problem: Problem
    fixed: tuple[int, ...]
    """Bytes live at each step whatever the plan: `Problem.base` and the nodes the step returns."""
    points: tuple[int, ...]
    """The backward check points (steps), ascending."""
    gaps: tuple[tuple[int, int], ...]
    """For each pair of consecutive points (i, i + 1): the step strictly between them with the most `base` bytes,
    and those bytes; (-1, 0) where the two are adjacent steps."""
    decided: tuple[int, ...]
    """The nodes with a decision, ascending."""
    first_use: dict[int, int]
    """Node -> index into `points` of its first backward use (nodes the backward pass reads)."""
    last_use: dict[int, int]
    """Node -> index into `points` of its last backward use."""
    decided_consumers: dict[int, tuple[int, ...]]
    """Node -> its consumers that have a decision."""
    tail: int
    """The most bytes live at a step after the last check point (the outputs at the end included): no plan
    changes them."""
    forward_groups: tuple[tuple[int, tuple[int, ...]], ...]
    """(the most fixed bytes at a forward step, the nodes whose keeping is live there) for each distinct set of
    nodes past their last forward use at a forward step."""

    def tracked(self) -> list[int]:
        """The nodes whose backward live range a plan may change: read in the backward pass, or by a node with a
        decision."""
        return [i for i in range(len(self.problem.nodes)) if i in self.first_use or self.decided_consumers[i]]


def formulate(problem: Problem, min_bytes: int = 0) -> Formulation:
    """The formulation of `problem`; recomputable nodes smaller than `min_bytes` are always kept (fewer decisions;
    what it gives up is at most their bytes at the peak)."""
    nodes, steps = problem.nodes, problem.steps
    returned = {i for i, n in enumerate(nodes) if n.backward_uses and n.backward_uses[-1] >= steps}
    readable = [i for i, n in enumerate(nodes) if n.backward_uses and i not in returned]
    fixed = list(problem.base)
    for index in returned:  # live from its step to the end whatever the plan
        for step in range(nodes[index].step, steps + 1):
            fixed[step] += nodes[index].size
    decided: set[int] = set()
    for index in range(len(nodes) - 1, -1, -1):
        node = nodes[index]
        if not node.recomputable or index in returned or node.size < min_bytes:
            continue
        if index in readable or any(c in decided for c in problem.consumers[index]):
            decided.add(index)
    point_steps = {problem.boundary + 1}
    for index in readable:
        point_steps.update((nodes[index].backward_uses[0], nodes[index].backward_uses[-1]))
    points = tuple(sorted(s for s in point_steps if problem.boundary < s < steps))
    gaps: list[tuple[int, int]] = []
    for left, right in itertools.pairwise(points):
        inside = range(left + 1, right)
        busiest = max(inside, key=lambda s: fixed[s], default=-1)
        gaps.append((busiest, fixed[busiest] if busiest >= 0 else 0))
    index_of = {step: i for i, step in enumerate(points)}
    first_use = {i: index_of[nodes[i].backward_uses[0]] for i in readable}
    last_use = {i: index_of[nodes[i].backward_uses[-1]] for i in readable}
    decided_consumers = {
        i: () if i in returned else tuple(c for c in problem.consumers[i] if c in decided) for i in range(len(nodes))
    }
    forward_groups = _forward_groups(problem, fixed, decided_consumers, set(readable), returned)
    tail = max(fixed[points[-1] + 1 :], default=0)
    return Formulation(
        problem, tuple(fixed), points, tuple(gaps), tuple(sorted(decided)), first_use, last_use, decided_consumers,
        tail, forward_groups,
    )  # fmt: skip


def _forward_groups(
    problem: Problem,
    fixed: list[int],
    decided_consumers: dict[int, tuple[int, ...]],
    readable: set[int],
    returned: set[int],
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """At each forward step: the fixed bytes (`base` and the nodes within their forward range) and the nodes past
    their last forward use that a plan may keep live; steps with the same such nodes share one constraint at their
    largest fixed bytes."""
    nodes = problem.nodes
    keepable = [i for i in range(len(nodes)) if i in readable or decided_consumers[i]]
    ends = sorted((nodes[i].forward_last, i) for i in keepable)
    within = [0] * (problem.boundary + 2)  # the nodes within their forward range, as a difference array
    for index, node in enumerate(nodes):
        if node.step <= problem.boundary and index not in returned:
            within[node.step] += node.size
            within[min(node.forward_last, problem.boundary) + 1] -= node.size
    groups: dict[tuple[int, ...], int] = {}
    live = 0
    for step in range(problem.boundary + 1):
        live += within[step]
        at_step = fixed[step] + live
        past = ends[: bisect.bisect_left(ends, (step, -1))]
        kept = tuple(sorted(i for _, i in past if nodes[i].step <= step))
        groups[kept] = max(groups.get(kept, 0), at_step)
    return tuple((most, kept) for kept, most in groups.items())


@dataclass(frozen=True)
class ExactResult:
    plan: frozenset[int] | None
    """The nodes to recompute; None when no plan was found (infeasible, or none found in time)."""
    starts: dict[int, int]
    """Each recomputed node's step: its copy is made just before it (`evaluate`'s `starts`)."""
    status: str
    """`optimal`, `windows of N` (Z3: no window of N decisions has a cheaper plan), `feasible` (the time limit ended the
    search), `infeasible`, or `unknown` (no plan in time)."""
    bound_s: float | None
    """A proven lower bound on the optimum's extra time, where the solver gives one."""
    solve_s: float


def live_rule(form: Formulation, node: int, i: int) -> str:
    """Which rule makes `node` live at check point `i`: `always` (its own backward uses span i), `before` (i precedes
    its first backward use: live if kept or its copy was made by i), `consumers` (live while a recomputation that
    reads it is still to come, and it is kept or its copy was made)."""
    if node in form.first_use and form.first_use[node] <= i <= form.last_use[node]:
        return "always"
    if node in form.first_use and i < form.first_use[node]:
        return "before"
    return "consumers"
