"""Converters for an LSTM layer's training kernels, as the torch frontend leaves them in a joint graph
(`gnomon.frontends.training_lstm`): `aten.mkldnn_rnn_layer` in training mode becomes `graph.lstm_train`, its
backward `graph.lstm_grad` (see `gnomon.dialects.graph.recurrent_train`). The kernels take and return states as
(1, batch, hidden), the layer's one slice of torch's (layers * directions, batch, hidden); the graph ops take
(batch, hidden). An absent result gradient (a final state the loss does not read) is zeros.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import bool_attr
from gnomon.dialects.graph.recurrent_train import LstmGradOp, LstmTrainOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

_LSTM_MODE = 2
"""ideep's rnn_kind::LSTM."""


def _one_layer(a: AtenArgs) -> None:
    """NotConvertible unless the call is one LSTM layer, one direction, sequence first, as the frontend makes it."""
    if a.int("mode") != _LSTM_MODE:
        raise NotConvertible(f"a oneDNN recurrent layer of mode {a.int('mode')} (only 2, LSTM, is supported)")
    if a.int("num_layers") != 1 or a.bool("bidirectional") or a.bool("batch_first") or a.ints("batch_sizes"):
        raise NotConvertible("a oneDNN LSTM call that is not one layer, one direction, sequence first, unpacked")
    if not a.bool("train"):
        raise NotConvertible("a oneDNN LSTM layer in inference mode (aten.lstm converts whole instead)")


def _state(a: AtenArgs, name: str) -> SSAValue:
    state = a.tensor(name)
    return a.reshape(state, tensor_type(state).get_shape()[1:])


@converts(
    "torch.aten.mkldnn_rnn_layer",
    args="input weight0 weight1 weight2 weight3 hx_ cx_ reverse batch_sizes mode hidden_size num_layers has_biases "
    "bidirectional batch_first train",
)
def mkldnn_rnn_layer(a: AtenArgs) -> list[SSAValue]:
    _one_layer(a)
    weights = [a.tensor(n) for n in ("weight0", "weight1", "weight2", "weight3")]
    h0, c0 = _state(a, "hx_"), _state(a, "cx_")
    state = tensor_type(h0)
    layer = LstmTrainOp.build(
        operands=[a.tensor("input"), *weights, h0, c0],
        properties={"reverse": bool_attr(a.bool("reverse"))},
        result_types=[a.result_type(0), state, state, a.result_type(3)],
    )
    layer.verify_()  # a malformed call's shapes: refused with the verifier's reason
    y, h_n, c_n, workspace = a.emit(layer).results
    single = a.result_type(1).get_shape()
    return [y, a.reshape(h_n, single), a.reshape(c_n, single), workspace]


@converts(
    "torch.aten.mkldnn_rnn_layer_backward",
    args="input weight1 weight2 weight3 weight4 hx_ cx_tmp output hy_ cy_ grad_output grad_hy grad_cy reverse "
    "mode hidden_size num_layers has_biases train bidirectional batch_sizes batch_first workspace",
)
def mkldnn_rnn_layer_backward(a: AtenArgs) -> list[SSAValue]:
    """(input, weight_ih, weight_hh, bias_ih, bias_hh, h0, c0) gradients; the two biases' are one value."""
    _one_layer(a)
    y = a.tensor("output")
    h0, c0, h_n, c_n = (_state(a, n) for n in ("hx_", "cx_tmp", "hy_", "cy_"))
    state = tensor_type(h0)

    def gradient(name: str, like: SSAValue) -> SSAValue:
        given = a.optional_tensor(name)
        if given is None:
            return a.splat(0.0, tensor_type(like))
        return a.reshape(given, tensor_type(like).get_shape())

    weights = [a.tensor(n) for n in ("weight1", "weight2", "weight3", "weight4")]
    grads = [gradient("grad_output", y), gradient("grad_hy", h_n), gradient("grad_cy", c_n)]
    backward = LstmGradOp.build(
        operands=[a.tensor("input"), *weights, h0, c0, y, h_n, c_n, *grads, a.tensor("workspace")],
        properties={"reverse": bool_attr(a.bool("reverse"))},
        result_types=[tensor_type(a.tensor("input")), *(tensor_type(w) for w in weights[:3]), state, state],
    )
    backward.verify_()
    dx, dw_ih, dw_hh, db, dh0, dc0 = a.emit(backward).results
    single = a.result_type(5).get_shape()
    return [dx, dw_ih, dw_hh, db, db, a.reshape(dh0, single), a.reshape(dc0, single)]
