"""End-to-end time of a schedule: a host thread dispatches tasks, device streams execute them.

A schedule is a sequence of tasks in program order. Each task costs `host_s` on the host thread (the runtime's
launch overhead, or PyTorch's per-op dispatch) and then `device_s` on a device stream (its kernel; 0 for a task the
host alone does, such as a view). The host dispatches in order. A kernel starts once the host has dispatched it, the
kernels it depends on have finished and its stream is free:

- synchronous (a CPU): the host thread runs each kernel itself, on the device's cores, so it dispatches the next task
  only when the kernel finishes; the schedule takes the sum of host and device time;
- asynchronous (a GPU): the host runs ahead of the device; each kernel goes to the stream where it can start first
  (of equal ones, the stream of its last-finishing dependency, which needs no cross-stream wait). Kernels on
  different streams overlap fully: an upper bound on overlap, since each kernel was priced with the whole device.

The predicted end-to-end time is when the last task finishes: the length of the critical path through host and
streams, which `Timeline.critical` lists (from each task back to whichever of the host's previous dispatch, a
dependency or its stream's previous kernel it waited for). Device-active time is the time at least one stream is busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

HOST = "host"

Segment = tuple[int, Literal["host", "device"]]
"""A task's host dispatch or its kernel."""


@dataclass(frozen=True)
class Task:
    """One step of a schedule."""

    name: str
    host_s: float
    """Host-thread time to dispatch it."""
    device_s: float
    """Stream time of its kernel; 0 when the host alone does the step."""
    depends_on: tuple[int, ...] = ()
    """Earlier tasks whose kernels must finish first (it reads or overwrites their data)."""


@dataclass(frozen=True)
class Span:
    """A task's time on one track."""

    task: int
    track: str
    """`host`, or `stream N`."""
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    """Where every task ran, and the critical path through them."""

    tasks: tuple[Task, ...]
    host: tuple[Span, ...]
    """One dispatch per task, in program order."""
    kernels: tuple[Span | None, ...]
    """Each task's kernel on its stream; None for host-only tasks."""
    critical: tuple[Segment, ...]
    """The segments of the critical path, first to last."""

    @property
    def e2e_s(self) -> float:
        ends = [span.end_s for span in (*self.host, *self.kernels) if span is not None]
        return max(ends, default=0.0)

    @property
    def active_s(self) -> float:
        """Time at least one stream is busy (the union of the kernels' spans)."""
        spans = sorted((span.start_s, span.end_s) for span in self.kernels if span is not None)
        total, reach = 0.0, 0.0
        for start, end in spans:
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    def on_critical_path(self, task: int) -> bool:
        return _device(task) in self.critical or _host(task) in self.critical


def schedule(tasks: Sequence[Task], streams: int = 1, synchronous: bool = True) -> Timeline:
    """Place `tasks` on the host thread and `streams` streams (see the module docstring)."""
    if streams < 1:
        raise ValueError(f"schedule: streams must be at least 1, got {streams}")
    host: list[Span] = []
    kernels: list[Span | None] = []
    ready: list[float] = []
    """When each task's result is available."""
    waited: dict[Segment, Segment | None] = {}
    """What each segment's start waited for."""
    stream_free = [0.0] * streams
    stream_last: list[int | None] = [None] * streams
    host_free = 0.0
    host_after: Segment | None = None
    """What the next dispatch waits for: the previous dispatch, or on a CPU the previous kernel."""
    for index, task in enumerate(tasks):
        host_end = host_free + task.host_s
        host.append(Span(index, HOST, host_free, host_end))
        waited[_host(index)] = host_after
        if task.device_s <= 0:
            kernels.append(None)
            ready.append(host_end)
            host_free, host_after = host_end, _host(index)
            continue
        last_input = max(task.depends_on, key=lambda j: ready[j], default=None)
        inputs_ready = ready[last_input] if last_input is not None else 0.0
        preferred = next((s for s in range(streams) if last_input is not None and stream_last[s] == last_input), 0)
        starts = [max(host_end, inputs_ready, stream_free[s]) for s in range(streams)]
        stream = min(range(streams), key=lambda s: (starts[s], s != preferred))
        start = starts[stream]
        end = start + task.device_s
        kernels.append(Span(index, f"stream {stream}", start, end))
        ready.append(end)
        previous = stream_last[stream]
        if start == host_end:
            waited[_device(index)] = _host(index)
        elif last_input is not None and start == inputs_ready:
            waited[_device(index)] = _device(last_input) if kernels[last_input] else _host(last_input)
        else:
            waited[_device(index)] = _device(previous) if previous is not None else _host(index)
        stream_free[stream], stream_last[stream] = end, index
        if synchronous:
            host_free, host_after = end, _device(index)
        else:
            host_free, host_after = host_end, _host(index)
    return Timeline(tuple(tasks), tuple(host), tuple(kernels), _critical(host, kernels, waited))


def _host(task: int) -> Segment:
    return (task, "host")


def _device(task: int) -> Segment:
    return (task, "device")


def _critical(
    host: Sequence[Span], kernels: Sequence[Span | None], waited: dict[Segment, Segment | None]
) -> tuple[Segment, ...]:
    """Back from the segment that ends last, through what each segment waited for."""
    host_ends = [(span.end_s, _host(span.task)) for span in host]
    ends = host_ends + [(span.end_s, _device(span.task)) for span in kernels if span is not None]
    if not ends:
        return ()
    path: list[Segment] = []
    segment: Segment | None = max(ends, key=lambda pair: pair[0])[1]
    while segment is not None:
        path.append(segment)
        segment = waited[segment]
    return tuple(reversed(path))
