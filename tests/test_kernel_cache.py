"""The kernel cache loads only what it wrote: a damaged or swapped entry is rebuilt after a warning, an unusable
directory is replaced by a temporary one after a warning, and the kernels' results stay right throughout.

Libraries are memoized per path within a process, so each check reads its entries from a fresh copy of a filled
cache, as a later process would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.dialects import kernel
from gnomon.errors import GnomonWarning
from gnomon.runtime.codegen import compilation_count, compile_kernel

KERNEL = """kernel.func @{op}_kernel(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {{kind = "generated",
    schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 1>}} {{
  %y = graph.{op} %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  kernel.yield %y : tensor<4x8xf32>
}}"""

X = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
EXPECTED = {"relu": np.maximum(X, 0), "neg": -X}
"""Two kernels of one signature: either library runs with the other's arguments."""

CHECKSUM = "fails its checksum (truncated, damaged or another kernel's library); rebuilding it"


def kernel_op(op: str) -> kernel.FuncOp:
    parsed = next(iter(Parser(gnomon_context(), KERNEL.format(op=op)).parse_module().ops))
    assert isinstance(parsed, kernel.FuncOp)
    return parsed


def run(op: str) -> tuple[bool, np.ndarray]:
    """Whether the kernel of `op` came from the cache, and its result on X."""
    compiled = compile_kernel(kernel_op(op))
    result = np.empty_like(X)
    compiled.bind([X], [result])()
    return compiled.from_cache, result


def gnomon_warnings(record: pytest.WarningsRecorder) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, GnomonWarning)]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A cache holding the relu and the neg kernels: each op's entry."""
    directory = tmp_path_factory.mktemp("filled")
    entries: dict[str, Path] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GNOMON_CACHE_DIR", str(directory))
        for op in EXPECTED:
            before = set(directory.iterdir())
            run(op)
            (entries[op],) = set(directory.iterdir()) - before
    return entries


def copy_cache(cache: Path, to: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of `cache` at `to`, made this process's cache."""
    shutil.copytree(cache, to)
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(to))
    return to


def assert_served_from_disk(cache: Path, to: Path, monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    """A copy of `cache` gives `op`'s kernel without compiling it and without a warning."""
    copy_cache(cache, to, monkeypatch)
    before = compilation_count()
    with warnings.catch_warnings():
        warnings.simplefilter("error", GnomonWarning)
        from_cache, result = run(op)
    assert from_cache
    assert compilation_count() == before
    np.testing.assert_array_equal(result, EXPECTED[op])


def test_whole_entries_load_without_compiling(
    filled: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for op in EXPECTED:
        assert_served_from_disk(filled[op].parent, tmp_path / op, monkeypatch, op)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda data: data[: len(data) // 2],
    "garbled": lambda data: data[:1000] + bytes(b ^ 0x5A for b in data[1000:1100]) + data[1100:],
    "empty": lambda data: b"",
    "random": lambda data: np.random.default_rng(0).bytes(len(data)),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_entry_is_rebuilt_after_a_warning(
    damage: str, filled: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = copy_cache(filled["relu"].parent, tmp_path / "cache", monkeypatch)
    entry = cache / filled["relu"].name
    entry.write_bytes(DAMAGE[damage](entry.read_bytes()))
    with pytest.warns(GnomonWarning) as record:
        from_cache, result = run("relu")
    assert gnomon_warnings(record) == [f"kernel cache entry {entry} {CHECKSUM}"]
    assert not from_cache
    np.testing.assert_array_equal(result, EXPECTED["relu"])
    assert_served_from_disk(cache, tmp_path / "again", monkeypatch, "relu")


def test_another_kernels_library_over_an_entry_is_rebuilt(
    filled: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A valid library of the same signature: loaded, it would compute -x where relu(x) is asked for.
    cache = copy_cache(filled["relu"].parent, tmp_path / "cache", monkeypatch)
    entry = cache / filled["relu"].name
    shutil.copyfile(cache / filled["neg"].name, entry)
    with pytest.warns(GnomonWarning) as record:
        from_cache, result = run("relu")
    assert gnomon_warnings(record) == [f"kernel cache entry {entry} {CHECKSUM}"]
    assert not from_cache
    np.testing.assert_array_equal(result, EXPECTED["relu"])
    assert_served_from_disk(cache, tmp_path / "again", monkeypatch, "relu")


def check_fallback(directory: Path, why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `directory` as the cache, kernels run right after one warning naming it and `why` it is unusable."""
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(directory))
    with pytest.warns(GnomonWarning) as record:
        results = {op: run(op)[1] for op in (*EXPECTED, *EXPECTED)}  # each op twice: one warning in all
    for op, result in results.items():
        np.testing.assert_array_equal(result, EXPECTED[op])
    (message,) = gnomon_warnings(record)
    head, _, temporary = message.removesuffix(" for this process only").partition("; compiling kernels into ")
    assert head == f"kernel cache {directory} is unusable ({why})"
    assert Path(temporary).is_dir()


def test_a_file_as_the_cache_directory_falls_back_to_a_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cache").write_text("not a directory")
    check_fallback(tmp_path / "cache", "it is not a directory", monkeypatch)


def test_a_directory_under_proc_falls_back_to_a_temporary_one(monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc file system")
    check_fallback(Path("/proc/gnomon-kernels"), "cannot create it: No such file or directory", monkeypatch)


_READ_ONLY_SCRIPT = """
import json, sys, warnings
import numpy as np
from xdsl.parser import Parser
from gnomon.context import gnomon_context
from gnomon.runtime.codegen import compile_kernel
x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
y = np.empty_like(x)
with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    compile_kernel(next(iter(Parser(gnomon_context(), sys.argv[1]).parse_module().ops))).bind([x], [y])()
print(json.dumps({"warnings": [str(w.message) for w in record], "correct": bool((y == np.maximum(x, 0)).all())}))
"""


def test_a_read_only_directory_falls_back_to_a_temporary_one() -> None:
    # Under /tmp rather than pytest's private tmp_path, so that the unprivileged user below can reach it.
    directory = Path(tempfile.mkdtemp(prefix="gnomon-read-only-"))
    directory.chmod(0o555)
    command = [sys.executable, "-c", _READ_ONLY_SCRIPT, KERNEL.format(op="relu")]
    if os.geteuid() == 0:  # root writes into any directory: run as nobody, for whom this one is read-only
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv to drop privileges")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = os.environ | {"GNOMON_CACHE_DIR": str(directory)}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    finally:
        directory.chmod(0o755)
        directory.rmdir()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["correct"]
    (message,) = (m for m in report["warnings"] if m.startswith("kernel cache "))
    assert message.startswith(
        f"kernel cache {directory} is unusable (cannot write into it: Permission denied); compiling kernels into "
    )


def test_a_kernel_mlir_rejects_is_one_line_internal_error_naming_it(tmp_path: Path) -> None:
    # Text the code generator should never emit; MLIR's multi-line diagnostic must not reach the user.
    from gnomon.passes.kernel_to_linalg import CodegenError
    from gnomon.runtime.codegen.jit import _compile  # pyright: ignore[reportPrivateUsage]

    with pytest.raises(CodegenError) as raised:
        _compile('func.func @k() { "test.unknown"() : () -> () }', tmp_path / "k.so", "relu_kernel")
    message = str(raised.value)
    assert message.startswith("internal error: MLIR rejected the generated kernel @relu_kernel: ")
    assert "\n" not in message
