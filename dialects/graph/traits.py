"""The traits of graph ops: which patterns of `canonicalization` each op roots, and which ops may be computed on data
a branch guards.

An op carrying one of these traits is simplified by xDSL's own `canonicalize` pass, and by
`graph-canonicalize`, which drives the same traits. As in xDSL's arith dialect, the patterns are
imported when first asked for: they build ops of the modules that carry these traits.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import RewritePattern
from xdsl.traits import ConditionallySpeculatable, ConstantLike, HasCanonicalizationPatternsTrait, NoMemoryEffect


class FoldsIntegerConstants(HasCanonicalizationPatternsTrait):
    """Ops that shape arithmetic uses: on small integer constants they fold to a constant."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import FoldIntegerConstants

        return (FoldIntegerConstants(),)


class ReshapeCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.reshape`: chains collapse, integer constants fold, a reshape to the input's type goes."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import (
            CollapseReshapeChain,
            FoldIntegerConstants,
            RemoveIdentityReshape,
        )

        return (CollapseReshapeChain(), FoldIntegerConstants(), RemoveIdentityReshape())


class ExpandCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.expand`: integer constants fold, an expand to the input's type goes."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import FoldIntegerConstants, RemoveIdentityReshape

        return (FoldIntegerConstants(), RemoveIdentityReshape())


class TransposeCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.transpose`: chains compose, integer constants fold, the identity permutation goes."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import (
            ComposeTransposes,
            FoldIntegerConstants,
            RemoveIdentityTranspose,
        )

        return (ComposeTransposes(), FoldIntegerConstants(), RemoveIdentityTranspose())


class MatmulCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.matmul`: a product with a transposed or constant matrix (and a bias add) is a linear layer."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import ConstantMatmulToLinear, MatmulTransposeToLinear

        return (MatmulTransposeToLinear(), ConstantMatmulToLinear())


class ClipCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.clip`: a clip to (-inf, inf) goes."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import RemoveUnboundedClip

        return (RemoveUnboundedClip(),)


class MaxPoolCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.max_pool`: a constant pad of its spatial dims by -inf before it becomes its own padding."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import FoldPadIntoMaxPool

        return (FoldPadIntoMaxPool(),)


class PowCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.pow`: a constant exponent of 1 or 2 is the base or its square (no pow call per element)."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import SimplifyConstantPow

        return (SimplifyConstantPow(),)


class MulCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.mul`: x times its own sigmoid (or hard sigmoid) is one activation op."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import ActivationProduct

        return (ActivationProduct(),)


class WhereCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.where`: integer constants fold, a condition constant everywhere selects its operand."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import FoldIntegerConstants, SelectByConstantCondition

        return (FoldIntegerConstants(), SelectByConstantCondition())


class AndCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.and`: integer constants fold, a constant conjunct goes (true) or decides (false)."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import DropConstantConjunct, FoldIntegerConstants

        return (FoldIntegerConstants(), DropConstantConjunct())


class WhileCanonicalization(HasCanonicalizationPatternsTrait):
    """`graph.while`: a bound on its trips read from a counted condition becomes `max_trips`."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from gnomon.dialects.graph.canonicalization import InferTripBound

        return (InferTripBound(),)


DATA_INDEX_OPERANDS = ("indices", "offsets")
"""The operands of an op with `ReadsAtDataIndices` that hold positions into another operand."""


class ReadsAtDataIndices(NoMemoryEffect, ConditionallySpeculatable):
    """Ops that read (or write) at positions taken from data: gather, embedding and scatter. They have no side effects,
    but an index out of range fails the kernel, so they are speculatable (safe to compute where the result may be
    thrown away, as `graph-predicate`'s if-conversion does) only when their indices are constants: an index a branch
    guards (`if i < n: x[i]`) is computed on the side not taken too."""

    @classmethod
    def is_speculatable(cls, op: Operation) -> bool:
        indices = [getattr(op, name) for name in DATA_INDEX_OPERANDS if getattr(op, name, None) is not None]
        return all(isinstance(v.owner, Operation) and v.owner.has_trait(ConstantLike) for v in indices)
