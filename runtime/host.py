"""Control flow on the host: `graph.if` and `graph.while` run as Python's if and while over rt programs.

A `HostPlan` is the tree `gnomon.host_program` cuts a graph function into: straight-line `Segment`s, each an rt
module, and the `Branch`es and `Loop`s between them, whose regions are cut the same way. Values live in numbered
slots, NumPy arrays on the host: a segment reads its inputs from slots and writes its results into others, a
branch or a loop reads its predicate and carried values from them.

`Program.run` copies a segment's inputs in and its results out, so nothing in its arena outlives its run: every
segment runs in one shared arena, the size of the largest segment's, allocated once. A loop runs its body's
segments again on each trip.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp

from gnomon.dialects import rt
from gnomon.passes.kernel_to_rt import rt_functions
from gnomon.runtime.executor import KernelTiming, Profile, Program

__all__ = ["Branch", "HostPlan", "HostProfile", "HostProgram", "HostRegion", "Loop", "Segment", "Step", "segments"]


@dataclass(frozen=True, eq=False)
class Segment:
    """Straight-line code between control ops: one rt program."""

    module: ModuleOp = field(repr=False)
    """Its program and kernels (a graph module until `gnomon.host_program` lowers it)."""
    inputs: tuple[int, ...]
    """The slots of its arguments, in order."""
    outputs: tuple[int, ...]
    """The slots its results go to, in order."""


@dataclass(frozen=True)
class HostRegion:
    """A block: the slots its arguments arrive in, its steps, and the slots of what it yields."""

    args: tuple[int, ...]
    steps: tuple[Step, ...]
    yields: tuple[int, ...]


@dataclass(frozen=True)
class Branch:
    """`graph.if`: run `then` or `otherwise` as the one-element predicate says; its yields go to `results`."""

    pred: int
    then: HostRegion
    otherwise: HostRegion
    results: tuple[int, ...]


@dataclass(frozen=True)
class Loop:
    """`graph.while`: from `inits`, run `body` on the carried values while `cond` yields true on them."""

    inits: tuple[int, ...]
    cond: HostRegion
    body: HostRegion
    results: tuple[int, ...]


Step = Segment | Branch | Loop


@dataclass(frozen=True)
class HostPlan:
    """A function with control flow: its body (arguments: the inputs; yields: the outputs), the constants that
    control ops and yields read (`graph.constant`s used inside segments are cloned into them instead), and the
    number of slots."""

    body: HostRegion
    constants: Mapping[int, np.ndarray]
    slots: int


def segments(region: HostRegion) -> Iterator[Segment]:
    """Every segment of `region` and of the regions nested in it, in program order."""
    for step in region.steps:
        if isinstance(step, Segment):
            yield step
        elif isinstance(step, Branch):
            yield from segments(step.then)
            yield from segments(step.otherwise)
        else:
            yield from segments(step.cond)
            yield from segments(step.body)


def arena_size(module: ModuleOp) -> int:
    """The arena an rt module's program needs, in bytes."""
    size = rt_functions(module)[0].attributes[rt.ARENA_SIZE]
    assert isinstance(size, IntegerAttr)
    return size.value.data


@dataclass
class HostProfile(Profile):
    """A profiled run of a host program: every segment's launches in the order they ran (a loop's on each trip),
    the compile statistics of all segments, and their shared arena. `run_seconds` is the whole run's, the host's
    work between segments (copies, branches) included."""

    branches: int = 0
    """`graph.if`s run."""
    loop_trips: int = 0
    """Loop bodies run, over all loops."""
    segment_runs: int = 0


class HostProgram:
    """A host plan, its segments loaded into one arena and ready to run."""

    def __init__(self, plan: HostPlan):
        self.plan = plan
        # The largest segment loads first and owns the arena; the others run in it.
        ordered = sorted(segments(plan.body), key=lambda s: arena_size(s.module), reverse=True)
        self.programs: dict[Segment, Program] = {}
        for segment in ordered:
            shared = next(iter(self.programs.values())).arena if self.programs else None
            self.programs[segment] = Program(segment.module, arena=shared)
        loaded = [p.profile for p in self.programs.values()]
        self.profile = HostProfile(
            arena_bytes=max((p.arena_bytes for p in loaded), default=0),
            arena_lower_bound=max((p.arena_lower_bound for p in loaded), default=0),
            kernels_compiled=sum(p.kernels_compiled for p in loaded),
            kernels_from_cache=sum(p.kernels_from_cache for p in loaded),
            compile_seconds=sum(p.compile_seconds for p in loaded),
            kernels_tuned=sum(p.kernels_tuned for p in loaded),
            kernels_generated=sum(p.kernels_generated for p in loaded),
        )
        self._profiling = False
        self._timings: list[KernelTiming] = []

    def run(self, inputs: Sequence[np.ndarray], profile: bool = False) -> list[np.ndarray]:
        """Run on `inputs` (already checked against the signature); the results are the caller's own arrays."""
        self._profiling = profile
        self._timings = []
        counts = HostProfile()
        start = time.perf_counter_ns()
        values: list[np.ndarray | None] = [None] * self.plan.slots
        for slot, array in self.plan.constants.items():
            values[slot] = array
        outputs = self._region(self.plan.body, list(inputs), values, counts)
        if profile:
            self.profile.timings = self._timings
            self.profile.run_seconds = (time.perf_counter_ns() - start) * 1e-9
            self.profile.branches = counts.branches
            self.profile.loop_trips = counts.loop_trips
            self.profile.segment_runs = counts.segment_runs
        return [np.array(output) for output in outputs]  # a copy: an output may be an input or a constant

    def _region(
        self, region: HostRegion, args: Sequence[np.ndarray], values: list[np.ndarray | None], counts: HostProfile
    ) -> list[np.ndarray]:
        for slot, array in zip(region.args, args, strict=True):
            values[slot] = array
        for step in region.steps:
            if isinstance(step, Segment):
                self._segment(step, values, counts)
            elif isinstance(step, Branch):
                counts.branches += 1
                taken = step.then if _truth(_value(values, step.pred)) else step.otherwise
                for slot, array in zip(step.results, self._region(taken, (), values, counts), strict=True):
                    values[slot] = array
            else:
                carried = [_value(values, slot) for slot in step.inits]
                while _truth(self._region(step.cond, carried, values, counts)[0]):
                    counts.loop_trips += 1
                    carried = self._region(step.body, carried, values, counts)
                for slot, array in zip(step.results, carried, strict=True):
                    values[slot] = array
        return [_value(values, slot) for slot in region.yields]

    def _segment(self, segment: Segment, values: list[np.ndarray | None], counts: HostProfile) -> None:
        counts.segment_runs += 1
        program = self.programs[segment]
        results = program.run([_value(values, slot) for slot in segment.inputs], profile=self._profiling)
        if self._profiling:
            self._timings += program.profile.timings
        for slot, array in zip(segment.outputs, results, strict=True):
            values[slot] = array


def _value(values: list[np.ndarray | None], slot: int) -> np.ndarray:
    value = values[slot]
    assert value is not None, f"slot {slot} is read before it is written"
    return value


def _truth(predicate: np.ndarray) -> bool:
    """A one-element i1 tensor as a Python bool."""
    return bool(predicate.reshape(-1)[0])
