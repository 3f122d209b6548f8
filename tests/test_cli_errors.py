"""Bad input to every CLI path, `gnomon-opt` included: one line on stderr that names the thing and where it came
from, exit status 2, and no traceback (unless `--debug`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import make_onnx
from onnx import TensorProto, helper
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

import gnomon
from gnomon import cli, opt
from gnomon.errors import GnomonError, ModelLoadError
from gnomon.executable import lower
from gnomon.limits import human_bytes, machine_memory
from gnomon.pipeline import load
from gnomon.printing import print_module

MEMORY = human_bytes(machine_memory())


def gnomon_error(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    """The stderr lines of `gnomon <args>`, which must fail with status 2 and no traceback."""
    assert cli.main(list(args)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


def opt_error(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert opt.main(list(args)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_onnx("conv_block", tmp_path_factory.mktemp("model") / "conv_block.onnx")


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory, model: Path) -> str:
    """The text `gnomon compile` writes for the model (lowered here without building its kernels)."""
    path = tmp_path_factory.mktemp("program") / "conv_block.rt.mlir"
    with open(path, "w") as stream:
        print_module(lower(load(model), model.name), stream)
    return path.read_text()


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A regular file, for paths under it: no directory lies there, even for root, whom permissions don't stop."""
    path = tmp_path / "file.txt"
    path.write_text("not a directory")
    return path


# Outputs.


@pytest.mark.parametrize("verb", ["import", "compile"])
def test_output_under_a_file(capsys: pytest.CaptureFixture[str], model: Path, a_file: Path, verb: str) -> None:
    out = a_file / "out.mlir"
    assert gnomon_error(capsys, verb, str(model), "-o", str(out)) == [
        f"gnomon: error: cannot write -o {out}: {a_file} is not a directory"
    ]


def test_output_in_a_missing_directory(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "out.mlir"
    assert gnomon_error(capsys, "import", str(model), "-o", str(out)) == [
        f"gnomon: error: cannot write -o {out}: no such directory: {tmp_path / 'missing'}"
    ]


def test_output_that_is_a_directory(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    assert gnomon_error(capsys, "compile", str(model), "-o", str(tmp_path)) == [
        f"gnomon: error: cannot write -o {tmp_path}: it is a directory; name a file in it"
    ]


def test_a_failed_write_names_the_output(capsys: pytest.CaptureFixture[str], model: Path) -> None:
    # /dev/full passes every check and then fails each write, as a full disk does.
    assert gnomon_error(capsys, "import", str(model), "-o", "/dev/full") == [
        "gnomon: error: cannot write -o /dev/full: No space left on device"
    ]
    assert gnomon_error(capsys, "run", str(model), "--backend", "reference", "--save-outputs", "/dev/full") == [
        "gnomon: error: cannot write --save-outputs /dev/full: No space left on device"
    ]


def test_save_outputs_under_a_file(capsys: pytest.CaptureFixture[str], model: Path, a_file: Path) -> None:
    out = a_file / "out.npz"
    assert gnomon_error(capsys, "run", str(model), "--save-outputs", str(out)) == [
        f"gnomon: error: cannot write --save-outputs {out}: {a_file} is not a directory"
    ]


def test_save_outputs_into_a_directory(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    assert gnomon_error(capsys, "run", str(model), "--save-outputs", str(tmp_path)) == [
        f"gnomon: error: cannot write --save-outputs {tmp_path}: it is a directory; name a file in it"
    ]
    assert list(tmp_path.parent.glob(f"{tmp_path.name}.npz")) == []


def test_save_outputs_writes_the_path_given(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    # np.savez(path) would have written `outputs.npz`.
    out = tmp_path / "outputs"
    assert cli.main(["run", str(model), "--backend", "reference", "--seed", "4", "--save-outputs", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]
    x = np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype(np.float32)
    with np.load(out) as saved:
        assert list(saved.files) == ["y"]
        np.testing.assert_allclose(saved["y"], gnomon.compile(model, backend="reference")(x)[0], rtol=1e-6)


# The model file and the inputs file.


def test_model_that_is_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for verb in ("import", "summary", "compile", "run", "analyze"):
        args = [verb, str(tmp_path), *(["-o", str(tmp_path / "out.mlir")] if verb == "compile" else [])]
        assert gnomon_error(capsys, *args) == [f"gnomon: error: {tmp_path} is a directory, not a file"]


def test_model_that_is_a_symlink_loop(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    loop = tmp_path / "loop.onnx"
    loop.symlink_to(loop)
    assert gnomon_error(capsys, "import", str(loop)) == [f"gnomon: error: cannot read {loop}: a symlink loop"]


def test_unreadable_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # A regular file whose first read fails, even for root: the reading process's own memory at address 0.
    model = tmp_path / "model.onnx"
    model.symlink_to("/proc/self/mem")
    assert gnomon_error(capsys, "compile", str(model), "-o", str(tmp_path / "out.mlir")) == [
        f"gnomon: error: cannot read {model}: Input/output error"
    ]


def test_inputs_from_an_npy(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    assert gnomon_error(capsys, "run", str(model), "--inputs", str(tmp_path / "x.npy")) == [
        f"gnomon: error: {tmp_path / 'x.npy'} is an .npy file, not an .npz: "
        "write one with numpy.savez(path, <input name>=array, ...)"
    ]
    (tmp_path / "x.txt").write_text("x = 1\n")
    assert gnomon_error(capsys, "run", str(model), "--inputs", str(tmp_path / "x.txt")) == [
        f"gnomon: error: {tmp_path / 'x.txt'} is not an .npz file: "
        "write one with numpy.savez(path, <input name>=array, ...)"
    ]


def test_inputs_with_an_object_array(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", x=np.array([{"a": 1}], dtype=object))
    assert gnomon_error(capsys, "run", str(model), "--inputs", str(tmp_path / "in.npz")) == [
        f"gnomon: error: {tmp_path / 'in.npz'}: cannot read array 'x': "
        "Object arrays cannot be loaded when allow_pickle=False"
    ]


def test_inputs_from_a_directory(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    assert gnomon_error(capsys, "run", str(model), "--inputs", str(tmp_path)) == [
        f"gnomon: error: {tmp_path} is a directory, not a file"
    ]


# Arguments.


def test_negative_seed(capsys: pytest.CaptureFixture[str], model: Path) -> None:
    assert gnomon_error(capsys, "run", str(model), "--seed", "-1") == [
        "gnomon: error: --seed -1: a seed is a non-negative integer"
    ]


def test_argparse_errors_are_one_line(capsys: pytest.CaptureFixture[str], model: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", str(model), "--seed", "abc"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "gnomon run: error: argument --seed: invalid int value: 'abc' (see `gnomon run --help`)"
    ]


def test_input_shape_given_twice(capsys: pytest.CaptureFixture[str], model: Path) -> None:
    args = ["run", str(model), "--input-shape", "x=1x3x8x8", "--input-shape", "x=1x3x16x16"]
    assert gnomon_error(capsys, *args) == ["gnomon: error: --input-shape given twice for input 'x'"]


def test_input_shape_for_a_compiled_program(capsys: pytest.CaptureFixture[str], program: str, tmp_path: Path) -> None:
    path = tmp_path / "m.rt.mlir"
    path.write_text(program)
    assert gnomon_error(capsys, "run", str(path), "--input-shape", "x=1x3x8x8") == [
        f"gnomon: error: --input-shape does not apply to {path}: a compiled program's shapes are fixed "
        "(compile the model again with --input-shape)"
    ]


# Sizes beyond the machine's memory fail before anything allocates them.


def test_huge_input_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = make_onnx("dynamic_batch", tmp_path / "dynamic.onnx")
    elements = 99999999999 * 3 * 8 * 8
    assert gnomon_error(capsys, "run", str(model), "--input-shape", "x=99999999999x3x8x8") == [
        f"gnomon: error: --input-shape 'x=99999999999x3x8x8' (at least a byte for each of {elements} elements) "
        f"needs {human_bytes(elements)}, more than this machine's memory ({MEMORY})"
    ]
    assert gnomon_error(capsys, "run", str(model), "--input-shape", f"x={2**64}x3x8x0") == [
        f"gnomon: error: --input-shape 'x={2**64}x3x8x0': a dim is larger than {2**63 - 1}"
    ]


def test_model_with_a_huge_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    big = [1_000_000_000, 1_000_000_000]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, big)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, big)],
    )
    model = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    assert gnomon_error(capsys, "run", str(model)) == [
        f"gnomon: error: input 'x' of shape {big} (float32) needs {human_bytes(4 * 10**18)}, "
        f"more than this machine's memory ({MEMORY})"
    ]


def test_hand_edited_arena_size(capsys: pytest.CaptureFixture[str], program: str, tmp_path: Path) -> None:
    path = tmp_path / "m.rt.mlir"
    path.write_text(re.sub(r"rt\.arena_size = \d+", "rt.arena_size = 9000000000000000000", program))
    assert gnomon_error(capsys, "run", str(path)) == [
        "gnomon: error: the program's arena (rt.arena_size = 9000000000000000000) needs "
        f"{human_bytes(9 * 10**18)}, more than this machine's memory ({MEMORY})"
    ]


# The Python API.


@pytest.mark.parametrize("api", [gnomon.compile, gnomon.load, gnomon.analyze])
def test_something_that_is_not_a_model(api: Callable[..., object]) -> None:
    with pytest.raises(ModelLoadError) as error:
        api(12345)
    assert str(error.value) == (
        "a model is a file (a str or Path), a torch.nn.Module or a torch.export.ExportedProgram, not int"
    )


@pytest.mark.parametrize("api", [gnomon.compile, gnomon.load])
def test_a_directory_is_not_a_model(api: Callable[..., object], tmp_path: Path) -> None:
    with pytest.raises(GnomonError) as error:
        api(tmp_path)
    assert str(error.value) == f"{tmp_path} is a directory, not a file"


# The last-resort net in `main`: an OSError or MemoryError that no check caught is still one line.


def test_os_error_names_its_file(capsys: pytest.CaptureFixture[str], model: Path, monkeypatch: pytest.MonkeyPatch):
    def fail(*_: object, **__: object) -> None:
        raise PermissionError(13, "Permission denied", "/var/cache/gnomon/kernel.so")

    monkeypatch.setattr("gnomon.run_report.run_command", fail)
    assert gnomon_error(capsys, "run", str(model)) == ["gnomon: error: /var/cache/gnomon/kernel.so: Permission denied"]
    with pytest.raises(PermissionError):
        cli.main(["run", str(model), "--debug"])


def test_memory_error_says_what_was_allocated(
    capsys: pytest.CaptureFixture[str], model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def allocate(*_: object, **__: object) -> None:
        np.zeros(1 << 62, np.uint8)

    monkeypatch.setattr("gnomon.run_report.run_command", allocate)
    assert gnomon_error(capsys, "run", str(model)) == [
        "gnomon: error: out of memory: Unable to allocate 4.00 EiB for an array with shape (4611686018427387904,) "
        "and data type uint8"
    ]


# gnomon-opt.


def test_opt_missing_file_and_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert opt_error(capsys, str(tmp_path / "no.mlir")) == [f"gnomon-opt: error: no such file: {tmp_path / 'no.mlir'}"]
    assert opt_error(capsys, str(tmp_path)) == [f"gnomon-opt: error: {tmp_path} is a directory, not a file"]


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("no-such-pass", "-p 'no-such-pass': unknown pass 'no-such-pass'"),
        (
            "graph-canonicalize{x=1}",
            """-p 'graph-canonicalize{x=1}': Provided arguments ["x"] not found in expected arguments []""",
        ),
        ("graph-canonicalize{", "-p 'graph-canonicalize{' is not a pass pipeline: Expected argument name here"),
    ],
)
def test_opt_bad_pipeline(capsys: pytest.CaptureFixture[str], tmp_path: Path, pipeline: str, message: str) -> None:
    source = tmp_path / "empty.mlir"
    source.write_text("builtin.module {}\n")
    assert opt_error(capsys, str(source), "-p", pipeline) == [f"gnomon-opt: error: {message}"]


def test_opt_binary_and_model_files(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path) -> None:
    binary = tmp_path / "binary.mlir"
    binary.write_bytes(b"\x08\x07\xff\xfe")
    assert opt_error(capsys, str(binary)) == [
        f"gnomon-opt: error: {binary} is not MLIR text: byte 2 is not UTF-8 (a binary file?)"
    ]
    assert opt_error(capsys, str(model)) == [
        f"gnomon-opt: error: {model}: gnomon-opt reads MLIR text, not .onnx (`gnomon import` imports a model)"
    ]


def test_opt_verifier_failure(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "bad.mlir"
    source.write_text('func.func @f() {\n  %0 = "test.op"() : () -> i32\n  func.return %0 : i32\n}\n')
    assert opt_error(capsys, str(source), "--allow-unregistered-dialect") == [
        f"gnomon-opt: error: {source} does not verify: func.return: Expected arguments to have the same types as "
        "the function output types: expected [], got [i32]"
    ]


@dataclass(frozen=True)
class _BreakReturn(ModulePass):
    """Returns an i32 from a function that returns nothing: a pass that leaves the program invalid."""

    name = "break-return"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ret = next(o for o in op.walk() if isinstance(o, func.ReturnOp))
        constant = arith.ConstantOp.from_int_and_width(1, 32)
        Rewriter.insert_op(constant, InsertPoint.before(ret))
        ret.operands = [constant.result]


def test_opt_verifier_failure_names_the_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register = opt.GnomonOptMain.register_all_passes

    def register_with_break(self: opt.GnomonOptMain) -> None:
        register(self)
        self.available_passes[_BreakReturn.name] = lambda: _BreakReturn

    monkeypatch.setattr(opt.GnomonOptMain, "register_all_passes", register_with_break)
    source = tmp_path / "ok.mlir"
    source.write_text("func.func @f() {\n  func.return\n}\n")
    assert opt_error(capsys, str(source), "-p", "break-return") == [
        f"gnomon-opt: error: {source} does not verify after break-return: func.return: Expected arguments to have "
        "the same types as the function output types: expected [], got [i32]"
    ]


def test_opt_parse_error_and_debug(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "broken.mlir"
    source.write_text("func.func @f( {\n")
    assert opt_error(capsys, str(source)) == [f"gnomon-opt: error: {source}:1:15: Expected argument or type"]
    with pytest.raises(Exception, match="Expected argument or type"):
        opt.main([str(source), "--debug"])


def test_opt_output_under_a_file(capsys: pytest.CaptureFixture[str], a_file: Path, tmp_path: Path) -> None:
    source = tmp_path / "empty.mlir"
    source.write_text("builtin.module {}\n")
    out = a_file / "out.mlir"
    assert opt_error(capsys, str(source), "-o", str(out)) == [
        f"gnomon-opt: error: cannot write -o {out}: Not a directory"
    ]


def test_a_gnomon_warning_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A file where the kernel cache should be: gnomon compiles into a temporary directory and says so, once.
    not_a_directory = tmp_path / "kernels"
    not_a_directory.write_text("")
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(not_a_directory))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "sigmoid", [x], [y])
    model = tmp_path / "sigmoid.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    assert cli.main(["run", str(model)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(warnings) == 1
    assert re.fullmatch(
        rf"gnomon: warning: kernel cache {not_a_directory} is unusable \(it is not a directory\); compiling kernels "
        r"into \S+ for this process only",
        warnings[0],
    )
