"""The einsum converter: an equation becomes diagonals, sums, transposes, reshapes and batched matmuls.

The equation follows torch.einsum (ONNX's Einsum lowers to it): subscripts are letters, `...` stands for the dims
an operand has beyond its letters (aligned on the right across operands, as broadcasting aligns them), spaces are
ignored, and without `->` the output is the ellipsis dims, then the letters that occur once, in alphabetical
order. Dims of one subscript broadcast across operands (size 1 against n), and ellipsis dims that the output lacks
are summed, as torch does.

Each operand first takes the diagonal of every subscript it repeats (`ii`, a gather of the flattened pair) and sums
the subscripts no other operand and not the output has. Then the operands combine left to right, two at a time:
subscripts in both that something later still needs are batch dims, the other shared ones are contracted, and the
rest belong to one side; the pair is one batched matmul [batch, M, K] x [batch, K, N] (or a broadcast multiply
when nothing is contracted). Last, the sum over what the output lacks, and a transpose into the output's order.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import Attribute, SSAValue

from gnomon.dialects.graph.base import DYN, bool_attr, i64_array, i64_attr
from gnomon.dialects.graph.elementwise import MulOp
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.reduce import ReduceSumOp
from gnomon.dialects.graph.tensor import GatherOp, ReshapeOp, TransposeOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, tensor_type
from gnomon.passes.torch_to_graph.registry import converts

_ELLIPSIS = "..."


@dataclass(frozen=True)
class _Term:
    """An operand (or a partial product) and the subscript of each of its dims; ellipsis dims are "...0", "...1"
    and so on, counted from the left of the longest ellipsis."""

    value: SSAValue
    labels: tuple[str, ...]


class _Einsum:
    """The ops of one einsum, emitted through `a`, over operands of one element type."""

    def __init__(self, a: AtenArgs, element: Attribute) -> None:
        self.a, self.element = a, element

    def reshape(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        if list(tensor_type(value).get_shape()) == list(shape):
            return value
        return self.a.value(ReshapeOp.build(operands=[value], result_types=[TensorType(self.element, shape)]))

    def permute(self, term: _Term, permutation: Sequence[int]) -> _Term:
        """`term` with dim i taken from its dim `permutation[i]`."""
        if list(permutation) == list(range(len(permutation))):
            return term
        shape = tensor_type(term.value).get_shape()
        value = self.a.value(
            TransposeOp.build(
                operands=[term.value],
                properties={"permutation": i64_array(permutation)},
                result_types=[TensorType(self.element, [shape[p] for p in permutation])],
            )
        )
        return _Term(value, tuple(term.labels[p] for p in permutation))

    def transpose(self, term: _Term, labels: Sequence[str]) -> _Term:
        """`term` with its dims in the order of `labels` (a permutation of its own, which do not repeat)."""
        return self.permute(term, [term.labels.index(label) for label in labels])

    def sum_out(self, term: _Term, keep: set[str]) -> _Term:
        """`term` summed over the dims whose subscripts are not in `keep`."""
        axes = [i for i, label in enumerate(term.labels) if label not in keep]
        if not axes:
            return term
        shape = tensor_type(term.value).get_shape()
        kept = [i for i in range(len(shape)) if i not in axes]
        value = self.a.value(
            ReduceSumOp.build(
                operands=[term.value],
                properties={"axes": i64_array(axes), "keepdims": bool_attr(False)},
                result_types=[TensorType(self.element, [shape[i] for i in kept])],
            )
        )
        return _Term(value, tuple(term.labels[i] for i in kept))

    def diagonal(self, term: _Term) -> _Term:
        """`term` with each repeated subscript taken once, along the diagonal of its dims: the pair of dims moved
        last and flattened, then gathered at multiples of n + 1."""
        while len(set(term.labels)) < len(term.labels):
            label = next(label for label, count in Counter(term.labels).items() if count > 1)
            first = term.labels.index(label)
            second = term.labels.index(label, first + 1)
            shape = tensor_type(term.value).get_shape()
            if shape[first] != shape[second]:
                raise NotConvertible(
                    f"einsum diagonal of subscript {label!r} over dims of sizes {shape[first]} and {shape[second]}"
                )
            n = shape[first]
            rest = [i for i in range(len(shape)) if i not in (first, second)]
            moved = self.permute(term, [*rest, first, second])
            rest_shape = [shape[i] for i in rest]
            flat = self.reshape(moved.value, [*rest_shape, n * n])
            value = self.a.value(
                GatherOp.build(
                    operands=[flat, self.a.constant(np.arange(n) * (n + 1), i64)],
                    properties={"axis": i64_attr(len(rest))},
                    result_types=[TensorType(self.element, [*rest_shape, n])],
                )
            )
            term = _Term(value, (*moved.labels[:-2], label))
        return term

    def combine(self, lhs: _Term, rhs: _Term, needed: set[str]) -> _Term:
        """The product of two terms, summed over the subscripts they share that `needed` lacks."""
        lhs_sizes = dict(zip(lhs.labels, tensor_type(lhs.value).get_shape(), strict=True))
        rhs_sizes = dict(zip(rhs.labels, tensor_type(rhs.value).get_shape(), strict=True))
        shared = [label for label in lhs.labels if label in rhs_sizes]
        # A contracted subscript of size 1 on one side broadcasts: sum(x * y) over it is sum(x) * sum(y).
        broadcast = {label for label in shared if label not in needed and lhs_sizes[label] != rhs_sizes[label]}
        if broadcast:
            lhs = self.sum_out(lhs, set(lhs.labels) - broadcast)
            rhs = self.sum_out(rhs, set(rhs.labels) - broadcast)
            shared = [label for label in shared if label not in broadcast]
        sizes = {**lhs_sizes, **rhs_sizes, **{label: max(lhs_sizes[label], rhs_sizes[label]) for label in shared}}
        batch = [label for label in shared if label in needed]
        contracted = [label for label in shared if label not in needed]
        left = [label for label in lhs.labels if label not in shared]
        right = [label for label in rhs.labels if label not in shared]
        lhs = self.transpose(lhs, [*batch, *left, *contracted])
        rhs = self.transpose(rhs, [*batch, *contracted, *right])
        lhs_batch = [lhs_sizes[label] for label in batch]
        rhs_batch = [rhs_sizes[label] for label in batch]
        labels = (*batch, *left, *right)
        out = TensorType(self.element, [sizes[label] for label in labels])
        if not contracted:
            # An outer product per batch entry: [batch, left, 1...] * [batch, 1..., right].
            x = self.reshape(lhs.value, [*lhs_batch, *(sizes[label] for label in left), *([1] * len(right))])
            y = self.reshape(rhs.value, [*rhs_batch, *([1] * len(left)), *(sizes[label] for label in right)])
            return _Term(self.a.value(MulOp.build(operands=[x, y], result_types=[out])), labels)
        m, k, n = (math.prod(sizes[label] for label in group) for group in (left, contracted, right))
        x = self.reshape(lhs.value, [*lhs_batch, m, k])
        y = self.reshape(rhs.value, [*rhs_batch, k, n])
        batch_shape = [sizes[label] for label in batch]
        product = self.a.value(
            MatmulOp.build(operands=[x, y], result_types=[TensorType(self.element, [*batch_shape, m, n])])
        )
        return _Term(self.reshape(product, out.get_shape()), labels)


def _parse(equation: str, ranks: Sequence[int]) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """Each operand's subscripts and the output's, with ellipses expanded (see `_Term`)."""
    equation = "".join(equation.split())
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        raise NotConvertible(f"einsum equation {equation!r} has {len(terms)} operands, got {len(ranks)} tensors")
    letters = set(string.ascii_letters)
    spans: list[tuple[str, bool, str]] = []
    for term in [*terms, output]:
        before, dots, after = term.partition(_ELLIPSIS)
        if not set(before + after) <= letters:
            raise NotConvertible(f"einsum equation {equation!r}: subscripts must be letters, with one '...' at most")
        spans.append((before, bool(dots), after))
    extras: list[int] = []
    for (before, dots, after), rank in zip(spans[:-1], ranks, strict=True):
        extra = rank - len(before) - len(after)
        if extra < 0 or (extra and not dots):
            spelled = before + _ELLIPSIS * dots + after
            raise NotConvertible(f"einsum equation {equation!r}: subscripts {spelled!r} for an operand of rank {rank}")
        extras.append(extra)
    dims = [f"{_ELLIPSIS}{i}" for i in range(max(extras, default=0))]
    operands = [
        (*before, *dims[len(dims) - extra :], *after)
        for (before, _, after), extra in zip(spans[:-1], extras, strict=True)
    ]
    if arrow:
        before, dots, after = spans[-1]
        result = (*before, *(dims if dots else []), *after)
        if len(set(result)) < len(result) or not set(result) <= {label for term in operands for label in term}:
            raise NotConvertible(f"einsum equation {equation!r}: output subscripts repeat or occur in no operand")
        return operands, result
    counts = Counter(label for term in operands for label in term if label in letters)
    return operands, (*dims, *sorted(label for label, count in counts.items() if count == 1))


@converts("torch.aten.einsum", args="equation tensors path")
def einsum(a: AtenArgs) -> SSAValue:
    element = a.result_dtype()
    values = [a.cast(value, element) for value in a.tensors("tensors")]
    shapes = [tensor_type(value).get_shape() for value in values]
    if any(DYN in shape for shape in shapes):
        raise NotConvertible("einsum of operands with dynamic dims")
    operands, output = _parse(a.str("equation"), [len(shape) for shape in shapes])
    sizes: dict[str, int] = {}
    for labels, shape in zip(operands, shapes, strict=True):
        for label, size in zip(labels, shape, strict=True):
            known = sizes.setdefault(label, size)
            if size != known and 1 not in (size, known):
                raise NotConvertible(f"einsum subscript {label!r} has sizes {known} and {size}")
            sizes[label] = max(size, known)
    ops = _Einsum(a, element)
    terms = [ops.diagonal(_Term(value, labels)) for value, labels in zip(values, operands, strict=True)]
    # What each step must keep: the output's subscripts and those of the operands still to come.
    needed = [set(output).union(*(term.labels for term in terms[i + 1 :])) for i in range(len(terms))]
    result = ops.sum_out(terms[0], needed[0])
    for i in range(1, len(terms)):
        result = ops.combine(result, ops.sum_out(terms[i], needed[i] | set(result.labels)), needed[i])
    return ops.transpose(result, output).value
