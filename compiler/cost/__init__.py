'''gnomon's cost service: what graph ops, fused groups of them and whole programs cost on a device, for the two
targets gnomon predicts, `gnomon` (its compiled program) and `torch-eager` (the imported graph, op by op).

Modules, lowest first:
- `devices`: device files (peaks, memory levels, overheads, fitted efficiencies), shipped or calibrated;
- `roofline`: the work model (exact FLOPs, least bytes) and the roofline time and bound of one op;
- `analytical`: kernel models refining the roofline (tiling, cache reuse, waves, launches), for one op
  (`op_cost`) or ops fused into one kernel (`group_cost`);
- `threads`: how many threads a kernel runs on, on a CPU (the policy the runtime splits calls by);
- `calls`: what a call costs beyond its kernel: library calls, warm or cold, eager's ATen calls, libm calls;
- `critical_path`: tasks on a host thread and device streams, the end-to-end time and the critical path;
- `program` and `eager`: the two targets' schedules, and their `Report`s (`program_report`, `eager_report`);
- `graph`: every graph op's figures, what the `graph-roofline` and `graph-cost` passes annotate;
- `report`, `trace`, `plot`: the report as a table, JSON, a Chrome trace, a roofline plot;
- `fit`: the calibration's fit of a device's efficiencies to measurements.

The package imports neither torch nor gnomon's runtime. With a device file from datasheets (`calibrated = false`)
every figure is an analytical prediction, not a measurement.

Price one op, a candidate fused group and a whole program:

>>> from xdsl.parser import Parser
>>> from gnomon.context import gnomon_context
>>> from gnomon.executable import lower
>>> from gnomon import cost
>>> module = Parser(gnomon_context(), """
... func.func @main(%x: tensor<64x256xf32>, %w: tensor<128x256xf32>) -> tensor<64x128xf32> {
...   %y = graph.linear %x, %w : (tensor<64x256xf32>, tensor<128x256xf32>) -> tensor<64x128xf32>
...   %z = graph.relu %y : (tensor<64x128xf32>) -> tensor<64x128xf32>
...   func.return %z : tensor<64x128xf32>
... }""").parse_module()
>>> linear, relu = cost.graph_ops(module)
>>> device = cost.load_device("generic-cpu")

One op, as one kernel (`gnomon`) and as eager PyTorch runs it (`torch-eager`): an `OpCost`, with its FLOPs,
bytes, model, kernel and launch times.

>>> alone = cost.op_cost(linear, device)
>>> alone.flops, alone.model
(4194304, 'gemm')
>>> cost.eager_op_cost(linear, device).kernel_s == alone.kernel_s
True

A candidate fusion: the two ops as one kernel pay one launch, and the intermediate never leaves the chip.

>>> fused = cost.group_cost([linear, relu], device)
>>> fused.bytes < alone.bytes + cost.op_cost(relu, device).bytes
True
>>> fused.launch_s == device.launch_overhead_s
True

A whole program, for each target: eager runs the graph op by op; gnomon's runtime runs the module gnomon lowers it
to, here one library call that fuses the relu, between its copies of the input and result arrays. A `Report` has a
record per step and the predicted end-to-end time of their schedule.

>>> eager = cost.eager_report(module, device)
>>> [(record.op, record.kind) for record in eager.records]
[('linear', 'torch'), ('relu', 'torch')]
>>> compiled = cost.program_report(lower(module.clone()), device)
>>> [(record.op, record.kind) for record in compiled.records if record.is_kernel]
[('linear+relu', 'aten.linear+relu')]
>>> compiled.predicted_e2e_s > 0 and eager.predicted_e2e_s > 0
True
'''

from gnomon.cost.analytical import Efficiency, OpCost, efficiency, group_cost, op_cost
from gnomon.cost.devices import Device, load_device
from gnomon.cost.eager import eager_op_cost, eager_report
from gnomon.cost.graph import cost_report, graph_ops, roofline_report
from gnomon.cost.program import kernel_cost, program_report
from gnomon.cost.report import TARGETS, OpRecord, Report
from gnomon.cost.roofline import Bound, GemmShape, OpWork, Roofline, op_work, roofline
from gnomon.cost.values import CostModelError

__all__ = [
    "TARGETS",
    "Bound",
    "CostModelError",
    "Device",
    "Efficiency",
    "GemmShape",
    "OpCost",
    "OpRecord",
    "OpWork",
    "Report",
    "Roofline",
    "cost_report",
    "eager_op_cost",
    "eager_report",
    "efficiency",
    "graph_ops",
    "group_cost",
    "kernel_cost",
    "load_device",
    "op_cost",
    "op_work",
    "program_report",
    "roofline",
    "roofline_report",
]
