"""`graph-canonicalize`: simplify graph programs to a normal form, dropping dead ops as it goes.

The patterns are those the graph ops declare through `HasCanonicalizationPatternsTrait`, so xDSL's
`canonicalize` applies them too. This pass is the import pipeline's stage: it runs those patterns
and no op folders, so it never needs a context to materialize constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.transforms.canonicalize import CanonicalizationRewritePattern


@dataclass(frozen=True)
class GraphCanonicalizePass(ModulePass):
    """Identity removal, reshape/transpose chains, Gemm to linear, integer constant folding, dead-code elimination."""

    name = "graph-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pattern = GreedyRewritePatternApplier([CanonicalizationRewritePattern()], dce_enabled=True)
        PatternRewriteWalker(pattern).rewrite_module(op)
