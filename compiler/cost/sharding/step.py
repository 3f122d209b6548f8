"""A DLRM-style training step with sharded embedding tables, as TorchRec's DistributedModelParallel runs it: the
tables sharded by a plan (`gnomon.cost.sharding.plan`), the dense layers data-parallel under DDP.

Per sharding kind (TorchRec's sharding groups: each kind's tables are one group with its own collectives):

- input dist: the ids go to the devices holding their rows. TorchRec's KJT all-to-all is three all-to-alls: the
  splits, the bags' lengths (4 bytes a bag) and the ids (8 bytes each). Table-wise and column-wise shards get all of
  a table's ids (a column shard gets them all again); a row block only the ids that fall in it.
- lookups: each device pools the ids it received over its shards, for every rank's bags, in one kernel call per
  group: on a device whose fbgemm kernels `gnomon calibrate` measured, priced by their fit (`gnomon.cost.tbe`: a
  cost per call, per id, and per distinct row from the memory level); elsewhere as `graph.embedding_bag` is
  (`lookup_cost`: distinct rows from the memory level). The level is the one that holds all of the device's shards,
  which every step reads, not the shard alone, and the rest of the step's traffic (`DenseStep.traffic_bytes`), which
  passes through the caches between two steps' lookups. The index distribution is `EmbeddingTable.distinct`'s.
- output dist: table- and column-wise, an all-to-all of the pooled rows back to the ranks whose bags they are
  (uneven where the devices hold different tables: `gnomon.cost.collectives.uneven_all_to_all_s`); row-wise, a
  reduce-scatter of each block's partial sums.
- backward: the pooled gradients go back (the all-to-all reversed; an all-gather for row-wise) and each device
  updates its shards with the fused backward and SGD (fbgemm's, measured; elsewhere `sparse_update_cost`).

The dense layers' step is `gnomon.cost.data_parallel` on the model with its tables frozen (its forward lookups of the
local tables taken out). A collective is a barrier: each phase ends when its slowest device does, so a plan's step
is the dense step plus, per group, the slowest device's lookups and updates and the collectives. On GPUs TorchRec's
pipelined training (`TrainPipelineSparseDist`) runs the next batch's input dist beside this batch's compute: only
what exceeds the compute is exposed. Each group also pays what `System.embedding_group_s` says: TorchRec's host work
and the ranks' waits at its pooled all-to-all and at its gradients' (fitted to TorchRec's steps on a measured
system; the datasheet systems' typical waits); and each byte of pooled embeddings a rank gets back what
`System.embedding_pooled_byte_s` says (TorchRec's copies of them on the host, fitted with the group cost; 0 on
the datasheet systems).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from gnomon.cost.analytical import lookup_cost, sparse_update_cost
from gnomon.cost.collectives import collective_s, uneven_all_to_all_s
from gnomon.cost.rates import resident_index
from gnomon.cost.sharding.plan import Placement, column_blocks, row_blocks
from gnomon.cost.sharding.tables import EmbeddingTable
from gnomon.cost.tbe import tbe_call_costs, tbe_costs
from gnomon.cost.topology import System

__all__ = ["DenseStep", "Shard", "ShardCosts", "ShardedStep", "pooled_bytes", "sharded_step", "shards_of"]

_ID_BYTES = 8  # int64 ids, as TorchRec's KJT carries them
_LENGTH_BYTES = 4  # int32 lengths


@dataclass(frozen=True)
class DenseStep:
    """The plan-independent part of the step on one rank: the dense layers' DDP step (tables frozen)."""

    step_s: float
    """The DDP step of the model with frozen tables: forward, backward, optimizer, all-reduces, sync, copies."""
    compute_s: float
    all_reduce_s: float
    """Its all-reduces' exposed time."""
    sync_s: float
    local_lookups_s: float
    """Its forward's lookups of the whole (local) tables, which sharding replaces."""
    parameter_bytes: int
    """The dense parameters' bytes (replicated on every device)."""
    traffic_bytes: int = 0
    """The bytes its kernels move: what passes through the caches between two steps' reads of a device's shards."""


@dataclass(frozen=True)
class Shard:
    table: str
    device: int
    kind: str
    first_row: int
    rows: int
    columns: int


@dataclass(frozen=True)
class ShardedStep:
    """A plan's predicted step and where its time goes."""

    system: str
    ranks: int
    step_s: float
    dense_compute_s: float
    embedding_compute_s: float
    """The slowest device's lookups and updates, summed over the groups."""
    all_to_all_s: float
    """Input dists, pooled embeddings and their gradients (reduce-scatters and all-gathers of row-wise included)."""
    all_reduce_s: float
    """DDP's all-reduces of the dense gradients, as exposed."""
    sync_s: float
    """The ranks' waits for each other where DDP's reducer waits for its all-reduces."""
    host_s: float
    """What TorchRec adds beyond its kernels and collectives (`System.embedding_group_s` per group,
    `embedding_step_s` once, `embedding_pooled_byte_s` per pooled byte): its host work and the waits at its blocking
    collectives."""
    device_embedding_s: tuple[float, ...]
    """Each device's lookups and updates."""
    memory_bytes_per_device: tuple[int, ...]
    groups: tuple[str, ...] = field(default=())

    @property
    def load_balance(self) -> float:
        """The busiest device's embedding time over the mean (1: balanced)."""
        mean = sum(self.device_embedding_s) / len(self.device_embedding_s)
        return max(self.device_embedding_s) / mean if mean > 0 else 1.0


def pooled_bytes(tables: Sequence[EmbeddingTable], assignment: Mapping[str, Placement]) -> int:
    """The pooled embeddings the output dists return to one rank: each sharded table's bags, all its columns."""
    return sum(t.batch * t.dim * t.element_bytes for t in tables if t.name in assignment)


def shards_of(table: EmbeddingTable, placement: Placement) -> list[Shard]:
    if placement.kind == "table_wise":
        return [Shard(table.name, placement.devices[0], "table_wise", 0, table.rows, table.dim)]
    if placement.kind == "column_wise":
        widths = column_blocks(table.dim, len(placement.devices))
        return [Shard(table.name, d, "column_wise", 0, table.rows, w) for d, w in zip(placement.devices, widths)]
    blocks = row_blocks(table.rows, len(placement.devices))
    firsts = [sum(blocks[:i]) for i in range(len(blocks))]
    return [
        Shard(table.name, d, "row_wise", first, rows, table.dim)
        for d, first, rows in zip(placement.devices, firsts, blocks, strict=True)
    ]


def sharded_step(
    tables: Sequence[EmbeddingTable],
    assignment: Mapping[str, Placement],
    dense: DenseStep,
    system: System,
    ranks: int | None = None,
    costs: ShardCosts | None = None,
) -> ShardedStep:
    """The step of a model whose `tables` are placed by `assignment` on `ranks` of `system`'s devices (default:
    all), each rank's batch the tables' example batch; `costs` a cache of shard prices to share between calls."""
    n = system.ranks if ranks is None else ranks
    by_name = {t.name: t for t in tables}
    costs = ShardCosts(system, n) if costs is None else costs
    groups: dict[str, list[Shard]] = {}
    for name, placement in assignment.items():
        groups.setdefault(placement.kind, []).extend(shards_of(by_name[name], placement))
    # Every shard on a device is read each step: their rows together, not each shard's alone, meet its caches, and
    # so does the rest of the step's traffic before the next step reads them.
    resident = [dense.traffic_bytes] * n
    for shards in groups.values():
        for shard in shards:
            resident[shard.device] += shard.rows * shard.columns * by_name[shard.table].element_bytes
    device_embedding = [0.0] * n
    embedding_s = outputs_s = inputs_s = 0.0
    for kind, shards in groups.items():
        lookups = [0.0] * n
        updates = [0.0] * n
        for shard in shards:
            forward, backward = costs.compute(by_name[shard.table], shard, resident[shard.device])
            lookups[shard.device] += forward
            updates[shard.device] += backward
        call_forward, call_backward = costs.calls
        for d in {shard.device for shard in shards}:  # one kernel call per device for all of the group's shards
            lookups[d] += call_forward
            updates[d] += call_backward
        for d in range(n):
            device_embedding[d] += lookups[d] + updates[d]
        embedding_s += max(lookups) + max(updates)
        inputs_s += _input_dist_s(system, n, shards, by_name)
        outputs_s += _output_dist_s(system, n, kind, shards, by_name)
    # TorchRec's host work and the waits at its blocking collectives: once a step, for each group, and for each byte
    # of pooled embeddings it hands back to a rank.
    host_s = (
        system.embedding_step_s
        + sum(system.embedding_group_s.get(kind, 0.0) for kind in groups)
        + system.embedding_pooled_byte_s * pooled_bytes(tables, assignment)
        if n > 1
        else 0.0
    )
    dense_compute = dense.compute_s - dense.local_lookups_s
    if system.device.kind == "gpu":  # the next batch's input dist runs beside this batch's compute (the pipeline)
        inputs_s = max(0.0, inputs_s - (dense_compute + embedding_s))
    communication_s = inputs_s + outputs_s
    step_s = dense.step_s - dense.local_lookups_s + embedding_s + communication_s + host_s
    memory = _memory_per_device(tables, assignment, dense, n, by_name)
    return ShardedStep(
        system.name, n, step_s, dense_compute, embedding_s, communication_s, dense.all_reduce_s,
        dense.sync_s, host_s, tuple(device_embedding), memory, tuple(groups),
    )  # fmt: skip


class ShardCosts:
    """Each shard's lookups and fused update on one device, cached: a plan search prices the same shards often."""

    def __init__(self, system: System, ranks: int) -> None:
        self.device = system.device
        self.ranks = ranks
        self.calls = tbe_call_costs(system.device)
        """(forward, backward) of one kernel call, which looks up all of a group's shards on a device."""
        self._compute = cache(self._uncached)

    def compute(self, table: EmbeddingTable, shard: Shard, resident_bytes: int) -> tuple[float, float]:
        """(forward, backward) of `shard` on a device whose shards hold `resident_bytes` in all."""
        # Only the level that holds them matters: keyed by its capacity, a search's moves reuse the prices.
        level = self.device.memory[resident_index(self.device, resident_bytes)]
        return self._compute(table, shard, self.device.capacity(level))

    def _uncached(self, table: EmbeddingTable, shard: Shard, resident_bytes: int) -> tuple[float, float]:
        bags = table.batch * self.ranks
        ids = len(table.ids) * self.ranks * _share(table, shard)
        lookups = round(ids)
        if lookups == 0:
            return 0.0, 0.0
        distinct = table.distinct(ids, shard.first_row, shard.rows)
        row_bytes = shard.columns * table.element_bytes
        shard_bytes = shard.rows * row_bytes
        measured = tbe_costs(lookups, round(distinct), row_bytes, resident_bytes, shard_bytes, self.device)
        if measured is not None:  # this machine's fbgemm kernels, as TorchRec runs them
            return measured
        pooled = bags * row_bytes
        other = lookups * _ID_BYTES + bags * _ID_BYTES + pooled
        flops = max(lookups - bags, 0) * shard.columns
        forward = lookup_cost(lookups, distinct, row_bytes, resident_bytes, other, flops, self.device)
        backward = sparse_update_cost(
            lookups, shard.columns, table.element_bytes, pooled + lookups * _ID_BYTES, self.device
        )
        return forward.predicted_s, backward.predicted_s


def _share(table: EmbeddingTable, shard: Shard) -> float:
    """The share of the table's ids that shard looks up."""
    if shard.kind != "row_wise" or len(table.ids) == 0:
        return 1.0
    return len(table.block_ids(shard.first_row, shard.rows)) / len(table.ids)


def _input_dist_s(system: System, n: int, shards: list[Shard], tables: Mapping[str, EmbeddingTable]) -> float:
    if n == 1:
        return 0.0
    ids = [[0.0] * n for _ in range(n)]
    lengths = [[0.0] * n for _ in range(n)]
    for shard in shards:
        table = tables[shard.table]
        for rank in range(n):
            ids[rank][shard.device] += len(table.ids) * _share(table, shard) * _ID_BYTES
            lengths[rank][shard.device] += table.batch * _LENGTH_BYTES
    splits = [[float(_LENGTH_BYTES * len(shards))] * n for _ in range(n)]
    return sum(uneven_all_to_all_s(system, sent) for sent in (splits, lengths, ids))


def _output_dist_s(
    system: System, n: int, kind: str, shards: list[Shard], tables: Mapping[str, EmbeddingTable]
) -> float:
    """The pooled embeddings' way back to their ranks, and their gradients' way out again."""
    if n == 1:
        return 0.0
    if kind == "row_wise":
        width = sum(
            tables[s.table].dim * tables[s.table].element_bytes for s in shards if s.first_row == 0
        )  # each table once
        batch = max(tables[s.table].batch for s in shards)
        message = n * batch * width
        forward = collective_s(system, "reduce_scatter", message, n).seconds
        backward = collective_s(system, "all_gather", message, n).seconds
        return forward + backward
    sent = [[0.0] * n for _ in range(n)]
    for shard in shards:
        table = tables[shard.table]
        for rank in range(n):
            sent[shard.device][rank] += table.batch * shard.columns * table.element_bytes
    return 2 * uneven_all_to_all_s(system, sent)


def _memory_per_device(
    tables: Sequence[EmbeddingTable],
    assignment: Mapping[str, Placement],
    dense: DenseStep,
    n: int,
    by_name: Mapping[str, EmbeddingTable],
) -> tuple[int, ...]:
    """Each device's shards, the dense parameters with their gradients and DDP's buckets, and the pooled
    embeddings with their gradients for every rank's bags."""
    memory = [3 * dense.parameter_bytes] * n
    for name, placement in assignment.items():
        table = by_name[name]
        for shard in shards_of(table, placement):
            memory[shard.device] += shard.rows * shard.columns * table.element_bytes
            memory[shard.device] += 2 * table.batch * n * shard.columns * table.element_bytes
    return tuple(memory)
