"""`graph-cost`: annotate each graph op with its analytical cost on a device.

The attributes of `graph-roofline` (`gnomon.flops`, `gnomon.bytes`, `gnomon.intensity`), with the analytical model's
answers where the roofline puts its own:
- `gnomon.time_s` (f64): the op's predicted time run alone, its kernel launch plus its kernel, in seconds;
- `gnomon.bound`: what limits the kernel under the model, "compute" or "memory";
and two more:
- `gnomon.roofline_s` (f64): the roofline time, for comparison;
- `gnomon.model`: which model priced the op (gemm, conv, depthwise-conv, attention, embedding, stream, view).
Models and their parameters live in `gnomon.passes.cost.analytical`. With a datasheet device (`calibrated = false`)
the times are analytical predictions from datasheet figures, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from gnomon.devices import Device, load_device
from gnomon.dialects.graph.base import GraphOperation
from gnomon.locations import location_name
from gnomon.passes.cost import OpCost, op_cost
from gnomon.passes.graph_roofline import DEVICE_ATTR, result_shapes, set_figures, significant

ROOFLINE_TIME_ATTR = "gnomon.roofline_s"
MODEL_ATTR = "gnomon.model"


@dataclass(frozen=True)
class CostRecord:
    """One op's cost, and which op it belongs to."""

    op: GraphOperation
    op_name: str
    location: str
    result_shapes: tuple[tuple[int, ...], ...]
    cost: OpCost


@dataclass(frozen=True)
class CostReport:
    """The cost of every graph op of a module, in program order."""

    device: Device
    records: tuple[CostRecord, ...]

    @property
    def total_flops(self) -> int:
        return sum(r.cost.flops for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.cost.bytes for r in self.records)

    @property
    def total_roofline_s(self) -> float:
        return sum(r.cost.roofline_s for r in self.records)

    @property
    def total_predicted_s(self) -> float:
        """The ops' predicted times one after another: launches do not overlap kernels here."""
        return sum(r.cost.predicted_s for r in self.records)


def annotate_cost(module: ModuleOp, device: Device) -> CostReport:
    """Attach each graph op's analytical cost as attributes and return it; a CostModelError on dynamic shapes."""
    module.attributes[DEVICE_ATTR] = StringAttr(device.name)
    records: list[CostRecord] = []
    for op in module.walk():
        if not isinstance(op, GraphOperation):
            continue
        cost = op_cost(op, device)
        set_figures(op, cost.flops, cost.bytes, cost.intensity, cost.predicted_s, cost.bound)
        op.attributes[ROOFLINE_TIME_ATTR] = significant(cost.roofline_s)
        op.attributes[MODEL_ATTR] = StringAttr(cost.model)
        records.append(CostRecord(op, op.name, location_name(op.location), result_shapes(op), cost))
    return CostReport(device, tuple(records))


@dataclass(frozen=True)
class GraphCostPass(ModulePass):
    """Annotate graph ops with FLOPs, bytes, intensity, predicted time, bound and model on `device`."""

    name = "graph-cost"

    device: str = "generic-cpu"
    """A shipped device (`h100`, `generic-cpu`, ...) or the path of a device file."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate_cost(op, load_device(self.device))
