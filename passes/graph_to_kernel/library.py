"""What the runtime's library kernels compute, declared without torch: `graph-to-kernel` partitions with it.

`gnomon.runtime.library` implements this table with ATen and oneDNN calls; tests check that it honours the
table both ways (every op and chain declared here binds to a library kernel, and nothing else does).

A library kernel is one op of `LIBRARY_CALLS`, or an anchor (`ANCHORS`: conv, linear, matmul) followed by
an epilogue its call fuses:

    anchor [+ bias add] [+ activation | + residual add [+ relu]]

A bias add adds a vector along the anchor's channel axis (1 for conv, the last for a channels-last conv, linear
and matmul); a residual add (conv only) adds another tensor of the conv result's type; the activations
(`ACTIVATIONS`) are those of oneDNN's unary post-ops. A matmul operand may also come through a transpose of its
last two dims (`reads_transposed`): BLAS reads the transpose's input as a strided view, so the transpose is
never materialized.

`library_call` names the call a block of graph ops becomes:

- a float32 conv whose epilogue has a residual add: one oneDNN call with fused post-ops,
  `mkldnn._convolution_pointwise` (the call Inductor's CPU backend emits); its binary post-op saves the
  in-place add's pass over the output, where its unary post-ops gain nothing over an in-place activation;
- a 1x1, stride-1 convolution without padding (`gemm_conv`): a BLAS product per image (and group) straight
  into the output (`aten.mm`), as oneDNN's convolution reorders contiguous NCHW data to its blocked layout
  and back, and its result must be copied into the output;
- any other anchor: its own call into the output, then each epilogue op in place on it while it is in cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from xdsl.dialects.builtin import Float32Type, IntegerType, Signedness, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from gnomon.cost.convs import gemm_conv
from gnomon.dialects.graph import (
    attention_train,
    embedding,
    grad,
    linalg,
    nn,
    recurrent,
    recurrent_train,
    sampling,
    tensor,
)  # fmt: skip
from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph import reduce as red
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.kernel import LibraryCall

LIBRARY_CALLS: Mapping[type[Operation], str] = {
    # elementwise
    ew.AbsOp: "aten.abs",
    ew.AcosOp: "aten.acos",
    ew.AcoshOp: "aten.acosh",
    ew.AsinOp: "aten.asin",
    ew.AsinhOp: "aten.asinh",
    ew.AtanOp: "aten.atan",
    ew.AtanhOp: "aten.atanh",
    ew.CeilOp: "aten.ceil",
    ew.CosOp: "aten.cos",
    ew.ErfOp: "aten.erf",
    ew.ExpOp: "aten.exp",
    ew.FloorOp: "aten.floor",
    ew.HardSwishOp: "aten.hardswish",
    ew.LogOp: "aten.log",
    ew.NegOp: "aten.neg",
    ew.NotOp: "aten.logical_not",
    ew.ReciprocalOp: "aten.reciprocal",
    ew.ReluOp: "aten.relu",
    ew.RoundOp: "aten.round",
    ew.RsqrtOp: "aten.rsqrt",
    ew.SeluOp: "aten.selu",
    ew.SigmoidOp: "aten.sigmoid",
    ew.SignOp: "aten.sign",
    ew.SiluOp: "aten.silu",
    ew.SinOp: "aten.sin",
    ew.SinhOp: "aten.sinh",
    ew.SoftsignOp: "aten.div",
    ew.SqrtOp: "aten.sqrt",
    ew.TanhOp: "aten.tanh",
    ew.GeluOp: "aten.gelu",
    ew.EluOp: "aten.elu",
    ew.LeakyReluOp: "aten.leaky_relu",
    ew.SoftplusOp: "aten.softplus",
    ew.HardSigmoidOp: "aten.hardsigmoid",
    ew.ClipOp: "aten.clamp",
    ew.DropoutOp: "aten.alias",
    ew.DropoutTrainOp: "aten.native_dropout",
    ew.CastOp: "aten._to_copy",
    ew.BitcastOp: "aten.view",
    ew.AddOp: "aten.add",
    ew.AndOp: "aten.logical_and",
    ew.BitwiseAndOp: "aten.bitwise_and",
    ew.BitwiseNotOp: "aten.bitwise_not",
    ew.BitwiseOrOp: "aten.bitwise_or",
    ew.BitwiseXorOp: "aten.bitwise_xor",
    ew.ShiftLeftOp: "aten.bitwise_left_shift",
    ew.ShiftRightOp: "aten.bitwise_right_shift",
    ew.DivOp: "aten.div",
    ew.MaxOp: "aten.maximum",
    ew.MinOp: "aten.minimum",
    ew.MulOp: "aten.mul",
    ew.OrOp: "aten.logical_or",
    ew.PowOp: "aten.pow",
    ew.PreluOp: "aten.where",
    ew.RemOp: "aten.remainder",
    ew.FmodOp: "aten.fmod",
    ew.SubOp: "aten.sub",
    ew.EqOp: "aten.eq",
    ew.GeOp: "aten.ge",
    ew.GtOp: "aten.gt",
    ew.LeOp: "aten.le",
    ew.LtOp: "aten.lt",
    ew.NeOp: "aten.ne",
    ew.WhereOp: "aten.where",
    # embedding
    embedding.EmbeddingOp: "aten.embedding",
    embedding.EmbeddingBagOp: "aten._embedding_bag",
    # linalg
    linalg.DetOp: "aten.linalg_det",
    linalg.MatmulOp: "aten.matmul",
    linalg.LinearOp: "aten.linear",
    # nn
    nn.ConvOp: "aten.convolution",
    nn.ConvTransposeOp: "aten.convolution",
    nn.MaxPoolOp: "aten.max_pool",
    nn.AvgPoolOp: "aten.avg_pool",
    nn.AdaptiveAvgPoolOp: "aten.adaptive_avg_pool",
    nn.AdaptiveMaxPoolOp: "aten.adaptive_max_pool",
    nn.GlobalAvgPoolOp: "aten.mean",
    nn.GlobalMaxPoolOp: "aten.amax",
    sampling.GridSampleOp: "aten.grid_sampler",
    nn.BatchNormOp: "aten.native_batch_norm",
    nn.BatchNormTrainOp: "aten.native_batch_norm",
    grad.ConvWeightGradOp: "aten.convolution_backward",
    grad.MaxPoolGradOp: "aten.max_pool_backward",
    grad.AvgPoolGradOp: "aten.avg_pool_backward",
    grad.EmbeddingBagGradOp: "aten.index_add",
    grad.EmbeddingBagUpdateOp: "aten.index_add",
    grad.EmbeddingBagAdamUpdateOp: "aten.index_put",
    nn.LayerNormOp: "aten.layer_norm",
    nn.InstanceNormOp: "aten.instance_norm",
    nn.GroupNormOp: "aten.group_norm",
    nn.LrnOp: "aten.avg_pool",
    nn.SoftmaxOp: "aten._softmax",
    nn.LogSoftmaxOp: "aten._log_softmax",
    nn.AttentionOp: "aten.scaled_dot_product_attention",
    attention_train.AttentionTrainOp: "aten._scaled_dot_product_flash_attention_for_cpu",
    attention_train.AttentionGradOp: "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    # recurrent
    recurrent.LstmOp: "aten.lstm",
    recurrent.GruOp: "aten.gru",
    recurrent.RnnOp: "aten.rnn_tanh",
    recurrent_train.LstmTrainOp: "aten.mkldnn_rnn_layer",
    recurrent_train.LstmGradOp: "aten.mkldnn_rnn_layer_backward",
    # reduce
    red.ReduceSumOp: "aten.sum",
    red.ReduceMeanOp: "aten.mean",
    red.ReduceMaxOp: "aten.amax",
    red.ReduceMinOp: "aten.amin",
    red.ReduceProdOp: "aten.prod",
    red.ArgmaxOp: "aten.argmax",
    red.CumsumOp: "aten.cumsum",
    red.CumprodOp: "aten.cumprod",
    red.ArgminOp: "aten.argmin",
    red.TopKOp: "aten.sort",
    # tensor
    tensor.ConstantOp: "constant",
    tensor.ReshapeOp: "aten.view",
    tensor.TransposeOp: "aten.permute",
    tensor.ConcatOp: "aten.cat",
    tensor.SplitOp: "aten.split_with_sizes",
    tensor.SliceOp: "aten.slice",
    tensor.GatherOp: "aten.index_select",
    tensor.GatherElementsOp: "aten.gather",
    tensor.ScatterElementsOp: "aten.scatter",
    tensor.SliceScatterOp: "aten.slice_scatter",
    tensor.PadOp: "aten.constant_pad_nd",
    tensor.ExpandOp: "aten.expand",
    tensor.TileOp: "aten.repeat",
    tensor.IotaOp: "aten.arange",
}
"""The graph ops a library kernel computes alone, each with the ATen call that mainly computes it, as profiles
name it. The runtime computes the others with NumPy (the reference semantics), as `numpy.<op>`."""

ANCHORS = (nn.ConvOp, linalg.LinearOp, linalg.MatmulOp)
"""The ops whose library call fuses an epilogue."""
Anchor = nn.ConvOp | linalg.LinearOp | linalg.MatmulOp

ACTIVATIONS = (
    ew.ReluOp, ew.SigmoidOp, ew.TanhOp, ew.HardSwishOp, ew.SiluOp, ew.GeluOp, ew.ClipOp, ew.LeakyReluOp,
    ew.HardSigmoidOp,
)  # fmt: skip
"""The activations an epilogue may end with: oneDNN's unary post-ops (hard_sigmoid as oneDNN's and torch's:
alpha 1/6, beta 1/2)."""

RESIDUAL_ANCHORS = (nn.ConvOp,)
"""The anchors whose epilogue may add a residual (a tensor of the anchor result's type)."""

AFTER_RESIDUAL = (ew.ReluOp,)
"""The activations an epilogue may end with after a residual add: oneDNN's binary post-op fuses only these."""

ONEDNN_CONV = "mkldnn._convolution_pointwise"
"""The call of a convolution with oneDNN's fused post-ops."""

GEMM_CONV = "aten.mm"
"""The call of a convolution that is a matrix product per image (`gemm_conv`)."""

OneDNNPolicy = Literal["residual", "always", "never"]
"""Which float32 conv epilogues `library_call` gives oneDNN: those with a residual add (the default), all, or
none (each epilogue op then runs in place after the convolution)."""


def _shaped(value: SSAValue) -> TensorType:
    shaped = value.type
    assert isinstance(shaped, TensorType)
    return shaped


def _shape(value: SSAValue) -> tuple[int, ...]:
    return _shaped(value).get_shape()


def _wide_unsigned(value: SSAValue) -> bool:
    """Whether `value` holds uint16/32/64, for which ATen has almost no kernels (it has uint8's)."""
    element = value.type.get_element_type() if isinstance(value.type, TensorType) else None
    return (
        isinstance(element, IntegerType) and element.signedness.data == Signedness.UNSIGNED and element.width.data > 8
    )


def callee_of(op: Operation) -> str | None:
    """The library call computing `op` alone (or as an anchor, before its epilogue); None if there is none."""
    if any(_wide_unsigned(v) for v in (*op.operands, *op.results)):
        return None
    if isinstance(op, nn.ConvOp) and gemm_conv(op):
        return GEMM_CONV
    return LIBRARY_CALLS.get(type(op))


# ---- epilogues ----


def fusible_activation(op: Operation) -> bool:
    """Whether `op` is one of `ACTIVATIONS` with parameters the library's post-op takes."""
    if isinstance(op, ew.HardSigmoidOp):
        return math.isclose(op.alpha.value.data, 1 / 6) and op.beta.value.data == 0.5
    return isinstance(op, ACTIVATIONS)


@dataclass(frozen=True)
class Epilogue:
    """The epilogue ops after an anchor, each optional, in the order they run."""

    bias: ew.BinaryOp | None = None
    residual: ew.BinaryOp | None = None
    activation: Operation | None = None

    def ops(self) -> list[Operation]:
        return [op for op in (self.bias, self.residual, self.activation) if op is not None]


def _channel_axis(anchor: Anchor, rank: int) -> int:
    return 1 if isinstance(anchor, nn.ConvOp) and not channels_last(anchor) else rank - 1


def _is_bias(anchor: Anchor, value: SSAValue, other: SSAValue) -> bool:
    """Whether `other` is a vector along the anchor's channel axis, broadcast against `value`."""
    shape, vector = _shape(value), _shape(other)
    if len(vector) > len(shape):
        return False
    aligned = (1,) * (len(shape) - len(vector)) + vector
    axis = _channel_axis(anchor, len(shape))
    return all(d == (shape[axis] if i == axis else 1) for i, d in enumerate(aligned)) and shape[axis] > 0


def other_operand(op: ew.BinaryOp, value: SSAValue) -> SSAValue | None:
    """The operand of a binary op that is not the chain's value; None if both are."""
    if op.lhs is value:
        return None if op.rhs is value else op.rhs
    return op.lhs


def match_epilogue(anchor: Operation, ops: Sequence[Operation]) -> Epilogue | None:
    """`ops` (in order) as an epilogue of `anchor`, or None if they are not one its call fuses."""
    if not isinstance(anchor, ANCHORS):
        return None
    value = anchor.results[0]
    epilogue = Epilogue()
    for op in ops:
        if value not in op.operands or epilogue.activation is not None or len(op.results) != 1:
            return None
        if isinstance(op, ew.AddOp):
            other = other_operand(op, value)
            if other is None or op.result.type != value.type:
                return None
            if epilogue.bias is None and epilogue.residual is None and _is_bias(anchor, value, other):
                epilogue = Epilogue(bias=op)
            elif epilogue.residual is None and isinstance(anchor, RESIDUAL_ANCHORS) and other.type == value.type:
                epilogue = Epilogue(bias=epilogue.bias, residual=op)
            else:
                return None
        elif fusible_activation(op) and (epilogue.residual is None or isinstance(op, AFTER_RESIDUAL)):
            epilogue = Epilogue(bias=epilogue.bias, residual=epilogue.residual, activation=op)
        else:
            return None
        value = op.results[0]
    return epilogue


def _chain_from(anchor: Operation, op: Operation, depth: int = 3) -> list[Operation] | None:
    """The ops through which the anchor's result flows into `op` (ending with `op`), at most `depth` long."""
    for operand in op.operands:
        owner = operand.owner
        if owner is anchor:
            return [op]
        if depth > 1 and isinstance(owner, Operation):
            chain = _chain_from(anchor, owner, depth - 1)
            if chain is not None:
                return [*chain, op]
    return None


def fusible_epilogue(anchor_op: Operation, next_op: Operation) -> bool:
    """Whether `next_op` can join the library kernel of `anchor_op` (with the epilogue ops between them).

    `next_op` uses the anchor's result directly or through earlier epilogue ops; those are found from
    the use-def chain, so the question needs no state: `fusible_epilogue(conv, relu)` after
    `fusible_epilogue(conv, add)` asks about conv+add+relu. Other uses of the intermediate values, and
    whether a residual operand depends on the anchor, are the partitioner's to check.
    """
    chain = _chain_from(anchor_op, next_op)
    return chain is not None and match_epilogue(anchor_op, chain) is not None


def residual_chain(conv: nn.ConvOp, epilogue: Epilogue) -> SSAValue:
    """The chain's value where the residual add reads it: the bias add's result, or the conv's."""
    return conv.result if epilogue.bias is None else epilogue.bias.result


def fuses_in_onednn(anchor: Anchor, epilogue: Epilogue, onednn: OneDNNPolicy = "residual") -> bool:
    """Whether the anchor and its epilogue are one oneDNN call (`ONEDNN_CONV`) under the `onednn` policy: the
    default takes a residual add, and a channels-last convolution's activation too (its result is copied into the
    output, so an activation after that would be a third pass over it: 0.91-0.97x the time on MobileNet-V2's
    depthwise layers here)."""
    if not isinstance(anchor, nn.ConvOp) or not isinstance(_shaped(anchor.input).get_element_type(), Float32Type):
        return False
    if anchor.bias is not None and epilogue.bias is not None:
        return False  # oneDNN takes one bias
    if onednn == "always":
        return True
    fused = epilogue.residual is not None or (channels_last(anchor) and epilogue.activation is not None)
    return onednn == "residual" and fused and not gemm_conv(anchor)


# ---- transposed operands ----


def reads_transposed(transpose: Operation) -> bool:
    """Whether a transpose can be a strided view inside its user's library kernel: it swaps the last two dims
    and its only use is a matmul, which BLAS runs on a transposed operand at no cost."""
    if not isinstance(transpose, tensor.TransposeOp) or not transpose.result.has_one_use():
        return False
    perm = list(ints(transpose.permutation))
    swapped = len(perm) >= 2 and perm == [*range(len(perm) - 2), len(perm) - 1, len(perm) - 2]
    return swapped and isinstance(next(iter(transpose.result.uses)).operation, linalg.MatmulOp)


# ---- the call a block becomes ----


def _arguments(values: Sequence[SSAValue], block: Block) -> bool:
    return all(value in block.args for value in values)


def _leading_transposes(ops: Sequence[Operation], block: Block) -> int:
    """How many of the first ops are transposes of block arguments that their user reads as views."""
    count = 0
    while count < len(ops) and reads_transposed(ops[count]) and ops[count].operands[0] in block.args:
        count += 1
    return count


def library_call(block: Block, *, onednn: OneDNNPolicy = "residual") -> LibraryCall | None:
    """The library call computing `block`, or None if library calls cannot.

    The block's arguments are the kernel's operands; its ops are graph ops and a terminator (any op
    with IsTerminator) returning the last op's results. Supported: one op of `LIBRARY_CALLS`, or an
    anchor with a fusible epilogue, either after transposes of arguments that `reads_transposed`
    accepts; every other operand is an argument. `onednn` says which conv epilogues oneDNN fuses.
    """
    ops = list(block.ops)
    count = _leading_transposes(ops, block)
    transposes, ops = ops[:count], ops[count:]
    if len(ops) < 2 or not ops[-1].has_trait(IsTerminator):
        return None
    *body, terminator = ops
    if tuple(terminator.operands) != tuple(body[-1].results):
        return None
    anchor, views = body[0], [t.results[0] for t in transposes]
    transposed = tuple(i for i, operand in enumerate(anchor.operands) if operand in views)
    if len(transposed) != len(views) or not _arguments([v for v in anchor.operands if v not in views], block):
        return None
    callee = callee_of(anchor)
    if len(body) == 1:
        return None if callee is None else LibraryCall(callee, (), transposed)
    epilogue = match_epilogue(anchor, body[1:])
    if epilogue is None or not isinstance(anchor, ANCHORS) or callee is None:
        return None
    chain = anchor.results[0]
    for op in epilogue.ops():
        if not _arguments([v for v in op.operands if v is not chain], block):
            return None
        chain = op.results[0]
    if fuses_in_onednn(anchor, epilogue, onednn):
        callee = ONEDNN_CONV
    return LibraryCall(callee, tuple(op.name.removeprefix("graph.") for op in epilogue.ops()), transposed)
