"""The threads generated kernels run on: the OpenMP team torch's library kernels use.

A generated function computes the `part`-th of `parts` slices of its outer loop (how many:
`gnomon.cost.threads.parts_for`). A split call is one ctypes call of `gnomon_parallel`, a few lines
of C that hand the slices to libgomp's `GOMP_parallel`, the entry point `#pragma omp parallel`
compiles to. It is looked up in the process (torch loads its libgomp globally), so generated and
library kernels share one team of threads:

- a second pool would contend with torch's OpenMP workers, which spin for a while after each
  library kernel on the very cores the pool needs, so a split kernel would wait for its threads
  after every library call;
- the dispatch costs microseconds and never touches the GIL, where a Python thread pool's dispatch
  costs more than a small kernel computes.

The slices run MLIR's packed entry point (`_mlir__mlir_ciface_<name>(void **args)`), which works for
any number of memref arguments. Without libgomp in the process the slices run on the calling thread.
The source is compiled with `cc` once per machine, into the kernel cache.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache, partial
from pathlib import Path
from typing import Any

from gnomon.runtime.codegen.cache import CODEGEN_VERSION, cache_directory, verified_entry, write_entry

_POOL_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef void (*packed_fn)(void **);
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
enum { MAX_ARGS = 256 };

struct job {
    packed_fn fn;
    void **args;
    int nargs;
    int64_t parts;
    _Atomic int64_t next;
};

/* Each thread of the team claims slices until none is left. */
static void run_parts(void *data) {
    struct job *job = data;
    void *args[MAX_ARGS + 2];
    int64_t part, count = job->parts;
    memcpy(args, job->args, (size_t)job->nargs * sizeof(void *));
    args[job->nargs] = &part;
    args[job->nargs + 1] = &count;
    while ((part = atomic_fetch_add(&job->next, 1)) < count) job->fn(args);
}

void gnomon_parallel(packed_fn fn, void **args, int nargs, int64_t parts, int threads) {
    static gomp_parallel_fn gomp_parallel;
    static int looked_up;
    if (!looked_up) {
        gomp_parallel = (gomp_parallel_fn)dlsym(RTLD_DEFAULT, "GOMP_parallel");
        looked_up = 1;
    }
    struct job job = {fn, args, nargs, parts, 0};
    if (gomp_parallel != 0 && threads > 1) gomp_parallel(run_parts, &job, (unsigned)threads, 0);
    else run_parts(&job);
}
"""


def cpu_count() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@cache
def _pool(compiler: str) -> Any:
    """The pool's library, compiled into the kernel cache on first use.

    It imports torch first, which loads libgomp globally, where `gnomon_parallel` looks up `GOMP_parallel` on its
    first call; importing torch here rather than with the module keeps it out of processes that split no call."""
    import torch  # noqa: F401  # pyright: ignore[reportUnusedImport]

    key = hashlib.sha256(f"{_POOL_SOURCE}{compiler}{CODEGEN_VERSION}".encode()).hexdigest()[:16]
    path = cache_directory() / f"pool-{key}.so"
    if not verified_entry(path):
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
            source, shared = Path(scratch, "pool.c"), Path(scratch, "pool.so")
            source.write_text(_POOL_SOURCE)
            subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(shared), str(source), "-ldl"], check=True)
            write_entry(path, shared.read_bytes())
    library = ctypes.CDLL(str(path))
    parallel = library.gnomon_parallel
    parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int]
    parallel.restype = None
    return parallel


class ParallelCall:
    """A zero-argument call running a kernel's packed entry point over `parts` slices on the pool."""

    __slots__ = ("_args", "_call", "_keep")

    def __init__(self, compiler: str, packed: int, descriptors: Sequence[ctypes.Structure], parts: int, threads: int):
        count = len(descriptors)
        # The packed entry point takes a pointer to each argument: here, to each descriptor's address.
        values = (ctypes.c_void_p * count)(*(ctypes.addressof(d) for d in descriptors))
        self._args = (ctypes.c_void_p * count)(
            *(ctypes.addressof(values) + i * ctypes.sizeof(ctypes.c_void_p) for i in range(count))
        )
        self._keep = (descriptors, values)
        self._call = partial(_pool(compiler), packed, self._args, count, parts, threads)

    def __call__(self) -> None:
        self._call()
