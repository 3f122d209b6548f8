"""Checks of the files a command reads and writes, so that a bad path is one line that names it.

The CLI checks its paths before the (slow) import, so a typo in `-o` fails at once; `writing` then turns
what can still go wrong while writing (a full disk, say) into the same kind of line.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

from gnomon.errors import FileAccessError


def check_readable(path: Path, what: str = "file") -> None:
    """`path` is a regular file whose first byte reads; `what` names it in the message (`no such inputs file: x`)."""
    try:
        mode = path.stat().st_mode
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise FileAccessError(f"no such {what}: {path}") from error
        if error.errno == errno.ELOOP:
            raise FileAccessError(f"cannot read {path}: a symlink loop") from error
        raise FileAccessError(f"cannot read {path}: {error.strerror}") from error
    if stat.S_ISDIR(mode):
        raise FileAccessError(f"{path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise FileAccessError(f"{path} is not a regular file")
    try:
        with path.open("rb") as stream:
            stream.read(1)
    except OSError as error:
        raise FileAccessError(f"cannot read {path}: {error.strerror}") from error


def check_writable(path: Path, flag: str) -> None:
    """A file can be created or replaced at `path`, which the option `flag` (`-o`, say) gave."""
    prefix = f"cannot write {flag} {path}"
    if path.is_dir():
        raise FileAccessError(f"{prefix}: it is a directory; name a file in it")
    parent = path.parent
    try:
        mode = parent.stat().st_mode
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise FileAccessError(f"{prefix}: no such directory: {parent}") from error
        raise FileAccessError(f"{prefix}: {error.strerror}") from error
    if not stat.S_ISDIR(mode):
        raise FileAccessError(f"{prefix}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise FileAccessError(f"{prefix}: permission denied")


@contextmanager
def writing(path: str | Path, what: str = "", mode: Literal["w", "wb"] = "w") -> Generator[IO[Any]]:
    """`open(path, mode)`, with an OSError while opening or writing raised as one line that names the file and
    `what` gave it (an option such as `-o`)."""
    prefix = f"cannot write {what} {path}" if what else f"cannot write {path}"
    try:
        with open(path, mode) as stream:
            yield stream
    except OSError as error:
        raise FileAccessError(f"{prefix}: {error.strerror or error}") from error


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory, then rename it: a reader never sees
    a partial file, and writers racing on one path leave one whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)
