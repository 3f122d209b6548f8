"""The tuning database: the schedule `gnomon tune` measured fastest for each generated kernel, on disk.

An entry is keyed by the kernel (its body and signature as printed, without its name or schedule), the machine
(`gnomon.machine.host_identity`: the CPU model and flags, the MLIR build) and `FORMAT`, so a kernel that recurs in
another model finds its entry, and another machine or MLIR finds none. An entry is one
JSON file: the winning schedule as IR text, and what was measured (every trial's predicted and measured time), so
that a user can see why. Entries are written atomically; one that does not read (damaged, edited, from another
version) is ignored with a warning and tuned again.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from xdsl.dialects.builtin import StringAttr

from gnomon.dialects import kernel
from gnomon.dialects.kernel import ScheduleAttr
from gnomon.errors import GnomonError, GnomonWarning
from gnomon.files import write_atomically
from gnomon.machine import host_identity

__all__ = ["Entry", "Trial", "TuningDatabase", "kernel_key", "tuning_directory"]

FORMAT = 1
"""Bump when an entry's fields change, or when code generation changes what a kernel's schedule means."""


def tuning_directory() -> Path:
    """`$GNOMON_TUNING_DIR`, else `$XDG_CACHE_HOME/gnomon/tuning`, else `~/.cache/gnomon/tuning`."""
    explicit = os.environ.get("GNOMON_TUNING_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gnomon" / "tuning"


def kernel_key(kernel_func: kernel.FuncOp) -> str:
    """What identifies a kernel to the database: its IR without name or schedule, and the machine."""
    anonymous = kernel_func.clone()
    anonymous.sym_name = StringAttr("kernel")
    anonymous.schedule = None
    digest = hashlib.sha256()
    for part in (str(anonymous), host_identity(), f"tuning {FORMAT}"):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class Trial:
    """One schedule tried: the cost model's prediction and, if it was measured, its time (min of medians)."""

    schedule: str
    predicted_s: float
    measured_s: float | None = None
    error: str | None = None
    """Why it was dropped: it did not compile, or its results differ from the default schedule's."""


@dataclass(frozen=True)
class Entry:
    """The tuning of one kernel."""

    kernel: str
    """The kernel's name where it was tuned (for people; the key identifies it)."""
    schedule: str
    """The schedule chosen: the fastest measured, unless it was within the noise of the default."""
    default: str
    default_s: float
    best_s: float
    trials: tuple[Trial, ...]

    @property
    def speedup(self) -> float:
        return self.default_s / self.best_s if self.best_s > 0 else 1.0


def parse_schedule(text: str) -> ScheduleAttr:
    """A `#kernel.schedule<...>` from its IR text; a GnomonError when it is not one."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    from gnomon.dialects.kernel import Kernel

    context = Context()
    context.load_dialect(Builtin)
    context.load_dialect(Kernel)
    try:
        attribute = Parser(context, text).parse_attribute()
        attribute.verify()
    except Exception as error:  # xDSL raises several types for malformed text
        raise GnomonError(f"{text!r} is not a kernel schedule: {str(error).strip().splitlines()[-1]}") from error
    if not isinstance(attribute, ScheduleAttr):
        raise GnomonError(f"{text!r} is not a kernel schedule")
    return attribute


class TuningDatabase:
    """Entries in a directory, one JSON file per kernel key."""

    def __init__(self, directory: Path | None = None):
        self.directory = directory if directory is not None else tuning_directory()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def lookup(self, key: str) -> tuple[Entry, ScheduleAttr] | None:
        """The entry for `key` and its schedule, or None (no entry, or one that does not read: warned)."""
        path = self.path(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as error:
            warnings.warn(f"tuning entry {path} is unreadable ({error.strerror}); ignoring it", GnomonWarning, 2)
            return None
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            trials = tuple(Trial(**trial) for trial in data["trials"])
            entry = Entry(
                str(data["kernel"]),
                str(data["schedule"]),
                str(data["default"]),
                float(data["default_s"]),
                float(data["best_s"]),
                trials,
            )
            return entry, parse_schedule(entry.schedule)
        except (ValueError, KeyError, TypeError, GnomonError) as error:
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            warnings.warn(f"tuning entry {path} does not read ({detail}); ignoring it", GnomonWarning, 2)
            return None

    def check_writable(self) -> None:
        """A GnomonError naming the directory unless entries can be written into it (checked before tuning starts,
        not after its first kernel's minutes)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(self.directory / ".probe", b"")
            (self.directory / ".probe").unlink()
        except OSError as error:
            raise GnomonError(f"cannot write the tuning database {self.directory}: {error.strerror}") from error

    def store(self, key: str, entry: Entry) -> None:
        data = {"format": FORMAT, **asdict(entry), "trials": [asdict(t) for t in entry.trials]}
        try:
            write_atomically(self.path(key), json.dumps(data, indent=1).encode())
        except OSError as error:
            raise GnomonError(f"cannot write tuning entry {self.path(key)}: {error.strerror}") from error


def best_trial(trials: Sequence[Trial]) -> Trial | None:
    measured = [t for t in trials if t.measured_s is not None and t.error is None]
    return min(measured, key=lambda t: t.measured_s or 0.0) if measured else None
