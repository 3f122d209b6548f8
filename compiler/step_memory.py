"""What a compiled training step's memory holds, by category.

Outside the arena, for as long as training runs: the parameters, the buffers the step updates (batch-norm
statistics), the optimizer's state and the batch. In the arena, planned per step (`kernel-to-rt`): the gradients,
from the kernel that computes each to the step's end; the activations saved for the backward pass, written
before the loss and read after it; and temporaries, the rest. The split is read from the lowered program itself:
the launch that writes the loss divides the forward pass from the backward.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import SSAValue

from gnomon.dialects import rt
from gnomon.passes.kernel_to_rt import plan_of, rt_functions
from gnomon.passes.kernel_to_rt.memory_plan import Buffer

__all__ = ["ARENA_CATEGORIES", "StepMemory", "step_memory"]

ARENA_CATEGORIES = ("gradients", "saved activations", "temporaries")


@dataclass(frozen=True)
class StepMemory:
    """Bytes, by category (see the module docstring)."""

    parameters: int
    buffers: int
    optimizer: int
    batch: int
    arena: int
    """The arena the memory plan allocated."""
    arena_lower_bound: int
    """The most bytes live at one launch: no plan fits in a smaller arena."""
    peak_step: int
    """The launch (in schedule order) at which the most arena bytes are live."""
    at_peak: dict[str, int]
    """The arena bytes live at `peak_step`, by `ARENA_CATEGORIES`."""

    @property
    def persistent(self) -> int:
        return self.parameters + self.buffers + self.optimizer + self.batch

    @property
    def total(self) -> int:
        """The step's memory: what persists between steps, and the arena."""
        return self.persistent + self.arena


def step_memory(module: ModuleOp, state: dict[str, int], gradient_results: range) -> StepMemory:
    """The memory of a lowered training step (`module`); `state` gives the bytes of each input array by category
    (parameters, buffers, optimizer, batch); `gradient_results` the positions of its gradient results."""
    (function,) = rt_functions(module)
    buffers, _ = plan_of(function)
    owner: dict[SSAValue, int] = {}
    buffer_count = 0  # ids in the order of the rt.buffer ops, as `plan_of` numbers them
    loss_step = None
    step = -1
    ret = function.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    for op in function.body.block.ops:
        if isinstance(op, rt.BufferOp):
            owner[op.result] = buffer_count
            buffer_count += 1
        elif isinstance(op, rt.ViewOp) and op.source in owner:
            owner[op.result] = owner[op.source]
        elif isinstance(op, rt.LaunchOp):
            step += 1
            if ret.operands[0] in op.outs:
                loss_step = step
    gradients = {owner[ret.operands[i]] for i in gradient_results if ret.operands[i] in owner}
    forward_end = loss_step if loss_step is not None else -1
    # A kernel that writes its result over an input it last reads (in place) holds one buffer at that step, not two.
    replaced = {(b.inplace_of, b.first) for b in buffers if b.inplace_of is not None}

    def live_at(s: int) -> list[Buffer]:
        return [b for b in buffers if b.first <= s <= b.last and (b.id, s) not in replaced]

    live = [sum(b.size for b in live_at(s)) for s in range(step + 1)]
    peak_step = max(range(len(live)), key=live.__getitem__) if live else 0
    at_peak: dict[str, int] = dict.fromkeys(ARENA_CATEGORIES, 0)
    for b in live_at(peak_step):
        if b.id in gradients:
            at_peak["gradients"] += b.size
        elif b.first < forward_end < b.last:
            at_peak["saved activations"] += b.size
        else:
            at_peak["temporaries"] += b.size
    arena = function.attributes[rt.ARENA_SIZE]
    lower = function.attributes.get(rt.ARENA_LOWER_BOUND)
    assert isinstance(arena, IntegerAttr)
    return StepMemory(
        parameters=state.get("parameters", 0),
        buffers=state.get("buffers", 0),
        optimizer=state.get("optimizer", 0),
        batch=state.get("batch", 0),
        arena=arena.value.data,
        arena_lower_bound=lower.value.data if isinstance(lower, IntegerAttr) else 0,
        peak_step=peak_step,
        at_peak=at_peak,
    )
