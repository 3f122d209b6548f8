"""The recomputation problem on a training step's kernel schedule, and what a plan costs on it.

A training step runs kernels 0..T-1 in order; the kernel that computes the loss ends the forward pass (`boundary`).
Each forward kernel is a `Node`: the bytes of its results, the step it runs at, the last forward step that reads
them, and the backward steps that read them. Everything else the arena holds (the backward pass's values, the
outputs) is `base[t]`, the bytes live at step t whatever the plan.

A plan recomputes a set of nodes. A recomputed node runs again just before the first step that needs it: its own
first backward use, or the recomputation of a node that reads it (recomputation chains), whichever is earlier, or
at an earlier step the plan gives (`starts`);
its copy then lives until the last step that needs it. Its original is freed after its last forward use. A kept
node lives from its step to the last step that needs it, and a recomputation that reads it extends its life to that
recomputation. A value is live at a step from the step that writes it through the last step that reads it,
inclusive; the copies a recomputation makes before step t are live at t; a pointwise kernel that writes over an
input dying at its step adds no bytes there (`Node.overwrites`). `evaluate` computes the peak and the
extra time of a plan under exactly these rules; every solver's plan is judged by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Evaluation", "Node", "Problem", "evaluate"]


@dataclass(frozen=True)
class Node:
    """One kernel of the forward pass."""

    step: int
    size: int
    """The bytes of its results."""
    forward_last: int
    """The last forward step that reads it; its own step if none does."""
    backward_uses: tuple[int, ...]
    """The backward steps that read it (directly or through a view), ascending; `Problem.steps` if the step returns
    it."""
    inputs: tuple[int, ...]
    """The nodes it reads (indices into `Problem.nodes`): what its recomputation needs."""
    recompute_s: float
    """The predicted time of one more launch of its kernel."""
    recomputable: bool
    """False for a kernel whose recomputation would not reproduce it (random draws) or cannot be repeated."""
    name: str = ""
    """Its kernel's first op and location, for reports."""
    overwrites: int | None = None
    """An input node the kernel may write its result over (a pointwise kernel, the same type): `kernel-to-rt`
    does so where that input dies at this step, and then the result takes no bytes of its own there."""


@dataclass(frozen=True)
class Problem:
    steps: int
    boundary: int
    """The step of the kernel that computes the loss: steps after it are the backward pass."""
    nodes: tuple[Node, ...]
    base: tuple[int, ...]
    """Bytes live at each step 0..steps (the last entry: after the schedule, the outputs) that no plan changes."""
    consumers: tuple[tuple[int, ...], ...] = field(init=False)
    """For each node, the nodes that read it."""

    def __post_init__(self) -> None:
        readers: list[list[int]] = [[] for _ in self.nodes]
        for index, node in enumerate(self.nodes):
            for source in node.inputs:
                readers[source].append(index)
        object.__setattr__(self, "consumers", tuple(tuple(r) for r in readers))

    def candidates(self) -> list[int]:
        """The nodes a plan may recompute: recomputable, read in the backward pass, not returned."""
        return [
            i
            for i, node in enumerate(self.nodes)
            if node.recomputable and node.backward_uses and node.backward_uses[-1] < self.steps
        ]


@dataclass(frozen=True)
class Evaluation:
    peak: int
    """The most bytes live at one step."""
    memory: tuple[int, ...]
    """Bytes live at each step 0..steps."""
    extra_s: float
    """The recomputations' predicted time together."""
    recomputed: frozenset[int]
    """The nodes the plan recomputes that something needs (a recomputed node nothing needs is dropped)."""
    at: dict[int, int]
    """Each recomputed node's step: its copy runs just before it."""


def evaluate(problem: Problem, plan: Iterable[int], starts: Mapping[int, int] | None = None) -> Evaluation:
    """The peak memory and extra time of recomputing `plan`'s nodes (see the module's docstring). `starts` may make
    a node's copy earlier than the first step that needs it (an exact solver spreads a chain of recomputations over
    several steps, so that its intermediates do not all live at once); never later, and never before the backward
    pass."""
    chosen = set(plan)
    starts = starts or {}
    nodes = problem.nodes
    at: dict[int, int] = {}
    needed_until: dict[int, int] = {}
    # Consumers come after what they read: walking the nodes backwards settles every consumer's step first.
    for index in range(len(nodes) - 1, -1, -1):
        node = nodes[index]
        needs = list(node.backward_uses)
        needs += [at[c] for c in problem.consumers[index] if c in at]
        if not needs:
            continue
        needed_until[index] = max(needs)
        if index in chosen:
            at[index] = max(min([*needs, starts.get(index, problem.steps)]), problem.boundary + 1)
    change = [0] * (problem.steps + 2)  # live bytes as a difference array over steps 0..steps
    last_live = {
        i: n.forward_last if i in at else max(n.forward_last, needed_until.get(i, n.forward_last))
        for i, n in enumerate(nodes)
    }
    for index, node in enumerate(nodes):
        first = node.step
        if node.overwrites is not None and last_live[node.overwrites] == node.step:
            first += 1  # written over its input, which dies here
        if index in at:
            spans = [(first, node.forward_last), (at[index], needed_until[index])]
        else:
            spans = [(first, last_live[index])]
        for first, last in spans:
            if last < first:
                continue
            change[first] += node.size
            change[min(last, problem.steps) + 1] -= node.size
    memory: list[int] = []
    live = 0
    for step, base in enumerate(problem.base):
        live += change[step]
        memory.append(base + live)
    extra = sum(nodes[i].recompute_s for i in at)
    return Evaluation(max(memory), tuple(memory), extra, frozenset(at), at)
