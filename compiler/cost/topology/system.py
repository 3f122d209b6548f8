"""A system's figures: its devices, how many, and the links between them (`gnomon.cost.topology`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gnomon.cost.devices import Device, DeviceError

__all__ = ["SYSTEM_DIR", "Link", "System", "TopologyError", "available_systems"]

SYSTEM_DIR = Path(__file__).parent
"""Where the shipped system files live (package data)."""


class TopologyError(DeviceError):
    """A system is unknown, or its file is missing or malformed, or it cannot hold the ranks asked for."""


@dataclass(frozen=True)
class Link:
    """A link, as one device sees it."""

    name: str
    bandwidth_bytes_per_s: float
    """Per device and direction."""
    latency_s: float
    """The fixed cost of one step of a collective over it (a send and its matching receive)."""


@dataclass(frozen=True)
class System:
    """`devices_per_node` x `nodes` devices of one kind and the links between them."""

    name: str
    device: Device
    devices_per_node: int
    nodes: int
    intra_node: Link
    inter_node: Link | None
    collective_efficiency: float
    """The share of a link's bandwidth collectives reach on large messages (NCCL's bus bandwidth over the link's)."""
    calibrated: bool
    source: str
    sync_s: float = 0.0
    """What a collective that ranks reach from their compute costs beyond its own time: the wait for the last rank
    and its wake-up (measured here; a typical figure for datasheet systems)."""
    measured: Mapping[str, tuple[tuple[int, float], ...]] = field(
        default_factory=dict[str, tuple[tuple[int, float], ...]]
    )
    """A calibrated system's collectives: each one's measured (message bytes, seconds) at `measured_ranks`."""
    measured_ranks: int = 0
    embedding_group_s: Mapping[str, float] = field(default_factory=dict[str, float])
    """Per sharding kind (`table_wise`, `row_wise`, `column_wise`): what each of TorchRec's sharding groups adds to
    a step beyond its kernels and its collectives' own time. On a measured system, fitted to TorchRec's steps (`gnomon
    calibrate --collectives`: its host work and the ranks' waits together); on a datasheet system, the ranks' waits
    at its two blocking collectives (2 x `sync_s`), as the host runs ahead of the device. A kind it does not name
    adds 0."""
    embedding_step_s: float = 0.0
    """What TorchRec adds once a step where any table is sharded, beyond its groups' `embedding_group_s` (its model
    wrapper's host work: fitted with them on a measured system; 0 on a datasheet system)."""
    embedding_pooled_byte_s: float = 0.0
    """What TorchRec adds per byte of pooled embeddings that its groups' output dists return to a rank (each
    table's `dim` columns for the rank's bags), forward and backward together, beyond the collectives' own time:
    its copies into the collectives' buffers, the concatenations and permutations of what comes back and of the
    gradients that go out, and the collectives run on a thread of the rank that computes. Fitted with the group cost
    on a measured system; 0 on a datasheet system, whose copies run at the device's memory bandwidth."""
    send_receive_share: float = 0.0
    """How much of what a device receives it pays as if sent (0 to 1), which prices an uneven all-to-all
    (`gnomon.cost.collectives.uneven_all_to_all_s`): 0 over full-duplex links (the datasheet systems' NVLink and
    InfiniBand send and receive at full bandwidth at once; a system file may set `send_receive_share`); measured on
    this machine's ranks, whose cores copy both directions through the loopback
    (`gnomon.runtime.distributed.duplex`)."""

    @property
    def ranks(self) -> int:
        return self.devices_per_node * self.nodes

    @property
    def provenance(self) -> str:
        if self.calibrated:
            return f"{self.name}: collectives measured on this machine"
        return f"{self.name}: datasheet figures, not measured; predicted times are analytical"


def available_systems() -> tuple[str, ...]:
    """The names of the shipped system files."""
    return tuple(sorted(path.stem for path in SYSTEM_DIR.glob("*.toml")))
