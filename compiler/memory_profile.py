"""What a compiled program's memory holds: each planned tensor's lifetime over the schedule, by category and layer.

Outside the arena, for as long as the program lives: its weights and inputs (inference), or a training step's
parameters, updated buffers (batch-norm statistics), optimizer state and batch. In the arena, planned per run
(`kernel-to-rt`): for inference, the activations and the outputs; for a training step, the gradients (from the
kernel that computes each to the step's end), the activations saved for the backward pass (written before the
loss and read after it) and the temporaries, the rest. The split is read from the lowered program itself: the
launch that writes the loss divides the forward pass from the backward. Each tensor's layer is the location of
the launch that writes it (`backward.<layer>` and `optimizer.<parameter>` in a training step).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from math import prod

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import SSAValue

from gnomon.dialects import rt
from gnomon.dialects.graph.constant_values import element_bytes
from gnomon.locations import location_name
from gnomon.passes.kernel_to_rt import plan_of, rt_functions

__all__ = ["INFERENCE_CATEGORIES", "TRAINING_CATEGORIES", "MemoryProfile", "PlannedTensor", "memory_profile"]

INFERENCE_CATEGORIES = ("activations", "outputs")
TRAINING_CATEGORIES = ("gradients", "saved activations", "temporaries")


@dataclass(frozen=True)
class PlannedTensor:
    """One buffer of the arena: its bytes, the launches it is live on (`first..last`, inclusive), its category and
    the layer that writes it."""

    size: int
    first: int
    last: int
    category: str
    layer: str


@dataclass(frozen=True)
class MemoryProfile:
    """A program's memory (see the module docstring)."""

    outside: dict[str, int]
    """Bytes outside the arena, by category, in the order a report lists them."""
    tensors: list[PlannedTensor]
    """The arena's buffers; one that reuses its input's memory in place is counted once, by the input."""
    layers: list[str]
    """The layer of each launch, in schedule order."""
    categories: tuple[str, ...]
    """The arena's categories."""
    arena: int
    """The arena the memory plan allocated."""
    arena_lower_bound: int
    """The most bytes live at one launch: no plan fits in a smaller arena."""
    forward_end: int | None = None
    """A training step's launch that writes the loss."""
    live: list[int] = field(init=False)
    """The arena bytes live at each launch."""

    def __post_init__(self) -> None:
        live = [0] * len(self.layers)
        for tensor in self.tensors:
            for step in range(tensor.first, min(tensor.last, len(live) - 1) + 1):
                live[step] += tensor.size
        object.__setattr__(self, "live", live)

    @property
    def peak_step(self) -> int:
        """The launch at which the most arena bytes are live (the first of several)."""
        return max(range(len(self.live)), key=self.live.__getitem__) if self.live else 0

    def live_at(self, step: int) -> list[PlannedTensor]:
        return [t for t in self.tensors if t.first <= step <= t.last]

    @property
    def at_peak(self) -> dict[str, int]:
        """The arena bytes live at `peak_step`, by category."""
        totals = dict.fromkeys(self.categories, 0)
        for tensor in self.live_at(self.peak_step):
            totals[tensor.category] += tensor.size
        return totals

    def at_peak_by_layer(self) -> list[tuple[str, str, int]]:
        """(layer, category, bytes) live at `peak_step`, the largest first."""
        totals: dict[tuple[str, str], int] = defaultdict(int)
        for tensor in self.live_at(self.peak_step):
            totals[tensor.layer, tensor.category] += tensor.size
        return sorted(((layer, category, size) for (layer, category), size in totals.items()), key=lambda r: -r[2])

    @property
    def persistent(self) -> int:
        return sum(self.outside.values())

    @property
    def total(self) -> int:
        """The program's memory: what persists between runs, and the arena."""
        return self.persistent + self.arena


def memory_profile(module: ModuleOp, outside: dict[str, int] | None = None,
                   gradient_results: range | None = None) -> MemoryProfile:  # fmt: skip
    """The memory of a lowered program. `outside` gives the bytes outside the arena by category (default: its
    weights and inputs); `gradient_results`, the positions of a training step's gradient results (empty for a step
    that returns none), makes it a training step's (its result 0 is the loss). A gradient is a gradient result, or
    what the backward pass writes and a parameter's update (`optimizer.<name>`) reads."""
    (function,) = rt_functions(module)
    buffers, _ = plan_of(function)
    block = function.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    owner: dict[SSAValue, int] = {}
    writer: dict[int, str] = {}
    layers: list[str] = []
    loss_step: int | None = None
    read_by_update: set[int] = set()
    buffer_count = 0
    for op in block.ops:
        if isinstance(op, rt.BufferOp):
            owner[op.result] = buffer_count  # ids in the order of the rt.buffer ops, as `plan_of` numbers them
            buffer_count += 1
        elif isinstance(op, rt.ViewOp) and op.source in owner:
            owner[op.result] = owner[op.source]
        elif isinstance(op, rt.LaunchOp):
            for out in op.outs:
                if out in owner:
                    writer.setdefault(owner[out], location_name(op.location))
            if gradient_results is not None and ret.operands[0] in op.outs:
                loss_step = len(layers)
            if location_name(op.location).startswith("optimizer."):
                read_by_update.update(owner[v] for v in op.ins if v in owner)
            layers.append(location_name(op.location))
    returned = {owner[v] for v in ret.operands if v in owner}
    gradients = {owner[ret.operands[i]] for i in gradient_results or () if ret.operands[i] in owner}
    tensors: list[PlannedTensor] = []
    for buffer in buffers:
        from_backward = loss_step is not None and buffer.first > loss_step and buffer.id in read_by_update
        if gradient_results is None:
            category = "outputs" if buffer.id in returned else "activations"
        elif buffer.id in gradients or from_backward:
            category = "gradients"
        elif loss_step is not None and buffer.first < loss_step < buffer.last:
            category = "saved activations"
        else:
            category = "temporaries"
        # An in-place result shares its input's bytes from its first launch on: count it from the next one.
        first = buffer.first + 1 if buffer.inplace_of is not None else buffer.first
        if first <= buffer.last:
            tensors.append(PlannedTensor(buffer.size, first, buffer.last, category, writer.get(buffer.id, "?")))
    arena = function.attributes[rt.ARENA_SIZE]
    lower = function.attributes.get(rt.ARENA_LOWER_BOUND)
    assert isinstance(arena, IntegerAttr)
    return MemoryProfile(
        outside=outside if outside is not None else _weights_and_inputs(function),
        tensors=tensors,
        layers=layers,
        categories=INFERENCE_CATEGORIES if gradient_results is None else TRAINING_CATEGORIES,
        arena=arena.value.data,
        arena_lower_bound=lower.value.data if isinstance(lower, IntegerAttr) else 0,
        forward_end=loss_step,
    )


def _weights_and_inputs(function: func.FuncOp) -> dict[str, int]:
    weights = sum(_bytes(op.result.type) for op in function.body.block.ops if isinstance(op, rt.ConstantOp))
    inputs = sum(_bytes(arg.type) for arg in function.body.block.args)
    return {"weights": weights, "inputs": inputs}


def _bytes(memref: object) -> int:
    assert isinstance(memref, MemRefType)
    return prod(memref.get_shape()) * (element_bytes(memref.element_type) or 0)
