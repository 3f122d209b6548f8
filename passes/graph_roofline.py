"""`graph-roofline`: annotate each graph op with its roofline figures on a device.

Attributes, shared with `graph-cost` (which puts its analytical time and bound in the same two places):
- `gnomon.flops` (i64) and `gnomon.bytes` (i64): exact FLOPs and minimum bytes (conventions in
  `gnomon.passes.cost.roofline`);
- `gnomon.intensity` (f64): FLOPs per byte;
- `gnomon.time_s` (f64): max(flops / peak, bytes / DRAM bandwidth), in seconds;
- `gnomon.bound`: "compute" or "memory".
The module gets `gnomon.device`, the device the figures are for. Floats keep 6 significant digits in the IR, where
FileCheck reads them; `annotate_roofline` returns the full figures. With a datasheet device (`calibrated = false`)
the times are analytical, from datasheet peaks and bandwidths, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, f64, i64
from xdsl.passes import ModulePass

from gnomon.devices import Device, load_device
from gnomon.dialects.graph.base import GraphOperation
from gnomon.locations import location_name
from gnomon.passes.cost import Bound, Roofline, roofline

FLOPS_ATTR = "gnomon.flops"
BYTES_ATTR = "gnomon.bytes"
INTENSITY_ATTR = "gnomon.intensity"
TIME_ATTR = "gnomon.time_s"
BOUND_ATTR = "gnomon.bound"
DEVICE_ATTR = "gnomon.device"


@dataclass(frozen=True)
class RooflineRecord:
    """One op's roofline figures, and which op they belong to."""

    op: GraphOperation
    op_name: str
    location: str
    result_shapes: tuple[tuple[int, ...], ...]
    roofline: Roofline


@dataclass(frozen=True)
class RooflineReport:
    """The roofline of every graph op of a module, in program order."""

    device: Device
    records: tuple[RooflineRecord, ...]

    @property
    def total_flops(self) -> int:
        return sum(r.roofline.flops for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.roofline.bytes for r in self.records)

    @property
    def total_time_s(self) -> float:
        """The ops' roofline times one after another."""
        return sum(r.roofline.time_s for r in self.records)


def annotate_roofline(module: ModuleOp, device: Device) -> RooflineReport:
    """Attach each graph op's roofline figures as attributes and return them; a CostModelError on dynamic shapes."""
    module.attributes[DEVICE_ATTR] = StringAttr(device.name)
    records: list[RooflineRecord] = []
    for op in module.walk():
        if not isinstance(op, GraphOperation):
            continue
        figures = roofline(op, device)
        set_figures(op, figures.flops, figures.bytes, figures.intensity, figures.time_s, figures.bound)
        records.append(RooflineRecord(op, op.name, location_name(op.location), result_shapes(op), figures))
    return RooflineReport(device, tuple(records))


def set_figures(op: GraphOperation, flops: int, moved: int, intensity: float, time_s: float, bound: Bound) -> None:
    """The attributes both cost passes write."""
    op.attributes[FLOPS_ATTR] = IntegerAttr(flops, i64)
    op.attributes[BYTES_ATTR] = IntegerAttr(moved, i64)
    op.attributes[INTENSITY_ATTR] = significant(intensity)
    op.attributes[TIME_ATTR] = significant(time_s)
    op.attributes[BOUND_ATTR] = StringAttr(bound)


def significant(value: float) -> FloatAttr:
    """An f64 attribute rounded to 6 significant digits, which xDSL prints as `1.234560e-07`."""
    return FloatAttr(float(f"{value:.6g}"), f64)


def result_shapes(op: GraphOperation) -> tuple[tuple[int, ...], ...]:
    return tuple(r.type.get_shape() if isinstance(r.type, TensorType) else () for r in op.results)


@dataclass(frozen=True)
class GraphRooflinePass(ModulePass):
    """Annotate graph ops with FLOPs, bytes, intensity, roofline time and bound on `device`."""

    name = "graph-roofline"

    device: str = "generic-cpu"
    """A shipped device (`h100`, `generic-cpu`, ...) or the path of a device file."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate_roofline(op, load_device(self.device))
