"""An LSTM layer in a training step: its forward pass keeping what its backward pass needs, and that backward pass.

Both are whole layers (one direction), as `graph.lstm` is: a step is no unit to schedule, and the backward
recurrence runs the steps in reverse, every step's gate gradients feeding the one before. torch's joint graph
would otherwise decompose a layer into some 30 ops per step, forward and backward. The pair is what PyTorch eager
runs on a CPU (`aten.mkldnn_rnn_layer` in training mode and `aten.mkldnn_rnn_layer_backward`): the forward op
hands the backward op a `workspace`, the gates and states of every step in the layout of the runtime's kernel
(oneDNN's). Its size is the kernel's to say, so it is part of the result type, set by whoever builds the op (the
torch frontend reads it off one call of the kernel); reference semantics leave it zero and recompute the forward.

Layouts are `graph.lstm`'s (torch's): `input` (seq, batch, input_size), gates i, f, g, o stacked in the weights'
rows, states (batch, hidden). The backward op returns one bias gradient: b_ih and b_hh enter the gates as a sum,
so their gradients are equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, IntegerType, TensorType
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import TensorT, dims_compatible, dtype_of, shape_of, shape_str, tensor_of, tensor_type
from gnomon.dialects.graph.recurrent import RecurrentOp


def _check_workspace(op: LstmTrainOp | LstmGradOp, workspace: TensorType) -> TensorT:
    shape = workspace.get_shape()
    element = workspace.get_element_type()
    if len(shape) != 1 or shape[0] < 0 or not (isinstance(element, IntegerType) and element.width.data == 8):
        raise VerifyException(f"{op.name}: workspace {workspace} is not a static 1-D tensor of bytes")
    return workspace


@irdl_op_definition
class LstmTrainOp(RecurrentOp):
    """`graph.lstm` in a training step: the same results, and the workspace its `graph.lstm_grad` reads.

    `%y, %h, %c, %ws = graph.lstm_train %x, %w_ih, %w_hh, %b_ih, %b_hh, %h0, %c0 {reverse = false}
        : (tensor<7x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>,
           tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<7x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>,
           tensor<28672xui8>)`
    """

    name = "graph.lstm_train"
    GATES: ClassVar[int] = 4
    input = operand_def(TensorType)
    weight_ih = operand_def(TensorType)
    weight_hh = operand_def(TensorType)
    bias_ih = operand_def(TensorType)
    bias_hh = operand_def(TensorType)
    h0 = operand_def(TensorType)
    c0 = operand_def(TensorType)
    reverse = prop_def(BoolAttr)
    """Run from the last step to the first; results stay in input order."""
    y = result_def(TensorType)
    h_n = result_def(TensorType)
    c_n = result_def(TensorType)
    workspace = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        out, state = self._check()
        self._state_shape(self.c0, "c0", state)
        dtype = dtype_of(self.input, "input")
        workspace = _check_workspace(self, tensor_type(self.workspace, "workspace"))
        return [tensor_of(dtype, out), tensor_of(dtype, state), tensor_of(dtype, state), workspace]


@irdl_op_definition
class LstmGradOp(RecurrentOp):
    """The gradients of an LSTM layer's loss with respect to its input, weights, bias and initial states, from the
    gradients of its results (`grad_y`, `grad_h_n`, `grad_c_n`) and what its `graph.lstm_train` returned.

    `%dx, %dw_ih, %dw_hh, %db, %dh0, %dc0 = graph.lstm_grad %x, %w_ih, %w_hh, %b_ih, %b_hh, %h0, %c0, %y, %h, %c,
          %dy, %dh, %dc, %ws {reverse = false} : (...) -> (tensor<7x2x16xf32>, tensor<128x16xf32>,
          tensor<128x32xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>)`
    """

    name = "graph.lstm_grad"
    GATES: ClassVar[int] = 4
    input = operand_def(TensorType)
    weight_ih = operand_def(TensorType)
    weight_hh = operand_def(TensorType)
    bias_ih = operand_def(TensorType)
    bias_hh = operand_def(TensorType)
    h0 = operand_def(TensorType)
    c0 = operand_def(TensorType)
    y = operand_def(TensorType)
    h_n = operand_def(TensorType)
    c_n = operand_def(TensorType)
    grad_y = operand_def(TensorType)
    grad_h_n = operand_def(TensorType)
    grad_c_n = operand_def(TensorType)
    workspace = operand_def(TensorType)
    reverse = prop_def(BoolAttr)
    """The forward op's direction."""
    grad_input = result_def(TensorType)
    grad_weight_ih = result_def(TensorType)
    grad_weight_hh = result_def(TensorType)
    grad_bias = result_def(TensorType)
    grad_h0 = result_def(TensorType)
    grad_c0 = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        out, state = self._check()
        self._state_shape(self.c0, "c0", state)
        for value, what, shape in (
            (self.y, "y", out),
            (self.grad_y, "grad_y", out),
            (self.h_n, "h_n", state),
            (self.c_n, "c_n", state),
            (self.grad_h_n, "grad_h_n", state),
            (self.grad_c_n, "grad_c_n", state),
        ):
            got = shape_of(value, f"{self.name} {what}")
            if len(got) != len(shape) or not all(dims_compatible(a, b) for a, b in zip(got, shape, strict=True)):
                raise VerifyException(f"{self.name}: {what} {shape_str(got)} is not {shape_str(shape)}")
            self._same_type(value, what)
        _check_workspace(self, tensor_type(self.workspace, "workspace"))
        return [
            tensor_type(self.input, "input"),
            tensor_type(self.weight_ih, "weight_ih"),
            tensor_type(self.weight_hh, "weight_hh"),
            tensor_type(self.bias_ih, "bias_ih"),
            tensor_type(self.h0, "h0"),
            tensor_type(self.c0, "c0"),
        ]


RECURRENT_TRAIN_OPS = [LstmGradOp, LstmTrainOp]
