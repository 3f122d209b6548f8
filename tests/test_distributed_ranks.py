"""`gnomon.runtime.distributed.run_ranks`: a function run on N spawned local ranks, rank 0's value returned, and
every way a rank can fail (an exception, a death without a word, no answer in time) one line of the caller's error
type that leaves no process behind, even when the parent itself is killed."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gnomon.errors import GnomonError
from gnomon.runtime.distributed import free_port, run_ranks


class _RanksError(GnomonError):
    pass


class _PlanError(GnomonError):
    pass


# The ranks' main functions, run in the spawned processes (so defined at module level).


def _returns(rank: int, plan: str) -> tuple[int, str]:
    return rank, plan


def _allocator_tuned(rank: int, plan: str) -> bool | None:
    from gnomon.runtime import malloc

    return malloc._tuned  # pyright: ignore[reportPrivateUsage]  # set before the rank's function, or None


def _raises(rank: int, plan: str) -> None:
    """Rank 1 raises the exception `plan` names; rank 0 waits for the parent to kill it."""
    if rank == 0:
        time.sleep(60)
    if plan == "ValueError":
        raise ValueError("bad input\nsecond line")
    raise _PlanError("plan error: the plan's own message")


def _killed(rank: int, plan: str) -> None:
    """Rank 1 is killed; rank 0 sees it gone and fails as a peer of a dead rank does (the symptom)."""
    pid_file = Path(plan) / "rank1.pid"
    if rank == 1:
        _write_pid(pid_file)
        os.kill(os.getpid(), signal.SIGKILL)
    while not pid_file.exists() or _alive(int(pid_file.read_text())):
        time.sleep(0.01)
    raise ConnectionResetError("connection reset by peer")


def _sleeps(rank: int, plan: str) -> None:
    """Writes its pid to the folder `plan`, then never answers."""
    _write_pid(Path(plan) / f"rank{rank}.pid")
    time.sleep(60)


def _unpicklable(rank: int, plan: str) -> object:
    return lambda: plan


def _exits(rank: int, plan: str) -> None:
    """Exits cleanly without returning: no value to send."""
    os._exit(0)


def _write_pid(path: Path) -> None:
    """Whole or not at all: a reader never sees a half-written pid."""
    path.with_suffix(".tmp").write_text(str(os.getpid()))
    path.with_suffix(".tmp").rename(path)


def _alive(pid: int) -> bool:
    """A zombie (dead, not yet reaped by its parent) is not alive."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _assert_no_rank_left() -> None:
    assert multiprocessing.active_children() == []


def test_returns_rank_zeros_value() -> None:
    assert run_ranks(_returns, "plan", 2, timeout_s=60, what="test", error=_RanksError) == (0, "plan")
    _assert_no_rank_left()


def test_ranks_run_on_the_allocator_gnomons_process_runs_on() -> None:
    """Freed memory kept for reuse (`gnomon.runtime.malloc`), as the cost model assumes: on glibc's own thresholds
    TorchRec's buffers faulted in afresh, step after step."""
    assert run_ranks(_allocator_tuned, "plan", 2, timeout_s=60, what="test", error=_RanksError) is True


@pytest.mark.parametrize(
    ("exception", "message"),
    [
        ("ValueError", "test: rank 1: ValueError: bad input"),
        ("_PlanError", "plan error: the plan's own message"),  # a GnomonError: its message as is
    ],
)
def test_a_rank_error_is_one_line_and_the_others_are_killed(exception: str, message: str) -> None:
    start = time.monotonic()
    with pytest.raises(_RanksError) as raised:
        run_ranks(_raises, exception, 2, timeout_s=60, what="test", error=_RanksError)
    assert str(raised.value) == message
    assert time.monotonic() - start < 30  # rank 0 sleeps for 60 s: it was killed, not waited for
    _assert_no_rank_left()


def test_a_dead_rank_is_named_before_its_peers_symptoms(tmp_path: Path) -> None:
    with pytest.raises(_RanksError, match=r"^test: rank 1 exited with code -9$"):
        run_ranks(_killed, str(tmp_path), 2, timeout_s=60, what="test", error=_RanksError)
    _assert_no_rank_left()


def test_no_result_within_the_timeout_kills_the_ranks(tmp_path: Path) -> None:
    with pytest.raises(_RanksError, match=r"^test: no result within timeout_s = 0.5 s$"):
        run_ranks(_sleeps, str(tmp_path), 2, timeout_s=0.5, what="test", error=_RanksError)
    _assert_no_rank_left()


def test_a_value_that_does_not_pickle_is_rank_zeros_error() -> None:
    with pytest.raises(_RanksError, match=r"^test: rank 0: \w+: .*pickle"):
        run_ranks(_unpicklable, "plan", 2, timeout_s=60, what="test", error=_RanksError)
    _assert_no_rank_left()


def test_ranks_that_exit_without_returning_are_one_line() -> None:
    with pytest.raises(_RanksError, match=r"^test: rank 0 exited without a result$"):
        run_ranks(_exits, "plan", 2, timeout_s=60, what="test", error=_RanksError)
    _assert_no_rank_left()


@pytest.mark.parametrize(("ranks", "timeout_s", "message"), [
    (0, 60.0, "test: ranks must be at least 1, got 0"),
    (2, 0.0, "test: timeout_s must be positive, got 0"),
])  # fmt: skip
def test_argument_errors(ranks: int, timeout_s: float, message: str) -> None:
    with pytest.raises(_RanksError) as raised:
        run_ranks(_returns, "plan", ranks, timeout_s=timeout_s, what="test", error=_RanksError)
    assert str(raised.value) == message


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_ranks_die_with_a_killed_parent(tmp_path: Path) -> None:
    """A parent killed by SIGKILL runs no `finally`: the kernel kills its ranks."""
    parent = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_distributed_ranks import _RanksError, _sleeps
        from gnomon.runtime.distributed import run_ranks
        run_ranks(_sleeps, {str(tmp_path)!r}, 2, timeout_s=60, what="test", error=_RanksError)
    """)
    process = subprocess.Popen([sys.executable, "-c", parent])
    try:
        pid_files = [tmp_path / f"rank{rank}.pid" for rank in range(2)]
        deadline = time.monotonic() + 25
        while not all(path.exists() for path in pid_files):
            assert process.poll() is None, "the parent exited before its ranks started"
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait()
    pids = [int(path.read_text()) for path in pid_files]
    deadline = time.monotonic() + 5
    while (survivors := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], "ranks outlived their killed parent"


def test_free_port_is_bindable() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", free_port()))
