"""Control flow on the native backend: `graph.if` / `graph.while` split into rt segments that the host runs.

Each program is hand-written graph IR, compiled as `gnomon.compile` compiles an imported model
(`executable_from_graph`), and checked against the reference interpreter on a fresh parse of the same text.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.parser import Parser

import gnomon
from gnomon.context import gnomon_context
from gnomon.dialects.graph.constant_values import dense_to_resource, numpy_to_dense
from gnomon.dialects.graph.control_flow import IfOp, WhileOp
from gnomon.dialects.graph.elementwise import DropoutOp
from gnomon.dialects.graph.nn import BatchNormOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.errors import GnomonError
from gnomon.executable import Executable, InputError, executable_from_graph, load_compiled
from gnomon.host_program import split
from gnomon.passes.kernel_to_rt import LoweringError
from gnomon.reference import run_reference
from gnomon.runtime.host import HostProfile, arena_size, segments

F = "tensor<2x8xf32>"
N = "tensor<i64>"

# A value defined before the if (%a) is read in a branch and after the if; the if's result is also returned as is.
IF_PROGRAM = f"""
func.func @main(%x: {F}) -> ({F}, {F}) {{
  %a = graph.exp %x : ({F}) -> {F}
  %s = graph.reduce_sum %x {{axes = array<i64>, keepdims = false}} : ({F}) -> tensor<f32>
  %z = graph.constant {{value = dense<0.0> : tensor<f32>}} : () -> tensor<f32>
  %p = graph.gt %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %y = graph.if %p : tensor<i1> -> ({F}) {{
    %r = graph.mul %a, %x : ({F}, {F}) -> {F}
    graph.yield %r : {F}
  }} else {{
    %m = graph.sub %x, %a : ({F}, {F}) -> {F}
    graph.yield %m : {F}
  }}
  %out = graph.add %y, %a : ({F}, {F}) -> {F}
  func.return %out, %y : {F}, {F}
}}
"""

# A data-dependent trip count; the body reads a weight of the function's; the loop's input %x is returned unchanged.
WHILE_PROGRAM = f"""
func.func @main(%x: {F}, %limit: {N}) -> ({F}, {N}, {F}) {{
  %w = graph.constant {{value = dense<0.0> : tensor<8x8xf32>}} : () -> tensor<8x8xf32>
  %zero = graph.constant {{value = dense<0> : {N}}} : () -> {N}
  %i, %h = graph.while (%zero, %x) : ({N}, {F}) -> ({N}, {F}) cond {{
  ^bb0(%j: {N}, %a: {F}):
    %go = graph.lt %j, %limit : ({N}, {N}) -> tensor<i1>
    graph.yield %go : tensor<i1>
  }} do {{
  ^bb0(%j: {N}, %a: {F}):
    %one = graph.constant {{value = dense<1> : {N}}} : () -> {N}
    %j1 = graph.add %j, %one : ({N}, {N}) -> {N}
    %l = graph.matmul %a, %w : ({F}, tensor<8x8xf32>) -> {F}
    %t = graph.tanh %l : ({F}) -> {F}
    graph.yield %j1, %t : {N}, {F}
  }}
  func.return %h, %i, %x : {F}, {N}, {F}
}}
"""

# An if inside a loop body, whose predicate the body computes; %l, defined before the if, is read after it.
NESTED_PROGRAM = f"""
func.func @main(%x: {F}, %limit: {N}) -> ({F}, {N}) {{
  %w = graph.constant {{value = dense<0.0> : tensor<8x8xf32>}} : () -> tensor<8x8xf32>
  %zero = graph.constant {{value = dense<0> : {N}}} : () -> {N}
  %i, %h = graph.while (%zero, %x) : ({N}, {F}) -> ({N}, {F}) cond {{
  ^bb0(%j: {N}, %a: {F}):
    %go = graph.lt %j, %limit : ({N}, {N}) -> tensor<i1>
    graph.yield %go : tensor<i1>
  }} do {{
  ^bb0(%j: {N}, %a: {F}):
    %one = graph.constant {{value = dense<1> : {N}}} : () -> {N}
    %j1 = graph.add %j, %one : ({N}, {N}) -> {N}
    %l = graph.matmul %a, %w : ({F}, tensor<8x8xf32>) -> {F}
    %s = graph.reduce_sum %l {{axes = array<i64>, keepdims = false}} : ({F}) -> tensor<f32>
    %z = graph.constant {{value = dense<0.0> : tensor<f32>}} : () -> tensor<f32>
    %p = graph.gt %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %b = graph.if %p : tensor<i1> -> ({F}) {{
      %r = graph.tanh %l : ({F}) -> {F}
      graph.yield %r : {F}
    }} else {{
      %q = graph.sigmoid %l : ({F}) -> {F}
      graph.yield %q : {F}
    }}
    %n = graph.add %b, %l : ({F}, {F}) -> {F}
    %t = graph.tanh %n : ({F}) -> {F}
    graph.yield %j1, %t : {N}, {F}
  }}
  func.return %h, %i : {F}, {N}
}}
"""

# Branches that only pick one of the function's inputs: no segment runs at all.
PICK_PROGRAM = f"""
func.func @main(%p: tensor<i1>, %x: {F}, %v: {F}) -> {F} {{
  %y = graph.if %p : tensor<i1> -> ({F}) {{
    graph.yield %x : {F}
  }} else {{
    graph.yield %v : {F}
  }}
  func.return %y : {F}
}}
"""

# What the inference rewrites remove or fold (dropout, a batch norm after a linear layer, constant arithmetic),
# inside a branch and a loop body: they must rewrite there as they do at the top level.
REWRITES_PROGRAM = f"""
func.func @main(%x: {F}, %limit: {N}) -> {F} {{
  %w = graph.constant {{value = dense<0.0> : tensor<8x8xf32>}} : () -> tensor<8x8xf32>
  %wscale = graph.constant {{value = dense<0.0> : tensor<8xf32>}} : () -> tensor<8xf32>
  %wshift = graph.constant {{value = dense<0.0> : tensor<8xf32>}} : () -> tensor<8xf32>
  %wmean = graph.constant {{value = dense<0.0> : tensor<8xf32>}} : () -> tensor<8xf32>
  %wvar = graph.constant {{value = dense<0.0> : tensor<8xf32>}} : () -> tensor<8xf32>
  %zero = graph.constant {{value = dense<0> : {N}}} : () -> {N}
  %i, %h = graph.while (%zero, %x) : ({N}, {F}) -> ({N}, {F}) cond {{
  ^bb0(%j: {N}, %a: {F}):
    %go = graph.lt %j, %limit : ({N}, {N}) -> tensor<i1>
    graph.yield %go : tensor<i1>
  }} do {{
  ^bb0(%j: {N}, %a: {F}):
    %one = graph.constant {{value = dense<1> : {N}}} : () -> {N}
    %two = graph.add %one, %one : ({N}, {N}) -> {N}
    %j1 = graph.add %j, %one : ({N}, {N}) -> {N}
    %j2 = graph.mul %j1, %two : ({N}, {N}) -> {N}
    %j3 = graph.div %j2, %two : ({N}, {N}) -> {N}
    %d = graph.dropout %a {{ratio = 5.000000e-01 : f64}} : ({F}) -> {F}
    %l = graph.linear %d, %w : ({F}, tensor<8x8xf32>) -> {F}
    %n = graph.batch_norm %l, %wscale, %wshift, %wmean, %wvar {{epsilon = 1.0e-05 : f64}}
      : ({F}, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> {F}
    %t = graph.tanh %n : ({F}) -> {F}
    graph.yield %j3, %t : {N}, {F}
  }}
  %s = graph.reduce_sum %h {{axes = array<i64>, keepdims = false}} : ({F}) -> tensor<f32>
  %z = graph.constant {{value = dense<0.0> : tensor<f32>}} : () -> tensor<f32>
  %p = graph.gt %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %y = graph.if %p : tensor<i1> -> ({F}) {{
    %e = graph.dropout %h {{ratio = 5.000000e-01 : f64}} : ({F}) -> {F}
    %f = graph.relu %e : ({F}) -> {F}
    graph.yield %f : {F}
  }} else {{
    graph.yield %x : {F}
  }}
  func.return %y : {F}
}}
"""


def _parse(text: str) -> ModuleOp:
    """The module, its weights (the constants named %w...) random, the same for the same text."""
    module = Parser(gnomon_context(), text).parse_module()
    rng = np.random.default_rng(0)
    for op in module.walk():
        if isinstance(op, ConstantOp) and (op.result.name_hint or "").startswith("w"):
            assert isinstance(op.result.type, TensorType)
            shape = op.result.type.get_shape()
            variance = op.result.name_hint == "wvar"
            array = rng.uniform(0.5, 1.5, shape) if variance else rng.standard_normal(shape) * 0.4
            op.properties["value"] = dense_to_resource(numpy_to_dense(array.astype(np.float32), f32), "host_test")
    module.verify()
    return module


def _compiled(text: str) -> Executable:
    # The branches here are small: graph-predicate would make them straight-line code, which is not under test.
    return executable_from_graph(_parse(text), "test", predicate="never")


def _check(executable: Executable, text: str, inputs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    got = executable.run(inputs, profile=True)
    want = run_reference(_parse(text), inputs)
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, f"output {index}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"output {index}")
    return got


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 8)).astype(np.float32)


def _limit(trips: int) -> np.ndarray:
    return np.array(trips, dtype=np.int64)


def _host_profile(executable: Executable) -> HostProfile:
    profile = executable.profile()
    assert isinstance(profile, HostProfile)
    return profile


def _check_shared_arena(executable: Executable) -> None:
    """The profile's arena is the largest segment's, and every segment's program runs in that one arena."""
    host = executable.host
    assert host is not None
    sizes = [arena_size(segment.module) for segment in segments(host.plan.body)]
    assert _host_profile(executable).arena_bytes == max(sizes, default=0)
    assert len({program.arena.ctypes.data for program in host.programs.values()}) <= 1


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_runs_each_branch(sign: float):
    executable = _compiled(IF_PROGRAM)
    x = np.abs(_x()) * sign
    _check(executable, IF_PROGRAM, [x])
    profile = _host_profile(executable)
    assert (profile.branches, profile.loop_trips, profile.segment_runs) == (1, 0, 3)
    assert {t.source_ops for t in profile.timings} >= {("graph.mul",) if sign > 0 else ("graph.sub",)}
    _check_shared_arena(executable)


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_while_runs_its_trips(trips: int):
    executable = _compiled(WHILE_PROGRAM)
    x = _x()
    h, i, same = _check(executable, WHILE_PROGRAM, [x, _limit(trips)])
    assert int(i) == trips
    np.testing.assert_array_equal(same, x)
    assert same is not x
    profile = _host_profile(executable)
    assert profile.loop_trips == trips
    assert profile.segment_runs == 2 * trips + 1  # the condition runs once more than the body
    assert sum("graph.linear" in t.source_ops for t in profile.timings) == trips  # x @ a weight: a linear layer
    if trips == 0:
        np.testing.assert_array_equal(h, x)
    _check_shared_arena(executable)


def test_segments_clone_weights_and_share_one_arena():
    executable = _compiled(WHILE_PROGRAM)
    host = executable.host
    assert host is not None
    plan = host.plan
    cond, body = (segment for segment in segments(plan.body))
    # The body reads the carried values, not the weight: it holds a copy of the constant.
    assert len(body.inputs) == 2
    assert plan.constants.keys() == {plan.body.steps[0].inits[0]}  # pyright: ignore[reportAttributeAccessIssue]
    assert arena_size(cond.module) < arena_size(body.module)
    _check_shared_arena(executable)


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_if_nested_in_a_loop(trips: int):
    executable = _compiled(NESTED_PROGRAM)
    for seed in (1, 2, 3):
        _check(executable, NESTED_PROGRAM, [_x(seed), _limit(trips)])
        profile = _host_profile(executable)
        assert (profile.loop_trips, profile.branches) == (trips, trips)
    _check_shared_arena(executable)


@pytest.mark.parametrize("pred", [True, False])
def test_branches_that_only_pick_an_input(pred: bool):
    executable = _compiled(PICK_PROGRAM)
    x, v = _x(1), _x(2)
    (y,) = _check(executable, PICK_PROGRAM, [np.array(pred), x, v])
    assert y is not x
    assert y is not v
    assert _host_profile(executable).arena_bytes == 0


@pytest.mark.parametrize("trips", [0, 2])
def test_inference_rewrites_inside_regions(trips: int):
    module = _parse(REWRITES_PROGRAM)
    executable = executable_from_graph(module, "test", predicate="never")
    remaining = [op for op in module.walk() if isinstance(op, DropoutOp | BatchNormOp)]
    assert remaining == []
    for seed in (1, 2):
        _check(executable, REWRITES_PROGRAM, [_x(seed), _limit(trips)])
    _check_shared_arena(executable)


def test_split_keeps_the_control_ops_on_the_host():
    plan = split(_parse(NESTED_PROGRAM))
    graph_ops = [op for segment in segments(plan.body) for op in segment.module.walk()]
    assert not any(isinstance(op, IfOp | WhileOp) for op in graph_ops)
    # cond, the body before the if, each branch, the body after it
    assert len(list(segments(plan.body))) == 5


def test_reference_backend_runs_control_flow():
    executable = executable_from_graph(_parse(NESTED_PROGRAM), "test", backend="reference")
    _check(executable, NESTED_PROGRAM, [_x(), _limit(2)])


def test_a_size_that_changes_at_run_time_is_refused():
    text = """
    func.func @main(%p: tensor<i1>, %x: tensor<2x8xf32>) -> tensor<?x8xf32> {
      %y = graph.if %p : tensor<i1> -> (tensor<?x8xf32>) {
        graph.yield %x : tensor<2x8xf32>
      } else {
        %s = graph.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 1, 8>, steps = array<i64: 1, 1>}
          : (tensor<2x8xf32>) -> tensor<1x8xf32>
        graph.yield %s : tensor<1x8xf32>
      }
      func.return %y : tensor<?x8xf32>
    }
    """
    with pytest.raises(LoweringError, match=r"^test: graph.if at .* tensor<\?x8xf32>.*static shapes"):
        _compiled(text)


def _onnx_if_in_a_loop(path: Path) -> Path:
    """h <- relu(h @ W) if sum(h) > 0 else -h, `n` times (`n` an input): ONNX's Loop and If through the frontend."""
    from onnx import TensorProto, helper, numpy_helper

    f32, i64, boolean = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    w = (np.random.default_rng(0).standard_normal((8, 8)) * 0.4).astype(np.float32)
    then = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W"], ["t"]), helper.make_node("Relu", ["t"], ["a"])],
        "then", [], [helper.make_tensor_value_info("a", f32, [2, 8])],
    )  # fmt: skip
    otherwise = helper.make_graph(
        [helper.make_node("Neg", ["h_in"], ["b"])], "else", [], [helper.make_tensor_value_info("b", f32, [2, 8])]
    )
    step = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("ReduceSum", ["h_in"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["h"], then_branch=then, else_branch=otherwise),
        ],
        "body",
        [helper.make_tensor_value_info("i", i64, []), helper.make_tensor_value_info("cond_in", boolean, []),
         helper.make_tensor_value_info("h_in", f32, [2, 8])],
        [helper.make_tensor_value_info("cond_out", boolean, []), helper.make_tensor_value_info("h", f32, [2, 8])],
    )  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "true", "x"], ["y"], body=step)],
        "loop_if",
        [helper.make_tensor_value_info("x", f32, [2, 8]), helper.make_tensor_value_info("n", i64, [])],
        [helper.make_tensor_value_info("y", f32, [2, 8])],
        [numpy_helper.from_array(np.asarray(True), "true"), numpy_helper.from_array(np.float32(0.0), "zero"),
         numpy_helper.from_array(w, "W")],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_gnomon_compile_runs_an_onnx_loop_with_an_if(tmp_path: Path):
    path = _onnx_if_in_a_loop(tmp_path / "loop_if.onnx")
    native, reference = gnomon.compile(path, predicate="never"), gnomon.compile(path, backend="reference")
    assert native.host is not None
    assert (native.input_names, native.output_names) == (["x", "n"], ["y"])
    for trips in (0, 1, 5):
        inputs = [_x(trips), _limit(trips)]
        (got,), (want,) = native.run(inputs, profile=True), reference.run(inputs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert (_host_profile(native).loop_trips, _host_profile(native).branches) == (trips, trips)
    with pytest.raises(InputError, match=r"^expected 2 inputs"):
        native.run([_x()])
    _check_shared_arena(native)


def test_a_saved_program_with_control_flow_loads_and_runs(tmp_path: Path):
    executable = _compiled(IF_PROGRAM)
    with pytest.raises(GnomonError, match="control flow"):
        _ = executable.program
    path = tmp_path / "model.mlir"
    executable.save(path)
    assert "graph.if" in path.read_text()
    loaded = load_compiled(path)
    assert loaded.host is not None
    for seed in (1, 2):
        _check(loaded, IF_PROGRAM, [_x(seed)])
