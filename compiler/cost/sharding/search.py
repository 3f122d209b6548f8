"""Choosing a sharding plan by predicted step time: greedy proposals, then a local search from the best of them.

Only placements TorchRec runs are proposed (`torchrec_limit`: row-wise over every device, column shards of equal
widths in multiples of four). The proposals: every table row-wise; every table column-wise over all devices;
table-wise, largest predicted cost first onto the device with the least so far (LPT), by lookup cost and by bytes;
and the hybrids that put the largest tables row-wise or column-wise and the rest table-wise. The search then moves
one table at a time (to another device, or to another kind) while the predicted step falls, from the best few
proposals. A plan must fit every device's memory; among those that do, the fastest wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gnomon.cost.sharding.plan import Placement, ShardingError, torchrec_limit
from gnomon.cost.sharding.step import ShardedStep
from gnomon.cost.sharding.tables import EmbeddingTable

__all__ = ["Candidate", "largest_first", "search_plans"]

_STARTS = 3  # proposals the local search starts from
_MOST_EVALUATIONS = 4000


@dataclass(frozen=True)
class Candidate:
    assignment: dict[str, Placement]
    step: ShardedStep
    source: str
    """How it was found: a proposal's name, or `search`."""

    def fits(self, capacity: int) -> bool:
        return max(self.step.memory_bytes_per_device) <= capacity

    def key(self) -> tuple[tuple[str, str], ...]:
        return _key(self.assignment)


def _key(assignment: Mapping[str, Placement]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, p.describe()) for name, p in assignment.items()))


def search_plans(
    tables: Sequence[EmbeddingTable],
    devices: int,
    capacity: int,
    evaluate: Callable[[Mapping[str, Placement]], ShardedStep],
) -> list[Candidate]:
    """Every plan priced, fastest first (those that fit `capacity` bytes per device before those that do not)."""
    if not tables:
        raise ShardingError("no embedding table to shard")
    seen: dict[tuple[tuple[str, str], ...], Candidate] = {}

    def price(assignment: dict[str, Placement], source: str) -> Candidate:
        key = _key(assignment)
        if key not in seen:
            seen[key] = Candidate(assignment, evaluate(assignment), source)
        return seen[key]

    for source, assignment in _proposals(tables, devices, evaluate).items():
        price(assignment, source)
    starts = sorted(seen.values(), key=lambda c: _rank(c, capacity))[:_STARTS]
    for start in starts:
        current = start
        improved = True
        while improved and len(seen) < _MOST_EVALUATIONS:
            improved = False
            for neighbour in _neighbours(current.assignment, tables, devices):
                candidate = price(neighbour, "search")
                if _rank(candidate, capacity) < _rank(current, capacity):
                    current, improved = candidate, True
    return sorted(seen.values(), key=lambda c: _rank(c, capacity))


def _rank(candidate: Candidate, capacity: int) -> tuple[bool, float, int]:
    """Fitting plans first, then the fastest; among equally fast ones, the one whose fullest device holds least."""
    return (not candidate.fits(capacity), candidate.step.step_s, max(candidate.step.memory_bytes_per_device))


def _proposals(
    tables: Sequence[EmbeddingTable], devices: int, evaluate: Callable[[Mapping[str, Placement]], ShardedStep]
) -> dict[str, dict[str, Placement]]:
    everyone = tuple(range(devices))
    proposals = {"row_wise": {t.name: Placement("row_wise", everyone) for t in tables}}
    if all(_runs(Placement("column_wise", everyone), t, devices) for t in tables):
        proposals["column_wise"] = {t.name: Placement("column_wise", everyone) for t in tables}
    # A table's own predicted cost, alone on device 0: what LPT balances.
    alone = {t.name: evaluate({t.name: Placement("table_wise", (0,))}).device_embedding_s[0] for t in tables}
    proposals["table_wise by cost"] = largest_first(tables, devices, lambda t: alone[t.name])
    proposals["table_wise by bytes"] = largest_first(tables, devices, lambda t: float(t.bytes))
    largest = sorted(tables, key=lambda t: -t.bytes)
    for count in range(1, min(len(tables), 3) + 1):
        big = {t.name for t in largest[:count]}
        rest = [t for t in tables if t.name not in big]
        for kind in ("row_wise", "column_wise"):
            if not all(_runs(Placement(kind, everyone), t, devices) for t in largest[:count]):
                continue
            hybrid = {name: Placement(kind, everyone) for name in big}
            hybrid.update(largest_first(rest, devices, lambda t: alone[t.name]))
            proposals[f"largest {count} {kind}, rest table_wise"] = hybrid
    return proposals


def largest_first(
    tables: Sequence[EmbeddingTable], devices: int, weight: Callable[[EmbeddingTable], float]
) -> dict[str, Placement]:
    """Largest first onto the least-loaded device."""
    load = [0.0] * devices
    assignment: dict[str, Placement] = {}
    for table in sorted(tables, key=lambda t: -weight(t)):
        device = min(range(devices), key=lambda d: load[d])
        assignment[table.name] = Placement("table_wise", (device,))
        load[device] += weight(table)
    return assignment


def _neighbours(
    assignment: dict[str, Placement], tables: Sequence[EmbeddingTable], devices: int
) -> list[dict[str, Placement]]:
    """Plans one table away: table-wise on another device, row-wise over all, column-wise over two devices."""
    everyone = tuple(range(devices))
    result: list[dict[str, Placement]] = []
    for table in tables:
        current = assignment[table.name]
        options = [Placement("table_wise", (d,)) for d in range(devices)]
        options.append(Placement("row_wise", everyone))
        options += [Placement("column_wise", (a, b)) for a in range(devices) for b in range(a + 1, devices)]
        options.append(Placement("column_wise", everyone))
        for option in options:
            if option != current and _runs(option, table, devices):
                result.append({**assignment, table.name: option})
    return result


def _runs(placement: Placement, table: EmbeddingTable, devices: int) -> bool:
    """Whether TorchRec, which runs the plans, can run it (`torchrec_limit`)."""
    return torchrec_limit(placement, table.dim, devices) is None
