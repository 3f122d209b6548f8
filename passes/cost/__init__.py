"""gnomon's cost service: what a graph op, or a fused group of them, costs on a device.

- `roofline`: exact FLOPs, minimum bytes, intensity and the roofline time and bound of one op.
- `op_cost` / `group_cost`: the analytical models (tiling and cache reuse, wave quantization, launch overhead,
  embedding hit patterns) for one op or for ops fused into one kernel.

With a datasheet device (`calibrated = false`), every time is an analytical prediction, not a measurement.
"""

from gnomon.passes.cost.analytical import Efficiency, OpCost, efficiency, group_cost, op_cost
from gnomon.passes.cost.roofline import Bound, CostModelError, GemmShape, OpWork, Roofline, op_work, roofline

__all__ = [
    "Bound",
    "CostModelError",
    "Efficiency",
    "GemmShape",
    "OpCost",
    "OpWork",
    "Roofline",
    "efficiency",
    "group_cost",
    "op_cost",
    "op_work",
    "roofline",
]
