"""Static memory planning: place a schedule's buffers in one arena, reusing memory whose owners have died.

The runtime runs a flat schedule of kernel launches, steps 0..n-1. Each intermediate buffer is written
by one step (`first`) and last read by another (`last`, inclusive); a buffer that must outlive the
schedule (a program output) has `last = n`. Two buffers may share bytes only when their live ranges
`first..last` are disjoint, or when one reuses the other in place (below).

What the caller settles before planning:
- Views (reshapes and other reinterpretations of contiguous data) share their source's memory, so the
  caller merges each view into its source: the source's `last` becomes the last step that reads it or
  any view of it, and the view gets no buffer of its own.
- Memory that the caller binds outside the arena (model inputs, weights) is not a buffer here.
- A buffer with dynamic dims has its size at their bounds: at run time it is a view of its actual size
  at its offset, no larger than its block, so the plan holds at every size (`kernel-to-rt`).

In place: a buffer may name in `inplace_of` an input of the step that writes it (an elementwise kernel
can overwrite its input as it reads it). `plan` takes that reuse, greedily in step order, when it is
legal: the input dies at this step (`input.last == buffer.first`), is at least as large, and no other
buffer has taken it already. Reuses chain (a -> b -> c all in one block). A chain becomes one block
the size of its largest member, live from its first member's `first` to its last member's `last`;
the bytes a smaller member leaves unused are not lent to others.

`lower_bound` is the most bytes live at any one step once the taken chains are merged into blocks: no
plan that makes the same in-place choices can have a smaller arena, since the blocks live at that step
must lie side by side (an arena may need more: the bound ignores fragmentation and alignment).

Offsets come from greedy best-fit over liveness intervals (Pisarchyk & Lee 2020, "Efficient Memory
Management for Deep Neural Net Inference": TFLite's greedy by size for offset calculation), run from a
few orderings of the blocks and refined by moving the blocks that stick out above the lower bound to
the front; the smallest arena wins, and a plan that meets the bound ends the search.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gnomon.errors import GnomonError


class MemoryPlanError(GnomonError):
    """A schedule's buffers are malformed, or a plan lets two live buffers overlap."""


@dataclass(frozen=True)
class Buffer:
    """One buffer of a schedule: its size and the steps it is live on."""

    id: int
    size: int
    """Bytes."""
    first: int
    """The step that writes it."""
    last: int
    """The last step that reads it, inclusive; the number of steps for a buffer that outlives the schedule."""
    inplace_of: int | None = None
    """An input buffer of the step `first` whose memory this buffer may reuse in place."""


@dataclass(frozen=True)
class MemoryPlan:
    """Where each buffer lives in the arena."""

    offsets: dict[int, int]
    """Buffer id -> byte offset from the arena's start."""
    arena_size: int
    """Bytes: the end of the highest buffer."""
    inplace: dict[int, int]
    """The in-place reuses taken: buffer id -> the id of the buffer whose memory it reuses."""
    lower_bound: int
    """The most bytes live at one step with the taken in-place chains merged; `arena_size` is at least this."""
    alignment: int
    """Every offset is a multiple of this."""


@dataclass(frozen=True)
class _Block:
    """An in-place chain (often a single buffer): what offset assignment places."""

    root: int
    size: int
    first: int
    last: int


def plan(buffers: Sequence[Buffer], alignment: int = 64) -> MemoryPlan:
    """Take the legal in-place reuses, then assign aligned offsets to the blocks (see the module docstring)."""
    if alignment < 1:
        raise MemoryPlanError(f"memory plan: alignment must be at least 1, got {alignment}")
    by_id = _check_buffers(buffers)
    inplace = _take_inplace(buffers, by_id)
    blocks = _blocks(buffers, inplace)
    lower_bound = _live_peak(blocks)
    offsets, arena_size = _place(blocks, alignment, lower_bound)
    root_of = _roots(inplace)
    return MemoryPlan(
        offsets={b.id: offsets[root_of(b.id)] for b in buffers},
        arena_size=arena_size,
        inplace=inplace,
        lower_bound=lower_bound,
        alignment=alignment,
    )


def verify(buffers: Sequence[Buffer], plan: MemoryPlan) -> None:
    """Raise MemoryPlanError unless every buffer is aligned, inside the arena, and apart from those it is live with.

    Two buffers of one taken in-place chain may share bytes when they start at the same offset and one's
    live range ends on the step the other's begins (the handover, where the kernel overwrites its input).
    """
    by_id = _check_buffers(buffers)
    root_of = _roots(plan.inplace)
    for b in buffers:
        offset = plan.offsets.get(b.id)
        if offset is None:
            raise MemoryPlanError(f"memory plan: buffer {b.id} (steps {b.first}..{b.last}) has no offset")
        if offset < 0 or offset % plan.alignment:
            raise MemoryPlanError(
                f"memory plan: buffer {_describe(b, offset)} is not at a non-negative multiple"
                f" of the alignment {plan.alignment}"
            )
        if offset + b.size > plan.arena_size:
            raise MemoryPlanError(
                f"memory plan: buffer {_describe(b, offset)} exceeds the arena of {plan.arena_size} bytes"
            )
    ordered = sorted(by_id.values(), key=lambda b: (b.first, b.id))
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.first > a.last:
                break  # sorted by first: no later buffer is live with a
            if _may_share(a, b, plan, root_of) or not _bytes_overlap(a, b, plan.offsets):
                continue
            x, y = sorted((a, b), key=lambda buffer: buffer.id)
            raise MemoryPlanError(
                f"memory plan: buffers {_describe(x, plan.offsets[x.id])} and {_describe(y, plan.offsets[y.id])}"
                " are live at the same time and overlap in memory"
            )


def _may_share(a: Buffer, b: Buffer, plan: MemoryPlan, root_of: Callable[[int], int]) -> bool:
    """Whether a and b are one in-place chain's members at their handover: same offset, ranges meeting at one step."""
    handover = a.last == b.first or b.last == a.first
    return handover and plan.offsets[a.id] == plan.offsets[b.id] and root_of(a.id) == root_of(b.id)


def _bytes_overlap(a: Buffer, b: Buffer, offsets: dict[int, int]) -> bool:
    return offsets[a.id] < offsets[b.id] + b.size and offsets[b.id] < offsets[a.id] + a.size


def _describe(b: Buffer, offset: int) -> str:
    return f"{b.id} (steps {b.first}..{b.last}, bytes [{offset}, {offset + b.size}))"


def _check_buffers(buffers: Sequence[Buffer]) -> dict[int, Buffer]:
    by_id: dict[int, Buffer] = {}
    for b in buffers:
        if b.id in by_id:
            raise MemoryPlanError(f"memory plan: buffer id {b.id} appears twice")
        if b.size < 0 or b.first < 0 or b.last < b.first:
            raise MemoryPlanError(
                f"memory plan: buffer {b.id} has size {b.size} and steps {b.first}..{b.last};"
                " it needs a size >= 0 and 0 <= first <= last"
            )
        by_id[b.id] = b
    for b in buffers:
        if b.inplace_of is not None and (b.inplace_of not in by_id or b.inplace_of == b.id):
            raise MemoryPlanError(
                f"memory plan: buffer {b.id} may reuse buffer {b.inplace_of}, which is not another buffer"
            )
    return by_id


def _take_inplace(buffers: Sequence[Buffer], by_id: dict[int, Buffer]) -> dict[int, int]:
    """The legal in-place reuses, taken greedily in step order (ties by id)."""
    taken: dict[int, int] = {}
    given: set[int] = set()
    root_of = _roots(taken)
    for b in sorted(buffers, key=lambda b: (b.first, b.id)):
        if b.inplace_of is None:
            continue
        source = by_id[b.inplace_of]
        if source.last != b.first or source.size < b.size or source.id in given:
            continue
        if root_of(source.id) == b.id:
            continue  # only when every step involved is the same one: taking it would close a cycle
        taken[b.id] = source.id
        given.add(source.id)
    return taken


def _roots(inplace: dict[int, int]) -> Callable[[int], int]:
    """Buffer id -> the first buffer of its in-place chain."""

    def root_of(buffer_id: int) -> int:
        seen = {buffer_id}
        while buffer_id in inplace:
            buffer_id = inplace[buffer_id]
            if buffer_id in seen:
                raise MemoryPlanError(f"memory plan: the in-place reuses of buffer {buffer_id} form a cycle")
            seen.add(buffer_id)
        return buffer_id

    return root_of


def _blocks(buffers: Sequence[Buffer], inplace: dict[int, int]) -> list[_Block]:
    root_of = _roots(inplace)
    members: dict[int, list[Buffer]] = {}
    for b in buffers:
        members.setdefault(root_of(b.id), []).append(b)
    return [
        _Block(root, max(m.size for m in group), min(m.first for m in group), max(m.last for m in group))
        for root, group in members.items()
    ]


def _live_peak(blocks: Sequence[_Block]) -> int:
    """The most bytes live at one step: a sweep over the steps where blocks start and stop being live."""
    changes: dict[int, int] = {}
    for b in blocks:
        changes[b.first] = changes.get(b.first, 0) + b.size
        changes[b.last + 1] = changes.get(b.last + 1, 0) - b.size
    live = peak = 0
    for step in sorted(changes):
        live += changes[step]
        peak = max(peak, live)
    return peak


_ORDERINGS: tuple[Callable[[_Block], tuple[int, ...]], ...] = (
    lambda b: (-b.size, -(b.last - b.first), b.first, b.root),
    lambda b: (-b.size * (b.last - b.first + 1), -b.size, b.first, b.root),
    lambda b: (b.first, -b.size, b.root),
    lambda b: (-(b.last - b.first), -b.size, b.first, b.root),
)
"""Orders in which greedy placement first sees the blocks: by size (Pisarchyk & Lee's), by size x lifetime,
by first use (close to what a runtime allocator sees), by lifetime. None of them is best on every network."""

_ROUNDS = 8
"""Placements per ordering: the first, then reorderings. Where no plan meets the lower bound all 4 x 8 run, so
this bounds the planner's time on networks of many buffers."""


def _place(blocks: Sequence[_Block], alignment: int, lower_bound: int) -> tuple[dict[int, int], int]:
    """The smallest arena found by greedy placement from each ordering, refined by squeaky-wheel reordering.

    After each placement the blocks that end above the lower bound move to the front of the order, so
    the next placement fits them first and the blocks they were squeezed out by go around them (Joslin &
    Clements 1999, "Squeaky wheel optimization"). Growing chains such as DenseNet's concatenations need
    this: greedy by size leaves a small block that spans two of them no gap and stacks it on top.
    """
    best: dict[int, int] = {}
    best_size = -1
    for key in _ORDERINGS:
        order = sorted(blocks, key=key)
        for _ in range(_ROUNDS):
            offsets = _assign_offsets(order, alignment)
            size = max((offsets[b.root] + b.size for b in blocks), default=0)
            if best_size < 0 or size < best_size:
                best, best_size = offsets, size
            if best_size <= lower_bound:
                return best, best_size
            above = [b for b in order if offsets[b.root] + b.size > lower_bound]
            order = above + [b for b in order if offsets[b.root] + b.size <= lower_bound]
    return best, best_size


def _assign_offsets(blocks: Sequence[_Block], alignment: int) -> dict[int, int]:
    """Greedy best fit: each block goes in the smallest gap that holds it among the placed blocks it is live with.

    With no such gap it goes above the highest of them, not above the whole arena, so short-lived
    blocks stack only over what they are live with.
    """
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last), sorted by offset
    offsets: dict[int, int] = {}
    for block in blocks:
        best_offset = -1
        best_gap = 0
        top = 0
        for offset, end, first, last in placed:
            if last < block.first or first > block.last:
                continue
            start = -(-top // alignment) * alignment
            gap = offset - start
            if gap >= block.size and (best_offset < 0 or gap < best_gap):
                best_offset, best_gap = start, gap
            top = max(top, end)
        if best_offset < 0:
            best_offset = -(-top // alignment) * alignment
        offsets[block.root] = best_offset
        bisect.insort(placed, (best_offset, best_offset + block.size, block.first, block.last))
    return offsets
