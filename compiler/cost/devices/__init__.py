"""Devices as data: what the cost model knows about a machine, read from a TOML file.

gnomon ships files for common GPUs and a generic CPU (`available_devices()`). They say
`calibrated = false`: their figures come from vendor datasheets (and, where a datasheet is silent,
from published microbenchmarks or typical values, as each file's `source` says), so times predicted
from them are analytical, not measured. A calibration writes a measured file with `save_device`.

A device file:

    name = "h100"
    kind = "gpu"                  # "cpu" or "gpu"
    calibrated = false
    source = "NVIDIA H100 Tensor Core GPU datasheet ..."
    cores = 132                   # SMs on a GPU, cores on a CPU
    launch_overhead_s = 4e-6      # the runtime's cost to launch one kernel
    dispatch_overhead_s = 1e-5    # PyTorch eager's cost to dispatch one op

    [peak_flops]                  # FLOP/s per dtype: tensor cores where the dtype uses them
    fp32 = 6.7e13                 # fp32 is required; fp64, tf32, fp16, bf16, int8 as the device has them

    [[memory]]                    # innermost first; the last level is DRAM (HBM on a GPU)
    name = "l1"
    capacity_bytes = 262144
    bandwidth_bytes_per_s = 3.3e13  # over the whole device
    per_core = true               # the capacity is per core (SM); default false

    [interconnect]                # optional: the link between two devices
    name = "nvlink4"
    bandwidth_bytes_per_s = 9e11
    latency_s = 2e-6

    [efficiency]                  # optional: factors of the analytical models fitted to this device
    gemm = 0.8                    # (keys: gnomon.cost.analytical.Efficiency)

    [steadiness]                  # optional: how steady the machine was while a calibration measured it
    others_busy = 0.02            # (keys: gnomon.calibrate.STEADINESS)

    [call_warm_s]                 # optional: measured fixed cost of a warm call, per library function
    "aten.layer_norm" = 2.1e-05   # (others: the [efficiency] table's library_call_warm_s)

    [eager_training]              # optional: eager's host costs in a training step beyond dispatch
    autograd_node_s = 3.6e-06     # (keys: gnomon.cost.eager_training.DEFAULTS)
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast, get_args

from gnomon.errors import GnomonError

DeviceKind = Literal["cpu", "gpu"]

DEVICE_DIR = Path(__file__).parent
"""Where the shipped device files live (package data)."""


class DeviceError(GnomonError):
    """A device is unknown, or its file is missing or malformed, or lacks a figure the cost model needs."""


class UnknownDeviceError(DeviceError):
    """A device name that names no shipped device file."""


class DeviceFileError(DeviceError):
    """A device file that does not exist, is not TOML, or misses or mistypes a key."""


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy."""

    name: str
    capacity_bytes: int
    """Per core (SM) if `per_core`, else for the whole device."""
    bandwidth_bytes_per_s: float
    """Over the whole device (all cores together)."""
    per_core: bool = False
    """Private to each core (L1, shared memory); false for levels all cores share (L2, L3, DRAM)."""


@dataclass(frozen=True)
class Interconnect:
    """The link between two devices of this kind (NVLink, PCIe)."""

    name: str
    bandwidth_bytes_per_s: float
    latency_s: float


TYPICAL_HOST_BRANCH_S: dict[str, float] = {"cpu": 1e-05, "gpu": 2e-05}
"""A host decision's cost where a device file does not give it: gnomon's host runtime starting a sub-schedule on a
CPU; a synchronization, a device-to-host copy and the relaunch on a GPU (typical values, not measured)."""


@dataclass(frozen=True)
class Device:
    """A device's figures, as the cost model uses them."""

    name: str
    kind: DeviceKind
    calibrated: bool
    """True for figures measured on the machine; false for datasheet figures."""
    peak_flops: dict[str, float]
    """Peak FLOP/s per dtype key (`fp32`, `tf32`, `fp16`, `bf16`, `int8`, `fp64`)."""
    cores: int
    memory: tuple[MemoryLevel, ...]
    """Innermost first; the last is DRAM."""
    launch_overhead_s: float
    dispatch_overhead_s: float
    """Seconds PyTorch eager takes to dispatch one op from Python, beyond its kernel."""
    module_call_s: float = 0.0
    """Seconds eager spends in each `nn.Module` call beyond its forward's own code (`Module.__call__`: hook checks,
    forward lookup); 0 in files written before it was measured."""
    host_branch_s: float = 0.0
    """Seconds one decision of data-dependent control flow on the host costs beyond the kernels: reading the
    predicate back (on a GPU, a synchronization and a device-to-host copy, and the device idle until the next
    launch) and starting the next sub-schedule; in files written before it was measured, the typical value for the
    device's kind (`TYPICAL_HOST_BRANCH_S`)."""
    interconnect: Interconnect | None = None
    source: str = ""
    """Where the figures come from (a datasheet, a calibration run)."""
    efficiency: dict[str, float] = field(default_factory=dict[str, float])
    """Fitted factors of the analytical models; absent ones take the models' defaults."""
    steadiness: dict[str, float] = field(default_factory=dict[str, float])
    """How steady a calibration's machine was (`gnomon.calibrate`: other processes' CPU share, the spread of its
    rounds); empty for datasheet figures."""
    call_warm_s: dict[str, float] = field(default_factory=dict[str, float])
    """Seconds a warm call of a library function takes beyond the runtime's launch and its kernel, per function
    (`gnomon.cost.calls.library_call_s`), as a calibration measured them; the others take `library_call_warm_s`."""
    eager_training: dict[str, float] = field(default_factory=dict[str, float])
    """PyTorch eager's host seconds in a training step beyond its ops' dispatch (`gnomon.cost.eager_training`:
    autograd's recording and engine, the optimizer's Python), as a calibration measured them; absent ones take
    that module's defaults."""

    @property
    def dram(self) -> MemoryLevel:
        return self.memory[-1]

    @property
    def last_cache(self) -> MemoryLevel:
        """The level inside main memory (main memory itself on a device that lists no cache)."""
        return self.memory[max(len(self.memory) - 2, 0)]

    @property
    def provenance(self) -> str:
        """How far to trust predictions made from this device, in words."""
        if self.calibrated:
            return f"{self.name}: calibrated figures (measured on this machine)"
        return f"{self.name}: datasheet figures, not measured; predicted times are analytical"

    def capacity(self, level: MemoryLevel) -> int:
        """The bytes `level` holds over the whole device: a per-core level's capacity on every core."""
        return level.capacity_bytes * (self.cores if level.per_core else 1)

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for a dtype key; a DeviceError if the file lists none for it."""
        if dtype not in self.peak_flops:
            listed = ", ".join(sorted(self.peak_flops))
            raise DeviceError(f"device {self.name} lists no peak_flops for {dtype} (it lists {listed})")
        return self.peak_flops[dtype]


def available_devices() -> tuple[str, ...]:
    """The names of the shipped device files."""
    return tuple(sorted(path.stem for path in DEVICE_DIR.glob("*.toml")))


LOCAL = "local"
"""The name of this machine's device: the file the last `gnomon calibrate` wrote."""


class NoCalibrationError(DeviceError):
    """`local` was asked for, but this machine has not been calibrated."""


def local_device_path() -> Path:
    """Where `gnomon calibrate` writes this machine's device: `$GNOMON_CACHE_DIR/local.toml`, else
    `$XDG_CACHE_HOME/gnomon/local.toml`, else `~/.cache/gnomon/local.toml`."""
    explicit = os.environ.get("GNOMON_CACHE_DIR")
    if explicit:
        return Path(explicit) / "local.toml"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gnomon" / "local.toml"


def load_device(name_or_path: str) -> Device:
    """A shipped device by name (`h100`), `local` (the last calibration), or a device file by path (anything
    ending in .toml or with a `/`)."""
    if name_or_path == LOCAL:
        path = local_device_path()
        if not path.is_file():
            raise NoCalibrationError(
                f"no calibration of this machine ({path} does not exist): run `gnomon calibrate` first"
            )
    elif name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise DeviceFileError(f"device file {path} does not exist")
    else:
        path = DEVICE_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            known = ", ".join(available_devices())
            raise UnknownDeviceError(
                f"unknown device '{name_or_path}'; known devices: {known}, local (or give the path of a .toml file)"
            )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise DeviceFileError(f"device file {path}: not valid TOML: {error}") from error
    return _device(_Table(path, "", data))


def save_device(device: Device, path: str | Path) -> None:
    """Write `device` as a TOML file that `load_device` reads back equal."""
    Path(path).write_text(device_toml(device))


def device_toml(device: Device) -> str:
    """The TOML text of a device file."""
    lines = [
        f"name = {_toml(device.name)}",
        f"kind = {_toml(device.kind)}",
        f"calibrated = {_toml(device.calibrated)}",
        f"source = {_toml(device.source)}",
        f"cores = {_toml(device.cores)}",
        f"launch_overhead_s = {_toml(device.launch_overhead_s)}",
        f"dispatch_overhead_s = {_toml(device.dispatch_overhead_s)}",
        f"module_call_s = {_toml(device.module_call_s)}",
        f"host_branch_s = {_toml(device.host_branch_s)}",
        "",
        "[peak_flops]",
        *(f"{_key(k)} = {_toml(v)}" for k, v in device.peak_flops.items()),
    ]
    for level in device.memory:
        lines += [
            "",
            "[[memory]]",
            f"name = {_toml(level.name)}",
            f"capacity_bytes = {_toml(level.capacity_bytes)}",
            f"bandwidth_bytes_per_s = {_toml(level.bandwidth_bytes_per_s)}",
            f"per_core = {_toml(level.per_core)}",
        ]
    if device.interconnect is not None:
        link = device.interconnect
        lines += [
            "",
            "[interconnect]",
            f"name = {_toml(link.name)}",
            f"bandwidth_bytes_per_s = {_toml(link.bandwidth_bytes_per_s)}",
            f"latency_s = {_toml(link.latency_s)}",
        ]
    if device.efficiency:
        lines += ["", "[efficiency]", *(f"{_key(k)} = {_toml(v)}" for k, v in device.efficiency.items())]
    if device.steadiness:
        lines += ["", "[steadiness]", *(f"{_key(k)} = {_toml(v)}" for k, v in device.steadiness.items())]
    if device.call_warm_s:
        lines += ["", "[call_warm_s]", *(f"{_key(k)} = {_toml(v)}" for k, v in device.call_warm_s.items())]
    if device.eager_training:
        lines += ["", "[eager_training]", *(f"{_key(k)} = {_toml(v)}" for k, v in device.eager_training.items())]
    return "\n".join(lines) + "\n"


def _toml(value: str | bool | int | float) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # JSON's string escapes are all valid in TOML basic strings
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return repr(value)  # int, or a float: repr gives TOML's syntax, `inf` included


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


# ---- reading, with errors that name the file and the key ----


@dataclass(frozen=True)
class _Table:
    """A TOML table and where it sits, so that each error names the file and the full key."""

    path: Path
    prefix: str
    data: Mapping[str, object]

    def _error(self, key: str, problem: str) -> DeviceFileError:
        return DeviceFileError(f"device file {self.path}: {problem} '{self.prefix}{key}'")

    def value(self, key: str) -> object:
        if key not in self.data:
            raise self._error(key, "missing key")
        return self.data[key]

    def string(self, key: str) -> str:
        value = self.value(key)
        if not isinstance(value, str):
            raise self._error(key, "expected a string at")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool:
        if default is not None and key not in self.data:
            return default
        value = self.value(key)
        if not isinstance(value, bool):
            raise self._error(key, "expected true or false at")
        return value

    def number(self, key: str, positive: bool = False) -> float:
        """A float; `positive` for the figures the models divide by (peaks, bandwidths, efficiencies)."""
        value = self.value(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (positive and value == 0):
            raise self._error(key, "expected a positive number at" if positive else "expected a non-negative number at")
        return float(value)

    def integer(self, key: str) -> int:
        value = self.value(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._error(key, "expected a positive integer at")
        return value

    def table(self, key: str) -> _Table:
        value = self.value(key)
        if not isinstance(value, dict):
            raise self._error(key, "expected a table at")
        return _Table(self.path, f"{self.prefix}{key}.", cast(dict[str, object], value))

    def tables(self, key: str) -> list[_Table]:
        value = self.value(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise self._error(key, "expected a non-empty array of tables ([[...]]) at")
        entries = cast(list[dict[str, object]], value)
        return [_Table(self.path, f"{self.prefix}{key}[{i}].", entry) for i, entry in enumerate(entries)]

    def positive_numbers(self) -> dict[str, float]:
        return {key: self.number(key, positive=True) for key in self.data}

    def numbers(self) -> dict[str, float]:
        return {key: self.number(key) for key in self.data}


def _device(top: _Table) -> Device:
    kind = top.string("kind")
    if kind not in get_args(DeviceKind):
        raise DeviceFileError(f"device file {top.path}: 'kind' must be cpu or gpu, got {kind!r}")
    peak_flops = top.table("peak_flops")
    peak_flops.number("fp32", positive=True)  # required: the cost models run non-matrix ops at the fp32 rate
    memory = tuple(
        MemoryLevel(
            level.string("name"),
            level.integer("capacity_bytes"),
            level.number("bandwidth_bytes_per_s", positive=True),
            level.boolean("per_core", default=False),
        )
        for level in top.tables("memory")
    )
    interconnect = None
    if "interconnect" in top.data:
        link = top.table("interconnect")
        interconnect = Interconnect(
            link.string("name"), link.number("bandwidth_bytes_per_s", positive=True), link.number("latency_s")
        )
    efficiency = top.table("efficiency").positive_numbers() if "efficiency" in top.data else {}
    steadiness = top.table("steadiness").numbers() if "steadiness" in top.data else {}
    call_warm_s = top.table("call_warm_s").positive_numbers() if "call_warm_s" in top.data else {}
    eager_training = top.table("eager_training").numbers() if "eager_training" in top.data else {}
    return Device(
        name=top.string("name"),
        kind=cast(DeviceKind, kind),
        calibrated=top.boolean("calibrated"),
        peak_flops=peak_flops.positive_numbers(),
        cores=top.integer("cores"),
        memory=memory,
        launch_overhead_s=top.number("launch_overhead_s"),
        dispatch_overhead_s=top.number("dispatch_overhead_s"),
        module_call_s=top.number("module_call_s") if "module_call_s" in top.data else 0.0,
        host_branch_s=top.number("host_branch_s") if "host_branch_s" in top.data else TYPICAL_HOST_BRANCH_S[kind],
        interconnect=interconnect,
        source=top.string("source"),
        efficiency=efficiency,
        steadiness=steadiness,
        call_warm_s=call_warm_s,
        eager_training=eager_training,
    )
