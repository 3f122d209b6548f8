"""The `torch-eager` target of a training step: `zero_grad()`, the loss, `backward()` and `step()` as PyTorch
eager runs them, priced on the step's graph (the joint forward-backward graph with the optimizer's update appended,
before any rewrite of gnomon's).

- Forward ops run as in inference (`gnomon.cost.eager.eager_steps`: dispatch, call and kernel), and each op that
  depends on a trained parameter is recorded for autograd (`autograd_record_s`).
- The backward pass, everything after the loss in program order: autograd's engine runs one node per recorded
  op and one `AccumulateGrad` per parameter (`autograd_node_s`, measured with one op per node, that op's dispatch
  included); the joint graph's backward ops are the nodes' formulas, each dispatched and run. Where eager has one
  fused backward kernel (batch norm's, log-softmax's) torch.export's decompositions give several ops, and the
  prediction pays a dispatch for each.
- `zero_grad()` and the optimizer's `step()` in torch's `foreach` implementation: a fixed host cost and one per
  parameter (`<optimizer>_step_s`, `<optimizer>_param_s`: Python and the per-tensor dispatch of each foreach op);
  its kernels are gnomon's update's ops unfused, each one pass over its tensors as each foreach op is, written in
  place (`written_in_place`).

The host costs come from the device's `[eager_training]` table (`gnomon calibrate` measures them), else
`DEFAULTS`.
"""

from __future__ import annotations

from dataclasses import replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from gnomon.cost.analytical import written_in_place
from gnomon.cost.devices import Device
from gnomon.cost.eager import eager_steps
from gnomon.cost.report import Report
from gnomon.cost.steps import Step, build_report, program_function
from gnomon.cost.values import nbytes
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.locations import location_name

__all__ = ["DEFAULTS", "eager_training_report", "optimizer_key"]

DEFAULTS = {
    "autograd_record_s": 0.9e-6,
    "autograd_node_s": 3.6e-6,
    "sgd_step_s": 26e-6,
    "sgd_param_s": 1.0e-6,
    "sgd_momentum_step_s": 37e-6,
    "sgd_momentum_param_s": 3.6e-6,
    "adam_step_s": 71e-6,
    "adam_param_s": 12e-6,
}
"""The host costs as `eager_training_overheads` (what `gnomon calibrate` runs) measured them once on the 2-core
development VM (torch 2.13), rounded: the figures for a device whose file has no `[eager_training]` table (the
datasheet GPUs run the same Python on their host)."""


def optimizer_key(optimizer: object) -> str:
    """The `[eager_training]` keys' prefix of a gnomon optimizer: `sgd`, `sgd_momentum` or `adam` (AdamW's step
    is Adam's with the decay moved)."""
    name = type(optimizer).__name__.lower()
    if name == "sgd":
        return "sgd_momentum" if getattr(optimizer, "momentum", 0.0) else "sgd"
    return "adam"


def eager_training_report(module: ModuleOp, device: Device, name: str, optimizer: object,
                          trained: int, parameters: tuple[int, int]) -> Report:  # fmt: skip
    """The `torch-eager` target of a training step's graph (`module`: the joint graph with `append_optimizer`'s
    update, whose first `trained` arguments are the trained parameters, its first result the loss). The engine's
    cost is the first backward op's host time; `zero_grad` and the optimizer's Python, the first update op's."""
    costs = {**DEFAULTS, **device.eager_training}
    block = program_function(module).body.block
    ops = [op for op in block.ops if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp)]
    steps = eager_steps(module, device)
    assert len(steps) == len(ops), "eager_steps prices every op but constants"
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    updates = {op for op in ops if location_name(op.location).startswith("optimizer")}
    # What runs after the loss runs in backward(): the seed gradient is a folded constant, so program order, not
    # data flow, tells (the joint graph recomputes some forward values there, as eager's formulas do).
    loss = ret.operands[0].owner
    after_loss = ops[ops.index(loss) + 1 :] if isinstance(loss, GraphOperation) and loss in ops else []
    backward = set(after_loss) - updates
    recorded = _reading(ops, set(block.args[:trained])) - backward - updates
    key = optimizer_key(optimizer)
    host = {
        "engine": (len(recorded) + trained) * costs["autograd_node_s"],
        "optimizer": costs[f"{key}_step_s"] + trained * costs[f"{key}_param_s"],
    }
    priced: list[Step] = []
    for op, step in zip(ops, steps, strict=True):
        if op in updates:  # a foreach op's per-tensor dispatch is in the per-parameter cost; it writes in place
            host_s, host["optimizer"] = host["optimizer"], 0.0
            if step.cost is not None:
                cost = written_in_place(step.cost, sum(nbytes(r) for r in op.results), device)
                step = replace(step, cost=cost, task=replace(step.task, device_s=cost.kernel_s))
        elif op in backward:
            host_s, host["engine"] = step.task.host_s + host["engine"], 0.0
        else:
            host_s = step.task.host_s + (costs["autograd_record_s"] if op in recorded else 0.0)
        priced.append(replace(step, task=replace(step.task, host_s=host_s)))
    return build_report(name, "torch-eager", device, priced, 1, parameters, 0)


def _reading(ops: list[GraphOperation], sources: set[SSAValue]) -> set[Operation]:
    """The ops that read any of `sources`, directly or through other ops."""
    reached = set(sources)
    found: set[Operation] = set()
    for op in ops:
        if any(operand in reached for operand in op.operands):
            found.add(op)
            reached.update(op.results)
    return found
