"""What this machine is, from Linux's files: its cores, data cache levels, memory size, CPU name and load."""

from __future__ import annotations

import os
import platform
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from gnomon.cost.devices import load_device

__all__ = [
    "CpuTimes",
    "busy_fraction",
    "cache_levels",
    "cores",
    "cpu_list_count",
    "cpu_name",
    "cpu_times",
    "dram_bytes",
    "others_busy",
]


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _size(text: str) -> int:
    """sysfs's cache sizes: `32K`, `1024K`, `32M`."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def cache_levels(cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> list[tuple[str, int, bool]]:
    """(name, capacity in bytes, per core) of each data cache level, innermost first, from sysfs."""
    levels: dict[int, tuple[str, int, bool]] = {}
    for index in sorted(cache_dir.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            capacity = _size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        levels[level] = (f"l{level}", capacity, cpu_list_count(shared) == 1)
    return [levels[level] for level in sorted(levels)]


def cpu_list_count(cpu_list: str) -> int:
    """How many CPUs a sysfs list such as `0-1,4` names."""
    count = 0
    for part in cpu_list.split(","):
        first, _, last = part.partition("-")
        count += int(last) - int(first) + 1 if last else 1
    return count


def dram_bytes() -> int:
    """The machine's memory (`/proc/meminfo`), else the generic CPU's."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return load_device("generic-cpu").dram.capacity_bytes


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def busy_fraction(seconds: float) -> float:
    """The share of all CPUs' time spent busy over the next `seconds` (Linux's /proc/stat; 0 elsewhere)."""
    before = cpu_times()
    time.sleep(seconds)
    after = cpu_times()
    if before is None or after is None or after.total <= before.total:
        return 0.0
    return (after.busy - before.busy) / (after.total - before.total)


@dataclass(frozen=True)
class CpuTimes:
    """CPU seconds so far: all CPUs busy (neither idle nor waiting for I/O), all CPUs in total, and this process's
    own (Linux's /proc/stat)."""

    busy: float
    total: float
    own: float


def cpu_times() -> CpuTimes | None:
    """The CPU seconds so far; None where /proc/stat cannot be read."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = sum(fields) / tick
    return CpuTimes(total - (fields[3] + fields[4]) / tick, total, usage.ru_utime + usage.ru_stime)


def others_busy(before: CpuTimes | None, after: CpuTimes | None) -> float:
    """The share of all CPUs' time that other processes used between two `cpu_times()` (0 where unknown): what
    took cores and caches away from a measurement that ran meanwhile."""
    if before is None or after is None or after.total <= before.total:
        return 0.0
    others = (after.busy - before.busy) - (after.own - before.own)
    return min(max(others / (after.total - before.total), 0.0), 1.0)
