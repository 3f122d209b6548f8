"""The time of a collective over a system's links: all-reduce, all-gather, reduce-scatter and all-to-all.

Message sizes follow nccl-tests: an all-reduce's message is the tensor each rank reduces; an all-gather's the gathered
output (ranks x each rank's part); a reduce-scatter's its input; an all-to-all's what each rank sends in all.

Datasheet systems use the latency-bandwidth model of the algorithms NCCL runs. A step costs the link's latency `a`;
bytes move at `efficiency x bandwidth` per device and direction (`B`). On `n` ranks with message `M`:

- ring all-reduce: 2(n-1) steps and 2(n-1)/n M bytes through each device's link (a reduce-scatter, then an
  all-gather); tree all-reduce: 2 ceil(log2 n) steps and 2M bytes (NCCL's double binary tree). The faster is taken,
  as NCCL's tuner does: the tree for small messages on many ranks.
- all-gather and reduce-scatter: a ring, n-1 steps and (n-1)/n M bytes.
- all-to-all: pairwise exchange, n-1 steps; (n-1)/n M bytes leave each device.

Across N nodes of p devices, each with a NIC of its own (as DGX nodes have), the reductions and gathers are
hierarchical, as NCCL's multi-ring and tree runs are in effect: an all-reduce is a reduce-scatter within each node,
an all-reduce of M/p across nodes between devices of the same place in their nodes (each over its own NIC) and an
all-gather within each node; an all-gather is one of M/p across nodes then one of M within each node (a
reduce-scatter the reverse). An all-to-all sends the share of its message bound for other nodes, (n-p)/n M, over the
network and the rest over the node's links, at the same time.

An uneven all-to-all (TorchRec's, where devices hold different tables) is priced as the uniform one whose busiest
rank carries as much: a rank's load is the larger of what it sends and receives, and `System.send_receive_share` of
the smaller (0 over full-duplex links; near 1 between ranks on one host, whose cores copy both directions).

A measured system (`gnomon calibrate --collectives`) interpolates its measurements: log-log between measured sizes,
the smallest size's time below them (latency-bound), and the last two sizes' slope above. At a rank count other
than the one measured, the measured time is scaled by the ratio of the model's times at the two counts, with a
latency and a bandwidth fitted to the measurements.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gnomon.cost.topology import Link, System, TopologyError

__all__ = ["COLLECTIVES", "CollectiveTime", "collective_s", "fit_latency_bandwidth", "model_s", "uneven_all_to_all_s"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@dataclass(frozen=True)
class CollectiveTime:
    """One collective's predicted seconds, and how they were reached."""

    collective: str
    ranks: int
    message_bytes: int
    seconds: float
    algorithm: str
    """`ring`, `tree`, `pairwise`, `hierarchical` (across nodes), or `measured` (interpolated from a calibration)."""


def _terms(collective: str, ranks: int) -> dict[str, tuple[float, float]]:
    """Each algorithm's (steps, bytes per message byte through a device's link) on `ranks` ranks."""
    n = ranks
    if collective == "all_reduce":
        return {"ring": (2 * (n - 1), 2 * (n - 1) / n), "tree": (2 * math.ceil(math.log2(n)), 2.0)}
    if collective in ("all_gather", "reduce_scatter"):
        return {"ring": (n - 1, (n - 1) / n)}
    if collective == "all_to_all":
        return {"pairwise": (n - 1, (n - 1) / n)}
    raise TopologyError(f"unknown collective '{collective}'; known: {', '.join(COLLECTIVES)}")


def model_s(collective: str, message_bytes: float, ranks: int, latency_s: float, bandwidth: float) -> tuple[float, str]:
    """The latency-bandwidth model's seconds on one kind of link, and the algorithm it takes."""
    if ranks <= 1:
        return 0.0, "none"
    times = {
        name: steps * latency_s + share * message_bytes / bandwidth
        for name, (steps, share) in _terms(collective, ranks).items()
    }
    algorithm = min(times, key=times.__getitem__)
    return times[algorithm], algorithm


def collective_s(system: System, collective: str, message_bytes: int, ranks: int | None = None) -> CollectiveTime:
    """Seconds `collective` of `message_bytes` takes on `ranks` of `system`'s devices (default: all of them), from
    the first device on (devices fill one node before the next)."""
    n = system.ranks if ranks is None else ranks
    if n < 1 or n > system.ranks:
        raise TopologyError(f"system {system.name} has {system.ranks} devices, not {n}")
    if message_bytes < 0:
        raise TopologyError(f"a {collective} of {message_bytes} bytes")
    _terms(collective, max(n, 2))  # names an unknown collective even on one rank
    if n == 1 or message_bytes == 0:
        return CollectiveTime(collective, n, message_bytes, 0.0, "none")
    if system.measured:
        return CollectiveTime(
            collective, n, message_bytes, _measured_s(system, collective, message_bytes, n), "measured"
        )
    seconds, algorithm = _analytical_s(system, collective, message_bytes, n)
    return CollectiveTime(collective, n, message_bytes, seconds, algorithm)


def uneven_all_to_all_s(system: System, sent: Sequence[Sequence[float]]) -> float:
    """Seconds of an all-to-all on `len(sent)` ranks in which rank a sends `sent[a][b]` bytes to rank b: the uniform
    all-to-all's whose ranks each carry the busiest rank's load, max(sent, received) + h x min(sent, received) for
    the system's `send_receive_share` h (a uniform all-to-all's rank carries (1 + h) x what it sends)."""
    n = len(sent)
    if n < 2:
        return 0.0
    share = system.send_receive_share
    load = 0.0
    for a in range(n):
        out = sum(sent[a][b] for b in range(n) if b != a)
        into = sum(sent[b][a] for b in range(n) if b != a)
        load = max(load, max(out, into) + share * min(out, into))
    if load <= 0:
        return 0.0
    return collective_s(system, "all_to_all", round(load / (1 + share) * n / (n - 1)), n).seconds


def _bandwidth(system: System, link: Link) -> float:
    return system.collective_efficiency * link.bandwidth_bytes_per_s


def _analytical_s(system: System, collective: str, message_bytes: int, n: int) -> tuple[float, str]:
    per_node = system.devices_per_node
    intra = system.intra_node
    if n <= per_node:
        return model_s(collective, message_bytes, n, intra.latency_s, _bandwidth(system, intra))
    inter = system.inter_node
    assert inter is not None  # load_system refuses several nodes without a link between them
    nodes = math.ceil(n / per_node)
    fast, slow = _bandwidth(system, intra), _bandwidth(system, inter)

    def within(kind: str, size: float) -> float:
        return model_s(kind, size, per_node, intra.latency_s, fast)[0]

    def across(kind: str, size: float) -> float:
        return model_s(kind, size, nodes, inter.latency_s, slow)[0]

    if collective == "all_reduce":
        return within("reduce_scatter", message_bytes) + across("all_reduce", message_bytes / per_node) + within(
            "all_gather", message_bytes
        ), "hierarchical"
    if collective in ("all_gather", "reduce_scatter"):
        return across(collective, message_bytes / per_node) + within(collective, message_bytes), "hierarchical"
    local = (per_node - 1) / n * message_bytes / fast
    remote = (n - per_node) / n * message_bytes / slow
    return (per_node - 1) * intra.latency_s + (n - per_node) * inter.latency_s + max(local, remote), "pairwise"


def _measured_s(system: System, collective: str, message_bytes: int, n: int) -> float:
    points = system.measured.get(collective)
    if not points:
        raise TopologyError(
            f"system {system.name}: {collective} was not measured (run `gnomon calibrate --collectives`)"
        )
    seconds = _interpolate(points, message_bytes)
    measured_ranks = system.measured_ranks
    if n == measured_ranks:
        return seconds
    latency, bandwidth = fit_latency_bandwidth(collective, points, measured_ranks)
    at_n, _ = model_s(collective, message_bytes, n, latency, bandwidth)
    at_measured, _ = model_s(collective, message_bytes, measured_ranks, latency, bandwidth)
    return seconds * at_n / at_measured


def _interpolate(points: Sequence[tuple[int, float]], size: float) -> float:
    sizes = [p[0] for p in points]
    if size <= sizes[0]:
        return points[0][1]
    if size >= sizes[-1] or len(points) == 1:
        if len(points) == 1:
            return points[0][1] * size / sizes[0]
        (s0, t0), (s1, t1) = points[-2], points[-1]
        return t1 + (size - s1) * max(0.0, (t1 - t0) / (s1 - s0))
    i = bisect.bisect_right(sizes, size)
    (s0, t0), (s1, t1) = points[i - 1], points[i]
    if size == s0:
        return t0
    w = math.log(size / s0) / math.log(s1 / s0)
    return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))


def fit_latency_bandwidth(collective: str, points: Sequence[tuple[int, float]], ranks: int) -> tuple[float, float]:
    """The link latency and bandwidth whose model (`model_s`'s first algorithm) fits `points` best: least squares
    of the time relative to each measurement, so that small messages count as much as large ones."""
    steps, share = next(iter(_terms(collective, ranks).values()))
    # t = steps * a + share * M / B is linear in (a, 1/B); minimize sum(((pred - t) / t)^2).
    rows = [(steps / t, share * m / t) for m, t in points]
    saa = sum(r[0] * r[0] for r in rows)
    sab = sum(r[0] * r[1] for r in rows)
    sbb = sum(r[1] * r[1] for r in rows)
    ya = sum(r[0] for r in rows)
    yb = sum(r[1] for r in rows)
    det = saa * sbb - sab * sab
    if det <= 0:
        raise TopologyError(f"{collective}: too few distinct sizes measured to fit a latency and a bandwidth")
    latency = (ya * sbb - yb * sab) / det
    inverse_bandwidth = (saa * yb - sab * ya) / det
    if inverse_bandwidth <= 0:
        raise TopologyError(f"{collective}: the measured times do not grow with the message size")
    return max(0.0, latency), 1.0 / inverse_bandwidth
