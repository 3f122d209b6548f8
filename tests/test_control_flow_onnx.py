"""ONNX's control flow (Loop, Scan, If) becomes `graph.while` / `graph.if` and computes what onnxruntime does.

Models are built with onnx.helper at opset 17 and IR version 8 (the newest onnxruntime 1.31 reads); each is
loaded with `gnomon.load`, run by the reference interpreter and held against onnxruntime.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import gnomon
from gnomon.errors import UnsupportedOpsError
from gnomon.reference import run_reference

ort = pytest.importorskip("onnxruntime")

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(0)
W = (RNG.standard_normal((8, 8)) * 0.3).astype(np.float32)


def value(name: str, shape: Sequence[int | str], element: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element, shape)


def constant(name: str, array: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: Any) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), name=f"{op.lower()}_{outputs[0]}", **attributes)


def body(
    nodes: Sequence[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto], outputs: Sequence[onnx.ValueInfoProto]
) -> onnx.GraphProto:
    return helper.make_graph(list(nodes), "body", list(inputs), list(outputs))


def save(
    path: Path,
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto] = (),
) -> Path:
    graph = helper.make_graph(list(nodes), path.stem, list(inputs), list(outputs), list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def check(path: Path, *feeds: dict[str, np.ndarray]) -> str:
    """Load `path` once, run it on each feed by the reference interpreter and onnxruntime; the printed module."""
    module = gnomon.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for feed in feeds:
        got = run_reference(module, list(feed.values()))
        want = session.run(None, feed)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert np.asarray(g).shape == w.shape
            assert np.asarray(g).dtype == w.dtype
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)
    return str(module)


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    """`text` against FileCheck directives, with the `filecheck` installed beside this Python."""
    directives = tmp_path / "checks.txt"
    directives.write_text(checks)
    tool = Path(sys.executable).parent / "filecheck"
    result = subprocess.run([str(tool), str(directives)], input=text, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def x_input(*shape: int) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal(shape).astype(np.float32)}


# ---- Loop ----


def tanh_loop(
    path: Path, trips: str, initializers: Sequence[onnx.TensorProto], inputs: Sequence[onnx.ValueInfoProto]
) -> Path:
    """h <- tanh(h @ W) `trips` times: W is an initializer of the outer graph, which the body reads."""
    step = body(
        [
            node("Identity", ["cond_in"], ["cond_out"]),
            node("MatMul", ["h_in", "W"], ["mm"]),
            node("Tanh", ["mm"], ["h"]),
        ],
        [value("i", [], I64), value("cond_in", [], BOOL), value("h_in", [2, 8])],
        [value("cond_out", [], BOOL), value("h", [2, 8])],
    )
    loop = helper.make_node("Loop", [trips, "true", "x"], ["y"], name="loop", body=step)
    return save(
        path,
        [loop],
        [value("x", [2, 8]), *inputs],
        [value("y", [2, 8])],
        [constant("true", True), numpy_helper.from_array(W, "W"), *initializers],
    )


def test_counted_loop_reads_an_outer_initializer(tmp_path: Path) -> None:
    path = tanh_loop(tmp_path / "counted.onnx", "M", [constant("M", np.int64(3))], [])
    text = check(path, x_input(2, 8))
    filecheck(
        text,
        """
        CHECK: %[[W:.*]] = graph.constant {{.*}} -> tensor<8x8xf32>
        CHECK: graph.while ({{.*}}) : (tensor<i64>, tensor<i1>, tensor<2x8xf32>)
        CHECK-SAME: -> (tensor<i64>, tensor<i1>, tensor<2x8xf32>) {max_trips = 3 : i64} cond {
        CHECK: graph.lt
        CHECK: graph.yield {{.*}} : tensor<i1>
        CHECK: } do {
        CHECK-NEXT: ^bb0(%{{.*}}: tensor<i64>, %{{.*}}: tensor<i1>, %[[H:.*]]: tensor<2x8xf32>):
        CHECK-NEXT: graph.linear %[[H]], %[[W]]
        CHECK-NEXT: graph.tanh
        CHECK-NEXT: graph.add
        CHECK-NEXT: graph.yield
        CHECK-NOT: onnx.Loop
        """,
        tmp_path,
    )


def test_loop_with_a_trip_count_given_at_run_time(tmp_path: Path) -> None:
    path = tanh_loop(tmp_path / "trips.onnx", "n", [], [value("n", [], I64)])
    feeds = [x_input(2, 8) | {"n": np.array(n, np.int64)} for n in (0, 1, 4)]
    text = check(path, *feeds)
    assert "graph.while" in text
    assert "max_trips" not in text


def halving_loop(path: Path, trips: str) -> Path:
    """h <- h / 2 while sum |h| > 1 (the condition is computed before the loop and by its body); with `trips`,
    at most that many times."""
    step = body(
        [
            node("Mul", ["h_in", "half"], ["h"]),
            node("Abs", ["h"], ["a"]),
            node("ReduceSum", ["a"], ["s"], keepdims=0),
            node("Greater", ["s", "one"], ["cond_out"]),
        ],
        [value("i", [], I64), value("cond_in", [], BOOL), value("h_in", [2, 8])],
        [value("cond_out", [], BOOL), value("h", [2, 8])],
    )
    return save(
        path,
        [
            node("Abs", ["x"], ["ax"]),
            node("ReduceSum", ["ax"], ["sx"], keepdims=0),
            node("Greater", ["sx", "one"], ["go"]),
            helper.make_node("Loop", [trips, "go", "x"], ["y"], name="while", body=step),
        ],
        [value("x", [2, 8])],
        [value("y", [2, 8])],
        [constant("half", np.float32(0.5)), constant("one", np.float32(1.0)), constant("M", np.int64(2))],
    )


@pytest.mark.parametrize("trips", ["", "M"])
def test_while_loop_whose_body_computes_the_condition(trips: str, tmp_path: Path) -> None:
    path = halving_loop(tmp_path / "while.onnx", trips)
    big, small = {"x": RNG.standard_normal((2, 8)).astype(np.float32) * 10}, {"x": np.full((2, 8), 0.01, np.float32)}
    text = check(path, big, small)  # several trips, and none
    bound = "{max_trips = 2 : i64} cond {" if trips else ") cond {"
    checks = ["CHECK: graph.while", f"CHECK-SAME: {bound}", "CHECK: graph.yield %{{.*}} : tensor<i1>", "CHECK: } do {"]
    filecheck(text, "\n".join([*checks, "CHECK: graph.gt"]), tmp_path)


def test_loop_scan_outputs_stack_each_step(tmp_path: Path) -> None:
    """Each step's doubled value and iteration number (as an int and as a float) are stacked along a new axis."""
    step = body(
        [
            node("Identity", ["cond_in"], ["cond_out"]),
            node("Add", ["y_in", "y_in"], ["y"]),
            node("Identity", ["y"], ["ys"]),
            node("Identity", ["i"], ["is"]),
            node("Cast", ["i"], ["fi"], to=F32),
            node("Mul", ["y", "fi"], ["scaled"]),
        ],
        [value("i", [], I64), value("cond_in", [], BOOL), value("y_in", [2, 3])],
        [value("cond_out", [], BOOL), value("y", [2, 3]), value("ys", [2, 3]), value("is", [], I64),
         value("scaled", [2, 3])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["M", "", "x"], ["out", "steps", "numbers", "scaled_steps"], name="loop", body=step)
    path = save(
        tmp_path / "scans.onnx",
        [loop],
        [value("x", [2, 3])],
        [value("out", [2, 3]), value("steps", [4, 2, 3]), value("numbers", [4], I64), value("scaled_steps", [4, 2, 3])],
        [constant("M", np.int64(4))],
    )
    text = check(path, x_input(2, 3))
    assert text.count("graph.scatter_elements") == 3


def test_nested_loops(tmp_path: Path) -> None:
    """An inner Loop, counted by the outer one's iteration number, adds its own iteration numbers to the value."""
    inner = body(
        [
            node("Identity", ["c_in"], ["c_out"]),
            node("Cast", ["j"], ["fj"], to=F32),
            node("Add", ["v_in", "fj"], ["v"]),
        ],
        [value("j", [], I64), value("c_in", [], BOOL), value("v_in", [3])],
        [value("c_out", [], BOOL), value("v", [3])],
    )
    outer = body(
        [
            node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Loop", ["i", "", "h_in"], ["h"], name="inner", body=inner),
        ],
        [value("i", [], I64), value("cond_in", [], BOOL), value("h_in", [3])],
        [value("cond_out", [], BOOL), value("h", [3])],
    )
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], name="outer", body=outer)
    path = save(tmp_path / "nested.onnx", [loop], [value("x", [3])], [value("y", [3])], [constant("M", np.int64(4))])
    text = check(path, x_input(3))
    assert text.count("graph.while") == 2


def test_scan_outputs_of_a_loop_without_a_constant_trip_count_are_refused(tmp_path: Path) -> None:
    step = body(
        [
            node("Identity", ["cond_in"], ["cond_out"]),
            node("Add", ["y_in", "y_in"], ["y"]),
            node("Identity", ["y"], ["s"]),
        ],
        [value("i", [], I64), value("cond_in", [], BOOL), value("y_in", [2])],
        [value("cond_out", [], BOOL), value("y", [2]), value("s", [2])],
    )
    loop = helper.make_node("Loop", ["n", "", "x"], ["y", "steps"], name="loop", body=step)
    path = save(
        tmp_path / "grow.onnx",
        [loop],
        [value("n", [], I64), value("x", [2])],
        [value("y", [2]), value("steps", [3, 2])],
    )
    with pytest.raises(
        UnsupportedOpsError, match=r"^unsupported op onnx\.Loop at node 'loop' in grow\.onnx \(scan outputs"
    ):
        gnomon.load(path)


# ---- Scan ----


def cumulative_sum(path: Path, x_shape: Sequence[int | str], y_shape: Sequence[int | str], **attributes: Any) -> Path:
    """Running sums of x's rows (along `scan_input_axes`, in `scan_input_directions`), as the final state and a
    scan output."""
    step = body(
        [node("Add", ["acc_in", "row"], ["acc"]), node("Identity", ["acc"], ["out"])],
        [value("acc_in", [4]), value("row", [4])],
        [value("acc", [4]), value("out", [4])],
    )
    scan = helper.make_node("Scan", ["zeros", "x"], ["total", "sums"], name="scan", body=step, num_scan_inputs=1,
                            **attributes)  # fmt: skip
    return save(path, [scan], [value("x", x_shape)], [value("total", [4]), value("sums", y_shape)],
                [constant("zeros", np.zeros(4, np.float32))])  # fmt: skip


SCAN_FORMS: dict[str, tuple[list[int], list[int], dict[str, list[int]]]] = {
    "forward": ([5, 4], [5, 4], {}),
    "reverse-input": ([5, 4], [5, 4], {"scan_input_directions": [1]}),
    "reverse-output": ([5, 4], [5, 4], {"scan_output_directions": [1]}),
    "reverse-both": ([5, 4], [5, 4], {"scan_input_directions": [1], "scan_output_directions": [1]}),
    "input-axis-1": ([4, 5], [5, 4], {"scan_input_axes": [1]}),
    "output-axis-1": ([5, 4], [4, 5], {"scan_output_axes": [1]}),
    "negative-axes": ([4, 5], [4, 5], {"scan_input_axes": [-1], "scan_output_axes": [-1]}),
}
"""x's shape, the scan output's and the Scan's attributes, by name: 5 steps over rows of 4."""


@pytest.mark.parametrize("form", sorted(SCAN_FORMS))
def test_scan_cumulative_sum(form: str, tmp_path: Path) -> None:
    x_shape, y_shape, attributes = SCAN_FORMS[form]
    path = cumulative_sum(tmp_path / "scan.onnx", x_shape, y_shape, **attributes)
    text = check(path, x_input(*x_shape))
    filecheck(
        text,
        """
        CHECK: graph.while {{.*}} {max_trips = 5 : i64} cond {
        CHECK: } do {
        CHECK: graph.gather
        CHECK: graph.add
        CHECK: graph.scatter_elements
        """,
        tmp_path,
    )


def test_scan_over_two_inputs_without_state(tmp_path: Path) -> None:
    """Two scan inputs along different axes, one reversed, and two scan outputs; no state is carried."""
    step = body(
        [node("Mul", ["a", "b"], ["p"]), node("Sub", ["a", "b"], ["d"])],
        [value("a", [3]), value("b", [3])],
        [value("p", [3]), value("d", [3])],
    )
    scan = helper.make_node("Scan", ["x", "z"], ["ps", "ds"], name="scan", body=step, num_scan_inputs=2,
                            scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[1, 0])  # fmt: skip
    path = save(
        tmp_path / "two.onnx",
        [scan],
        [value("x", [6, 3]), value("z", [3, 6])],
        [value("ps", [3, 6]), value("ds", [6, 3])],
    )
    check(path, x_input(6, 3) | {"z": RNG.standard_normal((3, 6)).astype(np.float32)})


def test_scan_body_reads_an_outer_initializer(tmp_path: Path) -> None:
    """An RNN as a Scan: h <- tanh(x_t + h @ W), the weights from the outer graph."""
    step = body(
        [node("MatMul", ["h_in", "W"], ["hw"]), node("Add", ["row", "hw"], ["pre"]), node("Tanh", ["pre"], ["h"]),
         node("Identity", ["h"], ["out"])],
        [value("h_in", [1, 8]), value("row", [1, 8])],
        [value("h", [1, 8]), value("out", [1, 8])],
    )  # fmt: skip
    scan = helper.make_node("Scan", ["h0", "x"], ["h", "hs"], name="rnn", body=step, num_scan_inputs=1)
    path = save(tmp_path / "rnn.onnx", [scan], [value("h0", [1, 8]), value("x", [6, 1, 8])],
                [value("h", [1, 8]), value("hs", [6, 1, 8])], [numpy_helper.from_array(W, "W")])  # fmt: skip
    check(path, {"h0": np.zeros((1, 8), np.float32)} | x_input(6, 1, 8))


def test_a_scan_over_a_sequence_of_dynamic_length_is_refused(tmp_path: Path) -> None:
    path = cumulative_sum(tmp_path / "dynamic.onnx", ["T", 4], ["T", 4])
    message = "unsupported op onnx.Scan at node 'scan' in dynamic.onnx (a Scan over a sequence of dynamic length)"
    with pytest.raises(UnsupportedOpsError, match=f"^{re.escape(message)}"):
        gnomon.load(path)


# ---- If ----


def test_if_branches_with_different_ops_and_an_initializer(tmp_path: Path) -> None:
    then_branch = helper.make_graph([node("MatMul", ["x", "W"], ["t"]), node("Relu", ["t"], ["a"])], "then", [],
                                    [value("a", [2, 8])])  # fmt: skip
    else_branch = helper.make_graph([node("Neg", ["x"], ["b"])], "else", [], [value("b", [2, 8])])
    path = save(
        tmp_path / "if.onnx",
        [
            node("ReduceSum", ["x"], ["s"], keepdims=0),
            node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["y"], name="choice", then_branch=then_branch, else_branch=else_branch),
        ],
        [value("x", [2, 8])],
        [value("y", [2, 8])],
        [constant("zero", np.float32(0.0)), numpy_helper.from_array(W, "W")],
    )
    text = check(path, {"x": np.full((2, 8), 0.5, np.float32)}, {"x": np.full((2, 8), -0.5, np.float32)})
    filecheck(
        text,
        """
        CHECK: graph.if %{{.*}} : tensor<i1> -> (tensor<2x8xf32>) {
        CHECK-NEXT: graph.linear
        CHECK-NEXT: graph.relu
        CHECK: } else {
        CHECK-NEXT: graph.neg
        """,
        tmp_path,
    )
