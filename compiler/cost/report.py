"""The report of a model's predicted cost: a row per kernel (the `gnomon` target) or op (`torch-eager`), totals,
the predicted end-to-end and device-active times; as a table, JSON, or a Chrome trace of the timeline."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gnomon.cost.critical_path import Timeline
from gnomon.cost.devices import Device
from gnomon.cost.roofline import Bound
from gnomon.cost.trace import DISPATCH, KERNEL, TraceEvent, trace_json
from gnomon.errors import GnomonError

TARGETS = ("gnomon", "torch-eager")
"""What a model can be priced as: gnomon's compiled program, or the imported graph run op by op by eager PyTorch."""


class AnalysisError(GnomonError):
    """A model cannot be analyzed as asked (an unknown target, a batch size the model cannot take)."""


@dataclass(frozen=True)
class OpRecord:
    """One kernel (gnomon) or op (torch-eager) of the predicted schedule."""

    name: str
    """The kernel's symbol (gnomon), or the op's name (torch-eager)."""
    op: str
    """The graph ops it runs, `conv+relu`; `copy` for the runtime's input and output copies."""
    kind: str
    """`generated` or the library call (gnomon), `torch` (torch-eager), `runtime` (a copy)."""
    location: str
    shapes: tuple[tuple[int, ...], ...]
    """Result shapes."""
    flops: int
    bytes: int
    """The least bytes it moves (a fused kernel: only those crossing its boundary)."""
    bound: Bound
    model: str
    """The cost model that priced it (gemm, conv, stream, fused, ...)."""
    overhead_s: float
    """Host time to dispatch it: the runtime's launch overhead, or PyTorch's dispatch."""
    kernel_s: float
    """Its kernel's predicted time on the device; 0 for a view."""
    start_s: float
    """When it starts in the predicted timeline (its dispatch)."""
    end_s: float
    critical: bool
    """Whether it lies on the timeline's critical path."""

    @property
    def predicted_s(self) -> float:
        """Its time run alone: dispatch, then kernel (what a profile measures per launch on a CPU)."""
        return self.overhead_s + self.kernel_s

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def is_kernel(self) -> bool:
        """A launch of a kernel (not a copy of the runtime, not a view)."""
        return self.kind != "runtime" and self.kernel_s > 0


@dataclass(frozen=True)
class Report:
    """A model's predicted cost on one device for one target."""

    model: str
    target: str
    device: Device
    records: tuple[OpRecord, ...]
    timeline: Timeline
    parameters: int
    """Elements of the model's constants (weights)."""
    parameter_bytes: int
    activation_bytes: int
    """Peak bytes of intermediate and output tensors live at once (gnomon: its memory plan's lower bound)."""

    @property
    def total_flops(self) -> int:
        return sum(r.flops for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.records)

    @property
    def predicted_e2e_s(self) -> float:
        return self.timeline.e2e_s

    @property
    def predicted_active_s(self) -> float:
        return self.timeline.active_s

    @property
    def kernels(self) -> int:
        return sum(1 for r in self.records if r.is_kernel)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "target": self.target,
            "device": {
                "name": self.device.name,
                "kind": self.device.kind,
                "calibrated": self.device.calibrated,
                "provenance": self.device.provenance,
            },
            "totals": {
                "flops": self.total_flops,
                "bytes": self.total_bytes,
                "parameters": self.parameters,
                "parameter_bytes": self.parameter_bytes,
                "activation_bytes": self.activation_bytes,
                "kernels": self.kernels,
                "predicted_e2e_s": self.predicted_e2e_s,
                "predicted_active_s": self.predicted_active_s,
            },
            "ops": [
                {
                    "name": r.name,
                    "op": r.op,
                    "kind": r.kind,
                    "location": r.location,
                    "shapes": [list(s) for s in r.shapes],
                    "flops": r.flops,
                    "bytes": r.bytes,
                    "intensity": r.intensity,
                    "bound": r.bound,
                    "model": r.model,
                    "overhead_s": r.overhead_s,
                    "kernel_s": r.kernel_s,
                    "predicted_s": r.predicted_s,
                    "start_s": r.start_s,
                    "end_s": r.end_s,
                    "critical": r.critical,
                }
                for r in self.records
            ],
        }

    def to_json(self) -> str:
        """What `gnomon analyze --json` prints."""
        return json.dumps(self.to_dict(), indent=2)

    def render(self) -> str:
        """The per-op table and the totals, as `gnomon analyze` prints them."""
        total = sum(r.predicted_s for r in self.records) or 1e-30
        lines = [
            f"{self.model}: target {self.target}, device {self.device.provenance}",
            f"{'#':>4} {'location':<24} {'op':<28} {'shape':<20} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} "
            f"{'bound':<7} {'time':>10} {'share':>6}",
        ]
        for index, r in enumerate(self.records):
            shape = "x".join(map(str, r.shapes[0])) if r.shapes else ""
            lines.append(
                f"{index:>4} {r.location[:24]:<24} {r.op[:28]:<28} {shape[:20]:<20} {_si(r.flops):>9} "
                f"{_si(r.bytes):>9} {r.intensity:>7.1f} {r.bound:<7} {_time(r.predicted_s):>10} "
                f"{r.predicted_s / total:>6.1%}"
            )
        lines += [
            f"totals: {_si(self.total_flops)}FLOP, {self.parameters:,} parameters ({_si(self.parameter_bytes)}B), "
            f"peak activations {_si(self.activation_bytes)}B, {self.kernels} kernels",
            f"predicted: end to end {_time(self.predicted_e2e_s)}, device active {_time(self.predicted_active_s)}",
        ]
        if not self.device.calibrated:
            lines.append(f"note: {self.device.name} figures are analytical, from datasheets; nothing was measured")
        return "\n".join(lines)

    def trace(self) -> dict[str, Any]:
        """The predicted timeline as Chrome trace-event JSON: one `kernel` event per kernel on its stream."""
        events: list[TraceEvent] = []
        for index, r in enumerate(self.records):
            args: dict[str, Any] = {"op": r.op, "kind": r.kind, "location": r.location, "critical": r.critical}
            host = self.timeline.host[index]
            if host.end_s > host.start_s:
                events.append(TraceEvent(r.name, DISPATCH, "host", host.start_s, host.end_s - host.start_s, args))
            span = self.timeline.kernels[index]
            if span is not None:
                args |= {"flops": r.flops, "bytes": r.bytes, "bound": r.bound}
                events.append(TraceEvent(r.name, KERNEL, span.track, span.start_s, span.end_s - span.start_s, args))
        title = f"predicted: {self.model}, {self.target} on {self.device.name}"
        metadata = {"provenance": self.device.provenance, "predicted_e2e_s": self.predicted_e2e_s}
        return trace_json(title, events, metadata)


def _si(value: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}"
    return f"{value:.0f}"


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"
