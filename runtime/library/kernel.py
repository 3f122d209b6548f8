"""Library kernels: a block of graph ops computed by ATen/oneDNN calls into the runtime's preallocated buffers.

A kernel is one graph op with a torch implementation, or an anchor (conv, linear, matmul) followed by
an epilogue that oneDNN fuses:

    anchor [+ bias add] [+ activation | + residual add [+ relu]]

A bias add adds a vector along the anchor's channel axis (1 for conv, the last for linear and matmul);
a residual add (conv only) adds another tensor of the conv result's type; the activations are those of
oneDNN's unary post-ops (see `_onednn_unary`).

Two ways to run an epilogue:

- oneDNN's fused post-ops, `mkldnn._convolution_pointwise` (overloads `default` and `binary`), the
  calls Inductor's CPU backend emits for conv; the result is copied into the output, as aten's
  convolution has no real out= either;
- the anchor's out= kernel (addmm, mm, matmul; a copy for conv), then each epilogue op's out= kernel in
  place on the output, while it is still in cache.

A matmul operand may also come through a transpose of its last two dims (`reads_transposed`): the
kernel then reads the transpose's input as a strided view, which BLAS takes as a transposed operand
(DLRM's `stacked @ stacked.transpose(1, 2)` ran in 100 us, against 280 us for the same bmm on a
transposed copy, here), and the transpose is never materialized.

Which one a float32 conv takes is `library_kernel`'s `onednn` option: "residual" (the default) fuses
in oneDNN the epilogues with a residual add, and runs the others in place. That is what
`bench/library_epilogue.py` measured on ResNet-50's convolutions over contiguous NCHW buffers (1 and
2 threads, batch 1 and 8): both are mostly faster than the unfused conv-then-ReLU schedule (up to
about 20%, from not writing and rereading a second buffer), within the machine's noise elsewhere. On
`+add` rows oneDNN's binary post-op also saves the in-place add's pass over the output (typically
0.97x of the in-place time, 0.87x to 1.03x); its unary post-ops gain nothing over an in-place ReLU
(0.95x to 1.2x). Linear and matmul always run in place: their out=
kernels allocate nothing. So does a 1x1, stride-1 convolution (`gemm_conv`), a BLAS product per
image straight into the output (0.2-1x oneDNN's time here), with any epilogue in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph import linalg, nn
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.tensor import TransposeOp
from gnomon.runtime.library.base import (
    OUT_IMPLS,
    TORCH_IMPLS,
    Launch,
    copy_back,
    element_type,
    static_shape,
    symmetric_pads,
    torch_padding,
)
from gnomon.runtime.library.nn import gemm_conv

Binder = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]
Anchor = nn.ConvOp | linalg.LinearOp | linalg.MatmulOp
ANCHORS = (nn.ConvOp, linalg.LinearOp, linalg.MatmulOp)


@dataclass(frozen=True)
class LibraryKernel:
    """A block that library calls compute: its name in profiles, and how to bind it to buffers."""

    name: str
    """The library calls it makes, e.g. `aten.linear+gelu` or `mkldnn._convolution_pointwise+add+relu`."""
    binder: Binder = field(repr=False)

    def bind(self, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Callable[[], None]:
        """A closure computing the block from `args` into `results` (preallocated, contiguous, of the block's types).

        Views, parameters and the choice of ATen overload are fixed here; the closure makes the calls only.
        It writes `results` and nothing else, and needs no grad mode (the runtime's tensors need no grad).
        """
        # The closure's return value (often the output a torch call hands back) means nothing to the caller.
        return cast("Callable[[], None]", self.binder(args, results))


# ---- epilogues ----


def _onednn_unary(op: Operation) -> tuple[str, list[float], str] | None:
    """The op as oneDNN's unary post-op (attr, scalars, algorithm), or None if it has none."""
    match op:
        case ew.ReluOp():
            return "relu", [], ""
        case ew.SigmoidOp():
            return "sigmoid", [], ""
        case ew.TanhOp():
            return "tanh", [], ""
        case ew.HardSwishOp():
            return "hardswish", [], ""
        case ew.SiluOp():
            return "swish", [], ""
        case ew.GeluOp():
            return "gelu", [], op.approximate.data
        case ew.ClipOp():
            return "hardtanh", [op.min.value.data, op.max.value.data], ""
        case ew.LeakyReluOp():
            return "leaky_relu", [op.alpha.value.data], ""
        case ew.HardSigmoidOp() if math.isclose(op.alpha.value.data, 1 / 6) and op.beta.value.data == 0.5:
            return "hardsigmoid", [], ""  # oneDNN's, like torch's, has alpha 1/6 and beta 1/2
        case _:
            return None


@dataclass(frozen=True)
class _Epilogue:
    """The epilogue ops after an anchor, each optional, in the order they run."""

    bias: ew.BinaryOp | None = None
    residual: ew.BinaryOp | None = None
    activation: Operation | None = None

    def ops(self) -> list[Operation]:
        return [op for op in (self.bias, self.residual, self.activation) if op is not None]


def _channel_axis(anchor: Anchor, rank: int) -> int:
    return 1 if isinstance(anchor, nn.ConvOp) else rank - 1


def _is_bias(anchor: Anchor, value: SSAValue, other: SSAValue) -> bool:
    """Whether `other` is a vector along the anchor's channel axis, broadcast against `value`."""
    shape, vector = static_shape(value), static_shape(other)
    if len(vector) > len(shape):
        return False
    aligned = (1,) * (len(shape) - len(vector)) + vector
    axis = _channel_axis(anchor, len(shape))
    return all(d == (shape[axis] if i == axis else 1) for i, d in enumerate(aligned)) and shape[axis] > 0


def _other_operand(op: ew.BinaryOp, value: SSAValue) -> SSAValue | None:
    """The operand of a binary op that is not the chain's value; None if both are."""
    if op.lhs is value:
        return None if op.rhs is value else op.rhs
    return op.lhs


def _match_epilogue(anchor: Operation, ops: Sequence[Operation]) -> _Epilogue | None:
    """`ops` (in order) as an epilogue of `anchor`, or None if they are not one oneDNN fuses."""
    if not isinstance(anchor, ANCHORS):
        return None
    value = anchor.results[0]
    epilogue = _Epilogue()
    for op in ops:
        if value not in op.operands or epilogue.activation is not None or len(op.results) != 1:
            return None
        if isinstance(op, ew.AddOp):
            other = _other_operand(op, value)
            if other is None or op.result.type != value.type:
                return None
            if epilogue.bias is None and epilogue.residual is None and _is_bias(anchor, value, other):
                epilogue = _Epilogue(bias=op)
            elif epilogue.residual is None and isinstance(anchor, nn.ConvOp) and other.type == value.type:
                epilogue = _Epilogue(bias=epilogue.bias, residual=op)
            else:
                return None
        elif _onednn_unary(op) is not None and (epilogue.residual is None or isinstance(op, ew.ReluOp)):
            # After a residual add oneDNN fuses ReLU only.
            epilogue = _Epilogue(bias=epilogue.bias, residual=epilogue.residual, activation=op)
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
    return chain is not None and _match_epilogue(anchor_op, chain) is not None


# ---- kernels ----


def _positions(values: Sequence[SSAValue], block: Block) -> list[int] | None:
    """Each value's index among the block's arguments, or None if one is not an argument."""
    indices: dict[SSAValue, int] = {arg: i for i, arg in enumerate(block.args)}
    positions = [indices.get(v) for v in values]
    return None if any(p is None for p in positions) else [p for p in positions if p is not None]


def _call_name(op: Operation) -> str:
    """The ATen call an op's out= binding makes, as profiles name it."""
    return "aten.mm" if isinstance(op, nn.ConvOp) and gemm_conv(op) else TORCH_IMPLS[type(op)].aten


def _single_op_kernel(op: Operation, block: Block) -> LibraryKernel | None:
    impl = TORCH_IMPLS.get(type(op))
    positions = _positions(op.operands, block)
    if impl is None or positions is None:
        return None
    bind_op = OUT_IMPLS.get(type(op), copy_back)

    def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return bind_op(op, [args[p] for p in positions], results)

    return LibraryKernel(_call_name(op), binder)


def _epilogue_names(epilogue: _Epilogue) -> str:
    return "".join(f"+{op.name.removeprefix('graph.')}" for op in epilogue.ops())


def _inplace_kernel(anchor: Anchor, epilogue: _Epilogue, block: Block) -> LibraryKernel | None:
    """The anchor's out= kernel into the output, then each epilogue op's out= kernel in place on it."""
    anchor_positions = _positions(anchor.operands, block)
    # Each epilogue op's operands, with None for the chain's value: the output it runs in place on.
    chain, epilogue_positions = anchor.results[0], list[list[int | None]]()
    for op in epilogue.ops():
        others = [v for v in op.operands if v is not chain]
        positions = _positions(others, block)
        if positions is None:
            return None
        iterator = iter(positions)
        epilogue_positions.append([None if v is chain else next(iterator) for v in op.operands])
        chain = op.results[0]
    if anchor_positions is None:
        return None
    anchor_bind = OUT_IMPLS.get(type(anchor), copy_back)
    ops = epilogue.ops()

    def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        out = results[0]
        launches = [anchor_bind(anchor, [args[p] for p in anchor_positions], [out])]
        for op, positions in zip(ops, epilogue_positions, strict=True):
            operands = [out if p is None else args[p] for p in positions]
            launches.append(OUT_IMPLS[type(op)](op, operands, [out]))

        def launch() -> None:
            for step in launches:
                step()

        return launch

    return LibraryKernel(_call_name(anchor) + _epilogue_names(epilogue), binder)


POINTWISE: Any = torch.ops.mkldnn._convolution_pointwise.default if torch.backends.mkldnn.is_available() else None
POINTWISE_BINARY: Any = torch.ops.mkldnn._convolution_pointwise.binary if POINTWISE is not None else None


def _onednn_conv_kernel(conv: nn.ConvOp, epilogue: _Epilogue, block: Block) -> LibraryKernel | None:
    """conv + epilogue as one `mkldnn._convolution_pointwise` call, copied into the output."""
    bias_add, residual = epilogue.bias, epilogue.residual
    unary = ("none", list[float](), "") if epilogue.activation is None else _onednn_unary(epilogue.activation)
    assert unary is not None
    bias_operand = conv.bias if bias_add is None else _other_operand(bias_add, conv.result)
    residual_operand = None if residual is None else _other_operand(residual, _residual_chain(conv, epilogue))
    positions = _positions([conv.input, conv.weight], block)
    extra = _positions([v for v in (bias_operand, residual_operand) if v is not None], block)
    if positions is None or extra is None:
        return None
    strides, pads, dilations = list(ints(conv.strides)), ints(conv.pads), list(ints(conv.dilations))
    groups, n = conv.groups.value.data, len(strides)
    symmetric, spec = symmetric_pads(pads), torch_padding(pads)
    padding = list(pads[:n]) if symmetric else [0] * n
    attr, scalars, algorithm = unary

    def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        x, weight, out = args[positions[0]], args[positions[1]], results[0]
        tensors = iter(args[p] for p in extra)
        bias = None if bias_operand is None else next(tensors).reshape(-1)  # a channel vector in any broadcast form
        geometry = (padding, strides, dilations, groups)
        if residual_operand is None:
            call, rest = POINTWISE, (weight, bias, *geometry, attr, scalars, algorithm)
        else:
            relu = None if attr == "none" else attr
            call, rest = POINTWISE_BINARY, (next(tensors), weight, bias, *geometry, "add", None, relu, [], None)
        if symmetric:
            fused = partial(call, x, *rest)

            def launch() -> None:
                out.copy_(fused())

            return launch

        def launch_padded() -> None:
            out.copy_(call(F.pad(x, spec), *rest))  # uneven pads: oneDNN takes symmetric ones

        return launch_padded

    return LibraryKernel("mkldnn._convolution_pointwise" + _epilogue_names(epilogue), binder)


def _residual_chain(conv: nn.ConvOp, epilogue: _Epilogue) -> SSAValue:
    """The chain's value where the residual add reads it: the bias add's result, or the conv's."""
    return conv.result if epilogue.bias is None else epilogue.bias.result


# ---- transposed operands ----


def reads_transposed(transpose: Operation) -> bool:
    """Whether a transpose can be a strided view inside its user's library kernel: it swaps the last two dims
    and its only use is a matmul, which BLAS runs on a transposed operand at no cost."""
    if not isinstance(transpose, TransposeOp) or not transpose.result.has_one_use():
        return False
    perm = list(ints(transpose.permutation))
    swapped = len(perm) >= 2 and perm == [*range(len(perm) - 2), len(perm) - 1, len(perm) - 2]
    return swapped and isinstance(next(iter(transpose.result.uses)).operation, linalg.MatmulOp)


def _without_transposes(block: Block) -> tuple[Block, list[tuple[int, tuple[int, ...]]]]:
    """The block with its leading transposes of arguments (`reads_transposed`) turned into extra arguments, and
    for each extra argument the position of the argument it views and the permutation."""
    ops = list(block.ops)
    count = 0
    while count < len(ops) and reads_transposed(ops[count]) and ops[count].operands[0] in block.args:
        count += 1
    if count == 0:
        return block, []
    transposes = cast("list[TransposeOp]", ops[:count])
    stripped = Block(arg_types=[*block.arg_types, *(t.result.type for t in transposes)])
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, stripped.args, strict=False))
    mapping |= {t.result: stripped.args[len(block.args) + i] for i, t in enumerate(transposes)}
    for op in ops[count:]:
        stripped.add_op(op.clone(value_mapper=mapping))
    arguments: list[SSAValue] = list(block.args)
    views = [(arguments.index(t.input), tuple(ints(t.permutation))) for t in transposes]
    return stripped, views


OneDNNPolicy = Literal["residual", "always", "never"]
"""Which float32 conv epilogues `library_kernel` fuses in oneDNN: those with a residual add, all, or none."""


def library_kernel(block: Block, *, onednn: OneDNNPolicy = "residual") -> LibraryKernel | None:
    """The library kernel computing `block`, or None if library calls cannot.

    The block's arguments are the kernel's operands; its ops are graph ops and a terminator (any op
    with IsTerminator) returning the kernel's results. Supported: one graph op with a torch
    implementation, or an anchor with a fusible epilogue (see the module docstring) returning the
    epilogue's result, either after transposes of arguments that `reads_transposed` accepts. `onednn`
    says which conv epilogues oneDNN fuses (see the module docstring).
    """
    stripped, views = _without_transposes(block)
    if views:
        inner = library_kernel(stripped, onednn=onednn)
        if inner is None:
            return None

        def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
            return inner.binder([*args, *(args[p].permute(perm) for p, perm in views)], results)

        return LibraryKernel(inner.name, binder)
    ops = list(block.ops)
    if len(ops) < 2 or not ops[-1].has_trait(IsTerminator):
        return None
    *body, terminator = ops
    if tuple(terminator.operands) != tuple(body[-1].results):
        return None
    if len(body) == 1:
        return _single_op_kernel(body[0], block)
    anchor = body[0]
    epilogue = _match_epilogue(anchor, body[1:])
    if epilogue is None or not isinstance(anchor, ANCHORS):
        return None
    if (
        isinstance(anchor, nn.ConvOp)
        and (onednn == "always" or (onednn == "residual" and epilogue.residual is not None and not gemm_conv(anchor)))
        and POINTWISE is not None
        and isinstance(element_type(anchor.input), Float32Type)
        and not (anchor.bias is not None and epilogue.bias is not None)  # oneDNN takes one bias
    ):
        return _onednn_conv_kernel(anchor, epilogue, block)
    return _inplace_kernel(anchor, epilogue, block)
