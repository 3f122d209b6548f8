"""Canonicalization patterns of the graph dialect; the ops they root declare them (see `traits`).

Each pattern is one local simplification: identity data movement disappears, chains of
reshapes or transposes collapse, ONNX's Gemm (transpose + matmul + add) and MatMul by a weight become linear layers,
and small integer computations (the shape arithmetic ONNX exporters emit) fold to constants.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    DenseResourceAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    IntegerType,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import GraphOperation, i64_array, ints
from gnomon.dialects.graph.constant_values import (
    constant_to_numpy,
    dense_to_numpy,
    folded_constant,
    numpy_to_dense,
    resource_to_numpy,
)
from gnomon.dialects.graph.control_flow import WhileOp, YieldOp
from gnomon.dialects.graph.integer_folding import fold_integer_op
from gnomon.dialects.graph.linalg import LinearOp, MatmulOp
from gnomon.dialects.graph.nn import MaxPoolOp
from gnomon.dialects.graph.tensor import (
    ConstantOp,
    ExpandOp,
    PadOp,
    ReshapeOp,
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


class RemoveUnboundedClip(RewritePattern):
    """A clip to (-inf, inf) is the input (ONNX's Clip without its optional bounds)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.ClipOp, rewriter: PatternRewriter) -> None:
        if op.min.value.data == -math.inf and op.max.value.data == math.inf and op.input.type == op.result.type:
            rewriter.replace(op, [], [op.input])


_NUMPY_FLOATS: dict[type[Attribute], type[np.floating]] = {
    Float16Type: np.float16,
    Float32Type: np.float32,
    Float64Type: np.float64,
}


class FoldPadIntoMaxPool(RewritePattern):
    """A max pool of a constant pad of its input's spatial dims by a value that is -inf in the element type is one
    max pool with those pads added to its own: padded positions never win either way, and a window of padding alone
    gives -inf both ways. torch-mlir lowers ONNX's uneven MaxPool pads so (Inception-v2's four pools), which kept the
    pad a kernel of its own and the pool off a channels-last region's generated kernel."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MaxPoolOp, rewriter: PatternRewriter) -> None:
        pad = op.input.owner
        if not isinstance(pad, PadOp) or pad.mode.data != "constant" or op.layout is not None:
            return
        in_element = _NUMPY_FLOATS.get(type(pad.result.type.get_element_type()))
        if in_element is None:
            return
        with np.errstate(over="ignore"):
            if in_element(pad.value.value.data) != -np.inf:
                return
        pads, own = ints(pad.pads), ints(op.pads)
        rank, spatial = len(pads) // 2, len(own) // 2
        leading, trailing = pads[:rank], pads[rank:]
        if rank != spatial + 2 or any(leading[:2]) or any(trailing[:2]) or min(pads) < 0:
            return
        merged = [p + q for p, q in zip(own, [*leading[2:], *trailing[2:]], strict=True)]
        pool = MaxPoolOp.build(
            operands=[pad.input],
            properties={**op.properties, "pads": i64_array(merged)},
            attributes=dict(op.attributes),
            result_types=[op.result.type],
        )
        if pool.infer_result_types()[0] != op.result.type:
            pool.erase()  # ceil mode: a last window that starts in the pad is not dropped, in the pool's padding it is
            return
        pool.location = op.location
        rewriter.replace(op, pool)


class SimplifyConstantPow(RewritePattern):
    """x ** 2 = x * x and x ** 1 = x, for a constant exponent that every element shares: a generated kernel would
    call libm's pow per element (RMS norm squares its input so), where the product is one exact multiply."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ew.PowOp):
            return
        exponent = _constant_array(op.rhs)
        if exponent is None or exponent.size == 0 or op.lhs.type != op.result.type:
            return
        if not np.issubdtype(exponent.dtype, np.floating) and not np.issubdtype(exponent.dtype, np.integer):
            return
        if np.all(exponent == 1):
            rewriter.replace(op, [], [op.lhs])
        elif np.all(exponent == 2):
            square = ew.MulOp.build(operands=[op.lhs, op.lhs], result_types=[op.result.type])
            square.location = op.location
            rewriter.replace(op, [square])


class ActivationProduct(RewritePattern):
    """x * sigmoid(x) is silu(x), and x * hard_sigmoid(x) with alpha 1/6 and beta 1/2 is hard_swish(x): the forms
    ONNX exporters write SiLU (EfficientNet's) and older opsets' HardSwish in. As one op, the activation joins a
    convolution as its library epilogue or its generated kernel, where the product of two of its values cannot."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ew.MulOp):
            return
        for x, gate in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            owner = gate.owner
            if x.type != op.result.type or not isinstance(owner, ew.SigmoidOp | ew.HardSigmoidOp) or owner.input != x:
                continue
            if isinstance(owner, ew.HardSigmoidOp) and not (
                math.isclose(owner.alpha.value.data, 1 / 6, rel_tol=1e-6) and owner.beta.value.data == 0.5
            ):
                continue
            kind = ew.SiluOp if isinstance(owner, ew.SigmoidOp) else ew.HardSwishOp
            activation = kind.build(operands=[x], result_types=[op.result.type])
            activation.location = op.location
            rewriter.replace(op, [activation])
            return


class CollapseReshapeChain(RewritePattern):
    """reshape(reshape(x)) = reshape(x)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, ReshapeOp):
            return
        reshape = ReshapeOp.build(operands=[inner.input], result_types=[op.result.type])
        reshape.location = op.location
        rewriter.replace(op, reshape)


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
        transpose = TransposeOp.build(
            operands=[inner.input], properties={"permutation": i64_array(composed)}, result_types=[op.result.type]
        )
        transpose.location = op.location
        rewriter.replace(op, transpose)


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
        if weight is None or not isinstance(op.lhs.type, TensorType) or len(op.lhs.type.get_shape()) < 1:
            return
        bias, replaced = _bias_add(op)
        operands = [op.lhs, weight, [bias] if bias is not None else []]
        linear = LinearOp.build(operands=operands, result_types=[replaced.results[0].type])
        linear.location = op.location
        rewriter.replace(replaced, linear)
        if replaced is not op:
            rewriter.erase(op)


class ConstantMatmulToLinear(RewritePattern):
    """x @ W (+ b), W a constant matrix no other op reads, is a linear layer with weight Wᵀ, folded here: ONNX
    exporters write `nn.Linear` as MatMul by a transposed initializer (and an Add), and a linear layer's library
    call takes its bias and, large enough, a weight packed once (`gnomon.cost.linears`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MatmulOp, rewriter: PatternRewriter) -> None:
        weight, x = op.rhs, op.lhs
        owner = weight.owner
        if not isinstance(owner, ConstantOp) or not weight.has_one_use():
            return
        if not isinstance(weight.type, TensorType) or not isinstance(x.type, TensorType):
            return
        if len(weight.type.get_shape()) != 2 or len(x.type.get_shape()) < 2 or DYNAMIC_INDEX in weight.type.get_shape():
            return
        if not isinstance(weight.type.get_element_type(), AnyFloat):
            return
        inputs, outputs = weight.type.get_shape()
        transposed = folded_constant(
            np.ascontiguousarray(constant_to_numpy(owner.value).T),
            TensorType(weight.type.get_element_type(), [outputs, inputs]),
            owner.location,
        )
        bias, replaced = _bias_add(op)
        linear = LinearOp.build(
            operands=[x, transposed.result, [bias] if bias is not None else []],
            result_types=[replaced.results[0].type],
        )
        linear.location = op.location
        rewriter.insert(transposed, InsertPoint.before(owner))  # where the weight was: outside a loop body reading it
        rewriter.replace(replaced, linear)
        if replaced is not op:
            rewriter.erase(op)
        rewriter.erase(owner)


def _bias_add(op: MatmulOp) -> tuple[SSAValue | None, Operation]:
    """The bias of `add(op, b)` when that add is the product's only use and b is a per-feature vector."""
    if not _single_use(op.result):
        return None, op
    user = next(iter(op.result.uses)).operation
    if not isinstance(user, ew.AddOp) or user.result.type != op.result.type:
        return None, op
    other = user.rhs if user.lhs is op.result else user.lhs
    out_features = op.result.type.get_shape()[-1]
    if not isinstance(other.type, TensorType) or other.type.get_shape() != (out_features,):
        return None, op
    return other, user


def _constant_array(value: SSAValue) -> np.ndarray | None:
    owner = value.owner
    if not isinstance(owner, ConstantOp) or not isinstance(value.type, TensorType):
        return None
    if math.prod(value.type.get_shape()) > FOLD_ELEMENT_LIMIT:
        return None
    if isinstance(owner.value, DenseResourceAttr):  # a small buffer of the model, such as DLRM's index pairs
        return resource_to_numpy(owner.value)
    return dense_to_numpy(owner.value)


class FoldIntegerConstants(RewritePattern):
    """Evaluate an op whose operands are all small integer constants (shape arithmetic)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, GraphOperation) or len(op.results) != 1 or not op.operands:
            return
        result_type = op.results[0].type
        if not isinstance(result_type, TensorType) or not isinstance(result_type.get_element_type(), IntegerType):
            return
        arrays = [_constant_array(v) for v in op.operands]
        known = [a for a in arrays if a is not None]
        if len(known) != len(arrays) or (folded := fold_integer_op(op, known)) is None:
            return
        value = numpy_to_dense(np.asarray(folded).reshape(result_type.get_shape()), result_type.get_element_type())
        constant = ConstantOp.build(properties={"value": value}, result_types=[result_type])
        constant.location = op.location
        rewriter.replace(op, constant)


def _uniform_truth(value: SSAValue) -> bool | None:
    """The one truth value of a small constant i1 tensor that holds only that value, else None."""
    array = _constant_array(value)
    if array is None or array.size == 0:
        return None
    if np.all(array):
        return True
    return False if not np.any(array) else None


class SelectByConstantCondition(RewritePattern):
    """A where whose condition is one constant everywhere is the operand it selects (where that operand has the
    result's type: no broadcast to make). Predicated code whose predicate folds (an unrolled counted loop) is then
    straight-line code."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ew.WhereOp, rewriter: PatternRewriter) -> None:
        truth = _uniform_truth(op.condition)
        if truth is None:
            return
        chosen = op.on_true if truth else op.on_false
        if chosen.type == op.result.type:
            rewriter.replace(op, [], [chosen])


class DropConstantConjunct(RewritePattern):
    """`x and true` is x; `x and false` is the false constant (each where it has the result's type)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ew.AndOp):
            return
        for constant, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            truth = _uniform_truth(constant)
            if truth is None:
                continue
            kept = other if truth else constant
            if kept.type == op.result.type:
                rewriter.replace(op, [], [kept])
                return


def _constant_int(value: SSAValue) -> int | None:
    array = _constant_array(value)
    if array is None or array.size != 1 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.reshape(-1)[0])


def _conjuncts(value: SSAValue) -> list[SSAValue]:
    """`value` split at its `graph.and`s."""
    owner = value.owner
    if isinstance(owner, ew.AndOp):
        return _conjuncts(owner.lhs) + _conjuncts(owner.rhs)
    return [value]


def _counter(value: SSAValue, body: Block) -> int | None:
    """The index of the carried value `value` steps by one each trip (`value` is the body's block argument or its
    yielded successor), or None."""
    yielded = body.last_op
    assert yielded is not None
    owner = value.owner
    if isinstance(owner, ew.AddOp):  # the successor: `arg + 1`, which the body yields in the counter's place
        argument = owner.lhs if owner.lhs in body.args else owner.rhs
        if argument not in body.args or _constant_int(owner.rhs if owner.lhs is argument else owner.lhs) != 1:
            return None
        index = body.args.index(argument)
        return index if yielded.operands[index] is value else None
    return None


def _bound(op: WhileOp, condition: SSAValue, region: Block, after_trip: bool) -> int | None:
    """The trips a condition allows: one of its conjuncts is `counter < n` (or `<=`) of a counter from a constant
    start; checked before each trip (the cond region) or after it (a flag the body yields, the first trip free)."""
    body = op.body_region.block
    bounds: list[int] = []
    for conjunct in _conjuncts(condition):
        compare = conjunct.owner
        if not isinstance(compare, ew.LtOp | ew.LeOp) or (limit := _constant_int(compare.rhs)) is None:
            continue
        if after_trip:
            index = _counter(compare.lhs, body)
        else:
            index = region.args.index(compare.lhs) if compare.lhs in region.args else None
            yielded = body.last_op
            assert yielded is not None
            index = index if index is not None and _counter(yielded.operands[index], body) == index else None
        start = None if index is None else _constant_int(op.inits[index])
        if start is None:
            continue
        trips = limit - start + isinstance(compare, ew.LeOp)
        bounds.append(max(trips, 1) if after_trip else max(trips, 0))
    return min(bounds, default=None)


class InferTripBound(RewritePattern):
    """A `graph.while` whose condition requires `counter < n` (or `<= n`) of a carried counter that starts at a
    constant and steps by a constant 1 each trip runs at most that many trips: record it as `max_trips` (which lets
    `graph-predicate` unroll the loop). torch's `while_loop` and ONNX's `Loop` count their trips so."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: WhileOp, rewriter: PatternRewriter) -> None:
        cond, body = op.cond_region.block, op.body_region.block
        go, yielded = cond.last_op, body.last_op
        if not isinstance(go, YieldOp) or not isinstance(yielded, YieldOp) or len(go.values) != 1:
            return
        bound = _bound(op, go.values[0], cond, after_trip=False)
        if go.values[0] in cond.args:  # a flag the body computes, as torch's while_loop carries it
            flag = yielded.values[cond.args.index(go.values[0])]
            after = _bound(op, flag, body, after_trip=True)
            bound = after if bound is None or (after is not None and after < bound) else bound
        if bound is not None and (op.trip_bound is None or bound < op.trip_bound):
            op.properties["max_trips"] = IntegerAttr(bound, i64)
            rewriter.notify_op_modified(op)
