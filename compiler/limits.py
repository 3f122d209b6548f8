"""What this machine's memory holds: a size beyond it is a one-line error before anything allocates it.

A shape such as `99999999999x3x8x8` (a typo) or a hand-edited `rt.arena_size` would otherwise reach NumPy,
which fails with a MemoryError deep in the runtime, or the system, which may start swapping first.
"""

from __future__ import annotations

import os

from gnomon.errors import TooLargeError

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def machine_memory() -> int:
    """The machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def human_bytes(count: int) -> str:
    """`count` bytes in the largest binary unit that keeps the number at least 1: `1.50 GiB`."""
    value = float(count)
    for unit in _UNITS[:-1]:
        if value < 1024:
            return f"{count} bytes" if unit == "bytes" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} {_UNITS[-1]}"


def check_fits(what: str, count: int) -> None:
    """`what` (`input 'x' [1, 3] of float32`, say) needs `count` bytes: no more than the machine's memory."""
    memory = machine_memory()
    if count > memory:
        raise TooLargeError(
            f"{what} needs {human_bytes(count)}, more than this machine's memory ({human_bytes(memory)})"
        )
