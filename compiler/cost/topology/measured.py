"""This machine as a system of ranks: the device one rank sees (`rank.toml`, `gnomon.calibrate_ranks`) and the
collectives between them (`collectives.toml`), both written by `gnomon calibrate --collectives` beside the `local`
device file. The collectives' file:

    name = "local"
    calibrated = true
    source = "gloo over loopback: 2 ranks of 1 thread ..."
    backend = "gloo"
    ranks = 2
    threads_per_rank = 1
    sync_s = 0.0016               # a collective right after compute, beyond its own time
    embedding_group_s = {table_wise = 0.0004, row_wise = 0.0019}  # optional: TorchRec's cost per sharding group
    embedding_step_s = 0.0001     # and step, by kind, and per byte of pooled embeddings
    embedding_pooled_byte_s = 2e-09  # a rank gets back (gnomon.calibrate_torchrec)
    send_receive_share = 0.95     # optional: what a rank receives costs it as if sent (an uneven all-to-all's)

    [all_reduce]                  # one table per collective (gnomon.cost.collectives.COLLECTIVES)
    bytes = [65536, 1048576]      # message sizes (nccl-tests' convention), ascending
    seconds = [9.1e-05, 0.0011]   # the faster half's mean of several medians at each size
    spread = [0.03, 0.05]         # how far apart those medians were
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from gnomon.cost.devices import load_device, local_device_path
from gnomon.cost.topology.system import Link, System, TopologyError

__all__ = [
    "MeasuredCollectives",
    "local_collectives_path",
    "local_rank_device_path",
    "local_system",
    "read_collectives",
    "write_collectives",
]


@dataclass(frozen=True)
class MeasuredCollectives:
    """What a collective calibration measured."""

    source: str
    backend: str
    ranks: int
    threads_per_rank: int
    sync_s: float
    """What a collective right after compute costs beyond its own time (`gnomon.runtime.distributed.sync`)."""
    points: Mapping[str, tuple[tuple[int, float, float], ...]]
    """Per collective: (message bytes, seconds, spread), by size."""
    embedding_group_s: Mapping[str, float] = field(default_factory=dict[str, float])
    """TorchRec's cost per sharding group and step beyond its kernels and collectives, by sharding kind
    (`gnomon.calibrate_torchrec`); empty where it was not measured."""
    embedding_step_s: float = 0.0
    """TorchRec's cost once a step beyond its groups' (`gnomon.calibrate_torchrec`); 0 where it was not measured."""
    embedding_pooled_byte_s: float = 0.0
    """TorchRec's cost per byte of pooled embeddings a rank gets back (`gnomon.calibrate_torchrec`); 0 where it was
    not measured."""
    send_receive_share: float = 0.0
    """How much of what a rank receives it pays as if sent (`gnomon.runtime.distributed.duplex`); 0 (full duplex)
    where it was not measured."""


def local_collectives_path() -> Path:
    """`collectives.toml` beside the `local` device file."""
    return local_device_path().with_name("collectives.toml")


def local_rank_device_path() -> Path:
    """`rank.toml` beside the `local` device file: the device one of the ranks sees (`gnomon.calibrate_ranks`)."""
    return local_device_path().with_name("rank.toml")


def write_collectives(measured: MeasuredCollectives, path: Path) -> None:
    lines = [
        'name = "local"',
        "calibrated = true",
        f"source = {json.dumps(measured.source)}",
        f"backend = {json.dumps(measured.backend)}",
        f"ranks = {measured.ranks}",
        f"threads_per_rank = {measured.threads_per_rank}",
        f"sync_s = {measured.sync_s!r}",
        "embedding_group_s = {" + ", ".join(f"{k} = {v!r}" for k, v in measured.embedding_group_s.items()) + "}",
        f"embedding_step_s = {measured.embedding_step_s!r}",
        f"embedding_pooled_byte_s = {measured.embedding_pooled_byte_s!r}",
        f"send_receive_share = {measured.send_receive_share!r}",
    ]
    for collective, points in measured.points.items():
        lines += [
            "",
            f"[{collective}]",
            f"bytes = [{', '.join(str(p[0]) for p in points)}]",
            f"seconds = [{', '.join(repr(p[1]) for p in points)}]",
            f"spread = [{', '.join(repr(round(p[2], 4)) for p in points)}]",
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def read_collectives(path: Path) -> MeasuredCollectives:
    if not path.is_file():
        raise TopologyError(
            f"no collective calibration of this machine ({path} does not exist): run `gnomon calibrate --collectives`"
        )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise TopologyError(f"collective file {path}: not valid TOML: {error}") from error
    from gnomon.cost.collectives import COLLECTIVES

    def field(key: str, kind: type) -> object:
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TopologyError(f"collective file {path}: missing or mistyped '{key}'")
        return value

    def optional_seconds(key: str) -> float:
        value = data.get(key, 0.0)  # files written before it was fitted have none
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise TopologyError(f"collective file {path}: '{key}' must be a number >= 0")
        return float(value)

    def array(collective: str, table: object, key: str) -> list[float]:
        value = table.get(key) if isinstance(table, dict) else None
        if not isinstance(value, list) or not value or not all(isinstance(v, int | float) for v in value):
            raise TopologyError(f"collective file {path}: '{collective}' needs arrays bytes, seconds and spread")
        return [float(v) for v in value]

    points: dict[str, tuple[tuple[int, float, float], ...]] = {}
    for collective in COLLECTIVES:
        if collective not in data:
            continue
        table = data[collective]
        sizes, seconds, spread = (array(collective, table, key) for key in ("bytes", "seconds", "spread"))
        if not len(sizes) == len(seconds) == len(spread) or sizes != sorted(sizes) or min(seconds) <= 0:
            raise TopologyError(
                f"collective file {path}: '{collective}' needs as many sizes (ascending) as positive times"
            )
        points[collective] = tuple((int(b), s, d) for b, s, d in zip(sizes, seconds, spread, strict=True))
    source, backend = str(field("source", str)), str(field("backend", str))
    ranks, threads = cast(int, field("ranks", int)), cast(int, field("threads_per_rank", int))
    sync_s = data.get("sync_s")
    if not isinstance(sync_s, int | float) or isinstance(sync_s, bool) or sync_s < 0:
        raise TopologyError(f"collective file {path}: missing or mistyped 'sync_s'")
    group_s = data.get("embedding_group_s", {})
    if not isinstance(group_s, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in group_s.values()
    ):
        raise TopologyError(f"collective file {path}: 'embedding_group_s' maps sharding kinds to seconds")
    group_costs = {str(k): float(v) for k, v in cast(dict[str, float], group_s).items()}
    step_s, byte_s = (optional_seconds(key) for key in ("embedding_step_s", "embedding_pooled_byte_s"))
    share = data.get("send_receive_share", 0.0)  # files written before it was measured have none
    if not isinstance(share, int | float) or isinstance(share, bool) or not 0 <= share <= 1:
        raise TopologyError(f"collective file {path}: 'send_receive_share' must be a number from 0 to 1")
    return MeasuredCollectives(
        source, backend, ranks, threads, float(sync_s), points, group_costs, step_s, byte_s, float(share)
    )


def local_system(ranks: int | None = None) -> System:
    """`ranks` processes on this machine (default: as many as were measured), their collectives as measured."""
    measured = read_collectives(local_collectives_path())
    n = measured.ranks if ranks is None else ranks
    cores = os.cpu_count() or 1
    if n * measured.threads_per_rank > cores:
        raise TopologyError(
            f"system '{n}xlocal': this machine has {cores} cores, too few for {n} ranks of "
            f"{measured.threads_per_rank} thread(s)"
        )
    rank_file = local_rank_device_path()
    if not rank_file.is_file():
        raise TopologyError(
            f"no calibration of this machine's ranks ({rank_file} does not exist): run `gnomon calibrate --collectives`"
        )
    device = load_device(str(rank_file))
    curves = {name: tuple((b, s) for b, s, _ in points) for name, points in measured.points.items()}
    latency, bandwidth = _link_of(curves, measured.ranks)
    return System(
        name=f"{n}xlocal",
        device=device,
        devices_per_node=n,
        nodes=1,
        intra_node=Link(measured.backend, bandwidth, latency),
        inter_node=None,
        collective_efficiency=1.0,
        calibrated=True,
        source=measured.source,
        sync_s=measured.sync_s,
        measured=curves,
        measured_ranks=measured.ranks,
        embedding_group_s=measured.embedding_group_s,
        embedding_step_s=measured.embedding_step_s,
        embedding_pooled_byte_s=measured.embedding_pooled_byte_s,
        send_receive_share=measured.send_receive_share,
    )


def _link_of(curves: Mapping[str, Sequence[tuple[int, float]]], ranks: int) -> tuple[float, float]:
    """The latency and bandwidth the all-reduce measurements fit (shown as the system's link)."""
    from gnomon.cost.collectives import fit_latency_bandwidth

    points = curves.get("all_reduce") or next(iter(curves.values()), ())
    if len(points) < 2:
        return 0.0, float("inf")
    return fit_latency_bandwidth("all_reduce" if "all_reduce" in curves else next(iter(curves)), points, ranks)
