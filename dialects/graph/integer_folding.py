"""The NumPy meaning of the graph ops that shape arithmetic uses, for folding small integer tensors.

`torch-to-graph` folds the scalar arithmetic ONNX exporters emit (Shape → Gather → Concat →
Reshape) while it converts, and `graph-canonicalize` folds what is left; both evaluate ops here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.tensor import ConcatOp, ExpandOp, GatherOp, ReshapeOp, SliceOp, TransposeOp

_BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ew.AddOp: np.add, ew.SubOp: np.subtract, ew.MulOp: np.multiply, ew.RemOp: np.mod, ew.MaxOp: np.maximum,
    ew.MinOp: np.minimum, ew.EqOp: np.equal, ew.NeOp: np.not_equal, ew.LtOp: np.less, ew.LeOp: np.less_equal,
    ew.GtOp: np.greater, ew.GeOp: np.greater_equal, ew.AndOp: np.logical_and, ew.OrOp: np.logical_or,
}  # fmt: skip
"""Integer graph ops with NumPy's meaning (graph.rem takes the divisor's sign, as np.mod does)."""


def fold_integer_op(op: Operation, operands: Sequence[np.ndarray]) -> np.ndarray | None:
    """`op` evaluated on the values of its integer operands, or None for an op it does not know."""
    xs = list(operands)
    if isinstance(op, ew.DivOp | ew.RemOp) and not np.all(xs[1]):
        return None  # a division by zero is for run time to report
    binary = _BINARY.get(type(op))
    if binary is not None:
        return binary(xs[0], xs[1])
    result_type = op.results[0].type if len(op.results) == 1 else None
    match op:
        case ew.DivOp():
            return np.trunc(xs[0] / xs[1])  # graph.div truncates integers
        case ew.NegOp():
            return -xs[0]
        case ew.NotOp():
            return np.logical_not(xs[0])
        case ew.WhereOp():
            return np.where(xs[0], xs[1], xs[2])
        case ew.CastOp():
            return xs[0]
        case ConcatOp():
            return np.concatenate(xs, axis=op.axis.value.data)
        case ReshapeOp() | ExpandOp() if isinstance(result_type, TensorType):
            shape = result_type.get_shape()
            return xs[0].reshape(shape) if isinstance(op, ReshapeOp) else np.broadcast_to(xs[0], shape)
        case TransposeOp():
            return xs[0].transpose(ints(op.permutation))
        case GatherOp():
            return np.take(xs[0], xs[1], axis=op.axis.value.data)
        case SliceOp():
            bounds = zip(ints(op.starts), ints(op.ends), ints(op.steps), strict=True)
            return xs[0][tuple(slice(b, None if e < 0 else e, st) for b, e, st in bounds)]
        case _:
            return None
