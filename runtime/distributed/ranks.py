"""Running one function on N local ranks: one spawned process per rank, rank 0's return value, one line of error.

A parent that never outlives its ranks nor lets them outlive it: every way out of `run_ranks` (a result, an error,
Ctrl-C) kills the ranks still running, and on Linux the kernel kills them if the parent is killed itself. A rank
that fails, a rank that dies without a word and a run past its timeout are each one line of the caller's error type.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import queue
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from gnomon.errors import GnomonError
from gnomon.runtime.malloc import keep_freed_memory

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

__all__ = ["free_port", "rank_cores", "run_ranks"]

P = TypeVar("P")
R = TypeVar("R")

_REPORTED_EXIT = 1  # the exit code of a rank that caught its error and sent it to the parent
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# What a rank sends: ("done", rank 0's pickled value) or ("error", one line).
_Results: TypeAlias = "Queue[tuple[str, Any]]"


def free_port() -> int:
    """A port free now on 127.0.0.1 (the OS picks it), for the ranks to meet on: runs that overlap get different
    ones."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_cores(
    ranks: int, threads_per_rank: int, *, what: str, error: type[GnomonError]
) -> tuple[tuple[int, ...], ...]:
    """Each rank's own cores, this process's allowed cores split in order (ranks pin themselves to them), or
    `error(f"{what}: ...")` where there are too few."""
    available = (
        sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    )
    if ranks * threads_per_rank > len(available):
        raise error(
            f"{what}: {ranks} ranks of {threads_per_rank} thread(s) need {ranks * threads_per_rank} cores, "
            f"this process may use {len(available)}"
        )
    return tuple(tuple(available[r * threads_per_rank : (r + 1) * threads_per_rank]) for r in range(ranks))


def run_ranks(
    main: Callable[[int, P], R], plan: P, ranks: int, *, timeout_s: float, what: str, error: type[GnomonError]
) -> R:
    """Runs main(rank, plan) in `ranks` spawned processes and returns rank 0's value, once every rank has returned.
    `main` must be a module-level function (spawn pickles it by reference); `plan` and rank 0's value must pickle.

    Raises `error(f"{what}: ...")`, one line, for a rank's own exception ("{what}: rank 1: ValueError: ..."; a
    GnomonError keeps its message), a rank that died ("{what}: rank 1 exited with code -9", named before its peers'
    errors, which are its symptoms) or no result within timeout_s. The ranks never outlive the call."""
    if ranks < 1:
        raise error(f"{what}: ranks must be at least 1, got {ranks}")
    if timeout_s <= 0:
        raise error(f"{what}: timeout_s must be positive, got {timeout_s:g}")
    context = multiprocessing.get_context("spawn")
    results: _Results = context.Queue()
    processes = [
        context.Process(target=_rank_process, args=(main, rank, plan, os.getpid(), what, results), daemon=True)
        for rank in range(ranks)
    ]
    try:
        for process in processes:
            process.start()
        return pickle.loads(_collect(processes, results, timeout_s, what, error))
    finally:  # on any way out (an error, Ctrl-C), no rank may outlive the call
        for process in processes:
            if process.is_alive():
                process.kill()
            if process.pid is not None:
                process.join()
        results.close()


def _collect(
    processes: Sequence[BaseProcess], results: _Results, timeout_s: float, what: str, error: type[GnomonError]
) -> bytes:
    """Rank 0's pickled value, once every rank has exited cleanly; a one-line error for a failed or dead rank."""
    deadline = time.monotonic() + timeout_s
    value: bytes | None = None
    while value is None or any(process.exitcode is None for process in processes):
        if time.monotonic() > deadline:
            raise error(f"{what}: no result within timeout_s = {timeout_s:g} s")
        exited = all(process.exitcode is not None for process in processes)
        try:
            kind, payload = results.get(timeout=0.05)
        except queue.Empty:
            _raise_for_exits(processes, results, what, error)
            if exited:  # cleanly, and all they sent was in the queue before this get: rank 0 returned nothing
                raise error(f"{what}: rank 0 exited without a result") from None
            continue
        if kind == "error":
            raise _failure(processes, payload, what, error)
        value = payload
    _raise_for_exits(processes, results, what, error)
    return value


def _raise_for_exits(processes: Sequence[BaseProcess], results: _Results, what: str, error: type[GnomonError]) -> None:
    """Raises for a rank that exited with an error: with the message it sent, if it sent one."""
    if all(process.exitcode in (None, 0) for process in processes):
        return
    try:  # a rank that caught its error sent it before exiting
        kind, payload = results.get(timeout=0.1)
    except queue.Empty:
        kind, payload = "", None
    raise _failure(processes, payload if kind == "error" else None, what, error)


def _failure(processes: Sequence[BaseProcess], message: str | None, what: str, error: type[GnomonError]) -> GnomonError:
    """The error to report. A rank that died without a word (killed, crashed) is the cause, and its peers'
    errors (a connection reset by it) are symptoms: they may report before it is reaped, hence the short wait."""
    for _ in range(20 if message is not None else 1):
        for rank, process in enumerate(processes):
            if process.exitcode not in (None, 0, _REPORTED_EXIT):
                return error(f"{what}: rank {rank} exited with code {process.exitcode}")
        time.sleep(0.01)
    if message is not None:
        return error(message)
    rank = next(rank for rank, process in enumerate(processes) if process.exitcode not in (None, 0))
    return error(f"{what}: rank {rank} exited with code {processes[rank].exitcode}")


def _rank_process(
    main: Callable[[int, P], R], rank: int, plan: P, parent_pid: int, what: str, results: _Results
) -> None:
    """One rank's process: rank 0 sends ("done", its pickled value); a rank that fails sends ("error", line) and
    exits with _REPORTED_EXIT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it kills the ranks
    _die_with_parent(parent_pid)
    # On glibc's own thresholds (128 KiB at first, then moved by the sizes freed) a rank's large tensors were now
    # fresh mappings, now heap given back, faulted in page by page at their first touch, step after step: TorchRec's
    # sharded bags of 16 tables of 128 columns, 512 samples a rank, took 24-30 ms a step forward and backward, 13.7-14.8
    # ms with freed memory kept. The ranks run on the allocator gnomon's process runs on and its cost model assumes.
    keep_freed_memory()
    try:
        value = main(rank, plan)
        pickled = pickle.dumps(value) if rank == 0 else b""  # here: a value that does not pickle is rank 0's error
    except Exception as caught:
        results.put(("error", _one_line(caught, rank, what)))
        raise SystemExit(_REPORTED_EXIT) from None
    if rank == 0:
        results.put(("done", pickled))


def _one_line(caught: Exception, rank: int, what: str) -> str:
    lines = str(caught).strip().splitlines()
    if isinstance(caught, GnomonError) and lines:
        return lines[0]
    return f"{what}: rank {rank}: {type(caught).__name__}" + (f": {lines[0]}" if lines else "")


def _die_with_parent(parent_pid: int) -> None:
    """A parent killed by a signal never runs the `finally` that kills its ranks: on Linux the kernel does."""
    if sys.platform != "linux":
        return
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before the prctl
        os._exit(_REPORTED_EXIT)
