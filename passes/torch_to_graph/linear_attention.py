"""ONNX's stateful sequence ops of linear-attention and state-space models (opset 27), composed of graph ops, with
the semantics of onnx/reference/ops/op_linear_attention.py and op_causal_conv_with_state.py.

LinearAttention runs a recurrence over the sequence, per key/value head, from the state S_0 (past_state, or zeros):
    linear       S_t = S_{t-1} + k_t v_tᵀ
    gated        S_t = diag(exp g_t) S_{t-1} + k_t v_tᵀ
    delta        S_t = S_{t-1} + β_t k_t (v_t - S_{t-1}ᵀ k_t)ᵀ
    gated_delta  S_t = Ŝ + β_t k_t (v_t - Ŝᵀ k_t)ᵀ  with  Ŝ = diag(exp g_t) S_{t-1}
    o_t = scale · S_tᵀ q_t,  the query heads grouped over the key/value heads' states.
The decay g is per key dim or per head (then the same on every key dim). It is computed here in its exact chunkwise
closed form. Within a chunk of C steps from S_0, with G_t = g_1 + ... + g_t (0 without a decay), every rule gives
    S_t = diag(e^{G_t}) S_0 + Σ_{s≤t} diag(e^{G_t - G_s}) k_s u_sᵀ,
where u = V without the delta rule, and with it the corrected values u_s = β_s (v_s - Ŝ_sᵀ k_s), which solve the
unit lower triangular system (I + diag(β) L) U = diag(β) (V - (K ⊙ e^G) S_0), L[s, r] = Σ_d k_sd k_rd e^{G_sd - G_rd}
for r < s. So, with A[t, s] = Σ_d q_td k_sd e^{G_td - G_sd} for s ≤ t (0 above the diagonal):
    O = (Q ⊙ e^G) S_0 + A U,    S_C = diag(e^{G_C}) S_0 + (K ⊙ e^{G_C - G})ᵀ U.
The exponents G_t - G_s are masked before `exp`, so no factor grows. The system is inverted by exact block steps,
log2 C of them (each doubles the solved diagonal blocks), not step by step. The chunks (`chunk_size` steps,
a tuning hint that does not change the result) follow each other, each from the state the last one left.
Everything is computed in f32, as the reference does, and rounded once to the inputs' types.

CausalConvWithState is a depthwise causal conv1d over the past state (or zeros) followed by the input; the present
state is the last kernel - 1 positions of that sequence; SiLU (`silu` or `swish`) is optional.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, TensorType, f32, i1
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import DYN, bool_attr, f64_attr, i64_array, i64_attr, str_attr
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import ConvOp
from gnomon.dialects.graph.reduce import CumsumOp, ReduceSumOp
from gnomon.dialects.graph.tensor import ConcatOp, PadOp, ReshapeOp, SliceOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.attention import binary, merge_heads, permute, repeat_heads, split_heads
from gnomon.passes.torch_to_graph.registry import converts

_LINEAR_ATTRIBUTES = {"chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"}

_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True), "gated_delta": (True, True)}
"""update_rule -> (decays, delta rule)."""

_NEG_INF = float("-inf")


@converts("onnx.LinearAttention", args="query key value past_state? decay? beta?")
def onnx_linear_attention(a: AtenArgs) -> list[SSAValue]:
    """The output and the present state."""
    unknown = sorted(set(a.onnx_attributes()) - _LINEAR_ATTRIBUTES)
    if unknown:
        raise NotConvertible(f"linear attention with {', '.join(unknown)}")
    rule = a.onnx_str("update_rule", "gated_delta")
    if rule not in _RULES:
        raise NotConvertible(f"linear attention with update_rule '{rule}'")
    gated, delta = _RULES[rule]
    for name, needed in (("decay", gated), ("beta", delta)):
        if a.is_none(name) == needed:
            raise NotConvertible(f"update_rule '{rule}' {'needs' if needed else 'takes no'} {name} input")
    q_heads, kv_heads = a.onnx_int("q_num_heads", 0), a.onnx_int("kv_num_heads", 0)
    if min(q_heads, kv_heads) < 1 or q_heads % kv_heads:
        raise NotConvertible(f"{q_heads} query heads do not group over {kv_heads} key/value heads")
    chunk = a.onnx_int("chunk_size", 64)
    if chunk < 1:
        raise NotConvertible(f"linear attention with chunk_size {chunk}")
    query, key, value = a.tensor("query"), a.tensor("key"), a.tensor("value")
    for name, x in (("query", query), ("key", key), ("value", value)):
        shape = tensor_type(x).get_shape()
        if len(shape) != 3 or DYN in shape:  # graph.slice cuts the chunks at known bounds
            raise NotConvertible(f"linear attention's {name} of shape {_spelled(shape)}, not a static 3-d shape")
    steps = tensor_type(query).get_shape()[1]
    if steps < 1:
        raise NotConvertible("linear attention over an empty sequence")
    q, k, v = (a.cast(split_heads(a, x, h), f32) for x, h in ((query, q_heads), (key, kv_heads), (value, kv_heads)))
    key_dims, value_dims = tensor_type(q).get_shape()[-1], tensor_type(v).get_shape()[-1]
    if tensor_type(k).get_shape()[-1] != key_dims:
        raise NotConvertible(f"keys of {tensor_type(k).get_shape()[-1]} dims for queries of {key_dims}")
    # A decay per key dim or per head; an update rate per head or for all heads.
    decay = _per_head(a, a.optional_tensor("decay"), "decay", {kv_heads * key_dims: kv_heads, kv_heads: kv_heads})
    beta = _per_head(a, a.optional_tensor("beta"), "beta", {kv_heads: kv_heads, 1: 1})
    past = a.optional_tensor("past_state")
    state = None
    if past is not None:
        shape = list(tensor_type(past).get_shape())
        if shape != [tensor_type(k).get_shape()[0], kv_heads, key_dims, value_dims]:
            raise NotConvertible(f"past_state of shape {shape} for {kv_heads} heads of {key_dims}x{value_dims}")
        state = a.cast(past, f32)
    scale = a.onnx_float("scale", 0.0) or 1.0 / math.sqrt(key_dims)
    q = binary(a, ew.MulOp, q, a.scalar_tensor(scale, f32), f32)
    outputs: list[SSAValue] = []
    for start in range(0, steps, chunk):
        end = min(start + chunk, steps)
        q_part, k_part, v_part = (_steps(a, x, start, end) for x in (q, k, v))
        decay_part, beta_part = (None if x is None else _steps(a, x, start, end) for x in (decay, beta))
        output, state = _chunk(a, _Chunk(q_part, k_part, v_part, decay_part, beta_part), state, q_heads // kv_heads)
        outputs.append(output)
    assert state is not None  # steps >= 1
    output = outputs[0] if len(outputs) == 1 else _concat(a, outputs, 2)
    element = tensor_type(query).get_element_type()
    present_element = element if past is None else tensor_type(past).get_element_type()
    return [a.cast(merge_heads(a, output), element), a.cast(state, present_element)]


@dataclass(frozen=True)
class _Chunk:
    """One chunk of C steps of the inputs, in f32."""

    q: SSAValue
    """The queries, already scaled: (B, H_q, C, key dims)."""
    k: SSAValue
    """(B, H_kv, C, key dims)."""
    v: SSAValue
    """(B, H_kv, C, value dims)."""
    decay: SSAValue | None
    """g: (B, H_kv, C, key dims), or (B, H_kv, C, 1) per head."""
    beta: SSAValue | None
    """β: (B, H_kv, C, 1), or (B, 1, C, 1) for all heads."""


def _chunk(a: AtenArgs, c: _Chunk, state: SSAValue | None, group: int) -> tuple[SSAValue, SSAValue]:
    """The chunk's output (B, H_q, C, value dims) and the state after it (see the module's doc)."""
    steps = tensor_type(c.k).get_shape()[2]
    total = factors = k_decayed = None
    if c.decay is not None:
        total = _cumsum(a, c.decay)  # G
        factors = _pairwise_decays(a, total)
        k_decayed = _unary(a, ew.ExpOp, total)  # e^G, over the key dims or per head
    u = c.v
    if c.beta is not None:
        corrected = c.v
        if state is not None:
            decayed = c.k if k_decayed is None else binary(a, ew.MulOp, c.k, k_decayed, f32)
            corrected = binary(a, ew.SubOp, c.v, _matmul(a, decayed, state), f32)
        corrected = binary(a, ew.MulOp, c.beta, corrected, f32)
        lower = _scores(a, c.k, c.k, factors, strict=True)
        u = _solve_unit_lower(a, binary(a, ew.MulOp, c.beta, lower, f32), corrected)
    # Each query head reads the state of its key/value head.
    k, u_read = repeat_heads(a, c.k, group), repeat_heads(a, u, group)
    factors_read = None if factors is None else repeat_heads(a, factors, group)
    output = _matmul(a, _scores(a, c.q, k, factors_read, strict=False), u_read)
    if state is not None:
        q = c.q if k_decayed is None else binary(a, ew.MulOp, c.q, repeat_heads(a, k_decayed, group), f32)
        output = binary(a, ew.AddOp, output, _matmul(a, q, repeat_heads(a, state, group)), f32)
    # The state after the chunk.
    written = c.k
    if total is not None:
        last = _steps(a, total, steps - 1, steps)  # G_C
        remaining = _unary(a, ew.ExpOp, binary(a, ew.SubOp, last, total, f32))
        written = binary(a, ew.MulOp, c.k, remaining, f32)
        if state is not None:
            state = binary(a, ew.MulOp, permute(a, _unary(a, ew.ExpOp, last), [0, 1, 3, 2]), state, f32)
    update = _matmul(a, permute(a, written, [0, 1, 3, 2]), u)
    return output, update if state is None else binary(a, ew.AddOp, state, update, f32)


def _pairwise_decays(a: AtenArgs, total: SSAValue) -> SSAValue:
    """e^{G_t - G_s} for s <= t, else 0: (B, H, C, C) for a decay per head, (B, H, C, C, key dims) per key dim."""
    batch, heads, steps, dims = tensor_type(total).get_shape()
    rows = _reshape(a, total, [batch, heads, steps, 1, dims])
    columns = _reshape(a, total, [batch, heads, 1, steps, dims])
    differences = binary(a, ew.SubOp, rows, columns, f32)
    causal = a.constant(np.tril(np.ones((steps, steps), np.bool_))[:, :, None], i1)
    masked = a.value(
        ew.WhereOp.build(
            operands=[causal, differences, a.scalar_tensor(_NEG_INF, f32)], result_types=[differences.type]
        )
    )
    factors = _unary(a, ew.ExpOp, masked)
    return _reshape(a, factors, [batch, heads, steps, steps]) if dims == 1 else factors


def _scores(a: AtenArgs, x: SSAValue, k: SSAValue, factors: SSAValue | None, strict: bool) -> SSAValue:
    """Σ_d x_td k_sd (e^{G_td - G_sd}) for s <= t (s < t when `strict`), else 0: (B, H, C, C)."""
    steps = tensor_type(k).get_shape()[2]
    if factors is None or len(tensor_type(factors).get_shape()) == 4:
        scores = _matmul(a, x, permute(a, k, [0, 1, 3, 2]))
        if factors is not None:
            scores = binary(a, ew.MulOp, scores, factors, f32)
    else:
        batch, heads, _, dims = tensor_type(x).get_shape()
        rows = _reshape(a, x, [batch, heads, steps, 1, dims])
        columns = _reshape(a, k, [batch, heads, 1, steps, dims])
        products = binary(a, ew.MulOp, binary(a, ew.MulOp, rows, columns, f32), factors, f32)
        scores = a.value(
            ReduceSumOp.build(
                operands=[products],
                properties={"axes": i64_array([-1]), "keepdims": bool_attr(False)},
                result_types=[TensorType(f32, [batch, heads, steps, steps])],
            )
        )
    if factors is not None and not strict:
        return scores  # the factors are 0 above the diagonal
    return binary(a, ew.MulOp, scores, a.constant(np.tril(np.ones((steps, steps)), -1 if strict else 0), f32), f32)


def _solve_unit_lower(a: AtenArgs, lower: SSAValue, rhs: SSAValue) -> SSAValue:
    """(I + lower)⁻¹ rhs for a strictly lower triangular `lower` (B, H, C, C). The inverse X starts as the inverse
    of the 1x1 diagonal blocks, I; each step doubles the blocks: with X = diag(A⁻¹, D⁻¹) over a block
    [[A, 0], [L, D]], X - X L X is its inverse. X's entries are always entries of the true inverse."""
    steps = tensor_type(lower).get_shape()[-1]
    if steps == 1:
        return rhs
    index = np.arange(steps)
    inverse = a.constant(np.eye(steps), f32)
    block = 1
    while block < steps:
        # L of each doubled block: rows in its lower half, columns in its upper half.
        same = index[:, None] // (2 * block) == index[None, :] // (2 * block)
        below = index[:, None] // block > index[None, :] // block
        coupling = binary(a, ew.MulOp, lower, a.constant((same & below).astype(np.float32), f32), f32)
        if block > 1:  # X = I at first
            coupling = _matmul(a, _matmul(a, inverse, coupling), inverse)
        inverse = binary(a, ew.SubOp, inverse, coupling, f32)
        block *= 2
    return _matmul(a, inverse, rhs)


def _per_head(a: AtenArgs, x: SSAValue | None, name: str, heads_by_width: dict[int, int]) -> SSAValue | None:
    """decay or beta (B, T, W) as (B, heads, T, W / heads) in f32, where `heads_by_width` gives the heads of each
    width W the input may have."""
    if x is None:
        return None
    shape = tensor_type(x).get_shape()
    if len(shape) != 3 or shape[-1] not in heads_by_width:
        widths = " or ".join(map(str, heads_by_width))
        raise NotConvertible(f"{name} of shape {_spelled(shape)}, not (batch, steps, {widths})")
    return a.cast(split_heads(a, x, heads_by_width[shape[-1]]), f32)


@converts("onnx.CausalConvWithState", args="input weight bias? past_state?")
def onnx_causal_conv_with_state(a: AtenArgs) -> list[SSAValue]:
    """The output and the present state."""
    unknown = sorted(set(a.onnx_attributes()) - {"activation"})
    if unknown:
        raise NotConvertible(f"CausalConvWithState with {', '.join(unknown)}")
    activation = a.onnx_str("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise NotConvertible(f"CausalConvWithState activation '{activation}'")
    x, weight = a.tensor("input"), a.tensor("weight")
    x_type = tensor_type(x)
    shape, weight_shape = x_type.get_shape(), tensor_type(weight).get_shape()
    if len(shape) != 3 or len(weight_shape) != 3 or weight_shape[:2] != (shape[1], 1) or DYN in weight_shape:
        raise NotConvertible(f"CausalConvWithState of a weight {_spelled(weight_shape)} over input {_spelled(shape)}")
    if DYN in shape:  # graph.slice cuts the present state at known bounds
        raise NotConvertible(f"CausalConvWithState over input {_spelled(shape)}, not a static shape")
    batch, channels, length = shape
    element, kernel = x_type.get_element_type(), weight_shape[2]
    past = a.optional_tensor("past_state")
    if past is not None:
        past_shape = tensor_type(past).get_shape()
        if past_shape != (batch, channels, kernel - 1):
            raise NotConvertible(f"past_state of shape {_spelled(past_shape)} for a kernel of {kernel}")
        padded = _concat(a, [a.cast(past, element), x], 2)
    elif kernel > 1:
        padded = a.value(
            PadOp.build(
                operands=[x],
                properties={"pads": i64_array([0, 0, kernel - 1, 0, 0, 0]), "mode": str_attr("constant"),
                            "value": f64_attr(0.0)},
                result_types=[TensorType(element, [batch, channels, length + kernel - 1])],
            )
        )  # fmt: skip
    else:
        padded = x
    # Half-precision convolutions are computed in f32 and rounded once.
    compute = f32 if isinstance(element, Float16Type | BFloat16Type) else element
    bias = a.optional_tensor("bias")
    operands = [a.cast(v, compute) for v in (padded, weight, *([] if bias is None else [bias]))]
    convolved = a.value(
        ConvOp.build(
            operands=[operands[0], operands[1], operands[2:]],
            properties={"strides": i64_array([1]), "pads": i64_array([0, 0]), "dilations": i64_array([1]),
                        "groups": i64_attr(channels)},
            result_types=[TensorType(compute, shape)],
        )
    )  # fmt: skip
    output = a.cast(convolved, element)
    if activation != "none":  # SiLU of the rounded convolution, in f32 for half precision as the reference
        output = a.cast(_unary(a, ew.SiluOp, a.cast(output, compute)), element)
    return [output, _steps(a, padded, length, length + kernel - 1)]


def _unary(a: AtenArgs, op: type[ew.UnaryOp], x: SSAValue) -> SSAValue:
    return a.value(op.build(operands=[x], result_types=[x.type]))


def _matmul(a: AtenArgs, x: SSAValue, y: SSAValue) -> SSAValue:
    """Batched (B, H, M, K) @ (B, H, K, N), either side broadcast over (B, H)."""
    x_shape, y_shape = tensor_type(x).get_shape(), tensor_type(y).get_shape()
    batch = x_shape[:-2] if len(x_shape) >= len(y_shape) else y_shape[:-2]
    result = TensorType(tensor_type(x).get_element_type(), [*batch, x_shape[-2], y_shape[-1]])
    return a.value(MatmulOp.build(operands=[x, y], result_types=[result]))


def _cumsum(a: AtenArgs, x: SSAValue) -> SSAValue:
    """The running sum along the steps (axis 2)."""
    return a.value(
        CumsumOp.build(
            operands=[x],
            properties={"axis": i64_attr(2), "exclusive": bool_attr(False), "reverse": bool_attr(False)},
            result_types=[x.type],
        )
    )


def _steps(a: AtenArgs, x: SSAValue, start: int, end: int) -> SSAValue:
    """x[:, :, start:end]."""
    x_type = tensor_type(x)
    shape = list(x_type.get_shape())
    if (start, end) == (0, shape[2]):
        return x
    starts, ends = [0] * len(shape), list(shape)
    starts[2], ends[2] = start, end
    return a.value(
        SliceOp.build(
            operands=[x],
            properties={"starts": i64_array(starts), "ends": i64_array(ends), "steps": i64_array([1] * len(shape))},
            result_types=[TensorType(x_type.get_element_type(), [*shape[:2], end - start, *shape[3:]])],
        )
    )


def _concat(a: AtenArgs, parts: list[SSAValue], axis: int) -> SSAValue:
    first = tensor_type(parts[0])
    shape = list(first.get_shape())
    shape[axis] = sum(tensor_type(p).get_shape()[axis] for p in parts)
    return a.value(
        ConcatOp.build(
            operands=[parts],
            properties={"axis": i64_attr(axis)},
            result_types=[TensorType(first.get_element_type(), shape)],
        )
    )


def _reshape(a: AtenArgs, x: SSAValue, shape: list[int]) -> SSAValue:
    element: Attribute = tensor_type(x).get_element_type()
    return a.value(ReshapeOp.build(operands=[x], result_types=[TensorType(element, shape)]))


def _spelled(shape: Sequence[int]) -> str:
    return "x".join("?" if d == DYN else str(d) for d in shape)
