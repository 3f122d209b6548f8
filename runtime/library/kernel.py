"""Library kernels: a block of graph ops computed by ATen/oneDNN calls into the runtime's preallocated buffers.

What a block may hold, and which call computes it, is declared without torch in
`gnomon.passes.graph_to_kernel.library`: one op with a torch implementation, or an anchor (conv,
linear, matmul) followed by an epilogue, either possibly reading matmul operands through transposes.
`bind_call` builds the kernel a `kernel.library` names, from its callee, epilogue and transposed
operands; it binds nothing the table does not declare.

Two ways to run an epilogue, as the callee says:

- `mkldnn._convolution_pointwise` (overloads `default` and `binary`): oneDNN's fused post-ops, the calls
  Inductor's CPU backend emits for conv; the result is copied into the output, as aten's convolution has
  no real out= either;
- any other callee: the anchor's binding into the output (addmm, mm, matmul; a BLAS product per image for
  `aten.mm`, a copy for `aten.convolution`), then each epilogue op's out= kernel in place on the output,
  while it is still in cache.

A transposed operand is read as a strided view of the transpose's input, which BLAS takes as a
transposed operand: the transpose is never materialized. A constant weight is packed once, at bind time, into
oneDNN's blocked layout where that pays: a convolution's (`gnomon.cost.convs.packs_weight`, then
`mkldnn._convolution_pointwise`) and a large linear layer's (`gnomon.cost.linears.packs_linear_weight`, then
`mkldnn._linear_pointwise`); the result is copied into the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import torch
import torch.nn.functional as F
from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from gnomon.cost.convs import packs_weight
from gnomon.cost.linears import packs_linear_weight
from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph import linalg, nn
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.layout import TO_CHANNELS_FIRST, channels_last
from gnomon.dialects.graph.tensor import TransposeOp
from gnomon.dialects.kernel import LibraryCall
from gnomon.passes.graph_to_kernel.library import (
    ANCHORS,
    ONEDNN_CONV,
    Anchor,
    Epilogue,
    OneDNNPolicy,
    callee_of,
    library_call,
    match_epilogue,
    other_operand,
    residual_chain,
)
from gnomon.runtime.library.base import (
    TORCH_IMPLS,
    Launch,
    element_type,
    symmetric_pads,
    torch_padding,
)

Binder = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]
ConstantBinder = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor], Sequence[bool]], Launch]
"""A binder told which operands hold the same values on every run (the program's constants)."""


@dataclass(frozen=True)
class LibraryKernel:
    """A block that library calls compute: its name in profiles, and how to bind it to buffers."""

    name: str
    """The library call and the ops it fuses, e.g. `aten.linear+gelu` or `mkldnn._convolution_pointwise+add+relu`."""
    binder: Binder = field(repr=False)
    with_constants: ConstantBinder | None = field(default=None, repr=False)
    """How to bind it when some operands are known constant: a convolution's weight is then packed once."""

    def bind(
        self, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor], constants: Sequence[bool] = ()
    ) -> Callable[[], None]:
        """A closure computing the block from `args` into `results` (preallocated, contiguous, of the block's types).

        Views, parameters and the choice of ATen overload are fixed here; the closure makes the calls only.
        It writes `results` and nothing else, and needs no grad mode (the runtime's tensors need no grad).
        `constants[i]` says that `args[i]` holds the same values whenever the closure runs (a weight): what is
        derived from it alone (oneDNN's blocked copy of a convolution weight) is then computed here, once.
        """
        # The closure's return value (often the output a torch call hands back) means nothing to the caller.
        if self.with_constants is not None and any(constants):
            return cast("Callable[[], None]", self.with_constants(args, results, constants))
        return cast("Callable[[], None]", self.binder(args, results))


def _onednn_unary(op: Operation) -> tuple[str, list[float], str]:
    """An epilogue activation (`ACTIVATIONS`) as oneDNN's unary post-op: attr, scalars, algorithm."""
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
        case ew.HardSigmoidOp():
            return "hardsigmoid", [], ""  # oneDNN's, like torch's, has alpha 1/6 and beta 1/2
        case _:
            raise ValueError(f"{op.name} is no oneDNN post-op")


def _positions(values: Sequence[SSAValue], block: Block) -> list[int] | None:
    """Each value's index among the block's arguments, or None if one is not an argument."""
    indices: dict[SSAValue, int] = {arg: i for i, arg in enumerate(block.args)}
    positions = [indices.get(v) for v in values]
    return None if any(p is None for p in positions) else [p for p in positions if p is not None]


def _single_op_kernel(op: Operation, block: Block, name: str) -> LibraryKernel | None:
    build = TORCH_IMPLS.get(type(op))
    positions = _positions(op.operands, block)
    if build is None or positions is None:
        return None
    impl = build(op)

    def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return impl.bind([args[p] for p in positions], results)

    def with_constants(
        args: Sequence[torch.Tensor], results: Sequence[torch.Tensor], constants: Sequence[bool]
    ) -> Launch:
        operands = [args[p] for p in positions]
        packed = _packed_call(op, operands, [constants[p] for p in positions], results[0])
        return packed if packed is not None else impl.bind(operands, results)

    return LibraryKernel(name, binder, with_constants if isinstance(op, nn.ConvOp | linalg.LinearOp) else None)


def _inplace_kernel(anchor: Anchor, epilogue: Epilogue, block: Block, name: str) -> LibraryKernel | None:
    """The anchor's binding into the output, then each epilogue op's out= kernel in place on it."""
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
    anchor_impl = TORCH_IMPLS[type(anchor)](anchor)
    epilogue_impls = [TORCH_IMPLS[type(op)](op) for op in epilogue.ops()]

    def with_constants(
        args: Sequence[torch.Tensor], results: Sequence[torch.Tensor], constants: Sequence[bool]
    ) -> Launch:
        out = results[0]
        operands = [args[p] for p in anchor_positions]
        packed = _packed_call(anchor, operands, [constants[p] for p in anchor_positions], out) if constants else None
        launches = [packed if packed is not None else anchor_impl.bind(operands, [out])]
        for impl, positions in zip(epilogue_impls, epilogue_positions, strict=True):
            operands = [out if p is None else args[p] for p in positions]
            launches.append(impl.bind(operands, [out]))

        def launch() -> None:
            for step in launches:
                step()

        return launch

    def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return with_constants(args, results, ())

    return LibraryKernel(name, binder, with_constants if isinstance(anchor, nn.ConvOp | linalg.LinearOp) else None)


POINTWISE: Any = torch.ops.mkldnn._convolution_pointwise.default if torch.backends.mkldnn.is_available() else None
POINTWISE_BINARY: Any = torch.ops.mkldnn._convolution_pointwise.binary if POINTWISE is not None else None
REORDER_WEIGHT: Any = torch._C._nn.mkldnn_reorder_conv2d_weight  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
LINEAR_POINTWISE: Any = torch.ops.mkldnn._linear_pointwise.default if POINTWISE is not None else None
REORDER_LINEAR_WEIGHT: Any = torch.ops.mkldnn._reorder_linear_weight if POINTWISE is not None else None


def _conv_geometry(conv: nn.ConvOp) -> tuple[list[int], list[int], list[int], int, bool, list[int]]:
    """padding, strides, dilations, groups as oneDNN takes them; whether the pads are symmetric (else the input is
    padded first, by `F.pad` spec)."""
    strides, pads, dilations = list(ints(conv.strides)), ints(conv.pads), list(ints(conv.dilations))
    n = len(strides)
    symmetric = symmetric_pads(pads)
    return (
        list(pads[:n]) if symmetric else [0] * n,
        strides,
        dilations,
        conv.groups.value.data,
        symmetric,
        torch_padding(pads),
    )


def _packed_weight(conv: nn.ConvOp, weight: torch.Tensor, input_shape: Sequence[int]) -> torch.Tensor | None:
    """oneDNN's blocked copy of a constant convolution weight for this geometry and (channels-first) input shape,
    made once at bind time where `packs_weight` says it pays; else None (and where oneDNN is absent)."""
    if POINTWISE is None or not packs_weight(conv):
        return None
    padding, strides, dilations, groups, _, _ = _conv_geometry(conv)
    return REORDER_WEIGHT(weight.contiguous().to_mkldnn(), padding, strides, dilations, groups, list(input_shape))


def _channels_first_view(conv: nn.ConvOp, activation: torch.Tensor) -> torch.Tensor:
    """A channels-last convolution's activation buffer as the (N, C, H, W) view oneDNN takes (channels-last
    strides, no copy); a channels-first one's as it is."""
    return activation.permute(TO_CHANNELS_FIRST) if channels_last(conv) else activation


def _padded_shape(shape: Sequence[int], spec: Sequence[int]) -> list[int]:
    """The shape after `F.pad(x, spec)` (spec: last dim's before and after, then the one before it...)."""
    padded = list(shape)
    for i in range(len(spec) // 2):
        padded[-1 - i] += spec[2 * i] + spec[2 * i + 1]
    return padded


def _packed_call(
    op: Operation, operands: Sequence[torch.Tensor], constants: Sequence[bool], out: torch.Tensor
) -> Launch | None:
    """A convolution or linear layer alone (`x, weight[, bias]`) by oneDNN on its weight packed once, copied into
    `out`; None when the weight is not constant or is not packed."""
    if len(constants) < 2 or not constants[1]:
        return None
    if isinstance(op, linalg.LinearOp):
        return _packed_linear(op, operands, out)
    return _packed_conv(op, operands, out) if isinstance(op, nn.ConvOp) else None


def _packed_linear(linear: linalg.LinearOp, operands: Sequence[torch.Tensor], out: torch.Tensor) -> Launch | None:
    """`mkldnn._linear_pointwise` on the weight packed once for this many rows (`packs_linear_weight`)."""
    if LINEAR_POINTWISE is None or not packs_linear_weight(linear):
        return None
    x, weight, *bias = operands
    rows = x.reshape(-1, x.shape[-1])
    packed = REORDER_LINEAR_WEIGHT(weight.contiguous(), rows.shape[0])
    call = partial(LINEAR_POINTWISE, rows, packed, bias[0] if bias else None, "none", [], "")
    flat = out.view(rows.shape[0], -1)
    return lambda: flat.copy_(call())


def _packed_conv(conv: nn.ConvOp, operands: Sequence[torch.Tensor], out: torch.Tensor) -> Launch | None:
    """A convolution by oneDNN on its weight packed once, where `packs_weight` says it pays."""
    x, weight, *bias = operands
    x, out = _channels_first_view(conv, x), _channels_first_view(conv, out)
    padding, strides, dilations, groups, symmetric, spec = _conv_geometry(conv)
    packed = _packed_weight(conv, weight, x.shape if symmetric else _padded_shape(x.shape, spec))
    if packed is None:
        return None
    rest = (packed, bias[0] if bias else None, padding, strides, dilations, groups, "none", [], "")
    if symmetric:
        call = partial(POINTWISE, x, *rest)
        return lambda: out.copy_(call())
    return lambda: out.copy_(POINTWISE(F.pad(x, spec), *rest))


def _onednn_conv_kernel(conv: nn.ConvOp, epilogue: Epilogue, block: Block, name: str) -> LibraryKernel | None:
    """conv + epilogue as one `mkldnn._convolution_pointwise` call, copied into the output."""
    bias_add, residual = epilogue.bias, epilogue.residual
    unary = ("none", list[float](), "") if epilogue.activation is None else _onednn_unary(epilogue.activation)
    bias_operand = conv.bias if bias_add is None else other_operand(bias_add, conv.result)
    residual_operand = None if residual is None else other_operand(residual, residual_chain(conv, epilogue))
    positions = _positions([conv.input, conv.weight], block)
    extra = _positions([v for v in (bias_operand, residual_operand) if v is not None], block)
    if positions is None or extra is None:
        return None
    padding, strides, dilations, groups, symmetric, spec = _conv_geometry(conv)
    attr, scalars, algorithm = unary

    def with_constants(
        args: Sequence[torch.Tensor], results: Sequence[torch.Tensor], constants: Sequence[bool]
    ) -> Launch:
        x, weight = _channels_first_view(conv, args[positions[0]]), args[positions[1]]
        out = _channels_first_view(conv, results[0])
        if constants and constants[positions[1]]:
            packed = _packed_weight(conv, weight, x.shape if symmetric else _padded_shape(x.shape, spec))
            weight = weight if packed is None else packed
        tensors = iter(args[p] for p in extra)
        bias = None if bias_operand is None else next(tensors).reshape(-1)  # a channel vector in any broadcast form
        geometry = (padding, strides, dilations, groups)
        if residual_operand is None:
            call, rest = POINTWISE, (weight, bias, *geometry, attr, scalars, algorithm)
        else:
            relu = None if attr == "none" else attr
            other = _channels_first_view(conv, next(tensors))  # the conv result's type: in its layout
            call, rest = POINTWISE_BINARY, (other, weight, bias, *geometry, "add", None, relu, [], None)
        if symmetric:
            fused = partial(call, x, *rest)

            def launch() -> None:
                out.copy_(fused())

            return launch

        def launch_padded() -> None:
            out.copy_(call(F.pad(x, spec), *rest))  # uneven pads: oneDNN takes symmetric ones

        return launch_padded

    def binder(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return with_constants(args, results, ())

    return LibraryKernel(name, binder, with_constants)


def _without_transposes(block: Block, count: int) -> tuple[Block, list[tuple[int, tuple[int, ...]]]] | None:
    """The block with its `count` leading transposes of arguments turned into extra arguments, and for each
    extra argument the position of the argument it views and the permutation; None if they are not that."""
    ops = list(block.ops)
    transposes = ops[:count]
    if not all(isinstance(t, TransposeOp) and t.input in block.args for t in transposes):
        return None
    transposes = cast("list[TransposeOp]", transposes)
    stripped = Block(arg_types=[*block.arg_types, *(t.result.type for t in transposes)])
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, stripped.args, strict=False))
    mapping |= {t.result: stripped.args[len(block.args) + i] for i, t in enumerate(transposes)}
    for op in ops[count:]:
        stripped.add_op(op.clone(value_mapper=mapping))
    arguments: list[SSAValue] = list(block.args)
    views = [(arguments.index(t.input), tuple(ints(t.permutation))) for t in transposes]
    return stripped, views


def bind_call(call: LibraryCall, block: Block) -> LibraryKernel | None:
    """The library kernel computing `block` as `call` says, or None if `call` does not describe the block or is
    not one the library declares (`gnomon.passes.graph_to_kernel.library`).

    The block's arguments are the kernel's operands; its ops are a transpose per `call.transposed` operand,
    the anchor, the `call.epilogue` ops, and a terminator (any op with IsTerminator) returning the last
    op's results.
    """
    if call.transposed:
        stripped = _without_transposes(block, len(call.transposed))
        if stripped is None:
            return None
        inner_block, views = stripped
        anchor, extra = inner_block.first_op, inner_block.args[len(block.args) :]
        if anchor is None or tuple(i for i, v in enumerate(anchor.operands) if v in extra) != call.transposed:
            return None
        inner = bind_call(LibraryCall(call.callee, call.epilogue), inner_block)
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
    anchor, fused = body[0], body[1:]
    if tuple(op.name.removeprefix("graph.") for op in fused) != call.epilogue:
        return None
    if not fused:
        return _single_op_kernel(anchor, block, call.name) if call.callee == callee_of(anchor) else None
    epilogue = match_epilogue(anchor, fused)
    if epilogue is None or not isinstance(anchor, ANCHORS):
        return None
    if call.callee == ONEDNN_CONV:
        if not isinstance(anchor, nn.ConvOp) or POINTWISE is None:
            return None
        two_biases = anchor.bias is not None and epilogue.bias is not None
        if not isinstance(element_type(anchor.input), Float32Type) or two_biases:
            return None  # oneDNN's post-ops run here on float32, with one bias
        return _onednn_conv_kernel(anchor, epilogue, block, call.name)
    if call.callee != callee_of(anchor):
        return None
    return _inplace_kernel(anchor, epilogue, block, call.name)


def library_kernel(block: Block, *, onednn: OneDNNPolicy = "residual") -> LibraryKernel | None:
    """The library kernel computing `block`, the call chosen by `library_call` (with its `onednn` policy), or
    None if library calls cannot compute it."""
    call = library_call(block, onednn=onednn)
    return None if call is None else bind_call(call, block)
