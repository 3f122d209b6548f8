"""The on-disk cache of compiled kernels: shared libraries keyed by their IR and the machine.

A key hashes the lowered kernel's MLIR text with what else decides the machine code: the CPU
(model and feature flags, since LLVM compiles for the host), the torch-mlir (MLIR/LLVM) build,
gnomon's codegen version and the link command. Entries are written to a temporary name and
renamed into place, so processes that compile the same kernel at once never see a partial file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
from functools import cache
from pathlib import Path

CODEGEN_VERSION = 1
"""Bump whenever the lowering or the pipeline changes the code generated for the same IR."""


def cache_directory() -> Path:
    """`$GNOMON_CACHE_DIR`, else `$XDG_CACHE_HOME/gnomon/kernels`, else `~/.cache/gnomon/kernels`."""
    explicit = os.environ.get("GNOMON_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "gnomon" / "kernels"


@cache
def machine_identity() -> str:
    """The CPU model and flags of this machine (Linux's /proc/cpuinfo), its architecture and the MLIR build."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line for line in info.read().splitlines() if line.startswith(("model name", "flags"))]
        cpu = "\n".join(dict.fromkeys(lines))
    except OSError:
        pass
    return "\n".join([platform.machine(), cpu, importlib.metadata.version("torch-mlir"), f"codegen {CODEGEN_VERSION}"])


def cache_key(mlir_text: str, link_command: str) -> str:
    digest = hashlib.sha256()
    for part in (mlir_text, link_command, machine_identity()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)
