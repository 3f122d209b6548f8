"""The `gnomon` and `gnomon-opt` command lines: output, exit status and the exact error lines users see."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import make_onnx
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from gnomon.bundled import model_path
from gnomon.context import gnomon_context
from gnomon.dialects.graph.elementwise import ReluOp
from gnomon.errors import GnomonError
from gnomon.executable import lower
from gnomon.pipeline import PIPELINES
from gnomon.registry import PASSES


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gnomon.cli", *args], capture_output=True, text=True, check=False)


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
        "gnomon: error: unsupported op com.example.Foo at node 'bar' in model.onnx",
        "gnomon: error: unsupported op com.example.Baz at node 'qux' in model.onnx",
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
        "^bb0(%x: !torch.vtensor<[2],f32>):\n"
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


PRINTED_PIPELINE = [
    "import:    torch-to-graph,graph-shape-inference,graph-canonicalize",
    "inference: graph-predicate,graph-drop-dropout,graph-fold-batch-norm,graph-fold-constants,graph-canonicalize",
    "lowering:  graph-layout,graph-fuse,graph-to-kernel,kernel-to-rt,kernel-tuned-schedules",
]


@pytest.mark.parametrize("args", [(), ("model.onnx",)])
def test_compile_prints_its_pipelines_without_a_model(args: tuple[str, ...]) -> None:
    result = run("compile", *args, "--print-pipeline")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PRINTED_PIPELINE


def _opt(tool: str, *args: str) -> str:
    module = {"gnomon-opt": "gnomon.opt", "xdsl-opt": "xdsl.tools.xdsl_opt"}[tool]
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _lines(text: str) -> list[str]:
    """The printers of `gnomon` and of the opt drivers differ only in blank lines around the resources."""
    return [line for line in text.splitlines() if line]


def test_the_printed_pipelines_rerun_each_stage_of_compile_in_gnomon_opt_and_xdsl_opt(tmp_path: Path) -> None:
    model = make_onnx("conv_block", tmp_path / "m.onnx")
    dumps, program = tmp_path / "ir", tmp_path / "m.rt.mlir"
    result = run("compile", str(model), "-o", str(program), "--dump-ir", str(dumps))
    assert result.returncode == 0, result.stderr
    names = [
        "import",
        "torch-to-graph",
        "graph-shape-inference",
        "graph-canonicalize",
        "graph-predicate",
        "graph-drop-dropout",
        "graph-fold-batch-norm",
        "graph-fold-constants",
        "graph-canonicalize",
        "graph-layout",
        "graph-fuse",
        "graph-to-kernel",
        "kernel-to-rt",
        "kernel-tuned-schedules",
    ]
    assert sorted(p.name for p in dumps.iterdir()) == [f"{n:02d}-{name}.mlir" for n, name in enumerate(names)]
    pipelines = dict(line.split(":") for line in run("compile", "--print-pipeline").stdout.splitlines())
    # Each stage, from the dump before it, gives the dump after it; the dumps carry locations, which name weights.
    files = sorted(dumps.iterdir())
    stages = [("import", 0, 3, "xdsl-opt"), ("inference", 3, 8, "gnomon-opt"), ("lowering", 8, 13, "gnomon-opt")]
    for stage, before, after, tool in stages:
        flags = ["--allow-unregistered-dialect"] if stage == "import" else []  # torch-mlir's ops print generically
        rerun = _opt(tool, str(files[before]), *flags, "--print-debuginfo", "-p", pipelines[stage].strip())
        assert _lines(rerun) == _lines(files[after].read_text()), stage
    assert _lines(_opt("gnomon-opt", str(dumps / "13-kernel-tuned-schedules.mlir"))) == _lines(program.read_text())


def test_the_import_pipeline_reruns_with_the_model_files_dim_names(tmp_path: Path) -> None:
    model = make_onnx("dynamic_batch", tmp_path / "m.onnx")  # its batch dim is named "N"
    dumps = tmp_path / "ir"
    assert run("import", str(model), "--dump-ir", str(dumps)).returncode == 0
    pipelines = dict(line.split(":") for line in run("compile", "--print-pipeline").stdout.splitlines())
    flags = ["--allow-unregistered-dialect", "--print-debuginfo"]
    rerun = _opt("gnomon-opt", str(dumps / "00-import.mlir"), *flags, "-p", pipelines["import"].strip())
    assert 'tensor<?x10xf32, #graph.dims<["N", ""]>>' in rerun
    assert _lines(rerun) == _lines((dumps / "03-graph-canonicalize.mlir").read_text())


def test_dump_ir_into_a_file_is_one_line(tmp_path: Path) -> None:
    model = make_onnx("conv_block", tmp_path / "m.onnx")
    (tmp_path / "taken").write_text("")
    result = run("compile", str(model), "-o", str(tmp_path / "out.mlir"), "--dump-ir", str(tmp_path / "taken"))
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: cannot dump IR into {tmp_path / 'taken'}: it is not a directory\n"
    result = run("compile", str(model), "-o", str(tmp_path / "out.mlir"), "--dump-ir", str(tmp_path / "taken" / "ir"))
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: cannot dump IR into {tmp_path / 'taken' / 'ir'}: Not a directory\n"


@dataclass(frozen=True)
class BreakRelu(ModulePass):
    """A pass with a bug: it gives a relu a result type its operand contradicts."""

    name = "break-relu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        relu = next(o for o in op.walk() if isinstance(o, ReluOp))
        Rewriter.replace_value_with_new_type(relu.results[0], TensorType(f32, [3]))


def test_verify_each_names_the_pass_after_which_the_program_stopped_verifying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PASSES, "break-relu", lambda: BreakRelu)
    monkeypatch.setitem(PIPELINES, "inference", "graph-drop-dropout,break-relu,graph-canonicalize")
    text = """func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = graph.relu %x : (tensor<2xf32>) -> tensor<2xf32>
      func.return %y : tensor<2xf32>
    }"""
    detail = "graph.relu: result type tensor<3xf32> does not match inferred type tensor<2xf32>"
    with pytest.raises(GnomonError) as error:
        lower(Parser(gnomon_context(), text).parse_module(), "f.mlir", verify_each=True)
    assert str(error.value) == f"internal error: the graph of f.mlir does not verify after break-relu: {detail}"
    with pytest.raises(GnomonError) as error:
        lower(Parser(gnomon_context(), text).parse_module(), "f.mlir")
    after = "inference (graph-drop-dropout,break-relu,graph-canonicalize)"
    assert str(error.value) == f"internal error: the graph of f.mlir does not verify after {after}: {detail}"
