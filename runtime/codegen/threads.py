"""The threads generated kernels run on: a small pthread pool in C, and when splitting pays off.

A generated function computes the `part`-th of `parts` slices of its outer loop. A split call is
one ctypes call of `gnomon_parallel`, which hands the slices to persistent worker threads and
runs slices itself until all are done, so the dispatch costs microseconds and never touches the
GIL (a Python thread pool costs ~40 us per call here, more than a 200K-element kernel takes).
Workers call MLIR's packed entry point (`_mlir__mlir_ciface_<name>(void **args)`), which works
for any number of memref arguments. The pool's source is compiled with `cc` once per machine,
into the kernel cache.
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

from gnomon.runtime.codegen.cache import cache_directory, write_atomically

PART_WORK = 1 << 19
"""Scalar results a slice needs to be worth a thread. Alone, dispatching costs ~1 us and an 8K-element
add+relu slice (2 us) wins it back (bench/codegen.py); but after a library kernel, torch's OpenMP
workers still spin on the cores this pool needs, and a split kernel then waits 80-240 us for its
second thread (`gnomon calibrate`'s thread-pool handoff). A slice must outweigh that: 512K results."""

_POOL_SOURCE = r"""
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define PAUSE() __builtin_ia32_pause()
#else
#define PAUSE() ((void)0)
#endif

typedef void (*packed_fn)(void **);
enum { MAX_ARGS = 256, SPIN = 4000 };

/* One job at a time; a claim is (generation << 32 | next part), so a worker that wakes late
   cannot take a part of a later job with the arguments of an earlier one. */
static pthread_mutex_t dispatch = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int workers;
static uint32_t generation;
static packed_fn job_fn;
static void **job_args;
static int job_nargs;
static int64_t job_parts;
static _Atomic uint64_t claim;
static _Atomic int64_t done;

static void run_parts(uint32_t gen, packed_fn fn, void **shared, int nargs, int64_t parts) {
    void *args[MAX_ARGS + 2];
    int64_t part, count = parts;
    memcpy(args, shared, (size_t)nargs * sizeof(void *));
    args[nargs] = &part;
    args[nargs + 1] = &count;
    for (;;) {
        uint64_t seen = atomic_load(&claim);
        if ((uint32_t)(seen >> 32) != gen || (int64_t)(seen & 0xffffffffu) >= parts) return;
        if (!atomic_compare_exchange_weak(&claim, &seen, seen + 1)) continue;
        part = (int64_t)(seen & 0xffffffffu);
        fn(args);
        atomic_fetch_add(&done, 1);
    }
}

static void *worker(void *unused) {
    (void)unused;
    uint32_t seen = 0;
    for (;;) {
        /* Spin ~0.1 ms before sleeping: a model launches kernels back to back. */
        for (int i = 0; i < SPIN && __atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen; i++) PAUSE();
        pthread_mutex_lock(&wake_lock);
        while (generation == seen) pthread_cond_wait(&wake, &wake_lock);
        seen = generation;
        packed_fn fn = job_fn;
        void **args = job_args;
        int nargs = job_nargs;
        int64_t parts = job_parts;
        pthread_mutex_unlock(&wake_lock);
        run_parts(seen, fn, args, nargs, parts);
    }
    return 0;
}

void gnomon_parallel(packed_fn fn, void **args, int nargs, int64_t parts, int threads) {
    pthread_mutex_lock(&dispatch);
    for (; workers < threads - 1; workers++) {
        pthread_t thread;
        if (pthread_create(&thread, 0, worker, 0) != 0) break;
        pthread_detach(thread);
    }
    pthread_mutex_lock(&wake_lock);
    uint32_t gen = generation + 1;
    job_fn = fn;
    job_args = args;
    job_nargs = nargs;
    job_parts = parts;
    atomic_store(&done, 0);
    atomic_store(&claim, (uint64_t)gen << 32);
    __atomic_store_n(&generation, gen, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&wake_lock);
    run_parts(gen, fn, args, nargs, parts);
    /* The last parts are running on workers: spin, then yield in case one of them was preempted. */
    for (int i = 0; atomic_load(&done) < parts; i++) {
        if (i < SPIN) PAUSE();
        else sched_yield();
    }
    pthread_mutex_unlock(&dispatch);
}
"""


def cpu_count() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parts_for(work: int, most: int, threads: int) -> int:
    """How many slices to split a call into: one per thread, each of at least PART_WORK results."""
    return max(1, min(most, threads, work // PART_WORK))


@cache
def _pool(compiler: str) -> Any:
    """The pool's library, compiled into the kernel cache on first use."""
    key = hashlib.sha256((_POOL_SOURCE + compiler).encode()).hexdigest()[:16]
    path = cache_directory() / f"pool-{key}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
            source, shared = Path(scratch, "pool.c"), Path(scratch, "pool.so")
            source.write_text(_POOL_SOURCE)
            subprocess.run(
                [compiler, "-O2", "-shared", "-fPIC", "-pthread", "-o", str(shared), str(source)], check=True
            )
            write_atomically(path, shared.read_bytes())
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
