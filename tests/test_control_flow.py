"""graph.if and graph.while: reference semantics, shape inference across regions, and `graph-predicate`, whose
straight-line code must compute what the control flow computes."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.cost import load_device
from gnomon.cost.control_flow import counted, expected_trips, host_if_s, op_sum
from gnomon.dialects.graph.control_flow import IfOp, WhileOp
from gnomon.passes.graph_predicate import GraphPredicatePass, predicate_decisions
from gnomon.passes.graph_shape_inference import GraphShapeInferencePass
from gnomon.reference import run_reference

BRANCH = """
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  %z = graph.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %p = graph.gt %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %y = graph.if %p : tensor<i1> -> (tensor<2x4xf32>) {
    %r = graph.relu %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
    graph.yield %r : tensor<2x4xf32>
  } else {
    %m = graph.mul %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    graph.yield %m : tensor<2x4xf32>
  }
  func.return %y : tensor<2x4xf32>
}
"""

# Halve x while its absolute sum is above 1, at most 5 times; count the trips. A nested branch in the body
# negates the odd trips' values.
HALVING = """
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<i64>) {
  %n0 = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %n, %h = graph.while (%n0, %x) : (tensor<i64>, tensor<2x4xf32>) -> (tensor<i64>, tensor<2x4xf32>)
      {max_trips = 5 : i64} cond {
  ^bb0(%i: tensor<i64>, %a: tensor<2x4xf32>):
    %five = graph.constant {value = dense<5> : tensor<i64>} : () -> tensor<i64>
    %lt = graph.lt %i, %five : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %ab = graph.abs %a : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %s = graph.reduce_sum %ab {axes = array<i64>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
    %one = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %big = graph.gt %s, %one : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %go = graph.and %lt, %big : (tensor<i1>, tensor<i1>) -> tensor<i1>
    graph.yield %go : tensor<i1>
  } do {
  ^bb0(%i: tensor<i64>, %a: tensor<2x4xf32>):
    %one = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %i1 = graph.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %half = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %m = graph.mul %a, %half : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %two = graph.constant {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %parity = graph.rem %i, %two : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %zero = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %odd = graph.ne %parity, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %v = graph.if %odd : tensor<i1> -> (tensor<2x4xf32>) {
      %neg = graph.neg %m : (tensor<2x4xf32>) -> tensor<2x4xf32>
      graph.yield %neg : tensor<2x4xf32>
    } else {
      graph.yield %m : tensor<2x4xf32>
    }
    graph.yield %i1, %v : tensor<i64>, tensor<2x4xf32>
  }
  func.return %h, %n : tensor<2x4xf32>, tensor<i64>
}
"""


# The then side is a 512^3 product, the else side a relu.
COSTLY = (
    BRANCH.replace("2x4", "512x512")
    .replace("graph.relu %x :", "graph.matmul %x, %x :")
    .replace(
        "(tensor<512x512xf32>) -> tensor<512x512xf32>\n    graph.yield %r",
        "(tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>\n    graph.yield %r",
    )
)


def parse(text: str) -> ModuleOp:
    module = Parser(gnomon_context(), text).parse_module()
    module.verify()
    return module


def halving(x: np.ndarray) -> tuple[np.ndarray, int]:
    trips = 0
    while trips < 5 and np.abs(x).sum() > 1:
        x = x * np.float32(0.5)
        x = -x if trips % 2 else x
        trips += 1
    return x, trips


@pytest.mark.parametrize("scale", [0.01, 0.2, 1.0, 100.0])
def test_reference_runs_a_loop_with_a_nested_branch(scale: float) -> None:
    x = (np.random.default_rng(1).standard_normal((2, 4)) * scale).astype(np.float32)
    h, n = run_reference(parse(HALVING), [x])
    expected, trips = halving(x)
    assert int(n) == trips
    np.testing.assert_array_equal(h, expected)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_reference_takes_the_branch_the_predicate_says(sign: float) -> None:
    x = (np.abs(np.random.default_rng(2).standard_normal((2, 4))) * sign).astype(np.float32)
    (y,) = run_reference(parse(BRANCH), [x])
    np.testing.assert_array_equal(y, np.maximum(x, 0) if sign > 0 else x * x)


def test_shape_inference_refines_a_branch_from_what_it_yields() -> None:
    module = parse(
        BRANCH.replace("-> (tensor<2x4xf32>) {", "-> (tensor<?x4xf32>) {")
        .replace("func.return %y : tensor<2x4xf32>", "func.return %y : tensor<?x4xf32>")
        .replace("-> tensor<2x4xf32> {\n  %s", "-> tensor<?x4xf32> {\n  %s")
    )
    GraphShapeInferencePass().apply(gnomon_context(), module)
    (branch,) = [op for op in module.walk() if isinstance(op, IfOp)]
    assert str(branch.outputs[0].type) == "tensor<2x4xf32>"


def predicated(text: str, **options: object) -> ModuleOp:
    module = parse(text)
    GraphPredicatePass(**options).apply(gnomon_context(), module)  # pyright: ignore[reportArgumentType]
    module.verify()
    return module


@pytest.mark.parametrize("scale", [0.01, 0.2, 1.0, 100.0])
def test_predicated_loop_computes_what_the_loop_computes(scale: float) -> None:
    module = predicated(HALVING, mode="always")
    assert not [op for op in module.walk() if isinstance(op, IfOp | WhileOp)]
    x = (np.random.default_rng(3).standard_normal((2, 4)) * scale).astype(np.float32)
    h, n = run_reference(module, [x])
    expected, trips = halving(x)
    assert int(n) == trips
    np.testing.assert_array_equal(h, expected)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_predicated_branch_computes_what_the_branch_computes(sign: float) -> None:
    x = (np.abs(np.random.default_rng(4).standard_normal((2, 4))) * sign).astype(np.float32)
    (y,) = run_reference(predicated(BRANCH, mode="always"), [x])
    np.testing.assert_array_equal(y, np.maximum(x, 0) if sign > 0 else x * x)


def test_predication_is_decided_by_predicted_time() -> None:
    # A small branch: computing the side not taken costs less than a host decision, on either device.
    for device in ("generic-cpu", "h100"):
        (decision,) = predicate_decisions(predicated(BRANCH, device=device))
        assert decision.decision == "predicated"
        assert decision.predicated_s is not None
        assert decision.host_s is not None
        assert decision.predicated_s < decision.host_s
    # A costly side (a 512^3 product) computed for nothing costs more than the decision and the copies of a host
    # branch: it stays on the host.
    (decision,) = predicate_decisions(predicated(COSTLY, device="generic-cpu"))
    assert decision.decision == "host"
    assert decision.host_s is not None
    assert decision.predicated_s is not None
    assert decision.host_s < decision.predicated_s


def test_host_branch_weighs_its_sides_by_the_share_taken() -> None:
    (branch,) = [op for op in parse(COSTLY).walk() if isinstance(op, IfOp)]
    device = load_device("generic-cpu")
    price = op_sum(device)
    then_heavy, else_heavy = host_if_s(branch, device, price, 1.0), host_if_s(branch, device, price, 0.0)
    assert host_if_s(branch, device, price, 0.5) == pytest.approx((then_heavy + else_heavy) / 2)
    assert then_heavy > 2 * else_heavy


def test_unbounded_loop_stays_on_the_host_and_says_why() -> None:
    module = predicated(HALVING.replace("\n      {max_trips = 5 : i64}", ""), mode="always")
    decisions = [d for d in predicate_decisions(module) if d.op == "graph.while"]
    assert [(d.decision, d.reason) for d in decisions] == [("host", "no bound on its trips")]


# Row %i of x where %i is a row (i < 4), else zeros: the gather is only safe on the side that is taken.
GUARDED = """
func.func @main(%x: tensor<4x8xf32>, %i: tensor<1xi64>) -> tensor<1x8xf32> {
  %n = graph.constant {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %p = graph.lt %i, %n : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>
  %y = graph.if %p : tensor<1xi1> -> (tensor<1x8xf32>) {
    %r = graph.gather %x, %i {axis = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
    graph.yield %r : tensor<1x8xf32>
  } else {
    %z = graph.constant {value = dense<0.0> : tensor<1x8xf32>} : () -> tensor<1x8xf32>
    graph.yield %z : tensor<1x8xf32>
  }
  func.return %y : tensor<1x8xf32>
}
"""

# The sum of x's rows, read one by one at a counter: once unrolled, each gather's index folds to a constant.
ROW_SUM = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<1x8xf32> {
  %i0 = graph.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %s0 = graph.constant {value = dense<0.0> : tensor<1x8xf32>} : () -> tensor<1x8xf32>
  %n, %s = graph.while (%i0, %s0) : (tensor<1xi64>, tensor<1x8xf32>) -> (tensor<1xi64>, tensor<1x8xf32>)
      {max_trips = 4 : i64} cond {
  ^bb0(%i: tensor<1xi64>, %a: tensor<1x8xf32>):
    %four = graph.constant {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
    %go = graph.lt %i, %four : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>
    graph.yield %go : tensor<1xi1>
  } do {
  ^bb0(%i: tensor<1xi64>, %a: tensor<1x8xf32>):
    %one = graph.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
    %next = graph.add %i, %one : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
    %row = graph.gather %x, %i {axis = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
    %b = graph.add %a, %row : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    graph.yield %next, %b : tensor<1xi64>, tensor<1x8xf32>
  }
  func.return %s : tensor<1x8xf32>
}
"""


def test_a_gather_at_an_index_the_branch_guards_is_not_predicated_and_runs_natively() -> None:
    from gnomon.executable import executable_from_graph

    (decision,) = predicate_decisions(predicated(GUARDED, mode="always"))
    assert (decision.decision, decision.reason) == (
        "host",
        "graph.gather reads at indices from data: where the branch is not taken they may be out of range",
    )
    executable = executable_from_graph(parse(GUARDED), "guarded", predicate="always")
    x = np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32)
    for i in (0, 3, 4, 1 << 40):
        (y,) = executable(x, np.array([i], dtype=np.int64))
        np.testing.assert_array_equal(y, x[i : i + 1] if i < 4 else np.zeros((1, 8), np.float32))


def test_a_gather_at_a_counted_loops_counter_is_predicated_once_its_indices_fold() -> None:
    module = predicated(ROW_SUM, mode="always")
    assert [d.decision for d in predicate_decisions(module)] == ["predicated"]
    x = np.random.default_rng(7).standard_normal((4, 8)).astype(np.float32)
    (s,) = run_reference(module, [x])
    np.testing.assert_allclose(s, x.sum(axis=0, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("predicate", ["always", "never"])
def test_native_program_with_or_without_predication_computes_what_the_reference_does(predicate: str) -> None:
    from gnomon.executable import executable_from_graph
    from gnomon.passes.graph_predicate import PredicateDecision

    decisions: list[PredicateDecision] = []
    executable = executable_from_graph(parse(HALVING), "halving", predicate=predicate, predications=decisions)
    assert (executable.host is None) == (predicate == "always")
    assert {d.decision for d in decisions} == {"predicated" if predicate == "always" else "host"}
    for scale in (0.01, 0.3, 100.0):
        x = (np.random.default_rng(5).standard_normal((2, 4)) * scale).astype(np.float32)
        h, n = executable(x)
        expected, trips = halving(x)
        assert int(n) == trips
        np.testing.assert_allclose(h, expected, rtol=1e-6)


@pytest.mark.parametrize("predicate", ["always", "never"])
def test_torch_early_exit_and_loop_run_natively_as_eager_does(predicate: str) -> None:
    import torch
    from torch._higher_order_ops.while_loop import while_loop

    import gnomon

    class EarlyExitThenRefine(torch.nn.Module):
        """Answer from a first head when it is confident, else from a deeper one; then refine while the step is
        large, at most 4 trips (a bound gnomon reads from the counted condition)."""

        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.stem, self.exit, self.deep = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
            self.step = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.stem(x))
            y = torch.cond(h.sum() > 1.0, lambda h: self.exit(h), lambda h: torch.tanh(self.deep(h)) * 2, (h,))

            def go(i: torch.Tensor, y: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
                return (i < 4) & (delta > 0.5)

            def refine(i: torch.Tensor, y: torch.Tensor, delta: torch.Tensor):
                new = torch.tanh(self.step(y))
                return i + 1, new, (new - y).abs().amax()

            return while_loop(go, refine, (torch.zeros((), dtype=torch.int64), y, torch.ones(())))[1]

    model = EarlyExitThenRefine().eval()
    example = (torch.randn(2, 8),)
    executable = gnomon.compile(model, example, predicate=predicate)
    assert (executable.host is None) == (predicate == "always")
    for scale in (0.01, 1.0, 30.0):
        x = torch.randn(2, 8, generator=torch.Generator().manual_seed(int(scale * 100))) * scale
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(executable(x)[0], expected, rtol=1e-5, atol=1e-6)


def test_a_counted_loop_is_priced_at_its_bound_and_one_on_data_half_way() -> None:
    (data,) = [op for op in parse(HALVING).walk() if isinstance(op, WhileOp)]
    assert not counted(data)
    assert expected_trips(data) == 3.0  # a bound of 5 trips, stopped by the data at any of them
    counter_only = HALVING.replace("%go = graph.and %lt, %big", "%go = graph.and %lt, %lt")
    (fixed,) = [op for op in parse(counter_only).walk() if isinstance(op, WhileOp)]
    assert counted(fixed)
    assert expected_trips(fixed) == 5.0


def test_a_branch_on_a_dynamic_length_runs_natively_at_every_size() -> None:
    import torch
    from torch.export import Dim

    import gnomon

    class Gate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.tanh(self.linear(x))
            return torch.cond(y.sum() > 0, lambda y: y * 2, lambda y: y.relu(), (y,))

    model = Gate().eval()
    seq = Dim("seq", min=1, max=64)
    executable = gnomon.compile(model, (torch.randn(2, 8, 16),), dynamic_shapes=({1: seq},), predicate="never")
    assert executable.host is not None
    for length in (1, 9, 64):
        for sign in (1.0, -1.0):
            x = sign * torch.ones(2, length, 16) + 0.1 * torch.randn(2, length, 16)
            with torch.no_grad():
                expected = model(x).numpy()
            np.testing.assert_allclose(executable(x)[0], expected, rtol=1e-5, atol=1e-6)
