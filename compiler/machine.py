"""What identifies this machine to what gnomon keeps on disk for it (compiled kernels, tuned schedules)."""

from __future__ import annotations

import importlib.metadata
import platform
from functools import cache

__all__ = ["host_identity"]


@cache
def host_identity() -> str:
    """The CPU model and flags of this machine (Linux's /proc/cpuinfo), its architecture and the MLIR build that
    compiles for it."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line for line in info.read().splitlines() if line.startswith(("model name", "flags"))]
        cpu = "\n".join(dict.fromkeys(lines))
    except OSError:
        pass
    return "\n".join([platform.machine(), cpu, importlib.metadata.version("torch-mlir")])
