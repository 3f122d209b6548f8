"""Recomputation under a memory budget (`graph-recompute`, `gnomon.compile(..., memory_budget=...)`): the plan
model against hand-computed figures, the exact solvers against each other and against every plan of small
problems, and compiled steps whose gradients and losses equal those without recomputation in a smaller arena."""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import gnomon
from gnomon import cli
from gnomon.errors import GnomonError
from gnomon.models import LSTMLanguageModel, ResNet18, TransformerEncoder
from gnomon.passes.graph_recompute import RecomputeError, parse_budget, smallest_budget, solve
from gnomon.passes.graph_recompute.formulation import formulate
from gnomon.passes.graph_recompute.heuristics import greedy, sqrt_checkpoints
from gnomon.passes.graph_recompute.milp import solve_milp
from gnomon.passes.graph_recompute.problem import Node, Problem, evaluate
from gnomon.passes.graph_recompute.z3_solver import WINDOW, solve_z3
from gnomon.passes.graph_recompute.z3_windows import HeldPlan


def _chain(sizes: list[int], costs: list[float], base: int = 0) -> Problem:
    """A chain of forward kernels 0..n-1 (each reads the one before), the loss at step n, and a backward pass that
    reads them in reverse at steps n+1..2n."""
    n = len(sizes)
    nodes = [
        Node(
            step=i,
            size=sizes[i],
            forward_last=i + 1,
            backward_uses=(2 * n - i,),
            inputs=(i - 1,) if i else (),
            recompute_s=costs[i],
            recomputable=True,
            name=f"k{i}",
        )
        for i in range(n)
    ]
    loss = Node(step=n, size=4, forward_last=n, backward_uses=(2 * n + 1,), inputs=(n - 1,), recompute_s=1.0,
                recomputable=True, name="loss")  # fmt: skip
    return Problem(2 * n + 1, n, (*nodes, loss), tuple([base] * (2 * n + 2)))


def test_evaluate_keeps_every_value_until_its_backward_use() -> None:
    problem = _chain([100, 10, 1000], [1.0, 1.0, 1.0])
    evaluation = evaluate(problem, ())
    # At the loss (step 3) all three live, and the loss to the end; the last kernel's value dies first.
    assert evaluation.memory[3] == 100 + 10 + 1000 + 4
    assert evaluation.memory[4] == 100 + 10 + 1000 + 4
    assert evaluation.memory[5] == 100 + 10 + 4
    assert evaluation.peak == 1114


def test_evaluate_recomputes_just_before_the_first_use_and_keeps_inputs_alive() -> None:
    problem = _chain([100, 10, 1000], [1.0, 2.0, 3.0])
    evaluation = evaluate(problem, {2})
    assert evaluation.at == {2: 4}
    # The 1000-byte value is freed after the loss reads it, then made again at step 4 from the kept 10 bytes.
    assert evaluation.memory[3] == 100 + 10 + 1000 + 4
    assert evaluation.memory[4] == 100 + 10 + 1000 + 4
    assert evaluation.extra_s == 3.0
    chained = evaluate(problem, {1, 2})
    assert chained.at == {1: 4, 2: 4}  # the copy of 1 is made where the copy of 2 needs it
    assert chained.extra_s == 5.0


def _random_problem(seed: int, kernels: tuple[int, int] = (6, 9)) -> Problem:
    """A forward pass of `kernels` (a range) kernels, each reading one or two earlier ones, some read by the
    backward pass (in roughly reverse order), over a backward pass with its own varying memory."""
    rng = random.Random(seed)
    n = rng.randint(*kernels)
    steps = 2 * n + 2
    nodes = []
    for i in range(n):
        inputs = tuple(sorted({rng.randrange(i), rng.randrange(i) if rng.random() < 0.4 else i - 1})) if i else ()
        read = rng.random() < 0.7 or i == n - 1
        uses = tuple(sorted({2 * n - i + rng.randint(0, 1), 2 * n - i + rng.randint(0, 3)})) if read else ()
        size, cost, recomputable = rng.choice([64, 256, 1024, 4096]), rng.uniform(1e-6, 1e-4), rng.random() < 0.9
        backward = tuple(u for u in uses if n < u < steps)
        nodes.append(Node(step=i, size=size, forward_last=i + 1, backward_uses=backward, inputs=inputs,
                          recompute_s=cost, recomputable=recomputable, name=f"k{i}"))  # fmt: skip
    nodes.append(Node(step=n, size=4, forward_last=n, backward_uses=(steps,), inputs=(n - 1,), recompute_s=1e-6,
                      recomputable=True, name="loss"))  # fmt: skip
    base = tuple(rng.choice([0, 512, 2048]) for _ in range(steps + 1))
    return Problem(steps, n, tuple(nodes), base)


def _cheapest_by_enumeration(problem: Problem, budget: int) -> float | None:
    """The least extra time of every plan (each copy made where it is first needed) that fits the budget."""
    candidates = [i for i, node in enumerate(problem.nodes) if node.recomputable]
    best = None
    for count in range(len(candidates) + 1):
        for plan in itertools.combinations(candidates, count):
            evaluation = evaluate(problem, plan)
            if evaluation.peak <= budget and (best is None or evaluation.extra_s < best):
                best = evaluation.extra_s
    return best


@pytest.mark.parametrize("seed", range(12))
def test_exact_solvers_agree_and_beat_every_plan(seed: int) -> None:
    """Z3 and the MILP find the same least extra time; their plans fit the budget under `evaluate`; and no plan of
    the enumeration is cheaper (their copies may also be made earlier than first needed, so they may be cheaper)."""
    problem = _random_problem(seed)
    without = evaluate(problem, ()).peak
    budget = int(without * random.Random(seed).uniform(0.55, 0.9))
    form = formulate(problem)
    z3_result = solve_z3(form, budget, 60)
    milp_result = solve_milp(form, budget, 60)
    enumerated = _cheapest_by_enumeration(problem, budget)
    assert z3_result.status in ("optimal", "infeasible")
    assert (z3_result.status == "infeasible") == (milp_result.status == "infeasible")
    if milp_result.plan is None:
        assert enumerated is None
        return
    assert z3_result.plan is not None
    z3_plan = evaluate(problem, z3_result.plan, z3_result.starts)
    milp_plan = evaluate(problem, milp_result.plan, milp_result.starts)
    assert z3_plan.peak <= budget
    assert milp_plan.peak <= budget
    assert z3_plan.extra_s == pytest.approx(milp_plan.extra_s, rel=1e-3, abs=1e-8)
    if enumerated is not None:
        assert milp_plan.extra_s <= enumerated + 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_windows_hold_the_rest_of_the_plan_as_evaluate_counts_it(seed: int) -> None:
    """Z3's windows see every node outside them as constant bytes at each check point and gap: for any plan, those
    constants with every node counted are `evaluate`'s memory there."""
    problem = _random_problem(seed, (40, 60))
    form = formulate(problem)
    rng = random.Random(seed)
    plan = evaluate(problem, [c for c in form.decided if rng.random() < 0.4])
    index_of = {step: i for i, step in enumerate(form.points)}
    held = HeldPlan(form, plan.recomputed, {c: index_of[step] for c, step in plan.at.items()})
    at_points, at_gaps, at_groups = held.without(set())
    for i, step in enumerate(form.points):
        assert at_points[i] == plan.memory[step], step
    for i, (step, _) in enumerate(form.gaps):
        if step >= 0:
            assert at_gaps[i] == plan.memory[step], step
    assert max(at_groups) == max(plan.memory[: problem.boundary + 1])


@pytest.mark.parametrize("seed", range(3))
def test_z3_windows_improve_on_greedy_within_the_budget(seed: int) -> None:
    """On problems of more decisions than one window, Z3's windows start from the greedy plan and return a plan
    that fits, no dearer than greedy's, and within 1% of the MILP's optimum."""
    problem = _random_problem(100 + seed, (60, 80))
    without = evaluate(problem, ()).peak
    budget = int(without * 0.7)
    assert len(formulate(problem, budget // 1000).decided) > WINDOW
    found, status, _, _ = solve(problem, budget, "z3", 20)
    start = evaluate(problem, greedy(problem, budget))
    assert found.peak <= budget
    assert status.startswith("windows of") or status == "optimal"
    if start.peak <= budget:
        assert found.extra_s <= start.extra_s + 1e-12
    reference, milp_status, _, _ = solve(problem, budget, "milp", 60)
    assert milp_status == "optimal"
    assert found.extra_s <= 1.01 * reference.extra_s


def test_heuristics_fit_or_say_so() -> None:
    problem = _chain([4096] * 9, [1e-5] * 9, base=100)
    without = evaluate(problem, ()).peak
    for share in (0.9, 0.7, 0.5):
        evaluation, status, _, _ = solve(problem, int(share * without), "greedy", 1.0)
        assert evaluation.peak <= without
        assert status == ("fits" if evaluation.peak <= share * without else "over budget")
        assert evaluation.recomputed == greedy(problem, int(share * without))
    assert len(sqrt_checkpoints(problem)) == 6  # 9 values in 3 segments: each segment's last is kept
    evaluation, status, _, _ = solve(problem, 10, "greedy", 1.0)
    assert status == "over budget"
    assert evaluation.peak > 10


def test_an_infeasible_budget_names_the_smallest_one_found() -> None:
    problem = _chain([4096] * 4, [1e-5] * 4, base=100)
    with pytest.raises(RecomputeError, match=r"no plan fits a budget of 1000 bytes: the smallest feasible budget found "
                                             r"is \d+ bytes \(0\.0 MiB, recomputing \d+ kernels\)"):  # fmt: skip
        solve(problem, 1000, "z3", 5.0)


@pytest.mark.parametrize("seed", range(4))
def test_z3_finds_smaller_feasible_budgets_than_the_heuristics(seed: int) -> None:
    """Given time, the smallest budget is searched with Z3 below the heuristics' least (on these problems, by 4-25%),
    and a plan fits the budget it names."""
    problem = _random_problem(seed, (20, 30))
    heuristic, _ = smallest_budget(problem)
    searched, _ = smallest_budget(problem, 10.0)
    assert searched < heuristic
    found, status, _, _ = solve(problem, searched, "z3", 10.0)
    assert found.peak <= searched, status


@pytest.mark.parametrize(
    ("text", "expected"),
    [("40%", (None, 0.4)), ("268435456", (268435456, None)), ("256MiB", (256 * 2**20, None)), ("1.5GB", (1.5e9, None))],
)
def test_budgets_read_as_bytes_or_a_share(text: str, expected: tuple[int | None, float | None]) -> None:
    assert parse_budget(text) == expected


@pytest.mark.parametrize("text", ["half", "0%", "150%", "-3MiB", "12 parsecs"])
def test_a_malformed_budget_is_one_line(text: str) -> None:
    with pytest.raises(RecomputeError, match=r"^memory budget"):
        parse_budget(text)


def _models() -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...], str]]:
    torch.manual_seed(0)
    lstm = LSTMLanguageModel(vocab=300, hidden=32, layers=2, steps=8)
    transformer = TransformerEncoder(layers=2, d_model=32, heads=4, seq=16)
    explicit = TransformerEncoder(layers=2, d_model=32, heads=4, seq=16, explicit_attention=True)
    resnet = ResNet18(width=8, classes=10, image=32).train()
    return [
        ("lstm", lstm, (lstm.example_inputs(4)[0], torch.randint(0, 300, (4 * 8,))), "cross_entropy"),
        ("transformer", transformer, (transformer.example_inputs(4)[0], torch.randn(4, 16, 32)), "mse"),
        ("explicit_attention", explicit, (explicit.example_inputs(4)[0], torch.randn(4, 16, 32)), "mse"),
        ("resnet", resnet, (resnet.example_inputs(32)[0], torch.randint(0, 10, (32,))), "cross_entropy"),
    ]


@pytest.mark.parametrize(("name", "model", "batch", "loss"), _models(), ids=lambda v: v if isinstance(v, str) else "")
def test_recomputation_leaves_the_numbers_unchanged_in_a_smaller_arena(
    name: str, model: torch.nn.Module, batch: tuple[torch.Tensor, ...], loss: str
) -> None:
    """Two SGD steps with momentum, with and without a budget of 70% of the arena: the same losses, gradients and
    parameters to the bit (the copies compute what the originals did), in an arena within the budget."""
    optimizer = gnomon.SGD(lr=0.01, momentum=0.9)
    plain = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer)
    budgeted = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer, memory_budget=0.7)
    report = budgeted.recompute
    assert report is not None
    assert report.peak_bytes == budgeted.memory().arena <= report.budget_bytes
    assert report.budget_bytes == int(0.7 * plain.memory().arena)
    assert report.peak_bytes_without_recompute == plain.memory().arena
    assert report.recomputed
    assert report.predicted_overhead_s > 0
    inputs = [x.numpy() for x in batch]
    for _ in range(2):
        assert budgeted.step(*inputs) == plain.step(*inputs)
    for key, value in plain.gradients().items():
        np.testing.assert_array_equal(budgeted.gradients()[key], value, err_msg=key)
    for key, value in plain.state_dict().items():
        np.testing.assert_array_equal(budgeted.state_dict()[key], value, err_msg=key)


def test_released_gradients_and_every_solver_train_alike() -> None:
    _, model, batch, loss = _models()[1]
    optimizer = gnomon.Adam(lr=1e-3)
    inputs = [x.numpy() for x in batch]
    plain = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer, keep_gradients=False)
    expected = [plain.step(*inputs) for _ in range(2)]
    for solver in ("milp", "greedy", "sqrt"):
        step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer,
                              keep_gradients=False, memory_budget=0.8, recompute=solver,
                              recompute_time_limit=5)  # an int, as users write it  # fmt: skip
        assert step.recompute is not None
        assert step.recompute.solver == solver
        assert [step.step(*inputs) for _ in range(2)] == expected, solver


def test_memory_budget_errors() -> None:
    _, model, batch, loss = _models()[1]
    with pytest.raises(GnomonError, match=r"^memory_budget=1\.5: a share of the peak is more than 0 and at most 1$"):
        gnomon.compile(gnomon.with_loss(model, loss), batch, train=True, memory_budget=1.5)
    with pytest.raises(GnomonError, match=r"the smallest feasible budget found is"):
        gnomon.compile(gnomon.with_loss(model, loss), batch, train=True, memory_budget=1000)
    with pytest.raises(GnomonError, match=r"^recomputation time limit '10': must be more than 0 seconds$"):
        gnomon.compile(gnomon.with_loss(model, loss), batch, train=True, memory_budget=0.5, recompute_time_limit="10")
    with pytest.raises(GnomonError, match=r"^memory_budget is a training step's option"):
        gnomon.compile(model, batch[:1], memory_budget=0.5)


@pytest.fixture(scope="module")
def transformer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = TransformerEncoder(layers=2, d_model=32, heads=4, seq=16)
    path = tmp_path_factory.mktemp("models") / "encoder.pt2"
    torch.export.save(torch.export.export(model, model.example_inputs(4)), path)
    return path


def test_cli_memory_budget_json(transformer_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["memory", "--train", str(transformer_file), "--loss", "mse", "--release-gradients", "--budget", "50%"]
    args.append("--json")
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["solver"] == "z3"
    assert report["peak_bytes"] == report["arena_bytes"] <= report["budget_bytes"]
    assert report["budget_bytes"] == report["peak_bytes_without_recompute"] // 2
    assert re.fullmatch(r"optimal|windows of \d+|feasible", report["status"])
    assert 0 < report["predicted_overhead"] < 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["memory", "{model}", "--budget", "50%"], "--budget recomputes a training step's forward values: add --train"),
        (["memory", "--train", "{model}", "--loss", "mse", "--solver", "milp"], "--solver and --time-limit choose"),
        (["run", "--train", "{model}", "--loss", "mse", "--budget", "lots"], "memory budget 'lots': expected bytes"),
        (["memory", "--train", "{model}", "--loss", "mse", "--budget", "1KiB"], "the smallest feasible budget found"),
        (["memory", "--train", "{model}", "--loss", "mse", "--budget", "0%"], "a share of the peak is between 0% and"),
        (["run", "--train", "{model}", "--budget", "50%", "--time-limit", "0"], "time limit 0.0: must be more than 0"),
    ],
)
def test_cli_budget_errors_are_one_line(transformer_file: Path, args: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert cli.main([a.replace("{model}", str(transformer_file)) for a in args]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert message in error
