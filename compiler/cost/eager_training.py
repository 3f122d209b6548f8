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
  its kernels are torch's foreach ops (`foreach_ops`), one pass over each parameter-sized tensor list each, mostly
  in place (`written_in_place`), not gnomon's update graph, which spells some of them in more ops (SGD's learning
  rate a multiply of its own). An embedding table's sparse update (SparseAdam's) is its graph op.
- Results larger than glibc's mmap threshold fault their pages in every step (`gnomon.cost.eager.fresh_pages_s`):
  `zero_grad()` sets gradients to None, so a large table's dense gradient is fresh memory each step.

The host costs come from the device's `[eager_training]` table (`gnomon calibrate` measures them), else
`DEFAULTS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from gnomon.cost.analytical import OpCost, pass_cost
from gnomon.cost.critical_path import Task
from gnomon.cost.devices import Device
from gnomon.cost.eager import eager_steps, fresh_pages_s
from gnomon.cost.report import Report
from gnomon.cost.steps import Step, build_report, program_function
from gnomon.cost.values import elements, nbytes
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.grad import EmbeddingBagAdamUpdateOp, EmbeddingBagUpdateOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.locations import location_name

__all__ = ["DEFAULTS", "ForeachOp", "eager_training_report", "foreach_ops", "optimizer_key", "priced_ops"]

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


@dataclass(frozen=True)
class ForeachOp:
    """One `torch._foreach_*` call of an optimizer's `step()`: a kernel per parameter that reads `reads` tensors
    of the parameter's size and writes one, over one it read (in place) unless `fresh`, at `flops` per element."""

    name: str
    reads: int
    flops: int
    fresh: bool = False


def foreach_ops(optimizer: object) -> tuple[ForeachOp, ...]:
    """The foreach calls of torch.optim's `_multi_tensor_sgd` / `_multi_tensor_adam` (torch 2.13) in a step after
    the first (the momentum buffers exist), for a gnomon optimizer's settings."""
    decay = getattr(optimizer, "weight_decay", 0.0)
    added_decay = (ForeachOp("_foreach_add", 2, 2, fresh=True),) if decay else ()  # grads + decay * params
    if optimizer_key(optimizer) != "adam":
        momentum: tuple[ForeachOp, ...] = ()
        if getattr(optimizer, "momentum", 0.0):
            momentum = (ForeachOp("_foreach_mul_", 1, 1), ForeachOp("_foreach_add_", 2, 2))
            if getattr(optimizer, "nesterov", False):
                momentum += (ForeachOp("_foreach_add_", 2, 2),)
        return (*added_decay, *momentum, ForeachOp("_foreach_add_", 2, 2))
    if decay and getattr(optimizer, "decoupled", False):
        added_decay = (ForeachOp("_foreach_mul_", 1, 1),)  # AdamW scales the parameters
    return (
        *added_decay,
        ForeachOp("_foreach_lerp_", 2, 3),  # exp_avg
        ForeachOp("_foreach_mul_", 1, 1),  # exp_avg_sq * beta2
        ForeachOp("_foreach_addcmul_", 2, 3),  # + (1 - beta2) * grad * grad
        ForeachOp("_foreach_sqrt", 1, 1, fresh=True),
        ForeachOp("_foreach_div_", 1, 1),  # / sqrt(bias correction 2)
        ForeachOp("_foreach_add_", 1, 1),  # + eps
        ForeachOp("_foreach_addcdiv_", 3, 3),  # params - step size * exp_avg / denominator
    )


def eager_training_report(module: ModuleOp, device: Device, name: str, optimizer: object,
                          trained: int, parameters: tuple[int, int]) -> Report:  # fmt: skip
    """The `torch-eager` target of a training step's graph (`module`: the joint graph with `append_optimizer`'s
    update, whose first `trained` arguments are the trained parameters, its first result the loss). The engine's
    cost is the first backward op's host time; `zero_grad` and the optimizer's Python, the first foreach op's."""
    costs = {**DEFAULTS, **device.eager_training}
    block = program_function(module).body.block
    ops = _graph_ops(module)
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    updates = _updates(ops)
    table_updates = {op for op in updates if isinstance(op, EmbeddingBagUpdateOp | EmbeddingBagAdamUpdateOp)}
    steps = eager_steps(module, device, skip=updates - table_updates)
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
    for op, step in zip(priced_ops(module), steps, strict=True):
        if op in table_updates:
            host_s, host["optimizer"] = host["optimizer"], 0.0
        elif op in backward:
            host_s, host["engine"] = step.task.host_s + host["engine"], 0.0
        else:
            host_s = step.task.host_s + (costs["autograd_record_s"] if op in recorded else 0.0)
        priced.append(replace(step, task=replace(step.task, host_s=host_s)))
    sparse = {operand for op in table_updates for operand in op.operands}
    dense = [argument for argument in block.args[:trained] if argument not in sparse]
    for call in foreach_ops(optimizer) if dense else ():
        cost = _foreach_cost(call, dense, device)
        host_s, host["optimizer"] = host["optimizer"], 0.0
        task = Task(call.name, host_s, cost.kernel_s, ())
        priced.append(Step(task, call.name, "torch", "optimizer", (), cost))
    return build_report(name, "torch-eager", device, priced, 1, parameters, 0)


def _foreach_cost(call: ForeachOp, parameters: Sequence[SSAValue], device: Device) -> OpCost:
    """One foreach call's kernels over `parameters`, one after another, as one cost."""
    costs = []
    for parameter in parameters:
        size = nbytes(parameter)
        cost = pass_cost(call.reads * size, size, call.flops * elements(parameter), device, in_place=not call.fresh)
        costs.append(replace(cost, first_touch_s=fresh_pages_s(size, device) if call.fresh else 0.0))
    return OpCost(
        flops=sum(c.flops for c in costs),
        bytes=sum(c.bytes for c in costs),
        roofline_s=sum(c.roofline_s for c in costs),
        roofline_bound="memory",
        compute_s=sum(c.compute_s for c in costs),
        memory_s=sum(c.memory_s for c in costs),
        launch_s=0.0,
        model="stream",
        first_touch_s=sum(c.first_touch_s for c in costs),
    )


def _graph_ops(module: ModuleOp) -> list[GraphOperation]:
    block = program_function(module).body.block
    return [op for op in block.ops if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp)]


def _updates(ops: Sequence[GraphOperation]) -> set[GraphOperation]:
    return {op for op in ops if location_name(op.location).startswith("optimizer")}


def priced_ops(module: ModuleOp) -> list[GraphOperation]:
    """The graph ops of a training step that `eager_training_report`'s first records price, one each, in order (the
    foreach optimizer's calls follow them): all but the dense optimizer updates, which the foreach calls replace."""
    ops = _graph_ops(module)
    dense = {op for op in _updates(ops) if not isinstance(op, EmbeddingBagUpdateOp | EmbeddingBagAdamUpdateOp)}
    return [op for op in ops if op not in dense]


def _reading(ops: list[GraphOperation], sources: set[SSAValue]) -> set[Operation]:
    """The ops that read any of `sources`, directly or through other ops."""
    reached = set(sources)
    found: set[Operation] = set()
    for op in ops:
        if any(operand in reached for operand in op.operands):
            found.add(op)
            reached.update(op.results)
    return found
