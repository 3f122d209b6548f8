"""Recurrent graph ops: one layer of an LSTM, GRU or simple RNN run over a sequence, in one direction.

Each op is the whole recurrence of one layer and direction, not its cell: the steps depend on each other, so a
step is no unit to schedule or fuse across, while the op as a whole is torch's and ONNX's unit (`aten.lstm`,
ONNX LSTM). Layers, both directions and batch-first layouts are the converters' transposes and concats around
these ops. Cells alone (`nn.LSTMCell`) are no op here: they convert to linear and elementwise graph ops, which
fuse like any others. The ops run as library calls into ATen's own LSTM, GRU and RNN kernels
(`gnomon.runtime.library.recurrent`): a recurrence is a loop over steps, which gnomon's kernel generator has no
construct for, and ATen runs it in C++ with every step's input projection batched into one GEMM.

The layout is torch's: `input` is (seq, batch, input_size); `weight_ih` is (gates * hidden, input_size),
`weight_hh` is (gates * hidden, hidden), `bias_ih` and `bias_hh` are (gates * hidden), the gates stacked in
torch's order (LSTM: input, forget, cell, output; GRU: reset, update, new); `h0` (and an LSTM's `c0`) is
(batch, hidden). The results are every step's hidden state (seq, batch, hidden), in input order, and the final
states, after the last step run (input step 0 when `reverse`, which runs the sequence from its end).

ONNX's extras are properties: `clip` bounds every gate's input to [-clip, clip] (absent: no bound); an LSTM may
have peepholes (3 * hidden: input, forget, output) and a forget gate coupled to the input gate (`input_forget`:
f = 1 - i); a GRU applies its reset gate before the recurrent product (ONNX's default) or after it
(`linear_before_reset`, torch's GRU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AnyFloat, BoolAttr, FloatAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    GraphOperation,
    Shape,
    TensorT,
    dims_compatible,
    dtype_of,
    shape_of,
    shape_str,
    tensor_of,
)


class RecurrentOp(GraphOperation):
    """What the three recurrent ops share: operands, direction, clip and the shape rule."""

    GATES: ClassVar[int]
    """Gates per step: the rows of the weights are this many blocks of `hidden`."""

    # Each op defines its fields itself (IRDL would order a base's fields after the op's), starting with
    # input, weight_ih, weight_hh, bias_ih, bias_hh and h0, then reverse and clip; these read them by position.

    def _input(self) -> SSAValue:
        return self.operands[0]

    def hidden_size(self) -> int:
        return shape_of(self.operands[2], f"{self.name} weight_hh")[-1]

    def clip_value(self) -> float | None:
        clip = self.properties.get("clip")
        return clip.value.data if isinstance(clip, FloatAttr) else None

    def is_reverse(self) -> bool:
        reverse = self.properties.get("reverse")
        return isinstance(reverse, IntegerAttr) and bool(reverse.value.data)

    def _state_shape(self, value: SSAValue, what: str, state: Shape) -> None:
        shape = shape_of(value, f"{self.name} {what}")
        if len(shape) != 2 or not all(dims_compatible(a, b) for a, b in zip(shape, state, strict=True)):
            raise VerifyException(f"{self.name}: {what} {shape_str(shape)} is not (batch, hidden) {shape_str(state)}")
        self._same_type(value, what)

    def _same_type(self, value: SSAValue, what: str) -> None:
        dtype = dtype_of(value, f"{self.name} {what}")
        if dtype != dtype_of(self._input(), f"{self.name} input"):
            raise VerifyException(f"{self.name}: {what} element type {dtype} differs from input's")

    def _check(self) -> tuple[Shape, Shape]:
        """The (seq, batch, hidden) output shape and the (batch, hidden) state shape, once the operands check."""
        x_value, w_ih_value, w_hh_value, b_ih, b_hh, h0 = self.operands[:6]
        x = shape_of(x_value, f"{self.name} input")
        w_ih, w_hh = shape_of(w_ih_value, f"{self.name} weight_ih"), shape_of(w_hh_value, f"{self.name} weight_hh")
        dtype = dtype_of(x_value, f"{self.name} input")
        if not isinstance(dtype, AnyFloat):
            raise VerifyException(f"{self.name}: input must be floating point, got {dtype}")
        if len(x) != 3:
            raise VerifyException(f"{self.name}: input {shape_str(x)} is not (seq, batch, input_size)")
        if len(w_hh) != 2 or len(w_ih) != 2:
            raise VerifyException(
                f"{self.name}: weight_ih {shape_str(w_ih)} and weight_hh {shape_str(w_hh)} must be 2-D"
            )
        hidden = w_hh[1]
        rows = self.GATES * hidden
        if not dims_compatible(w_hh[0], rows) or not dims_compatible(w_ih[0], rows):
            raise VerifyException(
                f"{self.name}: weight_ih {shape_str(w_ih)} and weight_hh {shape_str(w_hh)} need"
                f" {self.GATES} x hidden {hidden} rows"
            )
        if not dims_compatible(w_ih[1], x[2]):
            raise VerifyException(f"{self.name}: weight_ih {shape_str(w_ih)} does not take input size {x[2]}")
        for value, what in ((b_ih, "bias_ih"), (b_hh, "bias_hh")):
            bias = shape_of(value, f"{self.name} {what}")
            if len(bias) != 1 or not dims_compatible(bias[0], rows):
                raise VerifyException(f"{self.name}: {what} {shape_str(bias)} is not ({self.GATES} x hidden {hidden})")
        for value, what in ((w_ih_value, "weight_ih"), (w_hh_value, "weight_hh"), (b_ih, "bias_ih"), (b_hh, "bias_hh")):
            self._same_type(value, what)
        state = (x[1], hidden)
        self._state_shape(h0, "h0", state)
        clip = self.clip_value()
        if clip is not None and clip <= 0:
            raise VerifyException(f"{self.name}: clip {clip} is not positive")
        return (x[0], x[1], hidden), state


@irdl_op_definition
class LstmOp(RecurrentOp):
    """One LSTM layer in one direction (torch's gate order i, f, g, o):
    gates = x_t W_ih^T + b_ih + h W_hh^T + b_hh (+ peepholes * c for i, f, and for o with the new c);
    c' = f * c + i * g; h' = o * tanh(c').

    `%y, %h, %c = graph.lstm %x, %w_ih, %w_hh, %b_ih, %b_hh, %h0, %c0 {reverse = false, input_forget = false}
        : (tensor<7x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>,
           tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<7x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)`
    """

    name = "graph.lstm"
    GATES: ClassVar[int] = 4
    input = operand_def(TensorType)
    weight_ih = operand_def(TensorType)
    weight_hh = operand_def(TensorType)
    bias_ih = operand_def(TensorType)
    bias_hh = operand_def(TensorType)
    h0 = operand_def(TensorType)
    c0 = operand_def(TensorType)
    peepholes = opt_operand_def(TensorType)
    """(3 * hidden): the input, forget and output gates' weights of the cell state, if any."""
    reverse = prop_def(BoolAttr)
    """Run from the last step to the first; results stay in input order."""
    clip = opt_prop_def(FloatAttr)
    """The bound of every gate activation's input (ONNX's cell clip), if any."""
    input_forget = prop_def(BoolAttr)
    """The forget gate is 1 - the input gate (ONNX's input_forget)."""
    y = result_def(TensorType)
    h_n = result_def(TensorType)
    c_n = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        out, state = self._check()
        self._state_shape(self.c0, "c0", state)
        if self.peepholes is not None:
            peepholes = shape_of(self.peepholes, f"{self.name} peepholes")
            if len(peepholes) != 1 or not dims_compatible(peepholes[0], 3 * state[1]):
                raise VerifyException(f"{self.name}: peepholes {shape_str(peepholes)} are not (3 x hidden {state[1]})")
            self._same_type(self.peepholes, "peepholes")
        dtype = dtype_of(self.input, "input")
        return [tensor_of(dtype, out), tensor_of(dtype, state), tensor_of(dtype, state)]


@irdl_op_definition
class GruOp(RecurrentOp):
    """One GRU layer in one direction (torch's gate order r, z, n):
    r, z = sigmoid(x_t W_i{r,z}^T + b_i{r,z} + h W_h{r,z}^T + b_h{r,z});
    n = tanh(x_t W_in^T + b_in + r * (h W_hn^T + b_hn)) with `linear_before_reset` (torch's GRU),
    n = tanh(x_t W_in^T + b_in + (r * h) W_hn^T + b_hn) without (ONNX's default); h' = (1 - z) * n + z * h.

    `%y, %h = graph.gru %x, %w_ih, %w_hh, %b_ih, %b_hh, %h0 {reverse = true, linear_before_reset = true}
        : (tensor<7x2x16xf32>, tensor<96x16xf32>, tensor<96x32xf32>, tensor<96xf32>, tensor<96xf32>,
           tensor<2x32xf32>) -> (tensor<7x2x32xf32>, tensor<2x32xf32>)`
    """

    name = "graph.gru"
    GATES: ClassVar[int] = 3
    input = operand_def(TensorType)
    weight_ih = operand_def(TensorType)
    weight_hh = operand_def(TensorType)
    bias_ih = operand_def(TensorType)
    bias_hh = operand_def(TensorType)
    h0 = operand_def(TensorType)
    reverse = prop_def(BoolAttr)
    """Run from the last step to the first; results stay in input order."""
    clip = opt_prop_def(FloatAttr)
    """The bound of every gate activation's input (ONNX's cell clip), if any."""
    linear_before_reset = prop_def(BoolAttr)
    y = result_def(TensorType)
    h_n = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        out, state = self._check()
        dtype = dtype_of(self.input, "input")
        return [tensor_of(dtype, out), tensor_of(dtype, state)]


@irdl_op_definition
class RnnOp(RecurrentOp):
    """One simple RNN layer in one direction: h' = act(x_t W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu.

    `%y, %h = graph.rnn %x, %w_ih, %w_hh, %b_ih, %b_hh, %h0 {reverse = false, nonlinearity = "tanh"}
        : (tensor<7x2x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>,
           tensor<2x32xf32>) -> (tensor<7x2x32xf32>, tensor<2x32xf32>)`
    """

    name = "graph.rnn"
    GATES: ClassVar[int] = 1
    input = operand_def(TensorType)
    weight_ih = operand_def(TensorType)
    weight_hh = operand_def(TensorType)
    bias_ih = operand_def(TensorType)
    bias_hh = operand_def(TensorType)
    h0 = operand_def(TensorType)
    reverse = prop_def(BoolAttr)
    """Run from the last step to the first; results stay in input order."""
    clip = opt_prop_def(FloatAttr)
    """The bound of every gate activation's input (ONNX's cell clip), if any."""
    nonlinearity = prop_def(StringAttr)
    y = result_def(TensorType)
    h_n = result_def(TensorType)
    traits = traits_def(Pure())

    NONLINEARITIES: ClassVar[tuple[str, ...]] = ("tanh", "relu")

    def infer_result_types(self) -> Sequence[TensorT]:
        if self.nonlinearity.data not in self.NONLINEARITIES:
            raise VerifyException(f"graph.rnn: nonlinearity must be one of tanh, relu, got {self.nonlinearity.data!r}")
        out, state = self._check()
        dtype = dtype_of(self.input, "input")
        return [tensor_of(dtype, out), tensor_of(dtype, state)]


Recurrent = LstmOp | GruOp | RnnOp

RECURRENT_OPS = [GruOp, LstmOp, RnnOp]
