"""Where each embedding table lives: a sharding plan, as TorchRec's sharding types name them.

- `table_wise`: the whole table on one device, which looks up every rank's ids of it.
- `row_wise`: rows split into equal blocks, one per device (in `devices` order); each device looks up the ids
  that fall in its block and the partial sums are reduce-scattered.
- `column_wise`: columns split into shards, one per device in `devices` (a device may hold several); each shard
  is looked up like a table of its own, table-wise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gnomon.errors import GnomonError

__all__ = ["KINDS", "Placement", "ShardingError", "check_assignment", "column_blocks", "row_blocks", "torchrec_limit"]

KINDS = ("table_wise", "row_wise", "column_wise")
FUSED_WIDTH = 4
"""TorchRec's fused kernel (fbgemm's batched embedding bags) takes shards a multiple of this many columns wide."""


class ShardingError(GnomonError):
    """A plan is malformed, names a table the model lacks, or does not fit the devices' memory."""


@dataclass(frozen=True)
class Placement:
    """One table's sharding: its kind and the devices (ranks) holding its shards."""

    kind: str
    devices: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ShardingError(f"unknown sharding kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if not self.devices:
            raise ShardingError(f"a {self.kind} placement names no device")
        if self.kind == "table_wise" and len(self.devices) != 1:
            raise ShardingError(f"a table_wise placement is on one device, not {list(self.devices)}")
        if self.kind == "row_wise" and len(set(self.devices)) != len(self.devices):
            raise ShardingError(f"a row_wise placement names a device twice: {list(self.devices)}")

    def describe(self) -> str:
        if self.kind == "table_wise":
            return f"table_wise@{self.devices[0]}"
        return f"{self.kind}@{','.join(map(str, self.devices))}"

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "devices": list(self.devices)}


def row_blocks(rows: int, shards: int) -> list[int]:
    """Each shard's row count: TorchRec's equal blocks of ceil(rows / shards), the last one shorter (or empty)."""
    block = -(-rows // shards)
    return [max(0, min(block, rows - block * i)) for i in range(shards)]


def column_blocks(dim: int, shards: int) -> list[int]:
    """Each shard's column count: equal where `dim` divides, else the first ones one column wider."""
    base, extra = divmod(dim, shards)
    return [base + (1 if i < extra else 0) for i in range(shards)]


def check_assignment(assignment: Mapping[str, Placement], tables: Mapping[str, int], devices: int) -> None:
    """A ShardingError unless `assignment` places exactly `tables` (name to embedding dim) on devices below
    `devices`, with no column shard narrower than one column."""
    missing = [name for name in tables if name not in assignment]
    unknown = [name for name in assignment if name not in tables]
    if missing or unknown:
        parts = ([f"places no table {', '.join(missing)}"] if missing else []) + (
            [f"names no table of the model: {', '.join(unknown)}"] if unknown else []
        )
        raise ShardingError(f"the plan {' and '.join(parts)}")
    for name, placement in assignment.items():
        out = [d for d in placement.devices if not 0 <= d < devices]
        if out:
            raise ShardingError(f"table {name}: device {out[0]} is not one of the system's {devices}")
        if placement.kind == "column_wise" and len(placement.devices) > tables[name]:
            raise ShardingError(
                f"table {name}: {len(placement.devices)} column shards of a {tables[name]}-column table"
            )


def torchrec_limit(placement: Placement, dim: int, devices: int) -> str | None:
    """Why TorchRec (the engine that runs the plans) cannot run `placement` of a `dim`-column table on `devices`
    ranks as gnomon means it, or None."""
    if placement.kind == "row_wise" and placement.devices != tuple(range(devices)):
        # TorchRec's row-wise input bucketizes ids into one block per rank, block i to rank i.
        return (
            f"TorchRec shards row_wise over every rank in order, {list(range(devices))}, not {list(placement.devices)}"
        )
    shards = len(placement.devices) if placement.kind == "column_wise" else 1
    if dim % shards != 0:
        return f"TorchRec's fused kernel splits the {dim} columns evenly, not into {shards}"
    if (dim // shards) % FUSED_WIDTH != 0:
        return f"TorchRec's fused kernel needs shards a multiple of {FUSED_WIDTH} columns wide, not {dim // shards}"
    return None
