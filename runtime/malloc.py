"""glibc malloc's thresholds, set once so that the library calls' per-call temporaries reuse memory.

ATen allocates a library call's temporaries with malloc on every call: oneDNN's copies of plain (NCHW) tensors in its
blocked layout and back, a functional result before it is copied into the arena. glibc serves an allocation above
its mmap threshold (128 KiB at start, then moved by the sizes freed) with a fresh mmap, returns it to the kernel at
free, and every 4 KiB page then faults in again on its first touch in the next call. Measured here: a depthwise
3x3 convolution of 8 x 32 x 32 x 32 took 2.3 ms, 736 page faults a call, against 0.35 ms with the thresholds set;
which calls fault depends on what the process allocated before, so the cost model could not tell either. Setting
the mmap and trim thresholds turns glibc's adjustment off and keeps freed memory in the heap for the next call.

It is process-wide, as an allocator preloaded for inference serving (jemalloc, tcmalloc) is; PyTorch eager in the
same process runs on it too. `GNOMON_MALLOC_TUNING=0` leaves glibc as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from gnomon.cost.eager import MMAP_THRESHOLD

__all__ = ["MMAP_THRESHOLD", "keep_freed_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_tuned: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's mmap threshold to `MMAP_THRESHOLD` and its trim threshold above it, once per process; whether
    they are set (False off glibc, or with `GNOMON_MALLOC_TUNING=0`)."""
    global _tuned
    if _tuned is None:
        _tuned = os.environ.get("GNOMON_MALLOC_TUNING", "1") != "0" and _set_thresholds()
    return _tuned


def _set_thresholds() -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD))
