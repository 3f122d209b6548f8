"""Plans that are one plan: the same placements up to swapping tables of one shape or devices of one node.

A model often has tables of one shape whose ids differ only by the draw (a DLRM's nine 10k-row features), and a
system's devices within a node are alike. Two plans that differ only by which of such tables goes where, or by
which device holds what, run alike: priced, they differ by the ids' draw alone, and measured, by the host's noise.
A plan search that lists them as alternatives offers the user (and a benchmark that measures its best few) one plan
several times. `distinct_plans` keeps the fastest of each class.

The class is a structural key: each device's shards as (table shape, sharding kind, shard count, shard index),
sorted within the device, the devices sorted within their node and the nodes sorted. Sorting devices
independently forgets which devices a multi-device placement spans together; two plans with one key are taken as
one only when their predicted steps also agree within `_SAME_STEP`, so that a plan the key confuses with another is
dropped only where it is priced as fast as that one: the list loses a near-tie at most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gnomon.cost.sharding.plan import Placement
from gnomon.cost.sharding.tables import EmbeddingTable

if TYPE_CHECKING:
    from gnomon.cost.sharding.search import Candidate

__all__ = ["distinct_plans", "plan_class"]

_SAME_STEP = 0.005
"""Predicted steps of one class within this fraction of each other: the ids' draw moves a table's priced lookups
by well under this (nine 10k-row tables of one power law: 0.01 ms of a 9.15 ms step)."""

_Shape = tuple[int, int, int, int, int, str]
_Shard = tuple[_Shape, str, int, int]


def _shape(table: EmbeddingTable) -> _Shape:
    return (table.rows, table.dim, table.element_bytes, table.batch, len(table.ids), table.mode)


def plan_class(
    assignment: Mapping[str, Placement], tables: Mapping[str, EmbeddingTable], devices: int, devices_per_node: int
) -> tuple[tuple[tuple[_Shard, ...], ...], ...]:
    """`assignment`'s key up to swapping tables of one shape and devices within a node (and whole nodes)."""
    held: list[list[_Shard]] = [[] for _ in range(devices)]
    for name, placement in assignment.items():
        for index, device in enumerate(placement.devices):
            held[device].append((_shape(tables[name]), placement.kind, len(placement.devices), index))
    per_device = [tuple(sorted(shards)) for shards in held]
    nodes = [
        tuple(sorted(per_device[first : first + devices_per_node])) for first in range(0, devices, devices_per_node)
    ]
    return tuple(sorted(nodes))


def distinct_plans(
    candidates: Sequence[Candidate], tables: Sequence[EmbeddingTable], devices: int, devices_per_node: int
) -> list[Candidate]:
    """`candidates` (best first) without those equivalent to an earlier one."""
    by_name = {t.name: t for t in tables}
    kept: dict[object, list[Candidate]] = {}
    result: list[Candidate] = []
    for candidate in candidates:
        key = plan_class(candidate.assignment, by_name, devices, devices_per_node)
        same = kept.setdefault(key, [])
        step = candidate.step.step_s
        if any(abs(step - other.step.step_s) <= _SAME_STEP * other.step.step_s for other in same):
            continue
        same.append(candidate)
        result.append(candidate)
    return result
