"""A training step's kernel schedule as a recomputation `Problem`, read from its graph after `graph-fuse`.

The kernels are the groups `graph-to-kernel` will build (`kernel_groups`), one step each in program order. What the
arena holds is each kernel's results, from its step to the last step that reads them or a view of them (reshapes
are views); a result the step returns lives to the end, unless it is a new state value that `kernel-to-rt` writes
into its argument's own memory (`rt.UPDATES`), which the arena does not hold. Arguments and constants live outside
the arena.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.traits import NoMemoryEffect

from gnomon.cost.values import nbytes
from gnomon.dialects import rt
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.errors import GnomonError
from gnomon.locations import location_name
from gnomon.passes.graph_recompute.problem import Node, Problem
from gnomon.passes.graph_to_kernel import Group, kernel_groups

__all__ = ["Schedule", "read_schedule", "view_source"]


@dataclass
class Schedule:
    """The problem, and the IR it was read from."""

    problem: Problem
    groups: list[Group]
    """Each step's kernel group."""
    step_of: dict[Operation, int]
    """Each kernel op (prologues included) -> its step."""
    values: list[SSAValue]
    """Node i's value: a result of the last op of a forward kernel's group."""


def view_source(value: SSAValue) -> SSAValue:
    """The value whose memory `value` is: itself, or the source of the reshapes it is a view of."""
    while isinstance(value.owner, ReshapeOp):
        value = value.owner.operands[0]
    return value


def _donated(function: func.FuncOp) -> set[int]:
    """The return positions of new state values that may be written into their argument (`rt.UPDATES`)."""
    updates = function.attributes.get(rt.UPDATES)
    if updates is None:
        return set()
    return {i for i, argument in enumerate(ints(updates)) if argument >= 0}  # pyright: ignore[reportArgumentType]


def _overwritable(group: Group, value_step: dict[SSAValue, int]) -> list[SSAValue]:
    """The inputs `kernel-to-rt` may let the group's kernel write its result over (where one dies at this step): a
    generated pointwise kernel with one result, reading a kernel's result of the same type."""
    ops = group.all_ops()
    results = group.ops[-1].results
    if group.kind != "generated" or len(results) != 1 or not all(isinstance(op, POINTWISE) for op in ops):
        return []
    step = value_step[results[0]]
    found = [operand for op in ops for operand in op.operands if operand.type == results[0].type]
    return [v for v in found if v in value_step and value_step[v] < step]


def read_schedule(function: func.FuncOp, price: Callable[[Group], float]) -> Schedule:
    """The recomputation problem of `function`, a training step whose first result is its loss; `price` predicts
    one launch of a group's kernel. Each result of a forward kernel is a node of its own (a batch norm's small
    statistics are read by the backward pass, its output may not be): recomputing one runs the whole kernel."""
    groups = kernel_groups(function)
    step_of: dict[Operation, int] = {}
    value_step: dict[SSAValue, int] = {}
    values: list[SSAValue] = []
    for step, group in enumerate(groups):
        for op in group.all_ops():
            step_of[op] = step
        for result in group.ops[-1].results:
            if isinstance(result.type, TensorType):
                value_step[result] = step
                values.append(result)
    steps = len(groups)
    ret = function.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or not ret.operands:
        raise GnomonError("graph-recompute: the function returns nothing; it takes a training step (loss first)")
    loss = view_source(ret.operands[0])
    if loss not in value_step:
        raise GnomonError("graph-recompute: the step's loss is not computed by a kernel")
    boundary = value_step[loss]
    uses: dict[SSAValue, set[int]] = {value: set() for value in values}
    reads: dict[int, set[SSAValue]] = {step: set() for step in range(steps)}
    for step, group in enumerate(groups):
        for op in group.all_ops():
            for operand in op.operands:
                source = view_source(operand)
                if source in value_step and value_step[source] != step:
                    uses[source].add(step)
                    reads[step].add(source)
    donated = _donated(function)
    for position, operand in enumerate(ret.operands):
        source = view_source(operand)
        if source in value_step and position not in donated:
            uses[source].add(steps)
    base = [0] * (steps + 1)
    for value in values:
        step = value_step[value]
        if step <= boundary:
            continue
        last = max(uses[value], default=step)
        group = groups[step]
        overwritten = any(boundary < value_step[v] and max(uses[v]) == step for v in _overwritable(group, value_step))
        for at in range(step + 1 if overwritten else step, min(last, steps) + 1):
            base[at] += nbytes(value)
    forward = [v for v in values if value_step[v] <= boundary]
    index_of = {value: index for index, value in enumerate(forward)}
    prices: dict[int, float] = {}
    nodes: list[Node] = []
    for value in forward:
        step = value_step[value]
        group = groups[step]
        if step not in prices:
            prices[step] = price(group)
        forward_uses = [u for u in uses[value] if u <= boundary]
        overwrites = [index_of[v] for v in _overwritable(group, value_step) if v in index_of]
        nodes.append(
            Node(
                step=step,
                size=nbytes(value),
                forward_last=max(forward_uses, default=step),
                backward_uses=tuple(sorted(u for u in uses[value] if u > boundary)),
                inputs=tuple(sorted(index_of[v] for v in reads[step] if v in index_of)),
                recompute_s=prices[step],
                recomputable=all(op.has_trait(NoMemoryEffect) for op in group.all_ops()),
                name=f"{group.ops[0].name} at {location_name(group.ops[0].location)}",
                overwrites=overwrites[0] if overwrites else None,
            )
        )
    problem = Problem(steps, boundary, tuple(nodes), tuple(base))
    return Schedule(problem, groups, step_of, forward)
