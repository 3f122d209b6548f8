"""`graph-canonicalize`: simplify graph programs to a normal form, then drop dead ops."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

from gnomon.dialects.graph.canonicalization import CANONICALIZATION_PATTERNS


@dataclass(frozen=True)
class GraphCanonicalizePass(ModulePass):
    """Identity removal, reshape/transpose chains, Gemm to linear, integer constant folding, dead-code elimination."""

    name = "graph-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [pattern() for pattern in CANONICALIZATION_PATTERNS]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns, dce_enabled=True)).rewrite_module(op)
