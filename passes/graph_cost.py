"""`graph-cost`: annotate each graph op with its analytical cost on a device.

The attributes of `graph-roofline` (`gnomon.flops`, `gnomon.bytes`, `gnomon.intensity`), with the analytical model's
answers where the roofline puts its own:
- `gnomon.time_s` (f64): the op's predicted time run alone, its kernel launch plus its kernel, in seconds;
- `gnomon.bound`: what limits the kernel under the model, "compute" or "memory";
and two more:
- `gnomon.roofline_s` (f64): the roofline time, for comparison;
- `gnomon.model`: which model priced the op (gemm, conv, depthwise-conv, attention, embedding, stream, view).
Models and their parameters live in `gnomon.cost.analytical`. With a datasheet device (`calibrated = false`)
the times are analytical predictions from datasheet figures, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from gnomon.cost.devices import Device, load_device
from gnomon.cost.graph import CostReport, cost_report
from gnomon.passes.graph_roofline import DEVICE_ATTR, set_figures, significant

ROOFLINE_TIME_ATTR = "gnomon.roofline_s"
MODEL_ATTR = "gnomon.model"


def annotate_cost(module: ModuleOp, device: Device) -> CostReport:
    """Attach each graph op's analytical cost as attributes and return it; a CostModelError on dynamic shapes."""
    report = cost_report(module, device)
    module.attributes[DEVICE_ATTR] = StringAttr(device.name)
    for record in report.records:
        cost = record.figures
        set_figures(record.op, cost.flops, cost.bytes, cost.intensity, cost.predicted_s, cost.bound)
        record.op.attributes[ROOFLINE_TIME_ATTR] = significant(cost.roofline_s)
        record.op.attributes[MODEL_ATTR] = StringAttr(cost.model)
    return report


@dataclass(frozen=True)
class GraphCostPass(ModulePass):
    """Annotate graph ops with FLOPs, bytes, intensity, predicted time, bound and model on `device`."""

    name = "graph-cost"

    device: str = "generic-cpu"
    """A shipped device (`h100`, `generic-cpu`, ...) or the path of a device file."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate_cost(op, load_device(self.device))
