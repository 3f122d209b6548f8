"""`gnomon compile` and `gnomon run`: outputs against onnxruntime, saved files, the profile and its
kernel cache, and the exact error lines for bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_onnx

import gnomon


def run(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"GNOMON_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "gnomon.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_onnx("conv_block", tmp_path_factory.mktemp("model") / "conv_block.onnx")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel_cache")


def expected_output(model: Path, x: np.ndarray) -> np.ndarray:
    # The reference semantics (onnxruntime 1.31 reads ONNX IR <= 13; onnx 1.23 writes 14).
    return gnomon.compile(model, backend="reference")(x)[0]


def test_run_saves_outputs_keyed_by_name(model: Path, cache: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    result = run(
        "run",
        str(model),
        "--inputs",
        str(tmp_path / "in.npz"),
        "--save-outputs",
        str(tmp_path / "out.npz"),
        cache=cache,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("y ")
    with np.load(tmp_path / "out.npz") as saved:
        assert list(saved.files) == ["y"]
        np.testing.assert_allclose(saved["y"], expected_output(model, x), rtol=1e-5, atol=1e-6)


def test_random_inputs_are_seeded(model: Path, cache: Path) -> None:
    first, second = (json.loads(run("run", str(model), "--json", "--seed", "7", cache=cache).stdout) for _ in range(2))
    assert first["outputs"] == second["outputs"]
    other = json.loads(run("run", str(model), "--json", "--seed", "8", cache=cache).stdout)
    assert other["outputs"][0]["mean"] != first["outputs"][0]["mean"]


def test_reference_backend_agrees(model: Path, cache: Path, tmp_path: Path) -> None:
    native = json.loads(run("run", str(model), "--json", cache=cache).stdout)["outputs"][0]
    reference_run = run("run", str(model), "--json", "--backend", "reference", "--dump-ir", str(tmp_path), cache=cache)
    reference = json.loads(reference_run.stdout)["outputs"][0]
    assert native["shape"] == reference["shape"] == [1, 10]
    assert native["mean"] == pytest.approx(reference["mean"], rel=1e-5, abs=1e-6)
    # The reference backend interprets the graph program: only the import pipeline runs.
    dumps = ["00-import.mlir", "01-torch-to-graph.mlir", "02-graph-shape-inference.mlir", "03-graph-canonicalize.mlir"]
    assert sorted(p.name for p in tmp_path.iterdir()) == dumps


def test_profile_lists_kernels_and_the_second_run_compiles_nothing(tmp_path: Path) -> None:
    import torch

    from gnomon.models import TransformerBlock

    block = TransformerBlock()
    path = tmp_path / "block.pt2"
    torch.export.save(torch.export.export(block, block.example_inputs()), str(path))
    cache = tmp_path / "cache"
    first = json.loads(run("run", str(path), "--profile", "--json", cache=cache).stdout)["profile"]
    second = json.loads(run("run", str(path), "--profile", "--json", cache=cache).stdout)["profile"]
    assert first["generated_kernels_compiled"] > 0
    assert first["generated_kernels_from_cache"] == 0
    assert second["generated_kernels_compiled"] == 0
    assert second["generated_kernels_from_cache"] == first["generated_kernels_compiled"]
    assert {k["kind"] for k in second["kernels"]} >= {"generated", "aten.scaled_dot_product_attention"}
    assert second["arena_lower_bound_bytes"] <= second["arena_bytes"]
    text = run("run", str(path), "--profile", cache=cache).stdout
    assert "memory plan: arena" in text
    assert "from the disk cache" in text


def test_compile_writes_a_program_that_runs_without_the_model(model: Path, cache: Path, tmp_path: Path) -> None:
    program = tmp_path / "conv_block.mlir"
    assert run("compile", str(model), "-o", str(program), "--verify-each", cache=cache).returncode == 0
    assert "rt.launch" in program.read_text()
    x = np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    result = run(
        "run",
        str(program),
        "--inputs",
        str(tmp_path / "in.npz"),
        "--save-outputs",
        str(tmp_path / "out.npz"),
        cache=cache,
    )
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_allclose(saved["y"], expected_output(model, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"z": np.zeros((1, 3, 16, 16), np.float32)}, "has no array 'x' (the model's inputs: x)"),
        (
            {"x": np.zeros((1, 3, 8, 8), np.float32)},
            "input 'x': expected float32 of shape [1, 3, 16, 16], got float32 of shape [1, 3, 8, 8]",
        ),
        (
            {"x": np.zeros((1, 3, 16, 16), np.int64)},
            "input 'x': expected float32 of shape [1, 3, 16, 16], got int64 of shape [1, 3, 16, 16]",
        ),
    ],
)
def test_bad_inputs_are_one_line(
    model: Path, cache: Path, tmp_path: Path, arrays: dict[str, np.ndarray], message: str
) -> None:
    np.savez(tmp_path / "in.npz", **arrays)
    result = run("run", str(model), "--inputs", str(tmp_path / "in.npz"), cache=cache)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("gnomon: error: ")
    assert lines[0].endswith(message)


def test_missing_inputs_file_and_bad_program(model: Path, cache: Path, tmp_path: Path) -> None:
    result = run("run", str(model), "--inputs", str(tmp_path / "nothing.npz"), cache=cache)
    assert result.stderr.splitlines() == [f"gnomon: error: no such inputs file: {tmp_path / 'nothing.npz'}"]
    (tmp_path / "bad.mlir").write_text("func.func @f( {")
    result = run("run", str(tmp_path / "bad.mlir"), cache=cache)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"gnomon: error: {tmp_path / 'bad.mlir'} is not a gnomon program: ")
