"""`graph-fold-constants`: evaluate ops whose operands are all constants, at compile time; ops whose results are
all empty become empty constants.

The value comes from the reference interpreter's impl of the op, so folding means exactly what
running the program means. After ONNX import this folds the transposes, reshapes and casts of
weights that exporters emit; `graph-canonicalize` folds only small integer shape arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.interpreter import Interpreter
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import InterpretationError

from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.constant_values import folded_constant, numpy_dtype
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.reference import reference_interpreter

GROWTH_FREE_ELEMENTS = 1024
"""A fold may make constants grow up to this many elements (4 KiB of f32); see `_grows`."""


def _foldable_type(value: SSAValue) -> bool:
    """A static tensor of an element type NumPy holds: the interpreter can compute it and a constant can hold it."""
    tensor = value.type
    return (
        isinstance(tensor, TensorType)
        and tensor.has_static_shape()
        and numpy_dtype(tensor.get_element_type()) is not None
    )


def _elements(value: SSAValue) -> int:
    assert isinstance(value.type, TensorType)
    return math.prod(value.type.get_shape())


def _grows(op: Operation) -> bool:
    """Whether folding `op` would store more elements than its constant operands hold, beyond a small allowance.

    Broadcasts (expand, tile, a broadcasting add of a row and a column) turn a few stored elements
    into many; folding them would bloat the program and its memory for no saving at run time, so
    they stay ops. Transposes, reshapes, slices and elementwise maps of weights never grow and fold.
    """
    stored = sum(_elements(v) for v in dict.fromkeys(op.operands))
    return sum(_elements(r) for r in op.results) > max(stored, GROWTH_FREE_ELEMENTS)


@dataclass
class FoldConstantOperands(RewritePattern):
    """op(constant, ...) = constant(value of op), computed by the reference interpreter."""

    interpreter: Interpreter
    """A reference interpreter over the module being folded."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        # Only ops without side effects run at compile time; an op without operands (a constant) has nothing to fold.
        if not isinstance(op, GraphOperation) or not op.operands or not op.has_trait(NoMemoryEffect):
            return
        constants = [v.owner for v in op.operands if isinstance(v.owner, ConstantOp)]
        if len(constants) != len(op.operands):
            return
        if not all(_foldable_type(v) for v in (*op.operands, *op.results)) or _grows(op):
            return
        try:
            inputs = tuple(self.interpreter.run_op(c)[0] for c in constants)
            with np.errstate(all="ignore"):  # IEEE results, as when the program runs
                values = self.interpreter.run_op(op, inputs)
        except InterpretationError:  # an op without reference semantics stays
            return
        folded: list[ConstantOp] = []
        for result, array in zip(op.results, values, strict=True):
            assert isinstance(result.type, TensorType)  # `_foldable_type` checked it
            folded.append(folded_constant(np.asarray(array), result.type, op.location))
        rewriter.replace(op, folded, [c.result for c in folded])
        for constant in dict.fromkeys(constants):
            if not constant.results[0].uses:
                rewriter.erase(constant)


class FoldEmptyResults(RewritePattern):
    """op(...) = constant(empty) where every result has no elements: there is nothing to compute, whatever the
    operands (a triangle of a 3 x 0 x 5 tensor), and kernels over empty buffers would be generated for nothing."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, GraphOperation) or isinstance(op, ConstantOp) or not op.has_trait(NoMemoryEffect):
            return
        if not op.results or not all(_foldable_type(r) and _elements(r) == 0 for r in op.results):
            return
        folded: list[ConstantOp] = []
        for result in op.results:
            assert isinstance(result.type, TensorType)
            dtype = numpy_dtype(result.type.get_element_type())
            assert dtype is not None  # `_foldable_type` checked it
            folded.append(folded_constant(np.zeros(result.type.get_shape(), dtype), result.type, op.location))
        rewriter.replace(op, folded, [c.result for c in folded])


@dataclass(frozen=True)
class GraphFoldConstantsPass(ModulePass):
    """Replace each pure op whose operands are all constants, or whose results are all empty, by constants
    holding its results."""

    name = "graph-fold-constants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns: list[RewritePattern] = [FoldConstantOperands(reference_interpreter(op)), FoldEmptyResults()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns, dce_enabled=False)).rewrite_module(op)
