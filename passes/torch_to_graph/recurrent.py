"""Converters for recurrent layers: torch's lstm, gru, rnn_tanh and rnn_relu (any number of layers, both
directions, batch first) and ONNX's LSTM, GRU and RNN become one graph op per layer and direction (see
`gnomon.dialects.graph.recurrent`); torch's cells (`nn.LSTMCell`...) become the linear and elementwise ops of
their equations, which fuse like any others.

ONNX stacks its gates in another order than torch (LSTM i, o, f, c against i, f, g, o; GRU z, r, h against r,
z, n; peepholes i, o, f against i, f, o): the converter gathers the weight rows into torch's order, which
`graph-fold-constants` folds into the weights. ONNX's `sequence_lens` is accepted only where it is constant
and every sequence runs the full length; activations other than the defaults (and Relu for an RNN) are
refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, bool_attr, f64_attr, i64_array, i64_attr, str_attr
from gnomon.dialects.graph.linalg import LinearOp
from gnomon.dialects.graph.recurrent import GruOp, LstmOp, RnnOp
from gnomon.dialects.graph.tensor import ConcatOp, GatherOp, SplitOp, TransposeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, fold_tensor, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

RecurrentType = type[LstmOp] | type[GruOp] | type[RnnOp]

# ---- building blocks ----


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tensor_type(value).get_shape()


def _dtype(value: SSAValue) -> Attribute:
    return tensor_type(value).get_element_type()


def _transpose(a: AtenArgs, x: SSAValue, permutation: Sequence[int]) -> SSAValue:
    shape = _shape(x)
    moved = TensorType(_dtype(x), [shape[p] for p in permutation])
    return a.value(
        TransposeOp.build(operands=[x], properties={"permutation": i64_array(permutation)}, result_types=[moved])
    )


def _concat(a: AtenArgs, pieces: Sequence[SSAValue], axis: int) -> SSAValue:
    if len(pieces) == 1:
        return pieces[0]
    shape = list(_shape(pieces[0]))
    shape[axis] = sum(_shape(p)[axis] for p in pieces)
    return a.value(
        ConcatOp.build(
            operands=[list(pieces)],
            properties={"axis": i64_attr(axis)},
            result_types=[TensorType(_dtype(pieces[0]), shape)],
        )
    )


def _gather(a: AtenArgs, x: SSAValue, indices: int | Sequence[int], axis: int) -> SSAValue:
    """Slices of `x` along `axis` at constant `indices`; one index (an int) drops the axis."""
    shape = list(_shape(x))
    if not isinstance(indices, int) and list(indices) == list(range(shape[axis])):
        return x
    index = a.constant(np.asarray(indices), i64)
    kept = [] if isinstance(indices, int) else [len(indices)]
    out = TensorType(_dtype(x), [*shape[:axis], *kept, *shape[axis + 1 :]])
    return a.value(GatherOp.build(operands=[x, index], properties={"axis": i64_attr(axis)}, result_types=[out]))


def _stack(a: AtenArgs, states: Sequence[SSAValue]) -> SSAValue:
    """(batch, hidden) states stacked into (len(states), batch, hidden)."""
    return _concat(a, [a.reshape(s, [1, *_shape(s)]) for s in states], 0)


def _layer(
    a: AtenArgs,
    op_type: RecurrentType,
    x: SSAValue,
    weights: Sequence[SSAValue],
    states: Sequence[SSAValue],
    properties: dict[str, Attribute],
    peepholes: SSAValue | None = None,
) -> list[SSAValue]:
    """One layer in one direction: (every step's hidden state, final hidden state[, final cell state])."""
    steps, batch, _ = _shape(x)
    hidden = _shape(weights[1])[1]
    dtype = _dtype(x)
    state = TensorType(dtype, [batch, hidden])
    result_types = [TensorType(dtype, [steps, batch, hidden]), *[state] * len(states)]
    operands: list[SSAValue | list[SSAValue]] = [x, *weights, *states]
    if op_type is LstmOp:
        operands.append([peepholes] if peepholes is not None else [])
    op = op_type.build(operands=operands, properties=properties, result_types=result_types)
    op.verify_()  # a malformed model's shapes: refused with the verifier's reason
    return list(a.emit(op).results)


def _zeros(a: AtenArgs, like: SSAValue, shape: Sequence[int]) -> SSAValue:
    return a.splat_tensor(0.0, _dtype(like), shape)


# ---- torch ----


def _torch_layers(
    a: AtenArgs, op_type: RecurrentType, states: list[SSAValue], kind: dict[str, Attribute]
) -> list[SSAValue]:
    """torch's multi-layer form: each layer's directions concatenated along the features feed the next layer;
    the final states stack as (layers * directions, batch, hidden)."""
    if a.bool("train") and a.float("dropout") > 0:
        raise NotConvertible("dropout between layers in training mode")
    layers, directions = a.int("num_layers"), 2 if a.bool("bidirectional") else 1
    per_layer = 4 if a.bool("has_biases") else 2
    params = a.tensors("params")
    if len(params) != layers * directions * per_layer:
        raise NotConvertible(
            f"{len(params)} weights for {layers} layers in {directions} directions (an LSTM with proj_size)"
        )
    batch_first = a.bool("batch_first")
    x = a.tensor("input")
    if len(_shape(x)) != 3:
        raise NotConvertible("an unbatched sequence")
    if batch_first:
        x = _transpose(a, x, [1, 0, 2])
    finals: list[list[SSAValue]] = [[] for _ in states]
    for layer in range(layers):
        outputs: list[SSAValue] = []
        for direction in range(directions):
            index = layer * directions + direction
            w_ih, w_hh, *biases = params[index * per_layer : (index + 1) * per_layer]
            if not biases:
                biases = [_zeros(a, w_hh, [_shape(w_hh)[0]])] * 2
            initial = [_gather(a, s, index, 0) for s in states]
            properties = {"reverse": bool_attr(direction == 1), **kind}
            y, *final = _layer(a, op_type, x, [w_ih, w_hh, *biases], initial, properties)
            outputs.append(y)
            for collected, value in zip(finals, final, strict=True):
                collected.append(value)
        x = _concat(a, outputs, 2)
    return [_transpose(a, x, [1, 0, 2]) if batch_first else x, *(_stack(a, f) for f in finals)]


_TORCH_ARGS = "input hx params has_biases num_layers dropout train bidirectional batch_first"


@converts("torch.aten.lstm.input", args=_TORCH_ARGS)
def lstm(a: AtenArgs) -> list[SSAValue]:
    return _torch_layers(a, LstmOp, a.tensors("hx"), {"input_forget": bool_attr(False)})


@converts("torch.aten.gru.input", args=_TORCH_ARGS)
def gru(a: AtenArgs) -> list[SSAValue]:
    return _torch_layers(a, GruOp, [a.tensor("hx")], {"linear_before_reset": bool_attr(True)})


@converts("torch.aten.rnn_tanh.input", args=_TORCH_ARGS)
def rnn_tanh(a: AtenArgs) -> list[SSAValue]:
    return _torch_layers(a, RnnOp, [a.tensor("hx")], {"nonlinearity": str_attr("tanh")})


@converts("torch.aten.rnn_relu.input", args=_TORCH_ARGS)
def rnn_relu(a: AtenArgs) -> list[SSAValue]:
    return _torch_layers(a, RnnOp, [a.tensor("hx")], {"nonlinearity": str_attr("relu")})


# ---- torch's cells: linear and elementwise ops ----


def _unary(a: AtenArgs, op_type: type[ew.UnaryOp], x: SSAValue) -> SSAValue:
    return a.value(op_type.build(operands=[x], result_types=[tensor_type(x)]))


def _binary(a: AtenArgs, op_type: type[ew.BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    return a.value(op_type.build(operands=[lhs, rhs], result_types=[tensor_type(lhs)]))


def _gates(a: AtenArgs, x: SSAValue, w: SSAValue, b: SSAValue | None, count: int) -> list[SSAValue]:
    """x W^T + b, cut into `count` gates along the features."""
    rows = _shape(w)[0]
    if rows == DYN:
        raise NotConvertible("a cell of dynamic hidden size")
    out = TensorType(_dtype(x), [*_shape(x)[:-1], rows])
    projected = a.value(LinearOp.build(operands=[x, w, [b] if b is not None else []], result_types=[out]))
    if count == 1:
        return [projected]
    piece = TensorType(_dtype(x), [*_shape(x)[:-1], rows // count])
    split = a.emit(
        SplitOp.build(
            operands=[projected],
            properties={"axis": i64_attr(len(_shape(x)) - 1), "sizes": i64_array([rows // count] * count)},
            result_types=[[piece] * count],
        )
    )
    return list(split.results)


def _cell_gates(a: AtenArgs, h: SSAValue, count: int) -> list[tuple[SSAValue, SSAValue]]:
    """Each gate's input product and recurrent product."""
    x_gates = _gates(a, a.tensor("input"), a.tensor("w_ih"), a.optional_tensor("b_ih"), count)
    h_gates = _gates(a, h, a.tensor("w_hh"), a.optional_tensor("b_hh"), count)
    return list(zip(x_gates, h_gates, strict=True))


_CELL_ARGS = "input hx w_ih w_hh b_ih? b_hh?"


@converts("torch.aten.lstm_cell", args=_CELL_ARGS)
def lstm_cell(a: AtenArgs) -> list[SSAValue]:
    """c' = f c + i g; h' = o tanh(c'), each gate's two products summed."""
    h, c = a.tensors("hx")
    i, f, g, o = (_binary(a, ew.AddOp, x, r) for x, r in _cell_gates(a, h, 4))
    i, f, o = (_unary(a, ew.SigmoidOp, gate) for gate in (i, f, o))
    c_new = _binary(a, ew.AddOp, _binary(a, ew.MulOp, f, c), _binary(a, ew.MulOp, i, _unary(a, ew.TanhOp, g)))
    return [_binary(a, ew.MulOp, o, _unary(a, ew.TanhOp, c_new)), c_new]


@converts("torch.aten.gru_cell", args=_CELL_ARGS)
def gru_cell(a: AtenArgs) -> SSAValue:
    """r, z = sigmoid(sums); n = tanh(x_n + r h_n); h' = n + z (h - n)."""
    h = a.tensor("hx")
    (x_r, h_r), (x_z, h_z), (x_n, h_n) = _cell_gates(a, h, 3)
    r, z = (_unary(a, ew.SigmoidOp, _binary(a, ew.AddOp, x_g, h_g)) for x_g, h_g in ((x_r, h_r), (x_z, h_z)))
    n = _unary(a, ew.TanhOp, _binary(a, ew.AddOp, x_n, _binary(a, ew.MulOp, r, h_n)))
    return _binary(a, ew.AddOp, n, _binary(a, ew.MulOp, z, _binary(a, ew.SubOp, h, n)))


def _rnn_cell(a: AtenArgs, activation: type[ew.UnaryOp]) -> SSAValue:
    ((x, h),) = _cell_gates(a, a.tensor("hx"), 1)
    return _unary(a, activation, _binary(a, ew.AddOp, x, h))


@converts("torch.aten.rnn_tanh_cell", args=_CELL_ARGS)
def rnn_tanh_cell(a: AtenArgs) -> SSAValue:
    return _rnn_cell(a, ew.TanhOp)


@converts("torch.aten.rnn_relu_cell", args=_CELL_ARGS)
def rnn_relu_cell(a: AtenArgs) -> SSAValue:
    return _rnn_cell(a, ew.ReluOp)


# ---- ONNX ----


_GATE_ORDER: dict[RecurrentType, tuple[int, ...]] = {LstmOp: (0, 2, 3, 1), GruOp: (1, 0, 2), RnnOp: (0,)}
"""For each of torch's gates in order, its block in ONNX's order."""

_PEEPHOLE_ORDER = (0, 2, 1)
"""torch's peephole order (i, f, o), as blocks of ONNX's (i, o, f)."""

_DEFAULT_ACTIVATIONS: dict[RecurrentType, tuple[str, ...]] = {
    LstmOp: ("sigmoid", "tanh", "tanh"),
    GruOp: ("sigmoid", "tanh"),
    RnnOp: ("tanh",),
}
"""Each op's activations per direction by default, the only ones converted (and relu for an RNN)."""

_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _onnx_string(a: AtenArgs, name: str, default: str) -> str:
    attr = a.onnx_attr(name)
    if attr is None:
        return default
    if not isinstance(attr, StringAttr):
        raise NotConvertible(f"ONNX attribute '{name}' is not a string ({attr})")
    return attr.data


def _onnx_activations(a: AtenArgs, op_type: RecurrentType, directions: int) -> list[str]:
    """Each direction's nonlinearity: `tanh` or `relu` for an RNN, the default for LSTM and GRU."""
    defaults = _DEFAULT_ACTIVATIONS[op_type]
    attr = a.onnx_attr("activations")
    if attr is None:
        return [defaults[0]] * directions
    names = (
        [n.data.lower() if isinstance(n, StringAttr) else str(n) for n in attr] if isinstance(attr, ArrayAttr) else []
    )
    per_direction = [tuple(names[d * len(defaults) : (d + 1) * len(defaults)]) for d in range(directions)]
    allowed = {defaults, ("relu",)} if op_type is RnnOp else {defaults}
    if len(names) != directions * len(defaults) or any(p not in allowed for p in per_direction):
        spelled = ", ".join(defaults) + (" or relu" if op_type is RnnOp else "")
        raise NotConvertible(f"activations {names}: only {spelled} per direction are supported")
    return [p[0] for p in per_direction]


def _full_length(a: AtenArgs, steps: int) -> None:
    """Refuses `sequence_lens` unless it is constant and every sequence runs all `steps`."""
    if a.is_none("sequence_lens"):
        return
    lengths = fold_tensor(a.values["sequence_lens"])
    if lengths is None:
        raise NotConvertible("sequence_lens that is not a constant")
    if (lengths != steps).any():
        raise NotConvertible(f"sequence_lens {lengths.tolist()} shorter than the {steps} steps of X")


def _direction(a: AtenArgs, value: SSAValue, direction: int, axis: int = 0) -> SSAValue:
    """One direction's part of an operand with a directions axis."""
    shape = _shape(value)
    if shape[axis] == 1:
        return a.reshape(value, [d for i, d in enumerate(shape) if i != axis])
    return _gather(a, value, direction, axis)


def _gate_rows(a: AtenArgs, value: SSAValue, blocks: Sequence[int], block: int, start: int = 0) -> SSAValue:
    """The rows of `value` in torch's gate order: `blocks` of `block` rows each, from row `start`."""
    return _gather(a, value, [start + b * block + j for b in blocks for j in range(block)], 0)


def _onnx_operands(
    a: AtenArgs, op_type: RecurrentType, x: SSAValue, direction: int, layout: int
) -> tuple[list[SSAValue], list[SSAValue], SSAValue | None]:
    """One direction's weights (w_ih, w_hh, b_ih, b_hh), initial states and peepholes, in torch's gate order."""
    order, r = _GATE_ORDER[op_type], _direction(a, a.tensor("R"), direction)
    rows, hidden = _shape(r)
    weights = [_gate_rows(a, _direction(a, a.tensor("W"), direction), order, hidden), _gate_rows(a, r, order, hidden)]
    b = a.optional_tensor("B")
    if b is None:
        weights += [_zeros(a, x, [rows])] * 2
    else:
        weights += [_gate_rows(a, _direction(a, b, direction), order, hidden, start) for start in (0, rows)]
    names = ("initial_h", "initial_c") if op_type is LstmOp else ("initial_h",)
    states = [
        _zeros(a, x, [_shape(x)[1], hidden]) if s is None else _direction(a, s, direction, layout)
        for s in (a.optional_tensor(name) for name in names)
    ]
    p = a.optional_tensor("P") if op_type is LstmOp else None
    peepholes = None if p is None else _gate_rows(a, _direction(a, p, direction), _PEEPHOLE_ORDER, hidden)
    return weights, states, peepholes


def _onnx(a: AtenArgs, op_type: RecurrentType, kind: dict[str, Attribute]) -> list[SSAValue]:
    """Each direction one op; Y stacks them as (seq, directions, batch, hidden), Y_h and Y_c as (directions,
    batch, hidden), with batch first under layout 1."""
    direction, layout = _onnx_string(a, "direction", "forward"), a.onnx_int("layout", 0)
    if direction not in _DIRECTIONS or layout not in (0, 1):
        raise NotConvertible(f"direction {direction!r} with layout {layout}")
    x, r = a.tensor("X"), a.tensor("R")
    if layout:
        x = _transpose(a, x, [1, 0, 2])
    (steps, batch, _), (directions, rows, hidden) = _shape(x), _shape(r)
    if DYN in (steps, batch, directions, rows, hidden):
        raise NotConvertible("a dynamic sequence length, batch or hidden size")
    if directions != _DIRECTIONS[direction] or rows != op_type.GATES * hidden:
        raise NotConvertible(f"R {list(_shape(r))} for direction {direction} and {op_type.GATES} gates")
    if a.onnx_int("hidden_size", hidden) != hidden:
        raise NotConvertible(f"hidden_size {a.onnx_int('hidden_size', hidden)} differs from R's {hidden}")
    _full_length(a, steps)
    nonlinearities = _onnx_activations(a, op_type, directions)
    clip = a.onnx_attr("clip")
    if clip is not None:
        if not isinstance(clip, FloatAttr):
            raise NotConvertible(f"clip {clip}")
        kind = {**kind, "clip": f64_attr(clip.value.data)}
    results: list[list[SSAValue]] = []
    for d in range(directions):
        weights, states, peepholes = _onnx_operands(a, op_type, x, d, layout)
        properties = {"reverse": bool_attr(direction == "reverse" or d == 1), **kind}
        if op_type is RnnOp:
            properties["nonlinearity"] = str_attr(nonlinearities[d])
        results.append(_layer(a, op_type, x, weights, states, properties, peepholes))
    y = _concat(a, [a.reshape(ys[0], [steps, 1, batch, hidden]) for ys in results], 1)
    finals = [_stack(a, [ys[k] for ys in results]) for k in range(1, len(results[0]))]
    if layout:
        y, finals = _transpose(a, y, [2, 0, 1, 3]), [_transpose(a, f, [1, 0, 2]) for f in finals]
    return [y, *finals][: len(a.op.results)]


_ONNX_ARGS = "X W R B? sequence_lens? initial_h?"


@converts("onnx.LSTM", args=_ONNX_ARGS + " initial_c? P?")
def onnx_lstm(a: AtenArgs) -> list[SSAValue]:
    return _onnx(a, LstmOp, {"input_forget": bool_attr(bool(a.onnx_int("input_forget", 0)))})


@converts("onnx.GRU", args=_ONNX_ARGS)
def onnx_gru(a: AtenArgs) -> list[SSAValue]:
    return _onnx(a, GruOp, {"linear_before_reset": bool_attr(bool(a.onnx_int("linear_before_reset", 0)))})


@converts("onnx.RNN", args=_ONNX_ARGS)
def onnx_rnn(a: AtenArgs) -> list[SSAValue]:
    return _onnx(a, RnnOp, {})
