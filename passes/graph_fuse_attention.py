"""Attention written out as matmul, softmax and matmul, made one `graph.attention` when the cost model says so.

Models that do not call a fused attention spell it out: timm's ViT without `fused_attn`, nanoGPT's slow path,
Hugging Face's eager attention, and every ONNX export before opset 23:

    %s = graph.matmul %q, %kt                     (kt: k with its last two dims swapped)
    %t = graph.div %s, %c    or graph.mul         (a scalar constant; or q, or kt, scaled before the product)
    %u = graph.add %t, %mask                      (optional: an additive mask broadcast to the scores, or
                                                   graph.where %keep, %t, %low / graph.where %drop, %low, %t
                                                   with a boolean mask and a fill at or below -1e30)
    %p = graph.softmax %u {axis = -1}
    %o = graph.matmul %p, %v

Apart, the scores and probabilities ([..., L, S] each) are written to memory and read back; `graph.attention`
(ATen's flash kernel) keeps them in cache a block of queries at a time. `graph-fuse` asks this module for the
pattern at each softmax, prices the ops as it would group them against the fused op (and a transpose of k where
the one in the model does not give k directly), and takes the fused op only when it is predicted no slower. The
decision is a `gnomon.attention = {decision, separate_s, fused_s}` attribute: on the `graph.attention` that
replaced the ops, or on the softmax that stayed (`decision = "split", unpriced` where the model cannot price them).

Only the exact pattern is taken: each intermediate used once (a model that returns or keeps its probabilities, as a
training step does for its backward pass, keeps them), one float type throughout, q, k and v with the same batch
dims, and the mask added after the scale (a mask scaled with the scores is not `graph.attention`'s). One semantic
difference is accepted: a query row whose every key is masked gives zeros fused, where the written-out softmax
gives NaN (an additive -inf) or equal weights (a finite fill); PyTorch's fused attention does the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import AnyFloat, DictionaryAttr, FloatAttr, StringAttr, TensorType, UnitAttr, f64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from gnomon.cost.analytical import CostModelError
from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import bool_attr, f64_attr, i64_array, ints
from gnomon.dialects.graph.constant_values import constant_to_numpy, numpy_to_dense
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import AttentionOp, SoftmaxOp
from gnomon.dialects.graph.tensor import ConstantOp, TransposeOp
from gnomon.passes.graph_to_kernel import ATTENTION_ATTR

Pricer = Callable[[Sequence[Operation]], float]
"""The predicted time of graph ops (in program order) as `graph-fuse` would group them into kernels."""


@dataclass(frozen=True)
class Mask:
    """A written-out attention's mask: added to the scores (float), or selecting the keys kept (i1)."""

    value: SSAValue
    keep_where_true: bool
    """For a boolean mask: whether it keeps the keys where it holds (torch.where(mask, scores, -inf)) or masks them
    (masked_fill(mask, -inf)); graph.attention keeps them where its mask holds."""


@dataclass(frozen=True)
class WrittenAttention:
    """One written-out attention: the ops it replaces and what `graph.attention` takes instead."""

    ops: tuple[Operation, ...]
    """In program order, ending with the product by v: what the fused op replaces."""
    query: SSAValue
    key_transposed: SSAValue
    """k with its last two dims swapped, as the first product takes it (before any scale on it)."""
    value: SSAValue
    mask: Mask | None
    scale: float


def _float_tensor(value: SSAValue) -> TensorType[Attribute] | None:
    tensor = value.type
    return tensor if isinstance(tensor, TensorType) and isinstance(tensor.get_element_type(), AnyFloat) else None


def _scalar(value: SSAValue) -> float | None:
    """The value of a one-element float constant."""
    owner = value.owner
    if not isinstance(owner, ConstantOp) or _float_tensor(value) is None:
        return None
    array = constant_to_numpy(owner.value)
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def _only_user(value: SSAValue) -> Operation | None:
    return next(iter(value.uses)).operation if value.has_one_use() else None


def _unscaled(value: SSAValue, ops: list[Operation]) -> tuple[SSAValue, float]:
    """`value` without a product by a scalar constant that only it uses, and that constant (1 if none); the product
    goes into `ops`."""
    owner = value.owner
    if not isinstance(owner, ew.MulOp) or not value.has_one_use():
        return value, 1.0
    for factor, rest in ((owner.rhs, owner.lhs), (owner.lhs, owner.rhs)):
        constant = _scalar(factor)
        if constant is not None and rest.type == value.type:
            ops.append(owner)
            return rest, constant
    return value, 1.0


def _scaled_scores(value: SSAValue, ops: list[Operation]) -> tuple[SSAValue, float]:
    """The scores before a product by, or division by, a scalar constant (1 if none)."""
    owner = value.owner
    if isinstance(owner, ew.DivOp) and value.has_one_use() and owner.lhs.type == value.type:
        divisor = _scalar(owner.rhs)
        if divisor is not None and divisor != 0:
            ops.append(owner)
            return owner.lhs, 1.0 / divisor
    return _unscaled(value, ops)


MASKED_FILL = -1e30
"""A select's fill at or below this (-inf as nanoGPT writes it, float32's lowest as Hugging Face does) masks the
key out: exp(fill - max) is 0 in float32 unless the whole row is masked."""


def _is_scores(value: SSAValue, like: SSAValue) -> bool:
    return value.type == like.type and isinstance(value.owner, MatmulOp | ew.MulOp | ew.DivOp)


def _masked(value: SSAValue, ops: list[Operation]) -> tuple[SSAValue, Mask | None]:
    """The scores before a mask, and the mask: an add's other operand, broadcast to the scores; or a select's
    boolean condition between the scores and a fill that masks (`MASKED_FILL`), with which way it keeps keys."""
    owner, scores_type = value.owner, _float_tensor(value)
    if not value.has_one_use() or scores_type is None:
        return value, None
    rank = len(scores_type.get_shape())
    if isinstance(owner, ew.AddOp):
        for scores, mask in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            mask_type = _float_tensor(mask)
            if not _is_scores(scores, value) or mask_type is None or len(mask_type.get_shape()) > rank:
                continue
            if mask_type.get_element_type() == scores_type.get_element_type():
                ops.append(owner)
                return scores, Mask(mask, keep_where_true=True)
    if isinstance(owner, ew.WhereOp) and isinstance(owner.condition.type, TensorType):
        if len(owner.condition.type.get_shape()) > rank:
            return value, None
        for scores, fill, keep in ((owner.on_true, owner.on_false, True), (owner.on_false, owner.on_true, False)):
            filled = _scalar(fill)
            if _is_scores(scores, value) and filled is not None and filled <= MASKED_FILL:
                ops.append(owner)
                return scores, Mask(owner.condition, keep_where_true=keep)
    return value, None


def match_attention(softmax: SoftmaxOp) -> WrittenAttention | None:
    """The written-out attention whose softmax this is (see the module's docstring), or None."""
    probabilities = softmax.result
    scores_type = _float_tensor(probabilities)
    if scores_type is None:
        return None
    rank = len(scores_type.get_shape())
    if rank < 2 or softmax.axis.value.data not in (-1, rank - 1):
        return None
    product = _only_user(probabilities)
    if not isinstance(product, MatmulOp) or product.lhs is not probabilities or product.rhs is probabilities:
        return None
    ops: list[Operation] = [product, softmax]
    scores, mask = _masked(softmax.input, ops)
    scores, scale = _scaled_scores(scores, ops)
    first = scores.owner
    if not isinstance(first, MatmulOp) or not scores.has_one_use():
        return None
    ops.append(first)
    query, query_scale = _unscaled(first.lhs, ops)
    key_transposed, key_scale = _unscaled(first.rhs, ops)
    made = key_transposed.owner
    if isinstance(made, TransposeOp) and key_transposed.has_one_use():
        ops.append(made)  # composed into the fused op's own transpose of k
    value = product.rhs
    tensors = [_float_tensor(v) for v in (query, key_transposed, value)]
    if any(t is None for t in tensors):
        return None
    q, kt, v = (t.get_shape() for t in tensors if t is not None)
    if not (len(q) == len(kt) == len(v) == rank) or q[:-2] != kt[:-2] or q[:-2] != v[:-2]:
        return None
    if len({t.get_element_type() for t in tensors if t is not None} | {scores_type.get_element_type()}) != 1:
        return None
    block = product.parent_block()
    if block is None:
        return None
    order = {op: index for index, op in enumerate(block.ops)}
    ops.sort(key=order.__getitem__)
    return WrittenAttention(tuple(ops), query, key_transposed, value, mask, scale * query_scale * key_scale)


def _swap_last(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


def _inverted(condition: SSAValue) -> Operation:
    """The keys a masked_fill keeps: its condition's negation, folded when the condition is a constant (a causal
    mask)."""
    owner = condition.owner
    if isinstance(owner, ConstantOp) and isinstance(condition.type, TensorType):
        kept = numpy_to_dense(~constant_to_numpy(owner.value).astype(bool), condition.type.get_element_type())
        constant = ConstantOp.build(properties={"value": kept}, result_types=[condition.type])
        constant.location = owner.location
        return constant
    negation = ew.NotOp.build(operands=[condition], result_types=[condition.type])
    if isinstance(owner, Operation):
        negation.location = owner.location
    return negation


def fused_ops(match: WrittenAttention) -> list[Operation]:
    """The ops that compute `match` as one `graph.attention`, not yet inserted: k from its transposed form (a
    transpose the model made is composed into this one, which may then be nothing), and the attention."""
    key_transposed = match.key_transposed
    rank = len(key_transposed.type.get_shape()) if isinstance(key_transposed.type, TensorType) else 0
    permutation, source = _swap_last(rank), key_transposed
    made = key_transposed.owner
    if isinstance(made, TransposeOp):
        inner = ints(made.permutation)
        permutation, source = [inner[p] for p in permutation], made.input
    ops: list[Operation] = []
    key = source
    source_type = source.type
    if permutation != list(range(rank)) and isinstance(source_type, TensorType):
        shape = source_type.get_shape()
        transpose = TransposeOp.build(
            operands=[source],
            properties={"permutation": i64_array(permutation)},
            result_types=[TensorType(source_type.get_element_type(), [shape[p] for p in permutation])],
        )
        transpose.location = made.location if isinstance(made, Operation) else match.ops[0].location
        ops.append(transpose)
        key = transpose.result
    masks: list[SSAValue] = []
    if match.mask is not None:
        inverted = None if match.mask.keep_where_true else _inverted(match.mask.value)
        if inverted is not None:
            ops.append(inverted)
        masks.append(match.mask.value if inverted is None else inverted.results[0])
    last = match.ops[-1]
    attention = AttentionOp.build(
        operands=[match.query, key, match.value, masks],
        properties={"scale": f64_attr(match.scale), "is_causal": bool_attr(False)},
        result_types=[last.results[0].type],
    )
    attention.location = last.location
    ops.append(attention)
    return ops


def _decision(decision: str, figures: dict[str, float], unpriced: bool = False) -> DictionaryAttr:
    entries: dict[str, Attribute] = {"decision": StringAttr(decision)}
    entries |= {name: FloatAttr(seconds, f64) for name, seconds in figures.items()}
    if unpriced:
        entries["unpriced"] = UnitAttr()
    return DictionaryAttr(entries)


class FuseWrittenAttention(RewritePattern):
    """A written-out attention becomes one `graph.attention` when `price` predicts it no slower."""

    def __init__(self, price: Pricer):
        self.price = price
        self._priced: list[Operation] = []
        """Every op priced, kept alive: the pricer caches by the ops' identities, which a freed op's would reuse."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SoftmaxOp, rewriter: PatternRewriter) -> None:
        if ATTENTION_ATTR in op.attributes:
            return
        match = match_attention(op)
        if match is None:
            return
        fused = fused_ops(match)
        self._priced += [*match.ops, *fused]
        try:
            figures = {"separate_s": self.price(match.ops), "fused_s": self.price(fused)}
        except CostModelError:
            figures = {}
        if not figures or figures["fused_s"] > figures["separate_s"]:
            for candidate in fused:
                candidate.drop_all_references()
            op.attributes[ATTENTION_ATTR] = _decision("split", figures, unpriced=not figures)
            return
        fused[-1].attributes[ATTENTION_ATTR] = _decision("fuse", figures)
        last = match.ops[-1]
        rewriter.insert(fused, InsertPoint.before(last))
        rewriter.replace(last, [], [fused[-1].results[0]])
        constants = {v.owner for dead in match.ops for v in dead.operands if isinstance(v.owner, ConstantOp)}
        for dead in reversed(match.ops[:-1]):
            rewriter.erase(dead)
        for constant in constants:
            if not constant.result.uses:  # the scale, folded into the fused op
                rewriter.erase(constant)
