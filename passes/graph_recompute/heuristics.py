"""The usual heuristics, beside the exact solvers: sqrt(n) checkpointing and a greedy rematerializer.

- `sqrt` (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"): split the forward pass into about
  sqrt(n) segments of the nodes the backward pass reads, keep each segment's last node, recompute the rest. It does
  not look at the budget.
- `greedy`, in the style of XLA's rematerialization pass: while the plan's peak is over the budget, at the peak's
  step recompute the node (alone, or with the chain of unsaved values it is computed from) that frees the most
  bytes there per second of recomputation, judged by evaluating the plan with it (so a choice that only moves the
  peak, or raises it by keeping inputs alive, is not taken).
"""

from __future__ import annotations

import math

from gnomon.passes.graph_recompute.problem import Evaluation, Problem, evaluate

__all__ = ["greedy", "sqrt_checkpoints", "unsaved_chain"]

TRIALS = 8
"""How many of the best-ranked nodes the greedy rematerializer evaluates at each step before choosing."""


def sqrt_checkpoints(problem: Problem) -> frozenset[int]:
    candidates = sorted(problem.candidates(), key=lambda i: problem.nodes[i].step)
    if len(candidates) < 2:
        return frozenset()
    segment = max(round(math.sqrt(len(candidates))), 1)
    return frozenset(c for k, c in enumerate(candidates) if (k + 1) % segment != 0)


def greedy(problem: Problem, budget: int) -> frozenset[int]:
    plan: set[int] = set()
    current = evaluate(problem, plan)
    candidates = set(problem.candidates())
    while current.peak > budget:
        peak_step = current.memory.index(current.peak)
        ranked = sorted(
            (i for i in candidates - plan if _live_at(problem, i, peak_step)),
            key=lambda i: -problem.nodes[i].size / max(problem.nodes[i].recompute_s, 1e-9),
        )
        best: tuple[float, set[int], Evaluation] | None = None
        for node in ranked[:TRIALS]:
            for move in ({node}, {node} | unsaved_chain(problem, node)):
                trial = evaluate(problem, plan | move)
                freed = current.memory[peak_step] - trial.memory[peak_step]
                if freed <= 0 or trial.peak > current.peak:
                    continue
                score = freed / max(trial.extra_s - current.extra_s, 1e-9)
                if best is None or score > best[0]:
                    best = (score, move, trial)
        if best is None:
            break
        plan |= best[1]
        current = best[2]
    return frozenset(current.recomputed)


def unsaved_chain(problem: Problem, node: int) -> set[int]:
    """The recomputable ancestors of `node` that the backward pass does not read, up to the first it does (or that
    cannot be recomputed): recomputing `node` from them frees them too, where keeping them would not."""
    chain: set[int] = set()
    stack = list(problem.nodes[node].inputs)
    while stack:
        source = stack.pop()
        ancestor = problem.nodes[source]
        if source in chain or ancestor.backward_uses or not ancestor.recomputable:
            continue
        chain.add(source)
        stack.extend(ancestor.inputs)
    return chain


def _live_at(problem: Problem, node: int, step: int) -> bool:
    """Whether keeping `node` holds its bytes at `step`: past its forward range, before its last backward use."""
    n = problem.nodes[node]
    return n.forward_last < step <= n.backward_uses[-1]
