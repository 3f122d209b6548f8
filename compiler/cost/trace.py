"""Chrome trace-event JSON (what Perfetto and chrome://tracing open) of predicted and measured timelines.

Both `gnomon analyze --trace` (predicted) and `gnomon run --profile --trace` (measured) write this format, so the
two open side by side: one process per trace, named for what it shows; thread 0 is the host, thread N + 1 is
stream N. Kernels are complete events (`"ph": "X"`) of category `kernel`, named by their kernel (or op), on a
stream's track; host dispatches are category `dispatch` on the host track. Times are in microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnomon.errors import GnomonError

KERNEL = "kernel"
DISPATCH = "dispatch"


@dataclass(frozen=True)
class TraceEvent:
    name: str
    category: str
    """`kernel` or `dispatch`."""
    track: str
    """`host` or `stream N`."""
    start_s: float
    duration_s: float
    args: Mapping[str, Any] = field(default_factory=dict[str, Any])


def _thread_id(track: str) -> int:
    return 0 if track == "host" else int(track.removeprefix("stream ")) + 1


def trace_json(title: str, events: Sequence[TraceEvent], metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The trace-event document of `events`, in one process named `title`."""
    tracks = sorted({"host", *(event.track for event in events)}, key=_thread_id)
    trace: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": title}}]
    trace += [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": _thread_id(track), "args": {"name": track}}
        for track in tracks
    ]
    trace += [
        {
            "ph": "X",
            "name": event.name,
            "cat": event.category,
            "pid": 1,
            "tid": _thread_id(event.track),
            "ts": event.start_s * 1e6,
            "dur": event.duration_s * 1e6,
            "args": dict(event.args),
        }
        for event in events
    ]
    return {"traceEvents": trace, "displayTimeUnit": "ms", "otherData": dict(metadata or {})}


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Write a trace document (`trace_json`'s) to `path`."""
    try:
        path.write_text(json.dumps(document, indent=1))
    except OSError as error:
        raise GnomonError(f"cannot write the trace {path}: {error.strerror or error}") from error
