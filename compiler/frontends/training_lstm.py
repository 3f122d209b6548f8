"""LSTMs in a training step as the layer kernels PyTorch eager trains them with on a CPU.

torch's joint graph decomposes `aten.lstm` into every step's products and gate arithmetic, forward and backward:
some 30 small ops per step and layer, which ran 2x slower than eager. Eager runs one oneDNN kernel per layer and
direction instead (`aten.mkldnn_rnn_layer` in training mode, keeping a workspace) and autograd's
`aten.mkldnn_rnn_layer_backward`. `onednn_lstm_layers` rewrites a forward program's `aten.lstm` into those layer
calls before the joint graph is made (torch's own `_rnn_helper` stacks the layers and directions, and applies the
dropout between layers), so its backward pass is one op per layer too; they become `graph.lstm_train` and
`graph.lstm_grad`. Where eager would not use oneDNN (a dtype other than float32, projections, symbolic shapes,
oneDNN disabled), torch's decomposition stays.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import cache

import torch
from torch._decomp.decompositions import (  # torch's own LSTM decomposition, pinned with torch
    _rnn_helper,  # pyright: ignore[reportPrivateUsage]
    gather_params,
    lstm_impl,
)
from torch.export import ExportedProgram

__all__ = ["onednn_lstm_layers", "size_workspaces"]

aten = torch.ops.aten

_LSTM_MODE = 2
"""ideep's rnn_kind::LSTM, the kernel's `mode` argument."""


def onednn_lstm_layers(program: ExportedProgram) -> ExportedProgram:
    """`program` with each `aten.lstm` of float32 tensors as oneDNN layer calls (unchanged if it has none)."""
    # Asked here, not while tracing: export turns oneDNN off for its trace.
    onednn = torch.backends.mkldnn.is_available() and torch._C._get_mkldnn_enabled()  # pyright: ignore[reportPrivateUsage]
    if not onednn or not any(program.graph.find_nodes(op="call_function", target=aten.lstm.input)):
        return program
    return program.run_decompositions({aten.lstm.input: _lstm})


def size_workspaces(graph: torch.fx.Graph) -> None:
    """Gives each layer kernel's workspace its true size: torch's meta kernel says 0 bytes, and the graph's types
    (which become gnomon's) need the bytes the kernel keeps, which only a call of it tells."""
    for node in graph.find_nodes(op="call_function", target=aten.mkldnn_rnn_layer.default):
        x, w_ih, w_hh, *_ = (arg.meta["val"] for arg in node.args[:7])
        y, h_n, c_n, _ = node.meta["val"]
        reverse = bool(node.args[7])
        size = _workspace_bytes(tuple(x.shape), w_ih.shape[1], w_hh.shape[1], reverse)
        with y.fake_mode:
            workspace = torch.empty(size, dtype=torch.uint8)
        node.meta["val"] = (y, h_n, c_n, workspace)
        for user in node.users:
            if user.target is operator.getitem and user.args[1] == 3:
                user.meta["val"] = workspace


@cache
def _workspace_bytes(x: tuple[int, ...], features: int, hidden: int, reverse: bool) -> int:
    seq, batch, _ = x
    rows = 4 * hidden
    *_, workspace = aten.mkldnn_rnn_layer(
        torch.zeros(seq, batch, features),
        torch.zeros(rows, features),
        torch.zeros(rows, hidden),
        torch.zeros(rows),
        torch.zeros(rows),
        torch.zeros(1, batch, hidden),
        torch.zeros(1, batch, hidden),
        reverse, [], _LSTM_MODE, hidden, 1, True, False, False, True,
    )  # fmt: skip
    return workspace.numel()


def _onednn_applies(input: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor]) -> bool:
    tensors = [input, *hx, *params]
    static = all(type(d) is int for t in tensors for d in t.shape)  # a SymInt under a dynamic export
    projections = hx[0].shape[-1] != hx[1].shape[-1]
    return static and not projections and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors)


def _lstm(
    input: torch.Tensor,
    hx: Sequence[torch.Tensor],
    params: Sequence[torch.Tensor],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten.lstm.input` by torch's layer helper, each layer and direction one oneDNN kernel call."""
    if not _onednn_applies(input, hx, params):
        return lstm_impl(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    layers = gather_params(params, has_biases, False)
    hidden = list(zip(hx[0], hx[1], strict=True))
    out, final = _rnn_helper(
        input, hidden, layers, has_biases, num_layers, dropout, train, bidirectional, batch_first, _layer
    )
    h_n, c_n = zip(*final, strict=True)
    return out, torch.stack(h_n, 0), torch.stack(c_n, 0)


def _layer(
    x: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    params: Sequence[torch.Tensor],
    has_biases: bool,
    reverse: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One layer in one direction: (seq, batch, features) -> every step's hidden state, the final states."""
    w_ih, w_hh = params[0], params[1]
    if has_biases:
        # The kernel's backward returns one bias gradient for both biases; torch's joint-graph export keys the
        # parameters' gradients by node and would lose one of two equal ones, so b_hh reaches the kernel through a
        # node of its own, whose backward makes a gradient node of its own.
        b_ih, b_hh = params[2], params[3] * 1.0
    else:
        b_ih = b_hh = w_ih.new_zeros(w_ih.shape[0])
    h0, c0 = (s.unsqueeze(0).contiguous() for s in state)
    y, h_n, c_n, _ = aten.mkldnn_rnn_layer.default(
        x.contiguous(), w_ih, w_hh, b_ih, b_hh, h0, c0,
        reverse, [], _LSTM_MODE, h0.shape[2], 1, has_biases, False, False, True,
    )  # fmt: skip
    return y, (h_n.squeeze(0), c_n.squeeze(0))
