"""Canonicalization patterns of the graph dialect, driven by `graph-canonicalize`.

Each pattern is one local simplification: identity data movement disappears, chains of
reshapes or transposes collapse, ONNX's Gemm (transpose + matmul + add) becomes a linear layer,
and small integer computations (the shape arithmetic ONNX exporters emit) fold to constants.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import GraphOperation, i64_array, ints
from gnomon.dialects.graph.constant_values import dense_to_numpy, numpy_to_dense
from gnomon.dialects.graph.linalg import LinearOp, MatmulOp
from gnomon.dialects.graph.tensor import (
    ConcatOp,
    ConstantOp,
    ExpandOp,
    GatherOp,
    ReshapeOp,
    SliceOp,
    TransposeOp,
)

FOLD_ELEMENT_LIMIT = 1024
"""Fold only constants this small: shape arithmetic, not weights (folding those is a separate decision)."""


class RemoveIdentityReshape(RewritePattern):
    """A reshape (or expand) to the input's own type is the input."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ReshapeOp | ExpandOp) or op.input.type != op.result.type:
            return
        rewriter.replace(op, [], [op.input])


class CollapseReshapeChain(RewritePattern):
    """reshape(reshape(x)) = reshape(x)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, ReshapeOp):
            return
        rewriter.replace(op, ReshapeOp.build(operands=[inner.input], result_types=[op.result.type]))


class RemoveIdentityTranspose(RewritePattern):
    """A transpose by the identity permutation is the input."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransposeOp, rewriter: PatternRewriter) -> None:
        perm = ints(op.permutation)
        if list(perm) != list(range(len(perm))):
            return
        rewriter.replace(op, [], [op.input])


class ComposeTransposes(RewritePattern):
    """transpose(transpose(x, p), q) = transpose(x, p∘q)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransposeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, TransposeOp):
            return
        inner_perm, outer_perm = ints(inner.permutation), ints(op.permutation)
        composed = [inner_perm[p] for p in outer_perm]
        rewriter.replace(
            op,
            TransposeOp.build(
                operands=[inner.input], properties={"permutation": i64_array(composed)}, result_types=[op.result.type]
            ),
        )


def _single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def _transposed_matrix(value: SSAValue) -> SSAValue | None:
    """w when value is transpose(w) of a 2-D w."""
    owner = value.owner
    if isinstance(owner, TransposeOp) and ints(owner.permutation) == (1, 0):
        return owner.input
    return None


class MatmulTransposeToLinear(RewritePattern):
    """x @ wᵀ (+ b) is a linear layer; fusing the bias keeps ONNX Gemm one op."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MatmulOp, rewriter: PatternRewriter) -> None:
        weight = _transposed_matrix(op.rhs)
        if weight is None or len(op.lhs.type.get_shape()) < 1:  # type: ignore[union-attr]
            return
        bias, replaced = _bias_add(op)
        operands = [op.lhs, weight, [bias] if bias is not None else []]
        linear = LinearOp.build(operands=operands, result_types=[replaced.results[0].type])
        linear.location = op.location
        rewriter.replace(replaced, linear)
        if replaced is not op:
            rewriter.erase(op)


def _bias_add(op: MatmulOp) -> tuple[SSAValue | None, Operation]:
    """The bias of `add(op, b)` when that add is the product's only use and b is a per-feature vector."""
    if not _single_use(op.result):
        return None, op
    user = next(iter(op.result.uses)).operation
    if not isinstance(user, ew.AddOp) or user.result.type != op.result.type:
        return None, op
    other = user.rhs if user.lhs is op.result else user.lhs
    out_features = op.result.type.get_shape()[-1]  # type: ignore[union-attr]
    if not isinstance(other.type, TensorType) or other.type.get_shape() != (out_features,):
        return None, op
    return other, user


def _constant_array(value: SSAValue) -> np.ndarray | None:
    owner = value.owner
    if not isinstance(owner, ConstantOp) or not isinstance(owner.value, DenseIntOrFPElementsAttr):
        return None
    if len(owner.value) > FOLD_ELEMENT_LIMIT:
        return None
    return dense_to_numpy(owner.value)


def _slice(op: SliceOp, x: np.ndarray) -> np.ndarray:
    bounds = zip(ints(op.starts), ints(op.ends), ints(op.steps), strict=True)
    index = tuple(slice(s, None if e < 0 else e, st) for s, e, st in bounds)
    return x[index]


_FOLDERS: dict[type[GraphOperation], Callable[..., np.ndarray]] = {
    ew.AddOp: lambda op, a, b: a + b,
    ew.SubOp: lambda op, a, b: a - b,
    ew.MulOp: lambda op, a, b: a * b,
    ew.DivOp: lambda op, a, b: np.trunc(a / b).astype(a.dtype) if a.dtype.kind in "iu" else a / b,
    ew.CastOp: lambda op, a: a,
    ew.NegOp: lambda op, a: -a,
    ConcatOp: lambda op, *xs: np.concatenate(xs, axis=op.axis.value.data),
    GatherOp: lambda op, x, i: np.take(x, i, axis=op.axis.value.data),
    ReshapeOp: lambda op, x: x.reshape(op.result.type.get_shape()),
    SliceOp: _slice,
    TransposeOp: lambda op, x: x.transpose(ints(op.permutation)),
    ExpandOp: lambda op, x: np.broadcast_to(x, op.result.type.get_shape()),
}


class FoldIntegerConstants(RewritePattern):
    """Evaluate an op whose operands are all small integer constants (shape arithmetic)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        folder = _FOLDERS.get(type(op))  # type: ignore[arg-type]
        if folder is None or len(op.results) != 1 or not op.operands:
            return
        result_type = op.results[0].type
        if not isinstance(result_type, TensorType) or not isinstance(result_type.get_element_type(), IntegerType):
            return
        arrays = [_constant_array(v) for v in op.operands]
        if any(a is None for a in arrays):
            return
        folded = np.asarray(folder(op, *arrays)).reshape(result_type.get_shape())
        value = numpy_to_dense(folded, result_type.get_element_type())
        constant = ConstantOp.build(properties={"value": value}, result_types=[result_type])
        constant.location = op.location
        rewriter.replace(op, constant)


CANONICALIZATION_PATTERNS: tuple[type[RewritePattern], ...] = (
    CollapseReshapeChain,
    ComposeTransposes,
    FoldIntegerConstants,
    MatmulTransposeToLinear,
    RemoveIdentityReshape,
    RemoveIdentityTranspose,
)
