"""Embedding lookups: plain row gathers and the pooled bags of recommendation models (DLRM)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, IntegerType, StringAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, prop_def, result_def, traits_def
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    DYN,
    GraphOperation,
    TensorT,
    dims_compatible,
    dtype_of,
    shape_of,
    shape_str,
    tensor_of,
)
from gnomon.dialects.graph.traits import ReadsAtDataIndices


def _check_integer(op: str, value: SSAValue, what: str) -> None:
    dtype = dtype_of(value, f"{op} {what}")
    if not isinstance(dtype, IntegerType) or dtype.width.data not in (32, 64):
        raise VerifyException(f"{op}: {what} must be i32 or i64, got {dtype}")


def _table_shape(op: str, value: SSAValue) -> tuple[int, ...]:
    table = shape_of(value, f"{op} table")
    if len(table) != 2:
        raise VerifyException(f"{op}: table must be 2-D (rows, dim), got shape {shape_str(table)}")
    return table


@irdl_op_definition
class EmbeddingOp(GraphOperation):
    """Look up rows of `table` (num_rows, dim) at `indices`; the result is indices.shape + (dim,).

    `%e = graph.embedding %table, %ids : (tensor<1000x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>`
    """

    name = "graph.embedding"
    table = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    def infer_result_types(self) -> Sequence[TensorT]:
        table = _table_shape(self.name, self.table)
        _check_integer(self.name, self.indices, "indices")
        return [tensor_of(dtype_of(self.table, "table"), [*shape_of(self.indices, "indices"), table[1]])]


@irdl_op_definition
class EmbeddingBagOp(GraphOperation):
    """Pool (sum, mean or max) bags of table rows: bag b holds indices[offsets[b]:offsets[b+1]].

    With `include_last_offset`, offsets has one entry per bag plus a final end offset (as torch
    allows); otherwise the last bag runs to the end of indices. Optional per-sample weights scale
    each looked-up row (sum mode only).

    `%p = graph.embedding_bag %table, %ids, %offsets {mode = "sum", include_last_offset = false}
         : (tensor<100000x64xf32>, tensor<640xi64>, tensor<32xi64>) -> tensor<32x64xf32>`
    """

    name = "graph.embedding_bag"
    table = operand_def(TensorType)
    indices = operand_def(TensorType)
    offsets = operand_def(TensorType)
    per_sample_weights = opt_operand_def(TensorType)
    mode = prop_def(StringAttr)
    include_last_offset = prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    MODES: ClassVar[tuple[str, ...]] = ("sum", "mean", "max")

    def infer_result_types(self) -> Sequence[TensorT]:
        table = _table_shape(self.name, self.table)
        indices, offsets = shape_of(self.indices, "indices"), shape_of(self.offsets, "offsets")
        _check_integer(self.name, self.indices, "indices")
        _check_integer(self.name, self.offsets, "offsets")
        if self.mode.data not in self.MODES:
            raise VerifyException(f"graph.embedding_bag: mode must be one of sum, mean, max, got {self.mode.data!r}")
        if len(indices) != 1 or len(offsets) != 1:
            raise VerifyException(
                f"graph.embedding_bag: indices {shape_str(indices)} and offsets {shape_str(offsets)} must be 1-D"
            )
        if self.per_sample_weights is not None:
            weights = shape_of(self.per_sample_weights, "per_sample_weights")
            if self.mode.data != "sum":
                raise VerifyException("graph.embedding_bag: per_sample_weights need mode sum")
            if len(weights) != 1 or not dims_compatible(weights[0], indices[0]):
                raise VerifyException(
                    f"graph.embedding_bag: per_sample_weights {shape_str(weights)}"
                    f" do not match indices {shape_str(indices)}"
                )
        bags = offsets[0] if offsets[0] == DYN else offsets[0] - int(bool(self.include_last_offset.value.data))
        return [tensor_of(dtype_of(self.table, "table"), [bags, table[1]])]


EMBEDDING_OPS = [EmbeddingBagOp, EmbeddingOp]
