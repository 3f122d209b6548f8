"""ONNX's `Loop` and `Scan` as `graph.while`, with ONNX's semantics.

torch-mlir lowers neither as ONNX defines them (not a Loop whose body computes its condition, and a Scan's outputs
into empty slices), so the frontend holds both back (`OWN_LOWERINGS`): they arrive as `torch.operator` with their
body as a region whose ops are graph ops already (the pass walks regions first), which the converter moves into
the loop's `do` region.

`Loop(M, cond, v...)` with body `(iteration, cond, v...) -> (cond, v..., scan...)` carries (iteration counter,
condition, v..., one buffer per scan output) and runs while the counter is below M (if given) and the condition
holds (if given). Each scan output is preallocated as M rows and written at row `iteration`, which needs a
constant number of trips: a constant M, and no condition or one that stays true.

`Scan(state..., x...)` with body `(state..., x_t...) -> (state..., y_t...)` is a counted loop over the sequence
length: step t reads row t of each x (from the end in reverse) along its axis and writes y_t likewise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import IntegerType, LocationAttr, TensorType, i1, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import DYN, TensorT, i64_attr, normalize_axis, str_attr
from gnomon.dialects.graph.control_flow import WhileOp, YieldOp, joined_type
from gnomon.dialects.graph.elementwise import AddOp, AndOp, LtOp, SubOp
from gnomon.dialects.graph.tensor import ExpandOp, GatherOp, ReshapeOp, ScatterElementsOp
from gnomon.dialects.torch import ListType
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_tensor, tensor_type
from gnomon.passes.torch_to_graph.control_flow import move_body
from gnomon.passes.torch_to_graph.registry import converts

COUNTER = TensorType(i64, [])
"""The loop's iteration counter: a 0-d i64 tensor, as ONNX's iteration number is."""


def _moved(body: Block, target: Block, arguments: Sequence[SSAValue]) -> list[SSAValue]:
    """The body's ops moved into `target`, reading `arguments` for its own; the values its terminator yields."""
    return list(move_body(body, target, dict(zip(body.args, arguments, strict=True))).operands)


@dataclass
class _Emitter:
    """Appends ops to a block of the new loop, at the converted op's location."""

    block: Block
    location: LocationAttr

    def __call__(self, op: Operation) -> SSAValue:
        op.location = self.location
        self.block.add_op(op)
        return op.results[0]

    def reshape(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        value_type = tensor_type(value)
        if tuple(value_type.get_shape()) == tuple(shape):
            return value
        return self(ReshapeOp.build(operands=[value], result_types=[TensorType(value_type.get_element_type(), shape)]))

    def row(self, sequence: SSAValue, position: SSAValue, axis: int) -> SSAValue:
        """Row `position` (a 0-d index) of `sequence` along `axis`, without that axis."""
        shape = list(tensor_type(sequence).get_shape())
        del shape[axis]
        row_type = TensorType(tensor_type(sequence).get_element_type(), shape)
        return self(
            GatherOp.build(operands=[sequence, position], properties={"axis": i64_attr(axis)}, result_types=[row_type])
        )

    def write_row(self, buffer: SSAValue, value: SSAValue, position: SSAValue, axis: int) -> SSAValue:
        """`buffer` with row `position` (a 0-d index) along `axis` replaced by `value`."""
        shape = list(tensor_type(value).get_shape())
        shape.insert(axis, 1)
        update = self.reshape(value, shape)
        where = self.reshape(position, [1] * len(shape))
        index = self(ExpandOp.build(operands=[where], result_types=[TensorType(i64, shape)]))
        return self(
            ScatterElementsOp.build(
                operands=[buffer, index, update],
                properties={"axis": i64_attr(axis), "reduction": str_attr("none")},
                result_types=[buffer.type],
            )
        )


def _tensors(values: Sequence[SSAValue], what: str) -> list[SSAValue]:
    for value in values:
        if isinstance(value.type, ListType):
            raise NotConvertible(f"{what} an ONNX sequence ({value.type}), which gnomon has no type for")
        if not isinstance(value.type, TensorType):
            raise NotConvertible(f"{what} a value of type {value.type}, not a tensor")
    return list(values)


def _carried_types(inits: Sequence[SSAValue], args: Sequence[SSAValue], yields: Sequence[SSAValue]) -> list[TensorT]:
    """Types that hold each carried value: the initial one, the body's argument and what the body yields."""
    types: list[TensorT] = []
    for index, (init, arg, new) in enumerate(zip(inits, args, yields, strict=True)):
        if tensor_type(init).get_num_dims() != tensor_type(arg).get_num_dims():
            # torch-mlir types a body input that the model leaves without a shape as 0-d.
            raise NotConvertible(f"the body takes carried value #{index} as {arg.type} but is given {init.type}")
        what = f"the carried value #{index}"
        types.append(joined_type(joined_type(init.type, arg.type, what), new.type, what))
    return types


def _buffer(a: AtenArgs, row: SSAValue, length: int, axis: int) -> SSAValue:
    """Zeros for `length` rows of `row`'s type stacked along `axis`: a scan output before the loop writes it."""
    row_type = tensor_type(row)
    shape = list(row_type.get_shape())
    if DYN in shape:
        raise NotConvertible(f"a scan output of dynamic shape {row_type}")
    shape.insert(axis, length)
    return a.splat(0, TensorType(row_type.get_element_type(), shape))


def _one_element(value: SSAValue, what: str) -> TensorT:
    value_type = tensor_type(value)
    if any(d != 1 for d in value_type.get_shape()):
        raise NotConvertible(f"{what} of shape {list(value_type.get_shape())}, not one element")
    return value_type


def _body(a: AtenArgs) -> Block:
    if len(a.op.regions) != 1 or a.op.regions[0].blocks.first is None:
        raise NotConvertible(f"{len(a.op.regions)} bodies, not one")
    return a.op.regions[0].block


@converts("onnx.Loop", args="M cond *v_initial")
def onnx_loop(a: AtenArgs) -> list[SSAValue]:
    body = _body(a)
    inits = _tensors(a.rest, "the Loop carries")
    terminator = body.last_op
    if len(body.args) != 2 + len(inits) or terminator is None or len(terminator.operands) < 1 + len(inits):
        raise NotConvertible(f"a body of {len(body.args)} inputs for {len(inits)} carried values")
    iteration, cond_arg, value_args = body.args[0], body.args[1], body.args[2:]
    yields = _tensors(terminator.operands, "the Loop's body yields")
    next_cond, next_values, scans = yields[0], yields[1 : 1 + len(inits)], yields[1 + len(inits) :]
    flag_type = _one_element(cond_arg, "the body's condition")
    if not (isinstance(element := flag_type.get_element_type(), IntegerType) and element.width.data == 1):
        raise NotConvertible(f"the body's condition is {flag_type}, not a bool")
    _one_element(iteration, "the body's iteration number")

    trips_value = None if a.is_none("M") else a.tensor("M")
    cond_value = None if a.is_none("cond") else a.tensor("cond")
    folded = None if trips_value is None else fold_tensor(trips_value)
    trips = None if folded is None else max(int(folded.reshape(-1)[0]), 0)
    # A condition that starts true and is passed on (or yielded as true) leaves the trip count to M.
    stays_true = cond_value is None or (_is_true(cond_value) and (next_cond is cond_arg or _is_true(next_cond)))
    if scans and (trips is None or not stays_true):
        raise NotConvertible("scan outputs of a Loop whose trip count is not a constant: they would grow each step")

    types = _carried_types(inits, value_args, next_values)
    state = [COUNTER, flag_type, *types]
    init_state = [a.constant(np.asarray(0), i64), _flag(a, cond_value, flag_type)]
    buffers = [_buffer(a, scan, trips, 0) for scan in scans] if trips is not None else []
    block_types: list[Attribute] = [*state, *(b.type for b in buffers)]
    cond_block, do_block = Block(arg_types=block_types), Block(arg_types=block_types)

    _loop_condition(a, cond_block, trips_value, cond_value is not None)

    # do: the body on (iteration number, condition, v...), its scan values written at row `iteration`
    emit = _Emitter(do_block, a.op.location)
    counter, flag = do_block.args[0], do_block.args[1]
    number = emit.reshape(counter, tensor_type(iteration).get_shape())
    moved = _moved(body, do_block, [number, flag, *do_block.args[2 : 2 + len(inits)]])
    next_cond, next_values, scans = moved[0], moved[1 : 1 + len(inits)], moved[1 + len(inits) :]
    rows = [
        emit.write_row(buffer, scan, counter, 0)
        for buffer, scan in zip(do_block.args[2 + len(inits) :], scans, strict=True)
    ]
    one = a.constant(np.asarray(1), i64)
    step = emit(AddOp.build(operands=[counter, one], result_types=[COUNTER]))
    next_flag = emit.reshape(next_cond, flag_type.get_shape()) if cond_value is not None else flag
    do_block.add_op(YieldOp(step, next_flag, *next_values, *rows))

    loop = WhileOp([*init_state, *inits, *buffers], block_types, Region(cond_block), Region(do_block), trips)
    return list(a.emit(loop).results[2:])


def _loop_condition(a: AtenArgs, block: Block, trips: SSAValue | None, conditioned: bool) -> None:
    """The `cond` region of a Loop: the counter (argument 0) below M, and the last condition (argument 1)."""
    emit = _Emitter(block, a.op.location)
    checks: list[SSAValue] = []
    if trips is not None:
        limit = a.reshape(a.cast(_one_value(trips, "the trip count"), i64), [])
        checks.append(emit(LtOp.build(operands=[block.args[0], limit], result_types=[TensorType(i1, [])])))
    if conditioned:
        checks.append(emit.reshape(block.args[1], []))
    go = checks[0] if checks else a.constant(np.asarray(True), i1)
    if len(checks) == 2:
        go = emit(AndOp.build(operands=checks, result_types=[TensorType(i1, [])]))
    block.add_op(YieldOp(go))


def _is_true(value: SSAValue) -> bool:
    folded = fold_tensor(value)
    return folded is not None and folded.size == 1 and bool(folded.reshape(-1)[0])


def _one_value(value: SSAValue, what: str) -> SSAValue:
    _one_element(value, what)
    return value


def _flag(a: AtenArgs, cond: SSAValue | None, flag_type: TensorT) -> SSAValue:
    """The initial condition in the body's condition type; true where the Loop has none."""
    if cond is None:
        return a.constant(np.ones(flag_type.get_shape(), np.bool_), i1)
    return a.reshape(a.cast(_one_value(cond, "the Loop's condition"), i1), flag_type.get_shape())


@converts("onnx.Scan", args="*initial_state_and_scan_inputs")
def onnx_scan(a: AtenArgs) -> list[SSAValue]:
    body = _body(a)
    operands = _tensors(a.rest, "the Scan takes")
    inputs = a.onnx_int("num_scan_inputs", -1)
    if not 0 < inputs <= len(operands):
        raise NotConvertible(f"num_scan_inputs {inputs} of {len(operands)} inputs")
    states, sequences = operands[: len(operands) - inputs], operands[len(operands) - inputs :]
    terminator = body.last_op
    if len(body.args) != len(operands) or terminator is None or len(terminator.operands) < len(states):
        raise NotConvertible(f"a body of {len(body.args)} inputs for {len(operands)} Scan inputs")
    yields = _tensors(terminator.operands, "the Scan's body yields")
    outputs = len(yields) - len(states)
    input_axes = _axes(a, "scan_input_axes", inputs, [len(tensor_type(s).get_shape()) for s in sequences])
    output_ranks = [len(tensor_type(y).get_shape()) + 1 for y in yields[len(states) :]]
    output_axes = _axes(a, "scan_output_axes", outputs, output_ranks)
    input_reversed = _directions(a, "scan_input_directions", inputs)
    output_reversed = _directions(a, "scan_output_directions", outputs)
    lengths = {tensor_type(s).get_shape()[axis] for s, axis in zip(sequences, input_axes, strict=True)}
    if DYN in lengths:
        raise NotConvertible("a Scan over a sequence of dynamic length")
    if len(lengths) != 1:
        raise NotConvertible(f"scan inputs of different sequence lengths {sorted(lengths)}")
    (length,) = lengths

    types = _carried_types(states, body.args[: len(states)], yields[: len(states)])
    buffers = [_buffer(a, y, length, axis) for y, axis in zip(yields[len(states) :], output_axes, strict=True)]
    block_types: list[Attribute] = [COUNTER, *types, *(b.type for b in buffers)]
    cond_block, do_block = Block(arg_types=block_types), Block(arg_types=block_types)
    limit = a.constant(np.asarray(length), i64)
    emit = _Emitter(cond_block, a.op.location)
    cond_block.add_op(
        YieldOp(emit(LtOp.build(operands=[cond_block.args[0], limit], result_types=[TensorType(i1, [])])))
    )

    emit = _Emitter(do_block, a.op.location)
    counter = do_block.args[0]
    last = a.constant(np.asarray(length - 1), i64)
    backwards = (
        emit(SubOp.build(operands=[last, counter], result_types=[COUNTER]))
        if any(input_reversed + output_reversed)
        else counter
    )
    rows = [
        emit.row(s, backwards if reverse else counter, axis)
        for s, axis, reverse in zip(sequences, input_axes, input_reversed, strict=True)
    ]
    moved = _moved(body, do_block, [*do_block.args[1 : 1 + len(states)], *rows])
    written = [
        emit.write_row(buffer, y, backwards if reverse else counter, axis)
        for buffer, y, axis, reverse in zip(
            do_block.args[1 + len(states) :], moved[len(states) :], output_axes, output_reversed, strict=True
        )
    ]
    step = emit(AddOp.build(operands=[counter, a.constant(np.asarray(1), i64)], result_types=[COUNTER]))
    do_block.add_op(YieldOp(step, *moved[: len(states)], *written))

    loop = WhileOp(
        [a.constant(np.asarray(0), i64), *states, *buffers], block_types, Region(cond_block), Region(do_block), length
    )
    return list(a.emit(loop).results[1:])


def _axes(a: AtenArgs, name: str, count: int, ranks: Sequence[int]) -> list[int]:
    axes = a.onnx_ints(name, [0] * count)
    if len(axes) != count:
        raise NotConvertible(f"{name} has {len(axes)} entries for {count} values")
    try:
        return [normalize_axis(axis, rank, name) for axis, rank in zip(axes, ranks, strict=True)]
    except VerifyException as error:
        raise NotConvertible(str(error)) from error


def _directions(a: AtenArgs, name: str, count: int) -> list[bool]:
    directions = a.onnx_ints(name, [0] * count)
    if len(directions) != count or any(d not in (0, 1) for d in directions):
        raise NotConvertible(f"{name} {directions}, not 0 or 1 for each of {count} values")
    return [d == 1 for d in directions]
