"""ONNX Attention (opsets 23 to 25), with ONNX's semantics (onnx/reference/ops/op_attention.py).

Q, K and V become 4-d (batch, heads, sequence, head size); `past_key` / `past_value` are concatenated before K
and V along the sequence (and are the present key / value outputs); grouped KV heads are repeated to the query
heads. The masks add up to one bias over (query i, key j): a float `attn_mask` adds its values, a boolean one
-inf where it is false, and each rule below -inf where it excludes key j. The rules count the keys before the
query block, `offset`: past_key's length, or `nonpad_kv_seqlen - q_sequence_length` per batch for an external
cache, else 0. `is_causal` allows j <= i + offset, the window i + offset - left <= j <= i + offset + right, and
`nonpad_kv_seqlen` j < nonpad_kv_seqlen. A query row with every key excluded gives zeros.

The common case is one graph.attention. A softcap, or a used QK output (`qk_matmul_output_mode` 0 to 3: the
scores, after the softcap, after the bias, or the probabilities), is composed of matmuls, softmax and
elementwise ops instead.

FlexAttention (ai.onnx.preview) is attention with subgraphs that modify the scores and the probabilities; their
ops are inlined around the softmax. The head helpers here serve LinearAttention too (linear_attention.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, IntegerType, TensorType, bf16, f16, f32, f64, i1, i64
from xdsl.ir import Attribute, Region, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import (
    DYN,
    bool_attr,
    broadcast_shapes,
    f64_attr,
    i64_array,
    i64_attr,
    multiply_dims,
    str_attr,
)
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import AttentionOp, SoftmaxOp
from gnomon.dialects.graph.reduce import ReduceMaxOp
from gnomon.dialects.graph.tensor import ConcatOp, ExpandOp, PadOp, ReshapeOp, TransposeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

_ATTRIBUTES = {"is_causal", "kv_num_heads", "left_window_size", "q_num_heads", "qk_matmul_output_mode",
               "right_window_size", "scale", "softcap", "softmax_precision"}  # fmt: skip
"""The attributes of ONNX Attention-25. softmax_precision only asks for a precision, which is not lowered: the
softmax runs in the inputs' type, and in f32 for half-precision inputs."""

_NEG_INF = float("-inf")

Allowed = np.ndarray | SSAValue
"""Where the rules allow query i to attend key j: a constant (queries, keys) array when the offset is known, else
an i1 (batch, 1, queries, keys) value."""


@converts("onnx.Attention", args="Q K V attn_mask? past_key? past_value? nonpad_kv_seqlen?")
def onnx_attention(a: AtenArgs) -> list[SSAValue]:
    """Y, the present key and value, and the QK output; an output nobody reads stands in for one not computed."""
    unknown = sorted(set(a.onnx_attributes()) - _ATTRIBUTES)
    if unknown:
        raise NotConvertible(f"attention with {', '.join(unknown)}")
    mode = a.onnx_int("qk_matmul_output_mode", 0)
    if mode not in range(4):
        raise NotConvertible(f"attention with qk_matmul_output_mode {mode}")
    left, right = a.onnx_int("left_window_size", -1), a.onnx_int("right_window_size", -1)
    if min(left, right) < -1:
        raise NotConvertible(f"attention with a window of {left} keys left and {right} right")
    past_key, past_value = a.optional_tensor("past_key"), a.optional_tensor("past_value")
    if (past_key is None) != (past_value is None):
        raise NotConvertible("attention with only one of past_key and past_value")
    nonpad = a.optional_tensor("nonpad_kv_seqlen")
    if nonpad is not None and past_key is not None:
        raise NotConvertible("attention with both past_key and nonpad_kv_seqlen")

    q, k, v = a.tensor("Q"), a.tensor("K"), a.tensor("V")
    three_d = len(tensor_type(q).get_shape()) == 3
    if three_d:
        q_heads, kv_heads = a.onnx_int("q_num_heads", 0), a.onnx_int("kv_num_heads", 0)
        if q_heads < 1 or kv_heads < 1:
            raise NotConvertible("3-d attention without q_num_heads and kv_num_heads")
        q, k, v = (split_heads(a, x, h) for x, h in ((q, q_heads), (k, kv_heads), (v, kv_heads)))
    past = 0
    if past_key is not None and past_value is not None:
        past = tensor_type(past_key).get_shape()[2]
        k, v = _concat_sequence(a, past_key, k), _concat_sequence(a, past_value, v)
    present = [k, v]
    q_heads, kv_heads = tensor_type(q).get_shape()[1], tensor_type(k).get_shape()[1]
    if DYN in (q_heads, kv_heads) or q_heads % kv_heads:
        raise NotConvertible(f"{q_heads} query heads do not group over {kv_heads} key/value heads")
    k, v = (repeat_heads(a, x, q_heads // kv_heads) for x in (k, v))

    # Half-precision attention is computed in f32 and rounded once, as ONNX's expected outputs are: fp16 scores
    # and sums are off by several ulps (tests/test_ops_coverage.py).
    element = tensor_type(q).get_element_type()
    compute = f32 if isinstance(element, Float16Type | BFloat16Type) else element
    q, k, v = (a.cast(x, compute) for x in (q, k, v))
    head_size = tensor_type(q).get_shape()[-1]
    if head_size == DYN and a.onnx_attr("scale") is None:
        raise NotConvertible("attention with a dynamic head size and no explicit scale")
    scale = a.onnx_float("scale", 0.0) or 1.0 / math.sqrt(head_size)
    causal = bool(a.onnx_int("is_causal", 0))
    mask = a.optional_tensor("attn_mask")
    rules = _Rules(causal, left, right, past, nonpad)
    softcap = a.onnx_float("softcap", 0.0)
    qk_used = len(a.op.results) > 3 and bool(a.op.results[3].uses)
    if softcap <= 0 and not qk_used:
        y = qk = _fused(a, q, k, v, mask, rules, scale)
    else:
        bias = _bias(a, mask, rules.allowed(a, q, k), compute, tensor_type(k).get_shape()[2])
        y, qk = _composed(a, q, k, v, bias, scale, softcap, mode)
        qk = a.cast(qk, element)
    if three_d:
        y = merge_heads(a, y)
    return [a.cast(y, element), *present, qk][: len(a.op.results)]


@dataclass(frozen=True)
class _Rules:
    """The causal, window and padding rules of one Attention node."""

    causal: bool
    left: int
    right: int
    past: int
    """The keys before the queries in a KV cache (past_key's length)."""
    nonpad: SSAValue | None
    """nonpad_kv_seqlen: per batch, the keys before the queries and the queries themselves."""

    def native_causal(self) -> bool:
        """Only `is_causal` with no keys before the queries: graph.attention's own causal mask (j <= i)."""
        return self.causal and self.left < 0 and self.right < 0 and self.past == 0 and self.nonpad is None

    def allowed(self, a: AtenArgs, q: SSAValue, k: SSAValue) -> Allowed | None:
        """Where the rules allow key j for query i, or None when no rule applies."""
        if not (self.causal or self.left >= 0 or self.right >= 0 or self.nonpad is not None):
            return None
        rows, columns = tensor_type(q).get_shape()[2], tensor_type(k).get_shape()[2]
        if DYN in (rows, columns, self.past):
            raise NotConvertible("attention's causal, window or padding mask over a dynamic sequence length")
        bounds = self._bounds(rows, columns)
        if self.nonpad is None:
            allowed = np.ones((rows, columns), np.bool_)
            for threshold, upper in bounds:
                allowed &= threshold <= self.past if upper else threshold >= self.past
            return allowed
        return self._allowed_per_batch(a, rows, columns, self.nonpad, bounds)

    def _bounds(self, rows: int, columns: int) -> list[tuple[np.ndarray, bool]]:
        """Each rule as (threshold, upper): key j is allowed for query i iff threshold[i, j] <= offset (upper) or
        threshold[i, j] >= offset (lower)."""
        distance = np.arange(columns)[None, :] - np.arange(rows)[:, None]  # j - i
        bounds: list[tuple[np.ndarray, bool]] = []
        if self.causal:
            bounds.append((distance, True))
        if self.right >= 0:
            bounds.append((distance - self.right, True))
        if self.left >= 0:
            bounds.append((distance + self.left, False))
        return bounds

    def _allowed_per_batch(
        self, a: AtenArgs, rows: int, columns: int, nonpad: SSAValue, bounds: list[tuple[np.ndarray, bool]]
    ) -> SSAValue:
        """The rules with the offset nonpad_kv_seqlen - rows of each batch, and keys j < nonpad_kv_seqlen."""
        shape = tensor_type(nonpad).get_shape()
        if len(shape) != 1:
            raise NotConvertible(f"nonpad_kv_seqlen of shape {list(shape)}, not (batch,)")
        batch = shape[0]
        lengths = a.value(
            ReshapeOp.build(operands=[a.cast(nonpad, i64)], result_types=[TensorType(i64, [batch, 1, 1, 1])])
        )
        offset = binary(a, ew.SubOp, lengths, a.scalar_tensor(rows, i64), i64)
        allowed = binary(a, ew.LtOp, a.constant(np.arange(columns), i64), lengths, i1)
        for threshold, upper in bounds:
            within = binary(a, ew.LeOp if upper else ew.GeOp, a.constant(threshold, i64), offset, i1)
            allowed = binary(a, ew.AndOp, allowed, within, i1)
        return allowed


def _fused(
    a: AtenArgs, q: SSAValue, k: SSAValue, v: SSAValue, mask: SSAValue | None, rules: _Rules, scale: float
) -> SSAValue:
    """One graph.attention; a mask that needs neither padding nor the rules goes in as it is (a boolean one
    selects)."""
    compute = tensor_type(q).get_element_type()
    columns = tensor_type(k).get_shape()[2]
    native = rules.native_causal()
    allowed = None if native else rules.allowed(a, q, k)
    if allowed is None and (mask is None or tensor_type(mask).get_shape()[-1] == columns):
        masks = [] if mask is None else [mask if _is_bool(mask) else a.cast(mask, compute)]
    else:
        bias = _bias(a, mask, allowed, compute, columns)
        masks = [] if bias is None else [bias]
    q_shape, v_shape = tensor_type(q).get_shape(), tensor_type(v).get_shape()
    return a.value(
        AttentionOp.build(
            operands=[q, k, v, masks],
            properties={"scale": f64_attr(scale), "is_causal": bool_attr(native)},
            result_types=[TensorType(compute, [*q_shape[:-1], v_shape[-1]])],
        )
    )


def _composed(
    a: AtenArgs,
    q: SSAValue,
    k: SSAValue,
    v: SSAValue,
    bias: SSAValue | None,
    scale: float,
    softcap: float,
    mode: int,
) -> tuple[SSAValue, SSAValue]:
    """softmax(softcap(q·√scale (k·√scale)ᵀ) + bias) v op by op, and the QK output of `mode`."""
    compute = tensor_type(q).get_element_type()
    root = a.scalar_tensor(math.sqrt(scale), compute)
    key_rows = permute(a, k, [0, 1, 3, 2])
    q = binary(a, ew.MulOp, q, root, compute)
    key_rows = binary(a, ew.MulOp, key_rows, root, compute)
    q_shape, k_shape, v_shape = (tensor_type(x).get_shape() for x in (q, k, v))
    scores_type = TensorType(compute, [*q_shape[:-1], k_shape[-2]])
    scores = a.value(MatmulOp.build(operands=[q, key_rows], result_types=[scores_type]))
    capped = scores
    if softcap > 0:
        cap = a.scalar_tensor(softcap, compute)
        ratio = binary(a, ew.DivOp, scores, cap, compute)
        tanh = a.value(ew.TanhOp.build(operands=[ratio], result_types=[scores_type]))
        capped = binary(a, ew.MulOp, tanh, cap, compute)
    biased = capped if bias is None else binary(a, ew.AddOp, capped, bias, compute)
    biased_type = tensor_type(biased)
    probabilities = a.value(
        SoftmaxOp.build(operands=[biased], properties={"axis": i64_attr(-1)}, result_types=[biased_type])
    )
    if bias is not None:
        # A row whose bias is -inf throughout attends no key: zeros, not softmax's 0/0.
        bias_shape = tensor_type(bias).get_shape()
        row_max = a.value(
            ReduceMaxOp.build(
                operands=[bias],
                properties={"axes": i64_array([-1]), "keepdims": bool_attr(True)},
                result_types=[TensorType(compute, [*bias_shape[:-1], 1])],
            )
        )
        masked = binary(a, ew.EqOp, row_max, a.scalar_tensor(_NEG_INF, compute), i1)
        zero = a.scalar_tensor(0.0, compute)
        probabilities = a.value(ew.WhereOp.build(operands=[masked, zero, probabilities], result_types=[biased_type]))
    y_type = TensorType(compute, [*biased_type.get_shape()[:-1], v_shape[-1]])
    y = a.value(MatmulOp.build(operands=[probabilities, v], result_types=[y_type]))
    return y, [scores, capped, biased, probabilities][mode]


def _bias(
    a: AtenArgs, mask: SSAValue | None, allowed: Allowed | None, compute: Attribute, columns: int
) -> SSAValue | None:
    """The additive bias of the mask and the rules: a float mask's values (a boolean one's 0 or -inf), padded with
    -inf to `columns` keys, plus -inf where the rules exclude a key; None for neither."""
    bias = None if mask is None else _mask_bias(a, mask, compute, columns)
    if allowed is None:
        return bias
    if isinstance(allowed, np.ndarray):
        excluded = a.constant(np.where(allowed, 0.0, _NEG_INF), compute)
    else:
        excluded = a.value(
            ew.WhereOp.build(
                operands=[allowed, a.scalar_tensor(0.0, compute), a.scalar_tensor(_NEG_INF, compute)],
                result_types=[TensorType(compute, tensor_type(allowed).get_shape())],
            )
        )
    return excluded if bias is None else binary(a, ew.AddOp, bias, excluded, compute)


def _mask_bias(a: AtenArgs, mask: SSAValue, compute: Attribute, columns: int) -> SSAValue:
    shape = tensor_type(mask).get_shape()
    if _is_bool(mask):
        mask = a.value(
            ew.WhereOp.build(
                operands=[mask, a.scalar_tensor(0.0, compute), a.scalar_tensor(_NEG_INF, compute)],
                result_types=[TensorType(compute, shape)],
            )
        )
    mask = a.cast(mask, compute)
    if shape[-1] == columns:
        return mask
    if DYN in (shape[-1], columns) or shape[-1] > columns:
        raise NotConvertible(f"attn_mask over {shape[-1]} keys for {columns} keys")
    pads = [0] * (2 * len(shape))
    pads[-1] = columns - shape[-1]
    return a.value(
        PadOp.build(
            operands=[mask],
            properties={"pads": i64_array(pads), "mode": str_attr("constant"), "value": f64_attr(_NEG_INF)},
            result_types=[TensorType(compute, [*shape[:-1], columns])],
        )
    )


_FLEX_ATTRIBUTES = {"scale", "softmax_precision"}
"""FlexAttention's attributes but its subgraphs score_mod and prob_mod, which torch-mlir imports as regions."""

_PRECISIONS: dict[int, Attribute] = {1: f32, 10: f16, 11: f64, 16: bf16}
"""softmax_precision, an ONNX data type, as an element type."""


@converts("ai.onnx.preview.FlexAttention", args="Q K V")
def onnx_flex_attention(a: AtenArgs) -> SSAValue:
    """prob_mod(softmax(score_mod(Q Kᵀ scale))) V, with ONNX's semantics (onnx/reference/ops/aionnx_preview/
    op_flex_attention.py): one graph.attention without modifiers, else matmuls and a softmax around the modifier
    subgraphs, inlined. A FlexAttention with a modifier has both from the frontend, the absent one as the identity,
    in torch-mlir's (alphabetical) order of regions: prob_mod, score_mod."""
    unknown = sorted(set(a.onnx_attributes()) - _FLEX_ATTRIBUTES)
    if unknown:
        raise NotConvertible(f"FlexAttention with {', '.join(unknown)}")
    q, k, v = a.tensor("Q"), a.tensor("K"), a.tensor("V")
    shapes = [tensor_type(x).get_shape() for x in (q, k, v)]
    if any(len(shape) != 4 for shape in shapes):
        raise NotConvertible(f"FlexAttention over inputs of ranks {[len(shape) for shape in shapes]}, not 4")
    regions = list(a.op.regions)
    if len(regions) not in (0, 2):
        raise NotConvertible(f"FlexAttention with {len(regions)} modifier subgraphs, not 0 or 2")
    q_heads, kv_heads = shapes[0][1], shapes[1][1]
    if DYN in (q_heads, kv_heads) or q_heads % kv_heads:
        raise NotConvertible(f"{q_heads} query heads do not group over {kv_heads} key/value heads")
    k, v = (repeat_heads(a, x, q_heads // kv_heads) for x in (k, v))
    head_size = shapes[0][-1]
    if head_size == DYN and a.onnx_attr("scale") is None:
        raise NotConvertible("FlexAttention with a dynamic head size and no explicit scale")
    scale = a.onnx_float("scale", 0.0) if a.onnx_attr("scale") is not None else 1.0 / math.sqrt(head_size)
    element = tensor_type(q).get_element_type()
    half = isinstance(element, Float16Type | BFloat16Type)
    precision = a.onnx_int("softmax_precision", 0)
    compute = _PRECISIONS.get(precision) if precision else (f32 if half else element)
    if compute is None:
        raise NotConvertible(f"FlexAttention with softmax_precision {precision}")
    # The scores are computed in the inputs' type as the reference does, in f32 for half-precision inputs (see
    # Attention), and then in the softmax's.
    scores_type = f32 if half else element
    v_element = tensor_type(v).get_element_type()
    y_shape = [*shapes[0][:-1], shapes[2][-1]]
    if not regions and compute == scores_type:
        q, k, v = (a.cast(x, compute) for x in (q, k, v))
        y = a.value(
            AttentionOp.build(
                operands=[q, k, v, []],
                properties={"scale": f64_attr(scale), "is_causal": bool_attr(False)},
                result_types=[TensorType(compute, y_shape)],
            )
        )
        return a.cast(y, v_element)
    # The reference scales both sides by √scale, taken in f32.
    root = a.scalar_tensor(float(np.sqrt(np.float32(scale))), scores_type)
    q, k = (binary(a, ew.MulOp, a.cast(x, scores_type), root, scores_type) for x in (q, k))
    scores_shape = [*tensor_type(q).get_shape()[:-1], tensor_type(k).get_shape()[2]]
    key_rows = permute(a, k, [0, 1, 3, 2])
    scores = a.value(MatmulOp.build(operands=[q, key_rows], result_types=[TensorType(scores_type, scores_shape)]))
    scores = a.cast(scores, compute)
    if regions:
        scores = _modified(a, regions[1], scores, "score_mod")
    probabilities = a.value(
        SoftmaxOp.build(operands=[scores], properties={"axis": i64_attr(-1)}, result_types=[scores.type])
    )
    if regions:
        probabilities = _modified(a, regions[0], probabilities, "prob_mod")
    y = a.value(
        MatmulOp.build(operands=[probabilities, a.cast(v, compute)], result_types=[TensorType(compute, y_shape)])
    )
    return a.cast(y, v_element)


def _modified(a: AtenArgs, region: Region, x: SSAValue, name: str) -> SSAValue:
    """`x` through the inlined modifier subgraph `region`, which must keep its type."""
    results = a.inline(region, [x])
    if len(results) != 1 or results[0].type != x.type:
        spelled = ", ".join(str(r.type) for r in results)
        raise NotConvertible(f"FlexAttention's {name} gives ({spelled}), not one {x.type}")
    return results[0]


def _is_bool(value: SSAValue) -> bool:
    element = tensor_type(value).get_element_type()
    return isinstance(element, IntegerType) and element.width.data == 1


def binary(a: AtenArgs, op: type[ew.BinaryOp], lhs: SSAValue, rhs: SSAValue, element: Attribute) -> SSAValue:
    """`op` on broadcast operands: its result has the broadcast shape and `element`."""
    shape = broadcast_shapes([tensor_type(lhs).get_shape(), tensor_type(rhs).get_shape()], op.name)
    return a.value(op.build(operands=[lhs, rhs], result_types=[TensorType(element, shape)]))


def _concat_sequence(a: AtenArgs, past: SSAValue, new: SSAValue) -> SSAValue:
    """The cache `past` followed by the new keys or values, along the sequence (B, H, S, E)."""
    past_shape, new_shape = tensor_type(past).get_shape(), tensor_type(new).get_shape()
    length = DYN if DYN in (past_shape[2], new_shape[2]) else past_shape[2] + new_shape[2]
    joined = TensorType(tensor_type(new).get_element_type(), [*new_shape[:2], length, new_shape[3]])
    return a.value(ConcatOp.build(operands=[[past, new]], properties={"axis": i64_attr(2)}, result_types=[joined]))


def split_heads(a: AtenArgs, x: SSAValue, heads: int) -> SSAValue:
    """(B, S, H * E) -> (B, H, S, E)."""
    x_type = tensor_type(x)
    batch, seq, hidden = x_type.get_shape()
    if hidden == DYN or hidden % heads:
        raise NotConvertible(f"hidden size {hidden} does not split into {heads} heads")
    element = x_type.get_element_type()
    split = a.value(
        ReshapeOp.build(operands=[x], result_types=[TensorType(element, [batch, seq, heads, hidden // heads])])
    )
    return permute(a, split, [0, 2, 1, 3])


def merge_heads(a: AtenArgs, y: SSAValue) -> SSAValue:
    """(B, H, L, E) -> (B, L, H * E)."""
    moved = permute(a, y, [0, 2, 1, 3])
    batch, seq, heads, dim = tensor_type(moved).get_shape()
    merged = TensorType(tensor_type(y).get_element_type(), [batch, seq, multiply_dims([heads, dim])])
    return a.value(ReshapeOp.build(operands=[moved], result_types=[merged]))


def repeat_heads(a: AtenArgs, x: SSAValue, group: int) -> SSAValue:
    """(B, H, ...) -> (B, H * group, ...), each head repeated `group` times in a row."""
    if group == 1:
        return x
    x_type = tensor_type(x)
    batch, heads, *rest = x_type.get_shape()
    element = x_type.get_element_type()
    unit = a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, [batch, heads, 1, *rest])]))
    repeated = a.value(
        ExpandOp.build(operands=[unit], result_types=[TensorType(element, [batch, heads, group, *rest])])
    )
    return a.value(
        ReshapeOp.build(operands=[repeated], result_types=[TensorType(element, [batch, heads * group, *rest])])
    )


def permute(a: AtenArgs, x: SSAValue, permutation: list[int]) -> SSAValue:
    x_type = tensor_type(x)
    moved = TensorType(x_type.get_element_type(), [x_type.get_shape()[p] for p in permutation])
    return a.value(
        TransposeOp.build(operands=[x], properties={"permutation": i64_array(permutation)}, result_types=[moved])
    )
