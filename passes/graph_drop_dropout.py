"""`graph-drop-dropout`: inference dropout is the identity, so each `graph.dropout` becomes its input.

`graph.dropout` is the graph dialect's only op that is the identity by definition (it has no mask
result); identity reshapes, expands and transposes are `graph-canonicalize`'s to remove.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from gnomon.dialects.graph.elementwise import DropoutOp


class RemoveDropout(RewritePattern):
    """dropout(x) = x at inference."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: DropoutOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, [], [op.input])


@dataclass(frozen=True)
class GraphDropDropoutPass(ModulePass):
    """Replace every `graph.dropout` by its input."""

    name = "graph-drop-dropout"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(GreedyRewritePatternApplier([RemoveDropout()], dce_enabled=False))
        walker.rewrite_module(op)
