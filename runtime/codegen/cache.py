"""The on-disk cache of compiled kernels: shared libraries keyed by their IR and the machine.

A key hashes the lowered kernel's MLIR text with what else decides the machine code: the CPU
(model and feature flags, since LLVM compiles for the host), the torch-mlir (MLIR/LLVM) build,
gnomon's codegen version and the link command. Entries are written to a temporary name and
renamed into place, so processes that compile the same kernel at once never see a partial file.

Nothing is loaded that the cache did not write under that name: an entry ends with a trailer, the
SHA-256 of its name and its library's bytes, checked before the library is opened (a truncated,
garbled or swapped library would crash the process or compute another kernel's results). The
checksum travels inside the entry, so one rename publishes the library and its checksum together;
the dynamic loader maps only the segments the ELF headers name and never reads the trailer. A bad
entry is removed with a warning and rebuilt; an unusable cache directory is replaced, with a
warning, by a temporary one for the rest of the process.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import warnings
from functools import cache
from pathlib import Path

from gnomon.errors import GnomonError, GnomonWarning
from gnomon.files import write_atomically
from gnomon.machine import host_identity

CODEGEN_VERSION = 2
"""Bump whenever the lowering, the pipeline or the entries' format changes what is cached for the same IR. (The
tuning database keys its schedules by `kernel_tuned_schedules.database.FORMAT` instead: the kernel's IR, before
lowering.)"""

_MAGIC = b"\ngnomon-sha256:"
_TRAILER = len(_MAGIC) + 64
"""Bytes after the library: the magic, then the hex SHA-256 of the entry's name and the library."""


class KernelCacheError(GnomonError):
    """Neither the kernel cache nor a temporary directory can hold compiled kernels, or an entry cannot be written."""


def configured_directory() -> Path:
    """`$GNOMON_CACHE_DIR`, else `$XDG_CACHE_HOME/gnomon/kernels`, else `~/.cache/gnomon/kernels`."""
    explicit = os.environ.get("GNOMON_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "gnomon" / "kernels"


def cache_directory() -> Path:
    """The configured directory (`configured_directory`), created if need be; if it cannot hold files, a
    temporary directory of this process, after a warning that names the configured one and why."""
    return _usable(configured_directory())


@cache
def _usable(directory: Path) -> Path:
    problem = _problem(directory)
    if problem is None:
        return directory
    try:
        temporary = Path(tempfile.mkdtemp(prefix="gnomon-kernels-"))
    except OSError as error:
        raise KernelCacheError(
            f"kernel cache {directory} is unusable ({problem}), and so is a temporary directory ({error.strerror})"
        ) from error
    atexit.register(shutil.rmtree, temporary, ignore_errors=True)
    warnings.warn(
        f"kernel cache {directory} is unusable ({problem}); compiling kernels into {temporary} for this process only",
        GnomonWarning,
        stacklevel=2,
    )
    return temporary


def _problem(directory: Path) -> str | None:
    """Why `directory` cannot hold cache entries, or None: it is created if missing, then written to."""
    if directory.exists() and not directory.is_dir():
        return "it is not a directory"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create it: {error.strerror}"
    try:
        descriptor, probe = tempfile.mkstemp(dir=directory, prefix=".probe-")
    except OSError as error:
        return f"cannot write into it: {error.strerror}"
    os.close(descriptor)
    os.unlink(probe)
    return None


def machine_identity() -> str:
    """This machine (`gnomon.machine.host_identity`) and gnomon's code generator."""
    return f"{host_identity()}\ncodegen {CODEGEN_VERSION}"


def cache_key(mlir_text: str, link_command: str) -> str:
    digest = hashlib.sha256()
    for part in (mlir_text, link_command, machine_identity()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _checksum(name: str, library: bytes) -> bytes:
    # The name is hashed too: another entry's file copied over this one fails the check.
    return hashlib.sha256(name.encode() + b"\0" + library).hexdigest().encode()


def write_entry(path: Path, library: bytes) -> None:
    """Store the shared library `library` as the cache entry `path`, with its checksum, atomically."""
    try:
        write_atomically(path, library + _MAGIC + _checksum(path.name, library))
    except OSError as error:
        raise KernelCacheError(f"cannot write kernel cache entry {path}: {error.strerror}") from error


def verified_entry(path: Path) -> bool:
    """Whether `path` holds the entry `write_entry` wrote there, whole; only then may it be loaded.

    False when there is no entry; a damaged or foreign one is removed after a warning, for the caller to rebuild."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    except OSError as error:
        problem = f"is unreadable ({error.strerror})"
    else:
        library, magic, checksum = data[:-_TRAILER], data[-_TRAILER:-64], data[-64:]
        if magic == _MAGIC and checksum == _checksum(path.name, library):
            return True
        problem = "fails its checksum (truncated, damaged or another kernel's library)"
    warnings.warn(f"kernel cache entry {path} {problem}; rebuilding it", GnomonWarning, stacklevel=2)
    with contextlib.suppress(OSError):
        path.unlink()
    return False
