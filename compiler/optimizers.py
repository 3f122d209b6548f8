"""Optimizers: SGD and Adam/AdamW as torch.optim defines them, appended to a training step's graph.

A training step imported by `gnomon.frontends.torch_training` computes (loss, gradients, updated buffers) from
(parameters, buffers, inputs). `append_optimizer` turns it into one step of training: the optimizer's state (a
momentum buffer, Adam's two moments, and the step count) becomes arguments after the buffers, and the function
returns the loss, the new parameters, the new buffers, the new optimizer state and the gradients. The update is
written with the graph dialect's elementwise ops, each parameter's chain located at `optimizer.<name>`, so that
`graph-fuse` makes each parameter's update one generated kernel, as torch's fused optimizers do; the bias
corrections of Adam are scalars, computed once a step in float64 as torch computes them in Python.

Without `keep_gradients` the step returns no gradients, and each parameter's update is placed right after its
gradient and the last read of its old value, so that the gradient dies there. Plain SGD then updates an embedding
table on its looked-up rows alone (`graph.embedding_bag_update`) and never makes its dense gradient. `Adam(sparse=
True)` updates tables as torch.optim.SparseAdam does (`graph.embedding_bag_adam_update`), with or without the
gradients returned: lazy Adam is another update, not a faster form of Adam's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    FunctionType,
    ModuleOp,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.rewriter import InsertPoint, Rewriter

from gnomon.dialects import rt
from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.constant_values import numpy_to_dense
from gnomon.dialects.graph.grad import EmbeddingBagAdamUpdateOp, EmbeddingBagGradOp, EmbeddingBagUpdateOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
from gnomon.errors import GnomonError
from gnomon.locations import name_location

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Optimizer",
    "append_optimizer",
    "optimizer_from_spec",
    "optimizer_label",
    "optimizer_of",
    "optimizer_spec",
]

STEP = "step"
"""The optimizer state's step count, one float32 scalar for all parameters (torch keeps one per parameter, always
equal within a parameter group)."""


@dataclass(frozen=True)
class SGD:
    """torch.optim.SGD's update."""

    lr: float = 0.01
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    def __post_init__(self) -> None:
        _check_nonnegative("SGD", lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise GnomonError("SGD: Nesterov momentum needs a momentum and zero dampening")

    @property
    def slots(self) -> tuple[str, ...]:
        """The per-parameter state, each of the parameter's shape, by torch's names."""
        return ("momentum_buffer",) if self.momentum else ()


@dataclass(frozen=True)
class Adam:
    """torch.optim.Adam's update (without amsgrad); `decoupled` weight decay is AdamW's. With `sparse`, each
    embedding table whose gradient is an embedding (bag)'s alone takes torch.optim.SparseAdam's update instead, as
    a table with `sparse=True` trained by SparseAdam beside Adam for the rest: only the looked-up rows and their
    moments move (lazy Adam), and the table's dense gradient is never made (unless the step returns it)."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    sparse: bool = False

    def __post_init__(self) -> None:
        _check_nonnegative("Adam", lr=self.lr, eps=self.eps, weight_decay=self.weight_decay)
        if not all(0.0 <= beta < 1.0 for beta in self.betas):
            raise GnomonError(f"Adam: betas must be in [0, 1), got {tuple(self.betas)}")
        if self.sparse and self.weight_decay:
            raise GnomonError("Adam: sparse table updates (torch.optim.SparseAdam's) take no weight decay")

    @property
    def slots(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")


def AdamW(
    lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2
) -> Adam:
    """torch.optim.AdamW: Adam with weight decay applied to the parameter, not added to the gradient."""
    return Adam(lr, betas, eps, weight_decay, decoupled=True)


Optimizer = SGD | Adam


def optimizer_of(train: object) -> Optimizer:
    """`gnomon.compile`'s `train=`: True is plain SGD at lr 0.01, else an optimizer of this module."""
    if train is True:
        return SGD()
    if isinstance(train, SGD | Adam):
        return train
    raise GnomonError(f"train= takes True, gnomon.SGD(...), gnomon.Adam(...) or gnomon.AdamW(...), not {train!r}")


def optimizer_label(optimizer: Optimizer) -> str:
    """The optimizer as torch.optim spells it, with the settings that differ from its defaults: `SGD(lr=0.1,
    momentum=0.9)`, `AdamW(lr=0.001)`."""
    name = "AdamW" if isinstance(optimizer, Adam) and optimizer.decoupled else type(optimizer).__name__
    defaults = AdamW() if name == "AdamW" else type(optimizer)()
    changed = [
        f"{f.name}={getattr(optimizer, f.name)}"
        for f in fields(optimizer)
        if f.name == "lr" or (f.name != "decoupled" and getattr(optimizer, f.name) != getattr(defaults, f.name))
    ]
    return f"{name}({', '.join(changed)})"


def optimizer_spec(optimizer: Optimizer) -> str:
    """The optimizer as JSON (its type and every setting), which `optimizer_from_spec` reads back."""
    return json.dumps({"type": type(optimizer).__name__, **asdict(optimizer)})


def optimizer_from_spec(spec: str) -> Optimizer:
    """The optimizer `optimizer_spec` wrote; a GnomonError for text it did not write."""
    try:
        fields = json.loads(spec)
        kind = {"SGD": SGD, "Adam": Adam}[fields.pop("type")]
        if "betas" in fields:
            fields["betas"] = tuple(fields["betas"])
        return kind(**fields)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GnomonError(f"not an optimizer gnomon wrote: {spec!r}") from e


def _check_nonnegative(name: str, **values: float) -> None:
    for key, value in values.items():
        if not value >= 0.0:
            raise GnomonError(f"{name}: {key} must be at least 0, got {value}")


class _Emitter:
    """Emits graph ops before the function's return, each at a location naming what it updates."""

    def __init__(self, before: Operation):
        self.point = InsertPoint.before(before)
        self.location = name_location("optimizer")

    def op(self, op: Operation) -> SSAValue:
        op.location = self.location
        Rewriter.insert_op(op, self.point)
        return op.results[0]

    def constant(self, value: float, element_type: Attribute = f32) -> SSAValue:
        attr = numpy_to_dense(np.asarray(value), element_type)
        return self.op(ConstantOp.build(properties={"value": attr}, result_types=[attr.get_type()]))

    def binary(self, op_type: type[IRDLOperation], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        shape = max((_type(lhs), _type(rhs)), key=lambda t: len(t.get_shape()))
        return self.op(op_type.build(operands=[lhs, rhs], result_types=[shape]))

    def unary(self, op_type: type[IRDLOperation], x: SSAValue) -> SSAValue:
        return self.op(op_type.build(operands=[x], result_types=[_type(x)]))

    def scale(self, factor: float, x: SSAValue) -> SSAValue:
        return self.binary(ew.MulOp, x, self.constant(factor))

    def cast(self, x: SSAValue, element_type: Attribute) -> SSAValue:
        return self.op(ew.CastOp.build(operands=[x], result_types=[TensorType(element_type, _type(x).get_shape())]))


def _type(value: SSAValue) -> TensorType[Attribute]:
    assert isinstance(value.type, TensorType)
    return value.type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def append_optimizer(module: ModuleOp, optimizer: Optimizer, parameters: Sequence[str], buffers: Sequence[str],
                     keep_gradients: bool = True) -> None:  # fmt: skip
    """Make the training step's function one optimizer step, in place (see this module's docstring). The function's
    leading arguments are `parameters` then `buffers`; its results the loss, the gradients and the new buffers.
    Without `keep_gradients` the step returns no gradients, so each dies at its parameter's update."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = function.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    count = len(parameters)
    loss, gradients, new_buffers = ret.operands[0], list(ret.operands[1 : 1 + count]), list(ret.operands[1 + count :])
    params = list(block.args[:count])
    position = count + len(buffers)
    slots: list[list[SSAValue]] = []
    for _ in optimizer.slots:
        slots.append([block.insert_arg(p.type, position + i) for i, p in enumerate(params)])
        position += count
    step = block.insert_arg(TensorType(f32, []), position)
    # Released gradients die at their parameter's update, so each update runs as early as it may: after its
    # gradient and after the last read of the parameter's old value; the step count first of all.
    early = not keep_gradients
    order = {op: index for index, op in enumerate(block.ops)}
    first_op = block.first_op
    assert first_op is not None
    emit = _Emitter(first_op if early else ret)
    new_step = emit.binary(ew.AddOp, step, emit.constant(1.0))
    new_params: list[SSAValue] = []
    new_slots: list[list[SSAValue]] = [[] for _ in optimizer.slots]
    if isinstance(optimizer, SGD):
        first = None
        if optimizer.momentum and optimizer.dampening:
            first = emit.op(ew.EqOp.build(operands=[step, emit.constant(0.0)], result_types=[TensorType(i1, [])]))
        for i, (p, g) in enumerate(zip(params, gradients, strict=True)):
            emit.location = name_location(f"optimizer.{parameters[i]}")
            if early:
                emit.point = _after_last_use(p, g, order, ret)
                bag = _bag_gradient(g, ret)
                if bag is not None and not optimizer.momentum and not optimizer.weight_decay:
                    new_params.append(emit.op(_sparse_update(p, bag, optimizer.lr)))
                    continue
            state = [s[i] for s in slots]
            p_new, state_new = _sgd(emit, optimizer, p, g, state, first)
            new_params.append(p_new)
            for k, value in enumerate(state_new):
                new_slots[k].append(value)
    else:
        emit.location = name_location("optimizer")
        corrections = _adam_corrections(emit, optimizer, new_step)
        bags = [_bag_gradient(g, ret) if optimizer.sparse else None for g in gradients]
        sparse_step = _sparse_adam_step_size(emit, optimizer, new_step) if any(b is not None for b in bags) else None
        for i, (p, g) in enumerate(zip(params, gradients, strict=True)):
            emit.location = name_location(f"optimizer.{parameters[i]}")
            if early:
                emit.point = _after_last_use(p, g, order, ret)
            bag = bags[i]
            if bag is not None and sparse_step is not None:
                update = _sparse_adam(optimizer, p, slots[0][i], slots[1][i], bag, sparse_step)
                emit.op(update)
                p_new, m, v = update.results
            else:
                p_new, m, v = _adam(emit, optimizer, p, g, slots[0][i], slots[1][i], corrections)
            new_params.append(p_new)
            new_slots[0].append(m)
            new_slots[1].append(v)
    returned = gradients if keep_gradients else []
    results = [loss, *new_params, *new_buffers, *(v for s in new_slots for v in s), new_step, *returned]
    Rewriter.replace_op(ret, func.ReturnOp(*results))
    for gradient in gradients:  # a table's dense gradient that a sparse update replaced
        if not gradient.uses and isinstance(gradient.owner, EmbeddingBagGradOp):
            Rewriter.erase_op(gradient.owner)
    # The new state is the state's arguments' next value: computed into their own memory where that is safe.
    updated = len(results) - 1 - len(returned)
    function.attributes[rt.UPDATES] = DenseArrayBase.from_list(i64, [-1, *range(updated), *[-1] * len(returned)])
    function.function_type = FunctionType.from_lists(list(block.arg_types), [r.type for r in results])
    _rename(module, parameters, buffers, optimizer, keep_gradients)


def _after_last_use(parameter: SSAValue, gradient: SSAValue, order: dict[Operation, int],
                    ret: Operation) -> InsertPoint:  # fmt: skip
    """Just after the later of the gradient's computation and the last read of the parameter's old value, through
    its reshapes too (program order, among the ops the step had before its updates): there, `kernel-to-rt` can
    write the update into the parameter's own memory."""
    anchors: list[Operation] = []
    pending = [parameter]
    while pending:
        for use in pending.pop().uses:
            if use.operation in order:
                anchors.append(use.operation)
                if isinstance(use.operation, ReshapeOp):
                    pending.append(use.operation.results[0])
    if isinstance(gradient.owner, Operation) and gradient.owner in order:
        anchors.append(gradient.owner)
    if not anchors:
        return InsertPoint.before(next(iter(order)))
    last = max(anchors, key=order.__getitem__)
    following = last.next_op
    return InsertPoint.before(following if following is not None else ret)


def _bag_gradient(gradient: SSAValue, ret: Operation) -> EmbeddingBagGradOp | None:
    """The embedding-bag gradient op that computes `gradient`, where the step reads it nowhere else."""
    owner = gradient.owner
    if not isinstance(owner, EmbeddingBagGradOp) or any(use.operation is not ret for use in gradient.uses):
        return None
    return owner


def _sparse_update(table: SSAValue, bag: EmbeddingBagGradOp, lr: float) -> Operation:
    """Plain SGD's `table - lr * gradient` on the looked-up rows alone: the other rows' gradient is zero."""
    weights = [bag.per_sample_weights] if bag.per_sample_weights is not None else []
    return EmbeddingBagUpdateOp.build(
        operands=[table, bag.grad_output, bag.indices, bag.offsets, weights],
        properties={"mode": bag.mode, "scale": FloatAttr(-lr, f64)},
        result_types=[table.type],
    )


def _sgd(
    emit: _Emitter, opt: SGD, p: SSAValue, g: SSAValue, state: list[SSAValue], first: SSAValue | None
) -> tuple[SSAValue, list[SSAValue]]:
    if opt.weight_decay:
        g = emit.binary(ew.AddOp, g, emit.scale(opt.weight_decay, p))
    new_state: list[SSAValue] = []
    if opt.momentum:
        # One chain (momentum * buffer, then + the gradient), which graph-fuse makes one kernel. torch starts the
        # buffer at the first gradient; from a zero buffer that is `momentum * 0 + g`, unless dampening scales g.
        gradient = emit.scale(1.0 - opt.dampening, g) if opt.dampening else g
        buffer = emit.binary(ew.AddOp, emit.scale(opt.momentum, state[0]), gradient)
        if first is not None:
            buffer = emit.op(ew.WhereOp.build(operands=[first, g, buffer], result_types=[_type(g)]))
        new_state.append(buffer)
        g = emit.binary(ew.AddOp, g, emit.scale(opt.momentum, buffer)) if opt.nesterov else buffer
    return emit.binary(ew.SubOp, p, emit.scale(opt.lr, g)), new_state


def _bias_corrections(emit: _Emitter, opt: Adam, step: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(1 - beta1^t, 1 - beta2^t) for step t, float64 scalars as torch computes them in Python."""
    t = emit.cast(step, f64)
    beta1, beta2 = (emit.constant(b, f64) for b in opt.betas)
    one = emit.constant(1.0, f64)
    bias1 = emit.binary(ew.SubOp, one, emit.binary(ew.PowOp, beta1, t))
    bias2 = emit.binary(ew.SubOp, one, emit.binary(ew.PowOp, beta2, t))
    return bias1, bias2


def _adam_corrections(emit: _Emitter, opt: Adam, step: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t)) for step t, float32 scalars computed in float64."""
    bias1, bias2 = _bias_corrections(emit, opt, step)
    step_size = emit.binary(ew.DivOp, emit.constant(opt.lr, f64), bias1)
    root = emit.unary(ew.RsqrtOp, bias2)
    return emit.cast(step_size, f32), emit.cast(root, f32)


def _sparse_adam_step_size(emit: _Emitter, opt: Adam, step: SSAValue) -> SSAValue:
    """SparseAdam's lr * sqrt(1 - beta2^t) / (1 - beta1^t), a float32 scalar computed in float64."""
    bias1, bias2 = _bias_corrections(emit, opt, step)
    scaled = emit.binary(ew.MulOp, emit.constant(opt.lr, f64), emit.unary(ew.SqrtOp, bias2))
    return emit.cast(emit.binary(ew.DivOp, scaled, bias1), f32)


def _sparse_adam(
    opt: Adam, table: SSAValue, m: SSAValue, v: SSAValue, bag: EmbeddingBagGradOp, step_size: SSAValue
) -> Operation:
    """SparseAdam's update of the table and its moments on the looked-up rows alone."""
    weights = [bag.per_sample_weights] if bag.per_sample_weights is not None else []
    beta1, beta2 = opt.betas
    return EmbeddingBagAdamUpdateOp.build(
        operands=[table, m, v, bag.grad_output, bag.indices, bag.offsets, step_size, weights],
        properties={
            "mode": bag.mode,
            "beta1": FloatAttr(beta1, f64),
            "beta2": FloatAttr(beta2, f64),
            "eps": FloatAttr(opt.eps, f64),
        },
        result_types=[table.type] * 3,
    )


def _adam(
    emit: _Emitter,
    opt: Adam,
    p: SSAValue,
    g: SSAValue,
    m: SSAValue,
    v: SSAValue,
    corrections: tuple[SSAValue, SSAValue],
) -> tuple[SSAValue, SSAValue, SSAValue]:
    beta1, beta2 = opt.betas
    if opt.weight_decay and opt.decoupled:
        p = emit.scale(1.0 - opt.lr * opt.weight_decay, p)
    elif opt.weight_decay:
        g = emit.binary(ew.AddOp, g, emit.scale(opt.weight_decay, p))
    # As torch writes them (m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, 1 - beta2) as a lerp too): each
    # moment one chain of ops, which graph-fuse makes one kernel.
    m = emit.binary(ew.AddOp, m, emit.scale(1.0 - beta1, emit.binary(ew.SubOp, g, m)))
    v = emit.binary(ew.AddOp, v, emit.scale(1.0 - beta2, emit.binary(ew.SubOp, emit.binary(ew.MulOp, g, g), v)))
    step_size, root = corrections
    denominator = emit.binary(ew.AddOp, emit.binary(ew.MulOp, emit.unary(ew.SqrtOp, v), root), emit.constant(opt.eps))
    update = emit.binary(ew.MulOp, step_size, emit.binary(ew.DivOp, m, denominator))
    return emit.binary(ew.SubOp, p, update), m, v


def _rename(module: ModuleOp, parameters: Sequence[str], buffers: Sequence[str], optimizer: Optimizer,
            keep_gradients: bool) -> None:  # fmt: skip
    """The step's input and output names: state by torch's names, the optimizer's under `optimizer.`."""
    from xdsl.dialects.builtin import ArrayAttr

    from gnomon.pipeline import INPUT_NAMES_ATTR, OUTPUT_NAMES_ATTR

    attributes = module.attributes
    names = attributes[INPUT_NAMES_ATTR]
    assert isinstance(names, ArrayAttr)
    inputs = [n.data for n in names.data if isinstance(n, StringAttr)]
    user_inputs = inputs[len(parameters) + len(buffers) :]
    slots = [f"optimizer.{slot}.{name}" for slot in optimizer.slots for name in parameters]
    state = [*parameters, *buffers, *slots, f"optimizer.{STEP}"]
    attributes[INPUT_NAMES_ATTR] = ArrayAttr(StringAttr(n) for n in [*state, *user_inputs])
    outputs = ["loss", *state, *(f"grad.{name}" for name in parameters if keep_gradients)]
    attributes[OUTPUT_NAMES_ATTR] = ArrayAttr(StringAttr(n) for n in outputs)
