"""What data-dependent control flow costs: run on the host over sub-schedules, or as straight-line code.

On the host (gnomon's runtime, `graph.if` and `graph.while` kept), each decision pays `Device.host_branch_s` (the
predicate read back, the next sub-schedule started), and each stretch of straight-line code between control ops is
a sub-schedule of its own: it pays its kernels and the copies of the values that cross its boundary, in and out.
Straight-line code inside a larger program pays its kernels only.

How straight-line code is priced is the caller's `Price`: a function of its ops, in order, to its kernels' and its
copies' seconds. `op_sum` prices each op as its own kernel (`op_cost`), the copies at DRAM bandwidth; a pass that can
lower the ops prices them as compiled (`graph-predicate` does: fused, lowered and priced by `gnomon_steps`).

What a branch's two sides cost is known; which side runs is not: `host_if_s` weighs them by `taken`, the share of
runs that take the then side. A loop runs `expected_trips`: its bound where its condition reads no data (a counted
loop runs exactly that many), else half way to it (a condition on data may stop the loop at any trip up to the
bound; without a profile, the middle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from gnomon.cost.analytical import CostModelError, op_cost
from gnomon.cost.devices import Device
from gnomon.cost.values import nbytes
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.control_flow import IfOp, WhileOp, YieldOp
from gnomon.dialects.graph.tensor import ConstantOp

__all__ = [
    "Price",
    "Priced",
    "counted",
    "crossing",
    "expected_trips",
    "host_if_s",
    "host_while_s",
    "op_sum",
    "region_s",
]


@dataclass(frozen=True)
class Priced:
    """Straight-line code's predicted seconds: its kernels, and copying what crosses its boundary in and out."""

    run_s: float
    copy_s: float


Price = Callable[[Sequence[Operation]], Priced]
"""Prices straight-line ops (no control flow among them), in order; a CostModelError if it cannot."""


def crossing(ops: Sequence[Operation]) -> tuple[list[SSAValue], list[SSAValue]]:
    """The values `ops` read from outside them (but constants), and those of their results read after them."""
    inside = set(ops)
    inputs: list[SSAValue] = []
    for op in ops:
        for operand in op.operands:
            owner = operand.owner
            if owner not in inside and not isinstance(owner, ConstantOp) and operand not in inputs:
                inputs.append(operand)
    outputs: list[SSAValue] = [
        r for op in ops for r in op.results if any(use.operation not in inside for use in r.uses)
    ]
    return inputs, outputs


def op_sum(device: Device, library: Callable[[GraphOperation], bool] = lambda op: False) -> Price:
    """Each op as its own kernel (`library` says which are library calls), the crossing values copied at DRAM
    bandwidth."""

    def price(ops: Sequence[Operation]) -> Priced:
        run = sum(
            op_cost(op, device, library=library(op)).predicted_s
            for op in ops
            if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp)
        )
        inputs, outputs = crossing(ops)
        copies = 2 * sum(nbytes(v) for v in (*inputs, *outputs)) / device.dram.bandwidth_bytes_per_s
        return Priced(run, copies)

    return price


def region_s(block: Block, device: Device, price: Price, taken: float = 0.5) -> float:
    """A region run on the host: each stretch of straight-line code a sub-schedule (its kernels and its copies), the
    control ops in it decided on the host."""
    total, stretch = 0.0, []
    for op in block.ops:
        if isinstance(op, IfOp | WhileOp):
            total += _stretch_s(stretch, price) + _host_s(op, device, price, taken)
            stretch = []
        elif not isinstance(op, YieldOp):
            stretch.append(op)
    return total + _stretch_s(stretch, price)


def _stretch_s(ops: Sequence[Operation], price: Price) -> float:
    if not any(isinstance(op, GraphOperation) and not isinstance(op, ConstantOp) for op in ops):
        return 0.0  # nothing to run: the host passes values on
    priced = price(ops)
    return priced.run_s + priced.copy_s


def _host_s(op: IfOp | WhileOp, device: Device, price: Price, taken: float) -> float:
    if isinstance(op, IfOp):
        return host_if_s(op, device, price, taken)
    return host_while_s(op, device, expected_trips(op), price, taken)


def host_if_s(op: IfOp, device: Device, price: Price, taken: float = 0.5) -> float:
    """`graph.if` decided on the host: the decision, then the side taken, weighed by `taken`."""
    then_s = region_s(op.then_region.block, device, price, taken)
    else_s = region_s(op.else_region.block, device, price, taken)
    return device.host_branch_s + taken * then_s + (1 - taken) * else_s


def host_while_s(op: WhileOp, device: Device, trips: float, price: Price, taken: float = 0.5) -> float:
    """`graph.while` run `trips` times on the host: its condition and a decision before each trip and after the
    last, its body on each trip."""
    cond_s = region_s(op.cond_region.block, device, price, taken)
    body_s = region_s(op.body_region.block, device, price, taken)
    return (trips + 1) * (device.host_branch_s + cond_s) + trips * body_s


def expected_trips(op: WhileOp) -> float:
    """The trips a bounded loop is priced at: its bound when its condition reads no data, else half way to it."""
    bound = op.trip_bound
    if bound is None:
        raise CostModelError("cost model: graph.while without a bound on its trips")
    return float(bound) if counted(op) else (bound + 1) / 2


def counted(op: WhileOp) -> bool:
    """Whether the loop's condition reads only constants and carried values that start constant and change only by
    constants (its counter): then it runs a fixed number of trips, whatever the data."""
    cond, body = op.cond_region.block, op.body_region.block
    cond_yield, body_yield = cond.last_op, body.last_op
    assert cond_yield is not None
    assert body_yield is not None
    static = {i for i, init in enumerate(op.inits) if isinstance(init.owner, ConstantOp)}
    changed = True
    while changed:  # drop the carried values whose next value reads data, until none does
        changed = False
        for index in sorted(static):
            if not _data_free(body_yield.operands[index], body, static):
                static.discard(index)
                changed = True
    return _data_free(cond_yield.operands[0], cond, static)


def _data_free(value: SSAValue, block: Block, static: set[int]) -> bool:
    """Whether `value` is computed in `block` from constants and its static arguments only."""
    if value in block.args:
        return block.args.index(value) in static
    owner = value.owner
    if isinstance(owner, ConstantOp):
        return True
    if not isinstance(owner, Operation) or owner.parent_block() is not block:
        return False  # an argument of the function, or a value computed outside the loop: data
    return all(_data_free(operand, block, static) for operand in owner.operands)
