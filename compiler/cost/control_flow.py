"""What data-dependent control flow costs: run on the host over sub-schedules, or as straight-line code.

On the host (gnomon's runtime, `graph.if` and `graph.while` kept), each decision pays `Device.host_branch_s` (the
predicate read back, the next sub-schedule started) and the values that cross a sub-schedule's boundary are copied
out and in, at DRAM bandwidth; then the ops of the region taken run as they would in straight-line code. A
straight-line region costs the sum of its ops' predicted times (`op_cost`, each op its own kernel: the regions are
priced before fusion, alike on both sides of a decision).

What a branch's two sides cost is known; which side runs is not: `host_if_s` weighs them by `taken`, the share of
runs that take the then side. A loop's trips are priced at a given count (its bound, where it has one).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import Block, SSAValue

from gnomon.cost.analytical import CostModelError, op_cost
from gnomon.cost.devices import Device
from gnomon.cost.values import nbytes
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.control_flow import IfOp, WhileOp
from gnomon.dialects.graph.tensor import ConstantOp

__all__ = ["block_s", "copy_s", "host_if_s", "host_while_s"]


def block_s(block: Block, device: Device, taken: float = 0.5) -> float:
    """The predicted seconds of a block's ops run in order, each as its own kernel; control flow in it runs on the
    host (a loop at its bound). A CostModelError for an op the model cannot price (a dynamic shape)."""
    total = 0.0
    for op in block.ops:
        if isinstance(op, IfOp):
            total += host_if_s(op, device, taken)
        elif isinstance(op, WhileOp):
            if op.trip_bound is None:
                raise CostModelError(f"cost model: graph.while without a bound on its trips ({op.name})")
            total += host_while_s(op, device, op.trip_bound, taken)
        elif isinstance(op, GraphOperation) and not isinstance(op, ConstantOp):
            total += op_cost(op, device).predicted_s
    return total


def copy_s(values: Iterable[SSAValue], device: Device) -> float:
    """Copying `values` out of one sub-schedule and into the next."""
    return 2 * sum(nbytes(v) for v in values) / device.dram.bandwidth_bytes_per_s


def host_if_s(op: IfOp, device: Device, taken: float = 0.5) -> float:
    """`graph.if` decided on the host: the decision, the results' copies and the side taken, weighed by `taken`."""
    then_s = block_s(op.then_region.block, device, taken)
    else_s = block_s(op.else_region.block, device, taken)
    return device.host_branch_s + copy_s(op.outputs, device) + taken * then_s + (1 - taken) * else_s


def host_while_s(op: WhileOp, device: Device, trips: int, taken: float = 0.5) -> float:
    """`graph.while` run `trips` times on the host: a decision after each condition, and the carried values copied
    into and out of each trip's sub-schedules."""
    cond_s = block_s(op.cond_region.block, device, taken)
    body_s = block_s(op.body_region.block, device, taken)
    decisions = (trips + 1) * (device.host_branch_s + cond_s)
    return decisions + trips * (body_s + copy_s(op.outputs, device))
