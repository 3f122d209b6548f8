"""`gnomon run` on a compiled program edited by hand: each fault is one line that names the file and the op,
kernel or buffer at fault, with exit status 2, before any kernel is compiled or run."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gnomon.cli import main

W = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 4, 4, 4)


def add_relu_flatten(path: Path) -> Path:
    """y = flatten(relu(x + w)): one generated kernel over an input and a weight blob, and a view of its result."""
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "w"], ["a"], name="add"),
            helper.make_node("Relu", ["a"], ["r"], name="relu"),
            helper.make_node("Reshape", ["r", "shape"], ["y"], name="flatten"),
        ],
        "add_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(np.array([1, 64], np.int64), "shape")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The text `gnomon compile` writes for the model."""
    directory = tmp_path_factory.mktemp("program")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GNOMON_CACHE_DIR", str(directory / "cache"))
        assert main(["compile", str(add_relu_flatten(directory / "model.onnx")), "-o", str(directory / "p.mlir")]) == 0
    return (directory / "p.mlir").read_text()


def run(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, Path]:
    """`gnomon run` on `text` saved in tmp_path, with an empty kernel cache there: its status and the file."""
    path = tmp_path / "edited.rt.mlir"
    path.write_text(text)
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path / "cache"))
    return main(["run", str(path), *args]), path


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_the_unedited_program_runs(program: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    files = ["--inputs", str(tmp_path / "in.npz"), "--save-outputs", str(tmp_path / "out.npz")]
    status, _ = run(program, tmp_path, monkeypatch, *files)
    assert status == 0
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_allclose(saved["y"], np.maximum(x + W, 0).reshape(1, 64), rtol=1e-6)


FAULTS = {
    "view past its buffer": (
        ("rt.view %2 :", "rt.view %2 [8] :"),
        re.escape("rt.view: elements 8..72 of memref<1x64xf32> do not lie within memref<1x4x4x4xf32>"),
    ),
    "buffer past the arena": (
        ("rt.buffer 0 :", "rt.buffer 64 :"),
        re.escape("memory plan: buffer 0 (steps 0..1, bytes [64, 320)) exceeds the arena of 256 bytes"),
    ),
    "missing kernel": (
        ("rt.launch @add_relu_0", "rt.launch @missing"),
        re.escape("rt.launch: @missing is not a kernel.func"),
    ),
    "launch into an input": (
        ("outs(%2)", "outs(%0)"),
        re.escape("rt.launch @add_relu_0 writes its output 0 into input 0"),
    ),
    "launch into a constant": (
        ("outs(%2)", "outs(%1)"),
        r"rt\.launch @add_relu_0 writes its output 0 into the constant dense_resource<w_[0-9a-f]+>",
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_hand_edited_program_fails_in_one_line(
    fault: str, program: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (old, new), message = FAULTS[fault]
    status, path = run(edit(program, old, new), tmp_path, monkeypatch)
    assert status == 2
    assert re.fullmatch(f"gnomon: error: {re.escape(str(path))}: {message}\n", capsys.readouterr().err)
    assert not (tmp_path / "cache").exists()  # no kernel was compiled, let alone run


def blob_of(text: str) -> str:
    (blob,) = re.findall(r'w_[0-9a-f]+: "0x([0-9a-f]+)"', text)
    return blob


def test_truncated_blob_fails_in_one_line(
    program: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blob = blob_of(program)
    status, path = run(edit(program, blob, blob[: 8 + 32]), tmp_path, monkeypatch)
    assert status == 2
    # The blob is keyed again by its new content: the name starts with the file's.
    message = r"the constant dense_resource<w_[0-9a-f_]+> holds 16 bytes, memref<1x4x4x4xf32> needs 256"
    assert re.fullmatch(f"gnomon: error: {re.escape(str(path))}: {message}\n", capsys.readouterr().err)
    assert not (tmp_path / "cache").exists()


def test_garbled_blob_fails_in_one_line(
    program: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blob = blob_of(program)
    status, path = run(edit(program, blob, blob[:40] + "zz" + blob[42:]), tmp_path, monkeypatch)
    assert status == 2
    message = (
        r"the constant dense_resource<w_[0-9a-f_]+> does not hold valid data: "
        r"non-hexadecimal number found in fromhex\(\) arg at position 40"
    )
    assert re.fullmatch(f"gnomon: error: {re.escape(str(path))}: {message}\n", capsys.readouterr().err)
    assert not (tmp_path / "cache").exists()
