"""Reading a system: a shipped file, a file by path, `NxDEVICE`, `MxNxDEVICE` or `Nxlocal` (`gnomon.cost.topology`)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from gnomon.cost.devices import load_device
from gnomon.cost.sharding.plan import KINDS
from gnomon.cost.topology.system import SYSTEM_DIR, Link, System, TopologyError, available_systems

__all__ = ["load_system"]


_SPEC = re.compile(r"(?:(\d+)x)?(\d+)x([A-Za-z][\w.-]*)")
"""`[nodes x] devices x kind`: `4xh100`, `2x8xh100`."""


def load_system(spec: str) -> System:
    """A shipped system by name (`8xh100`), a system file by path, `N x kind` or `M x N x kind` with a shipped
    system's links for that kind, or `N x local` / `local` (this machine's measured collectives)."""
    if spec.endswith(".toml") or "/" in spec:
        return _read(Path(spec))
    shipped = SYSTEM_DIR / f"{spec}.toml"
    if shipped.is_file():
        return _read(shipped)
    match = _SPEC.fullmatch(spec)
    if spec == "local" or (match and match.group(3) == "local"):
        from gnomon.cost.topology.measured import local_system

        if match and match.group(1):
            raise TopologyError(f"system '{spec}': this machine is one node; write {match.group(2)}xlocal")
        return local_system(int(match.group(2)) if match else None)
    if match is None:
        raise TopologyError(f"unknown system '{spec}'; {_known()}")
    nodes, per_node, kind = int(match.group(1) or 1), int(match.group(2)), match.group(3)
    bases = [_read(SYSTEM_DIR / f"{name}.toml") for name in available_systems()]
    base = next((s for s in sorted(bases, key=lambda s: -s.devices_per_node) if s.device.name == kind), None)
    if base is None:
        raise TopologyError(f"no system of {kind} devices is known, so '{spec}' has no links; {_known()}")
    if per_node > base.devices_per_node:
        raise TopologyError(
            f"system '{spec}': a node of {base.name} holds {base.devices_per_node} {kind} devices, not {per_node}"
        )
    if nodes > 1 and base.inter_node is None:
        raise TopologyError(f"system '{spec}': {base.name} gives no link between nodes")
    name = f"{nodes}x{per_node}x{kind}" if nodes > 1 else f"{per_node}x{kind}"
    return replace(base, name=name, devices_per_node=per_node, nodes=nodes)


def _known() -> str:
    return f"known systems: {', '.join(available_systems())}, NxDEVICE or MxNxDEVICE of their devices, Nxlocal"


def _read(path: Path) -> System:
    if not path.is_file():
        raise TopologyError(f"system file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise TopologyError(f"system file {path}: not valid TOML: {error}") from error

    def value(table: dict[str, object], key: str, kind: type, where: str = "") -> Any:
        found = table.get(key)
        if kind is float and isinstance(found, int) and not isinstance(found, bool):
            found = float(found)
        if not isinstance(found, kind) or (isinstance(found, bool) and kind is not bool):
            raise TopologyError(f"system file {path}: missing or mistyped '{where}{key}' (expected {kind.__name__})")
        if isinstance(found, int | float) and not isinstance(found, bool) and found < 0:
            raise TopologyError(f"system file {path}: '{where}{key}' must not be negative")
        return found

    def link(key: str) -> Link:
        table = data.get(key)
        if not isinstance(table, dict):
            raise TopologyError(f"system file {path}: missing or mistyped '{key}' (expected a table)")
        bandwidth = value(table, "bandwidth_bytes_per_s", float, f"{key}.")
        if bandwidth <= 0:
            raise TopologyError(f"system file {path}: '{key}.bandwidth_bytes_per_s' must be positive")
        return Link(value(table, "name", str, f"{key}."), bandwidth, value(table, "latency_s", float, f"{key}."))

    efficiency = value(data, "collective_efficiency", float)
    if not 0 < efficiency <= 1:
        raise TopologyError(f"system file {path}: 'collective_efficiency' must be in (0, 1], got {efficiency}")
    return System(
        name=value(data, "name", str),
        device=load_device(value(data, "device", str)),
        devices_per_node=max(1, value(data, "devices_per_node", int)),
        nodes=max(1, value(data, "nodes", int)),
        intra_node=link("intra_node"),
        inter_node=link("inter_node") if "inter_node" in data else None,
        collective_efficiency=efficiency,
        calibrated=value(data, "calibrated", bool),
        source=value(data, "source", str),
        sync_s=value(data, "sync_s", float),
        # The ranks' waits at a group's two blocking collectives: the pooled all-to-all and its gradients'.
        embedding_group_s=dict.fromkeys(KINDS, 2 * value(data, "sync_s", float)),
        send_receive_share=_share(data, path),
    )


def _share(data: dict[str, Any], path: Path) -> float:
    """The file's `send_receive_share`, optional: 0 (full-duplex links, as the shipped systems' are) without it."""
    share = data.get("send_receive_share", 0.0)
    if not isinstance(share, int | float) or isinstance(share, bool) or not 0 <= share <= 1:
        raise TopologyError(f"system file {path}: 'send_receive_share' must be a number from 0 to 1")
    return float(share)
