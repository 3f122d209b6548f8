"""The `gnomon` and `gnomon-opt` command lines: output, exit status and the exact error lines users see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gnomon.bundled import model_path

FILECHECK_INPUTS = Path(__file__).parent.parent / "filecheck" / "import" / "Inputs"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gnomon.cli", *args], capture_output=True, text=True, check=False)


def make_onnx(kind: str, out: Path) -> Path:
    subprocess.run([sys.executable, str(FILECHECK_INPUTS / "make_onnx.py"), kind, str(out)], check=True)
    return out


def test_summary_of_resnet50() -> None:
    result = run("summary", str(model_path("light_resnet50")))
    assert result.returncode == 0, result.stderr
    assert "input  gpu_0/data_0: tensor<1x3x224x224xf32>" in result.stdout
    assert "graph.conv" in result.stdout
    lines = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()[4:]}
    assert lines["graph.conv"] == 53
    assert lines["graph.batch_norm"] == 53


def test_import_writes_a_file_that_gnomon_opt_reads(tmp_path: Path) -> None:
    model = make_onnx("conv_block", tmp_path / "m.onnx")
    out = tmp_path / "m.mlir"
    assert run("import", str(model), "-o", str(out)).returncode == 0
    opt = subprocess.run(
        [sys.executable, "-m", "gnomon.opt", str(out), "-p", "graph-canonicalize"], capture_output=True, text=True
    )
    assert opt.returncode == 0, opt.stderr
    assert "graph.linear" in opt.stdout
    assert "dialect_resources" in opt.stdout


def test_unsupported_ops_are_listed_once_each(tmp_path: Path) -> None:
    result = run("import", str(make_onnx("unsupported", tmp_path / "model.onnx")))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "gnomon: error: unsupported op onnx.Foo at node 'bar' in model.onnx",
        "gnomon: error: unsupported op onnx.Baz at node 'qux' in model.onnx",
    ]


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run("--debug", "import", str(make_onnx("unsupported", tmp_path / "model.onnx")))
    assert result.returncode != 0
    assert "Traceback" in result.stderr


def test_missing_file() -> None:
    result = run("import", "no/such/model.onnx")
    assert result.returncode == 2
    assert result.stderr == "gnomon: error: no such file: no/such/model.onnx\n"


def test_corrupt_onnx(tmp_path: Path) -> None:
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07garbage that is not a protobuf \xff\xfe")
    result = run("import", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"gnomon: error: {path} is not a valid ONNX model")
    assert len(result.stderr.splitlines()) == 1


def test_not_a_torchscript_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.pt"
    path.write_text("these are not weights")
    result = run("import", str(path), "--input-shape", "x=1x3")
    assert result.returncode == 2
    assert result.stderr.startswith(f"gnomon: error: {path} is not a loadable TorchScript file")
    assert len(result.stderr.splitlines()) == 1


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "model.txt"
    path.write_text("hello")
    result = run("import", str(path))
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: {path}: unknown model format (expected .onnx, .pt, .pth or .pt2)\n"


def test_input_shape_that_names_no_input(tmp_path: Path) -> None:
    model = make_onnx("conv_block", tmp_path / "m.onnx")
    result = run("import", str(model), "--input-shape", "image=1x3x16x16")
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: --input-shape names no input 'image' of {model}; inputs are: x\n"


def test_input_shape_of_the_wrong_rank(tmp_path: Path) -> None:
    model = make_onnx("conv_block", tmp_path / "m.onnx")
    result = run("import", str(model), "--input-shape", "x=1x3")
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: --input-shape x=1x3 has rank 2 but input 'x' of {model} has rank 4\n"


@pytest.mark.parametrize("text", ["x", "x=", "=1x2", "x=1xa", "x=-1x2"])
def test_malformed_input_shape(text: str, tmp_path: Path) -> None:
    result = run("import", str(make_onnx("conv_block", tmp_path / "m.onnx")), "--input-shape", text)
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: --input-shape {text!r} is not NAME=DIMS, e.g. x=1x3x224x224\n"


def test_gnomon_opt_reports_unsupported_torch_ops(tmp_path: Path) -> None:
    source = tmp_path / "t.mlir"
    source.write_text(
        '"func.func"() <{function_type = (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>, sym_name = "f"}> ({\n'
        '^bb0(%x: !torch.vtensor<[2],f32>):\n'
        '  %y = "torch.aten.frobnicate"(%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> loc("layer.0")\n'
        '  "func.return"(%y) : (!torch.vtensor<[2],f32>) -> ()\n'
        "}) : () -> ()\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "gnomon.opt", str(source), "--allow-unregistered-dialect", "-p", "torch-to-graph"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr == "gnomon-opt: error: unsupported op aten.frobnicate at node 'layer.0' in the input\n"
