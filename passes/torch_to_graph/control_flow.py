"""torch-mlir's structured control flow to `graph.if` and `graph.while`.

`torch.prim.If` comes from `torch.cond`, TorchScript's `if` and ONNX's `If`; `torch.prim.Loop` from
`torch.while_loop` and TorchScript's loops. Their regions hold ops already converted (the pass walks regions
first), so a converter moves the converted ops into the graph op's regions and replaces the terminators.

`torch.prim.Loop %trips, %cond, init(%v...)` runs its body on (iteration number, v...) while the iteration number
is below `trips` and the last condition (the initial one, then each body's) holds. As a `graph.while` it carries
the iteration counter where the trip count bounds it or the body reads it, and the condition where it is not
constantly true, ahead of the loop's own values; `max_trips` is a constant trip count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import IntegerType, TensorType, UnitAttr, UnrealizedConversionCastOp, i1, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from gnomon.dialects.graph.constant_values import numpy_to_dense
from gnomon.dialects.graph.control_flow import IfOp, WhileOp, YieldOp, joined_type
from gnomon.dialects.graph.elementwise import AddOp, AndOp, CastOp, LtOp, NeOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.dialects.torch import ConstantBoolOp, ValueTensorType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_scalar, tensor_type, torch_op_name
from gnomon.passes.torch_to_graph.registry import converts

INT64_MAX = 2**63 - 1
"""The trip count `torch.while_loop` and TorchScript's `while` give a loop bounded only by its condition."""

ITERATION_CAST = "gnomon.iteration"
"""Marks the cast that stands for a loop's iteration number as a tensor until the loop is converted."""


def iteration_tensors(loop: Operation) -> None:
    """Before conversion: where a `torch.prim.Loop` body takes its iteration number as a tensor
    (`prim.NumToTensor.Scalar`, or a 0-d `aten.full` of it, as ONNX's lowering does), read a marked cast of the
    iteration number instead, which the loop's converter replaces by its counter."""
    block = loop.regions[0].block
    iteration = block.args[0]
    cast: UnrealizedConversionCastOp | None = None
    for use in list(iteration.uses):
        user = use.operation
        name = torch_op_name(user)
        zero_d_full = name == "torch.aten.full" and _is_scalar_shape(user.operands[0]) and use.index == 1
        if name != "torch.prim.NumToTensor.Scalar" and not zero_d_full:
            continue
        result_type = user.results[0].type
        if not isinstance(result_type, ValueTensorType) or (builtin := result_type.to_builtin()) is None:
            continue
        if not isinstance(builtin.get_element_type(), IntegerType):
            continue
        if cast is None:
            cast = UnrealizedConversionCastOp.get([iteration], [TensorType(i64, [])])
            cast.attributes[ITERATION_CAST] = UnitAttr()
            block.insert_op_before(cast, block.first_op) if block.first_op else block.add_op(cast)
        user.results[0].replace_all_uses_with(_as_type(cast.results[0], builtin, user))
        user.detach()
        user.erase()


def _is_scalar_shape(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and torch_op_name(owner) == "torch.prim.ListConstruct" and not owner.operands


def _as_type(counter: SSAValue, wanted: TensorType, before: Operation) -> SSAValue:
    if wanted == counter.type:
        return counter
    cast = CastOp.build(operands=[counter], result_types=[wanted])
    cast.location = before.location
    assert before.parent is not None
    before.parent.insert_op_before(cast, before)
    return cast.result


def _condition(value: SSAValue) -> SSAValue | bool:
    """The one-element tensor a `!torch.bool` condition was computed from, or its value if it is a constant."""
    owner = value.owner
    if isinstance(owner, ConstantBoolOp):
        return bool(owner.value.value.data)
    if not isinstance(owner, Operation):
        raise NotConvertible("a condition that is a block argument, not computed from a tensor")
    name = torch_op_name(owner)
    tensor: SSAValue | None = None
    if name == "torch.aten.Bool.Tensor":
        tensor = owner.operands[0]
    elif name == "torch.aten.Bool.int" and isinstance(inner := owner.operands[0].owner, Operation):
        tensor = inner.operands[0] if torch_op_name(inner) == "torch.aten.item" else None
    if tensor is None:
        raise NotConvertible(f"a condition computed by {name}, not from a tensor")
    if not isinstance(tensor.type, TensorType):
        raise NotConvertible("a condition computed from a tensor that did not convert")
    if any(d != 1 for d in tensor.type.get_shape()):
        raise NotConvertible(f"a condition from a tensor of shape {list(tensor.type.get_shape())}, not one element")
    return tensor


def _predicate(args: AtenArgs, value: SSAValue, emit: Callable[[Operation], SSAValue]) -> SSAValue:
    """A `!torch.bool` condition as a one-element i1 tensor; `emit` places the ops that computes it."""
    condition = _condition(value)
    if isinstance(condition, bool):
        return emit(_constant(args, condition, TensorType(i1, [])))
    element = tensor_type(condition).get_element_type()
    if element == i1:
        return condition
    zero = emit(_constant(args, 0, TensorType(element, [])))
    shape = tensor_type(condition).get_shape()
    return emit(NeOp.build(operands=[condition, zero], result_types=[TensorType(i1, shape)]))


def _is_true(value: SSAValue) -> bool:
    return isinstance(value.owner, ConstantBoolOp) and bool(value.owner.value.value.data)


def move_body(source: Block, target: Block, values: Mapping[SSAValue, SSAValue]) -> Operation:
    """Move `source`'s ops but its terminator into `target`, reading `values` in place of its arguments (a loop's
    body into the new loop's); the terminator is left in `source` and returned."""
    for old, new in values.items():
        old.replace_all_uses_with(new)
    terminator = source.last_op
    assert terminator is not None
    for op in list(source.ops):
        if op is terminator:
            break
        op.detach()
        target.add_op(op)
    return terminator


def _converted(values: Sequence[SSAValue], what: str) -> list[SSAValue]:
    for value in values:
        if not isinstance(value.type, TensorType):
            raise NotConvertible(f"{what} a value of type {value.type}, not a tensor")
    return list(values)


@converts("torch.prim.If", args="cond")
def convert_if(args: AtenArgs) -> list[SSAValue]:
    pred = _predicate(args, args.values["cond"], args.value)
    regions = [Region(Block()), Region(Block())]
    yielded: list[list[SSAValue]] = []
    for old, new in zip(args.op.regions, regions, strict=True):
        terminator = move_body(old.block, new.block, {})
        values = _converted(terminator.operands, "a branch yields")
        new.block.add_op(YieldOp(*values))
        yielded.append(values)
    types = [joined_type(a.type, b.type, "torch.prim.If") for a, b in zip(*yielded, strict=True)]
    return list(args.emit(IfOp(pred, types, regions[0], regions[1])).results)


@converts("torch.prim.Loop", args="trips cond *inits")
def convert_loop(args: AtenArgs) -> list[SSAValue]:
    loop = args.op
    body = loop.regions[0].block
    iteration, carried_args = body.args[0], body.args[1:]
    inits = _converted(args.rest, "the loop carries")
    terminator = body.last_op
    assert terminator is not None
    next_cond, next_values = terminator.operands[0], _converted(terminator.operands[1:], "the loop body yields")
    trips = fold_scalar(args.values["trips"])
    bounded = trips is None or int(trips) < INT64_MAX
    counted = bounded or any(True for _ in iteration.uses)
    conditioned = not (_is_true(args.values["cond"]) and _is_true(next_cond))
    trip_tensor = _trip_tensor(args, trips) if bounded else None

    types = [joined_type(a.type, b.type, "torch.prim.Loop") for a, b in zip(inits, next_values, strict=True)]
    counter_type, flag_type = TensorType(i64, []), TensorType(i1, [])
    state = [counter_type] * counted + [flag_type] * conditioned
    cond_block, body_block = Block(arg_types=[*state, *types]), Block(arg_types=[*state, *types])

    # cond: the counter below the trip count, and the last condition
    checks: list[SSAValue] = []
    if bounded:
        assert trip_tensor is not None
        checks.append(
            _add(cond_block, LtOp.build(operands=[cond_block.args[0], trip_tensor], result_types=[flag_type]))
        )
    if conditioned:
        checks.append(cond_block.args[int(counted)])
    go = checks[0] if checks else _add(cond_block, _constant(args, True, flag_type))
    if len(checks) == 2:
        go = _add(cond_block, AndOp.build(operands=checks, result_types=[flag_type]))
    cond_block.add_op(YieldOp(go))

    # do: the old body, then the counter's step and the new condition
    counter = body_block.args[0] if counted else None
    values: dict[SSAValue, SSAValue] = dict(zip(carried_args, body_block.args[len(state) :], strict=True))
    for op in list(body.ops):
        if isinstance(op, UnrealizedConversionCastOp) and ITERATION_CAST in op.attributes:
            assert counter is not None
            op.results[0].replace_all_uses_with(counter)
            op.detach()
            op.erase()
    move_body(body, body_block, values)
    new_state: list[SSAValue] = []
    if counter is not None:
        one = _add(body_block, _constant(args, 1, counter_type))
        new_state.append(_add(body_block, AddOp.build(operands=[counter, one], result_types=[counter_type])))
    if conditioned:
        new_state.append(_predicate(args, next_cond, lambda op: _add(body_block, op)))
    body_block.add_op(YieldOp(*new_state, *[values.get(v, v) for v in next_values]))

    init_state: list[SSAValue] = []
    if counted:
        init_state.append(args.constant(np.asarray(0), i64))
    if conditioned:
        init_state.append(_predicate(args, args.values["cond"], args.value))
    max_trips = int(trips) if trips is not None and bounded else None
    op = WhileOp([*init_state, *inits], [*state, *types], Region(cond_block), Region(body_block), max_trips)
    return list(args.emit(op).results[len(state) :])


def _trip_tensor(args: AtenArgs, trips: int | float | None) -> SSAValue:
    """The trip count as a 0-d i64 tensor: a constant, or the tensor it is the item of (ONNX's M)."""
    if trips is not None:
        return args.constant(np.asarray(int(trips)), i64)
    owner = args.values["trips"].owner
    if isinstance(owner, Operation) and torch_op_name(owner) in ("torch.aten.item", "torch.aten.Int.Tensor"):
        tensor = owner.operands[0]
        if isinstance(tensor.type, TensorType) and all(d == 1 for d in tensor.type.get_shape()):
            return args.reshape(args.cast(tensor, i64), [])
    raise NotConvertible("a trip count that is neither a constant nor a tensor's item")


def _add(block: Block, op: Operation) -> SSAValue:
    block.add_op(op)
    return op.results[0]


def _constant(args: AtenArgs, value: int | bool, tensor: TensorType) -> Operation:
    attr = numpy_to_dense(np.asarray(value), tensor.get_element_type())
    op = ConstantOp.build(properties={"value": attr}, result_types=[tensor])
    op.location = args.op.location
    return op
