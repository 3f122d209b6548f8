"""Embedding lookups and their gradients as kernels: each distinct row fetched once from the memory level that holds
the table, in whole access granules (cache lines, DRAM sectors); repeated rows, indices and results from cache; each
lookup also costs `lookup_s` of index handling (bounds checks, finding its bag). `gnomon.cost.analytical` prices the
graph's embedding ops with them, and a sharded table's shards (`lookup_cost`) too.
"""

from __future__ import annotations

import math

from gnomon.cost.devices import Device
from gnomon.cost.efficiency import Efficiency
from gnomon.cost.gemm_model import KernelTime
from gnomon.cost.rates import resident_index, sustained, weights_bandwidth
from gnomon.cost.roofline import OpWork, embedding_rows
from gnomon.cost.values import element_bytes, elements, nbytes, static_shape
from gnomon.dialects.graph.embedding import EmbeddingBagOp, EmbeddingOp
from gnomon.dialects.graph.grad import EmbeddingBagGradOp

__all__ = ["bag_grad_kernel", "embedding_kernel", "lookup_kernel"]


def bag_grad_kernel(op: EmbeddingBagGradOp, work: OpWork, device: Device, eff: Efficiency) -> KernelTime:
    """An embedding bag's dense gradient: the table zeroed, a stream of its bytes; then each lookup's row of the
    bags' gradient gathered and added into the table's row (read and written), at the fitted `index_add` fraction
    of a stream's rate from where the table lives. Only looked-up rows are added into: one pass over the table at
    the adds' rate priced gnomon's kernel on tables of 2M elements and more 1.40x too slow in the training suite
    (session 10) and 1.85x on the held-out DLRMs' 200k-row tables (which is where this was noticed)."""
    table = nbytes(op.result)
    zero_s = table / sustained(device, eff, resident_index(device, table))
    row = static_shape(op.grad_output)[1] * element_bytes(op.grad_output)
    added = work.bytes - table + 4 * elements(op.indices) * row  # the operands; each row gathered, added into
    rate = sustained(device, eff, resident_index(device, table)) * eff.index_add
    compute_s = work.flops / (device.peak(work.peak_key) * eff.vector * eff.index_add)
    return KernelTime("stream", compute_s, zero_s + added / rate)


def embedding_kernel(
    op: EmbeddingOp | EmbeddingBagOp, work: OpWork, device: Device, eff: Efficiency, table_in_dram: bool
) -> KernelTime:
    """A graph's lookup or bag: its distinct rows counted from constant indices, else all assumed distinct."""
    lookups, distinct = embedding_rows(op)
    row_bytes = static_shape(op.table)[1] * element_bytes(op.table)
    rest = work.bytes - distinct * row_bytes
    flop_rate = device.peak(work.peak_key) * eff.vector
    compute_s = work.flops / flop_rate
    return lookup_kernel(lookups, distinct, row_bytes, nbytes(op.table), rest, compute_s, device, eff, table_in_dram)


def lookup_kernel(
    lookups: int, distinct: int, row_bytes: int, table_bytes: int, rest: int, compute_s: float, device: Device,
    eff: Efficiency, table_in_dram: bool,
) -> KernelTime:  # fmt: skip
    """Distinct rows from the table's level, in whole granules; repeats, indices and result (`rest` bytes) from
    cache; each lookup's index handling beside `compute_s`."""
    fetched = math.ceil(row_bytes / eff.access_bytes) * eff.access_bytes * distinct
    table_level = len(device.memory) - 1 if table_in_dram else resident_index(device, table_bytes)
    hot_level = resident_index(device, distinct * row_bytes + rest)
    table_bandwidth = weights_bandwidth(device, eff) if table_in_dram else sustained(device, eff, table_level)
    memory_s = fetched / table_bandwidth + ((lookups - distinct) * row_bytes + rest) / sustained(device, eff, hot_level)
    return KernelTime("embedding", compute_s + lookups * eff.lookup_s, memory_s)
