"""Run torch-mlir's steps in a forked child, so that its crashes cannot kill the user's process.

torch-mlir's C++ aborts (`LLVM ERROR`, failed asserts) or segfaults on some models, e.g. ONNX's
uint16 QuantizeLinear. The child does the risky work and sends back its result; before each risky
step it sends a progress line ("importing QuantizeLinear node 'q'"), so that when it dies by a
signal the parent can name the step that killed it. `fork` is cheap here, torch and torch-mlir are
already imported, and the child shares the parent's model objects without pickling them.

The child's stderr goes to a file: the parent takes the crash's reason from it (`LLVM ERROR: ...`)
instead of letting LLVM's multi-line dump reach the user.

The price of `fork`: the parent's private pages are copy-on-write until written, so each heap page the
parent writes after an import takes one minor fault (a few dozen per call in a program's first calls,
none once they settle); benchmarks and calibration keep the fastest of several medians, which these
first calls do not set.
"""

from __future__ import annotations

import copyreg
import faulthandler
import fcntl
import os
import pickle
import select
import signal
import struct
import tempfile
import traceback
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

from gnomon.errors import ImporterCrashError, UnsupportedOpsError

STALL_TIMEOUT_S = 600.0
"""A child that sends nothing for this long is stuck (a lock inherited from a thread of the
parent, say): it is killed and the import fails, rather than the user's process hanging."""

Progress = Callable[[str], None]
"""What the child's work calls with a description of each risky step before it starts it."""

T = TypeVar("T")

_PROGRESS, _RESULT = b"P", b"R"
_PIPE_SIZE = 1 << 20
_HEADER = struct.Struct("<cQ")

# Its constructor takes the ops, not the message, so the default exception pickling cannot rebuild it.
copyreg.pickle(UnsupportedOpsError, lambda error: (UnsupportedOpsError, (error.ops,), error.__dict__))


@dataclass
class _Report:
    """What the parent read from the child: the steps it started, and its outcome if it sent one."""

    steps: list[str]
    outcome: tuple[bool, Any] | None
    stalled: bool = False


def run_isolated(work: Callable[[Progress], T], source: str, stall_timeout: float = STALL_TIMEOUT_S) -> T:
    """`work(progress)`, run in a forked child; its result or exception (both pickled) come back.

    A child killed by a signal, or silent for `stall_timeout` seconds, is an ImporterCrashError that names
    `source` and the last step the child started."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as stderr:
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _child(work, write_end, stderr)
        os.close(write_end)
        try:
            report = _read(read_end, pid, stall_timeout)
        except BaseException:  # interrupted (Ctrl-C, say): the child must not outlive the wait for it
            os.kill(pid, signal.SIGKILL)
            raise
        finally:
            os.close(read_end)
            _, status = os.waitpid(pid, 0)
        stderr.seek(0)
        reason = _crash_reason(stderr.read().decode(errors="replace"))
    if report.outcome is None:
        raise _death(source, status, report, reason, stall_timeout)
    succeeded, value = report.outcome
    if not succeeded:
        raise value
    return value


def _child(work: Callable[[Progress], Any], channel: int, stderr: BinaryIO) -> None:
    """Runs in the child: never returns, and never runs the parent's exit handlers or flushes its buffers."""
    try:
        # The parent reports a crash in one line: no Python traceback dump from here (`-X faulthandler`, pytest).
        faulthandler.disable()
        os.dup2(stderr.fileno(), 2)

        def progress(step: str) -> None:
            _send(channel, _PROGRESS, step.encode())

        try:
            outcome: tuple[bool, Any] = (True, work(progress))
        except Exception as error:
            error.add_note(f"(in the child process that ran torch-mlir)\n{traceback.format_exc()}")  # for --debug
            outcome = (False, error)
        try:
            payload = pickle.dumps(outcome)
        except Exception:  # an unpicklable exception: its traceback still says what went wrong
            payload = pickle.dumps((False, RuntimeError(traceback.format_exc())))
        _send(channel, _RESULT, payload)
    finally:
        os._exit(0)


def _send(channel: int, tag: bytes, payload: bytes) -> None:
    for data in (memoryview(_HEADER.pack(tag, len(payload))), memoryview(payload)):
        while data:
            data = data[os.write(channel, data) :]


def _read(channel: int, pid: int, stall_timeout: float) -> _Report:
    """Reads the child's messages until it closes the pipe (done or dead) or stalls (then kills it)."""
    with suppress(OSError):  # a larger pipe carries a large result in fewer round trips; the default works too
        fcntl.fcntl(channel, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    report = _Report([], None)
    while (header := _read_exactly(channel, _HEADER.size, stall_timeout)) is not None:
        tag, size = _HEADER.unpack(header)
        payload = _read_exactly(channel, size, stall_timeout)
        if payload is None:
            break
        if tag == _PROGRESS:
            report.steps.append(payload.decode())
        else:
            report.outcome = pickle.loads(payload)
    if report.outcome is None and not _closed(channel):
        os.kill(pid, signal.SIGKILL)
        report.stalled = True
    return report


def _read_exactly(channel: int, size: int, stall_timeout: float) -> bytearray | None:
    """`size` bytes from the pipe; None if it closes first or sends nothing for `stall_timeout` seconds."""
    data = bytearray(size)
    view, done = memoryview(data), 0
    while done < size:
        ready, _, _ = select.select([channel], [], [], stall_timeout)
        if not ready:
            return None
        count = os.readv(channel, [view[done:]])
        if count == 0:
            return None
        done += count
    return data


def _closed(channel: int) -> bool:
    """Whether the child closed the pipe (exited or died), as opposed to stalling with it open."""
    ready, _, _ = select.select([channel], [], [], 0)
    return bool(ready) and not os.read(channel, 1)


def _crash_reason(stderr: str) -> str:
    """LLVM's fatal error line (`LLVM ERROR: ...`) or a failed assertion, from the dead child's stderr."""
    for line in stderr.splitlines():
        if line.startswith("LLVM ERROR:") or "Assertion" in line:
            return line.strip()
    return ""


def _death(source: str, status: int, report: _Report, reason: str, stall_timeout: float) -> ImporterCrashError:
    """The error for a child that sent no result."""
    if report.stalled:
        what = f"made no progress for {stall_timeout:g} s"
    elif os.WIFSIGNALED(status):
        what = f"crashed ({signal.Signals(os.WTERMSIG(status)).name})"
    else:
        what = f"exited with status {os.WEXITSTATUS(status)}"
    return ImporterCrashError(source, what, report.steps[-1] if report.steps else "", reason)
