"""Converters for embedding lookups and embedding bags."""

from __future__ import annotations

from xdsl.ir import SSAValue

from gnomon.dialects.graph.base import bool_attr, str_attr
from gnomon.dialects.graph.embedding import EmbeddingBagOp, EmbeddingOp
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, torch_op_name
from gnomon.passes.torch_to_graph.registry import converts

_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


@converts("torch.aten.embedding", args="weight indices padding_idx scale_grad_by_freq sparse")
def embedding(a: AtenArgs) -> SSAValue:
    # padding_idx only changes the gradient; the forward lookup is the same.
    return a.value(
        EmbeddingOp.build(operands=[a.tensor("weight"), a.tensor("indices")], result_types=[a.result_type()])
    )


def _embedding_bag(a: AtenArgs) -> list[SSAValue]:
    for index in range(1, len(a.op.results)):
        # A training graph's backward op reads them, but `graph.embedding_bag_grad` finds the bags from the offsets.
        if any(
            torch_op_name(use.operation) != "torch.aten._embedding_bag_backward" for use in a.op.results[index].uses
        ):
            raise NotConvertible("embedding bag auxiliary results (offsets, bag sizes) are used")
    mode = _BAG_MODES.get(a.int("mode"))
    if mode is None:
        raise NotConvertible(f"embedding bag mode {a.int('mode')}")
    if a.optional_int("padding_idx") not in (None, -1):
        raise NotConvertible("embedding bag with padding_idx")
    weights = a.optional_tensor("per_sample_weights")
    bag = a.value(
        EmbeddingBagOp.build(
            operands=[
                a.tensor("weight"),
                a.tensor("indices"),
                a.tensor("offsets"),
                [weights] if weights is not None else [],
            ],
            properties={"mode": str_attr(mode), "include_last_offset": bool_attr(a.bool("include_last_offset"))},
            result_types=[a.result_type()],
        )
    )
    return [bag] * len(a.op.results)


@converts(
    "torch.aten._embedding_bag", "torch.aten.embedding_bag.padding_idx", "torch.aten._embedding_bag_forward_only",
    args="weight indices offsets scale_grad_by_freq mode sparse per_sample_weights include_last_offset padding_idx",
)  # fmt: skip
def embedding_bag(a: AtenArgs) -> list[SSAValue]:
    return _embedding_bag(a)
