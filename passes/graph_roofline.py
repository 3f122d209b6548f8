"""`graph-roofline`: annotate each graph op with its roofline figures on a device.

Attributes, shared with `graph-cost` (which puts its analytical time and bound in the same two places):
- `gnomon.flops` (i64) and `gnomon.bytes` (i64): exact FLOPs and minimum bytes (conventions in
  `gnomon.cost.roofline`);
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
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, StringAttr, f64, i64
from xdsl.passes import ModulePass

from gnomon.cost.devices import Device, load_device
from gnomon.cost.graph import RooflineReport, roofline_report
from gnomon.cost.roofline import Bound
from gnomon.dialects.graph.base import GraphOperation

FLOPS_ATTR = "gnomon.flops"
BYTES_ATTR = "gnomon.bytes"
INTENSITY_ATTR = "gnomon.intensity"
TIME_ATTR = "gnomon.time_s"
BOUND_ATTR = "gnomon.bound"
DEVICE_ATTR = "gnomon.device"


def annotate_roofline(module: ModuleOp, device: Device) -> RooflineReport:
    """Attach each graph op's roofline figures as attributes and return them; a CostModelError on dynamic shapes."""
    report = roofline_report(module, device)
    module.attributes[DEVICE_ATTR] = StringAttr(device.name)
    for record in report.records:
        figures = record.figures
        set_figures(record.op, figures.flops, figures.bytes, figures.intensity, figures.time_s, figures.bound)
    return report


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


@dataclass(frozen=True)
class GraphRooflinePass(ModulePass):
    """Annotate graph ops with FLOPs, bytes, intensity, roofline time and bound on `device`."""

    name = "graph-roofline"

    device: str = "generic-cpu"
    """A shipped device (`h100`, `generic-cpu`, ...) or the path of a device file."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate_roofline(op, load_device(self.device))
