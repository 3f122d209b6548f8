"""Bad models fail with one line that names the op to blame, and never take the user's process down.

torch-mlir runs in a forked child (`gnomon.frontends.isolation`): its aborts and segfaults become errors
that name the node being imported or lowered. Ops of custom domains are named with their domain, even
when their untyped outputs make a supported op downstream fail to lower.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from gnomon.cli import main
from gnomon.errors import ImporterCrashError, ModelLoadError, UnsupportedOp, UnsupportedOpsError
from gnomon.frontends.isolation import run_isolated
from gnomon.pipeline import load

F32 = TensorProto.FLOAT


def save(
    path: Path,
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    opsets: Sequence[tuple[str, int]] = (("", 17),),
    initializers: Sequence[onnx.TensorProto] = (),
) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    onnx.save(model, path)
    return path


def tensor(name: str, shape: Sequence[int], element: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element, shape)


def relu_model(path: Path) -> Path:
    relu = helper.make_node("Relu", ["x"], ["y"], name="relu")
    return save(path, [relu], [tensor("x", [2, 3])], [tensor("y", [2, 3])])


def uint16_fill(path: Path) -> Path:
    """A uint16 ConstantOfShape beside a Relu: torch-mlir aborts on the uint16 fill value. Its shape is a graph
    input: a constant one the frontend folds before torch-mlir sees it."""
    fill = numpy_helper.from_array(np.array([3], np.uint16))
    return save(
        path,
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu"),
            helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill", value=fill),
        ],
        [tensor("x", [12]), tensor("shape", [1], TensorProto.INT64)],
        [tensor("r", [12]), tensor("y", [None], TensorProto.UINT16)],
        opsets=[("", 21)],
    )


def test_a_torch_mlir_abort_is_one_line_naming_the_node_and_the_process_survives(tmp_path: Path) -> None:
    path = uint16_fill(tmp_path / "fill.onnx")
    with pytest.raises(ImporterCrashError) as error:
        load(path)
    assert str(error.value) == (
        f"{path}: torch-mlir crashed (SIGABRT) while lowering ConstantOfShape node 'fill': "
        "LLVM ERROR: Unhandled type in getScalarTypeForType: ui16"
    )
    # The same process imports the next model.
    assert "graph.relu" in str(load(relu_model(tmp_path / "relu.onnx")))


def test_the_cli_prints_the_abort_as_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = uint16_fill(tmp_path / "fill.onnx")
    assert main(["import", str(path)]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err == (
        f"gnomon: error: {path}: torch-mlir crashed (SIGABRT) while lowering ConstantOfShape node 'fill': "
        "LLVM ERROR: Unhandled type in getScalarTypeForType: ui16\n"
    )


def test_a_segfault_in_the_lowering_names_the_node(tmp_path: Path) -> None:
    """torch-mlir segfaults lowering a Split whose sizes are not a literal (here a graph input) into pieces that ONNX
    cannot type."""
    split = helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=-1, name="split")
    untyped = [helper.make_tensor_value_info(name, F32, None) for name in ("a", "b")]
    path = save(
        tmp_path / "split.onnx", [split], [tensor("x", [2, 8]), tensor("sizes", [2], TensorProto.INT64)], untyped
    )
    with pytest.raises(ImporterCrashError) as error:
        load(path)
    assert str(error.value) == f"{path}: torch-mlir crashed (SIGSEGV) while lowering Split node 'split'"


def test_split_sizes_computed_from_static_shapes_are_folded_for_torch_mlir(tmp_path: Path) -> None:
    """ONNX's own node test `test_rotary_embedding_expanded` computes a Split's sizes from the input's shape, on
    which torch-mlir would segfault; the frontend folds them to a constant first."""
    import onnx.backend.test.case.node.rotaryembedding  # registers the RotaryEmbedding cases on import
    from onnx.backend.test.case import node

    # collect_testcases() would build every op's cases (half a minute); this module's are enough.
    [case] = [case for case in node._NodeTestCases if case.name == "test_rotary_embedding_expanded"]
    path = tmp_path / "rotary.onnx"
    onnx.save(case.model, path)
    assert "graph.split" in str(load(path))


def test_a_crash_names_the_last_step_the_child_started() -> None:
    def work(progress: object) -> None:
        assert callable(progress)
        progress("importing Foo node 'first'")
        progress("importing Bar node 'second'")
        os.kill(os.getpid(), signal.SIGSEGV)

    with pytest.raises(ImporterCrashError) as error:
        run_isolated(work, "m.onnx")
    assert str(error.value) == "m.onnx: torch-mlir crashed (SIGSEGV) while importing Bar node 'second'"


def test_a_stalled_child_is_killed() -> None:
    def work(progress: object) -> None:
        assert callable(progress)
        progress("lowering")
        time.sleep(60)

    start = time.monotonic()
    with pytest.raises(ImporterCrashError) as error:
        run_isolated(work, "m.onnx", stall_timeout=0.5)
    assert str(error.value) == "m.onnx: torch-mlir made no progress for 0.5 s while lowering"
    assert time.monotonic() - start < 30


def test_the_childs_errors_and_results_come_back_whole() -> None:
    ops = [UnsupportedOp("com.example.Foo", "foo", "m.onnx"), UnsupportedOp("onnx.Loop", "loop", "m.onnx", "why")]

    def fail(_progress: object) -> None:
        raise UnsupportedOpsError(ops)

    with pytest.raises(UnsupportedOpsError) as error:
        run_isolated(fail, "m.onnx")
    assert error.value.ops == ops
    assert run_isolated(lambda _: "x" * 5_000_000, "m.onnx") == "x" * 5_000_000


def test_imports_after_torch_started_its_threads_do_not_hang(tmp_path: Path) -> None:
    """OpenMP's thread pool does not survive fork: the child must not wait for the parent's threads."""
    torch.set_num_threads(2)
    big = torch.ones(512, 512)
    assert float((big @ big).sum()) == 512.0**3
    linear = torch.nn.Linear(512, 512)
    with torch.no_grad():
        linear.weight.fill_(1.0)
        linear.bias.zero_()
    assert "graph.linear" in str(load(linear, [big]))
    assert "graph.relu" in str(load(relu_model(tmp_path / "relu.onnx")))


def test_a_custom_domain_op_is_named_not_the_supported_op_after_it(tmp_path: Path) -> None:
    path = save(
        tmp_path / "custom.onnx",
        [
            helper.make_node("Foo", ["x"], ["t"], name="foo", domain="com.example"),
            helper.make_node("Relu", ["t"], ["y"], name="relu"),
        ],
        [tensor("x", [2, 3])],
        [tensor("y", [2, 3])],
        opsets=[("", 17), ("com.example", 1)],
    )
    with pytest.raises(UnsupportedOpsError) as error:
        load(path)
    assert str(error.value) == "unsupported op com.example.Foo at node 'foo' in custom.onnx"


def test_a_custom_op_named_like_an_onnx_op_is_not_taken_for_it(tmp_path: Path) -> None:
    path = save(
        tmp_path / "relu.onnx",
        [helper.make_node("Relu", ["x"], ["y"], name="mine", domain="com.example")],
        [tensor("x", [2, 3])],
        [tensor("y", [2, 3])],
        opsets=[("", 17), ("com.example", 1)],
    )
    with pytest.raises(UnsupportedOpsError) as error:
        load(path)
    assert str(error.value) == "unsupported op com.example.Relu at node 'mine' in relu.onnx"


def test_a_chain_of_unknown_ops_names_each(tmp_path: Path) -> None:
    path = save(
        tmp_path / "chain.onnx",
        [
            helper.make_node("Foo", ["x"], ["t"], name="foo", domain="com.example"),
            helper.make_node("Bar", ["t"], ["y"], name="bar", domain="com.example"),
        ],
        [tensor("x", [2, 3])],
        [tensor("y", [2, 3])],
        opsets=[("", 17), ("com.example", 1)],
    )
    with pytest.raises(UnsupportedOpsError) as error:
        load(path)
    assert str(error.value).splitlines() == [
        "unsupported op com.example.Foo at node 'foo' in chain.onnx",
        "unsupported op com.example.Bar at node 'bar' in chain.onnx",
    ]


def test_an_opset_newer_than_onnx_knows_is_refused(tmp_path: Path) -> None:
    path = relu_model(tmp_path / "new.onnx")
    model = onnx.load(path)
    model.opset_import[0].version = 99
    onnx.save(model, path)
    with pytest.raises(ModelLoadError) as error:
        load(path)
    newest = onnx.defs.onnx_opset_version()
    assert str(error.value) == f"{path} needs ONNX opset 99, but the newest that gnomon's onnx knows is {newest}"


def loop_model(path: Path) -> Path:
    """`y` doubled `n` times by an ONNX Loop, with each step's value as a scan output: with a trip count known only
    at run time, the scan output would grow each step."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["y_in", "y_in"], ["y_out"]),
            helper.make_node("Identity", ["y_out"], ["scan"]),
        ],
        "body",
        [tensor("i", [], TensorProto.INT64), tensor("cond", [], TensorProto.BOOL), tensor("y_in", [2])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("y_out", [2]), tensor("scan", [2])],
    )
    loop = helper.make_node("Loop", ["n", "keep_going", "y"], ["doubled", "steps"], name="loop", body=body)
    inputs = [tensor("n", [], TensorProto.INT64), tensor("keep_going", [], TensorProto.BOOL), tensor("y", [2])]
    return save(path, [loop], inputs, [tensor("doubled", [2]), tensor("steps", [3, 2])])


def if_model(path: Path) -> Path:
    """`x` or `-x` by an ONNX If."""
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["a"])], "then", [], [tensor("a", [2])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "else", [], [tensor("b", [2])])
    node = helper.make_node("If", ["c"], ["y"], name="choice", then_branch=then_branch, else_branch=else_branch)
    return save(path, [node], [tensor("c", [], TensorProto.BOOL), tensor("x", [2])], [tensor("y", [2])])


def test_control_flow_is_one_line_naming_the_op(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A Loop gnomon cannot convert is one line with the reason; an If imports (as graph.if)."""
    loop, choice = loop_model(tmp_path / "loop.onnx"), if_model(tmp_path / "if.onnx")
    assert main(["import", str(loop)]) == 2
    assert main(["import", str(choice)]) == 0
    out, err = capfd.readouterr()
    assert err.splitlines() == [
        "gnomon: error: unsupported op onnx.Loop at node 'loop' in loop.onnx"
        " (scan outputs of a Loop whose trip count is not a constant: they would grow each step)",
    ]
    assert "graph.if" in out


@pytest.mark.parametrize("damage", ["random", "truncated"])
def test_a_bad_pt2_is_one_line(tmp_path: Path, damage: str, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.pt2"
    if damage == "random":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    else:
        program = torch.export.export(torch.nn.ReLU(), (torch.ones(2, 3),))
        torch.export.save(program, path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    assert main(["import", str(path)]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err == f"gnomon: error: {path} is not a loadable torch.export file: File is not a zip file\n"
