"""Predication against host branching: does `graph-predicate` decide right? (issue 19, acceptance 3)

Models, built from code (torch.export with `torch.cond` / `torch.while_loop`):
- early-exit classifiers: a first head decides on its softmax's confidence whether to answer, or to run a deeper
  trunk and a second head; small (width 64: the deep side costs less than a host decision) and large (width 1024:
  it costs much more);
- a fixed-point loop: h <- tanh(W h + x) while the step is above a tolerance, at most 8 trips (a counted bound
  that gnomon reads from the condition), small and large.

Each model is compiled natively three ways: with its control flow kept for the host (`predicate="never"`),
predicated (`"always"`) and as `graph-predicate` decides (`"auto"`, on this machine's device file). Each way is
timed on inputs that take each path (the branch's two sides; the loop at a few trip counts), the ways taking turns,
the smallest of several medians with the spread. The measured mean over the inputs stands against the prediction
at the pass's assumption (a branch's sides taken equally often; a loop at its bound: the measured rows say how many
trips each input ran). "right" says whether the decision taken is the way measured faster on these inputs. The H100
columns are predictions from its datasheet device (no GPU runs here): the same two figures and the decision.

    python bench/predicate.py [--repeats 5] [--models early_exit_small,...] [--widths 64,1024]

Run it alone on the machine (never beside the tests or another benchmark).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch._higher_order_ops.while_loop import while_loop

import gnomon
from gnomon.executable import Executable
from gnomon.passes.graph_fuse import fusion_device
from gnomon.passes.graph_predicate import PredicateDecision

sys.path.insert(0, str(Path(__file__).parent))
from timing import timed


class EarlyExit(torch.nn.Module):
    """Answer from the first head when its top probability is above `threshold`, else from a deeper trunk."""

    def __init__(self, width: int, depth: int = 4, classes: int = 10, threshold: float = 0.5):
        super().__init__()
        self.stem = torch.nn.Linear(width, width)
        self.exit_head = torch.nn.Linear(width, classes)
        self.trunk = torch.nn.Sequential(
            *[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU()) for _ in range(depth)]
        )
        self.head = torch.nn.Linear(width, classes)
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        early = self.exit_head(h)
        confident = torch.softmax(early, dim=-1).amax() > self.threshold
        return torch.cond(confident, lambda h, e: e.clone(), lambda h, e: self.head(self.trunk(h)), (h, early))


class FixedPoint(torch.nn.Module):
    """h <- tanh(W h + x) while the step is above `tolerance`, at most `max_trips` times."""

    def __init__(self, width: int, max_trips: int = 8, tolerance: float = 1e-3):
        super().__init__()
        self.w = torch.nn.Linear(width, width)
        self.max_trips, self.tolerance = max_trips, tolerance

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def cond(i: torch.Tensor, h: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
            return (i < self.max_trips) & (step > self.tolerance)

        def body(i: torch.Tensor, h: torch.Tensor, step: torch.Tensor):
            new = torch.tanh(self.w(h) + x)
            return i + 1, new, (new - h).abs().amax()

        start = (torch.zeros((), dtype=torch.int64), torch.zeros_like(x), torch.ones(()))
        return while_loop(cond, body, start)[1]


@dataclass(frozen=True)
class Case:
    name: str
    model: torch.nn.Module
    inputs: dict[str, np.ndarray]
    """Inputs by the path they take."""


def _early_exit_inputs(model: EarlyExit, width: int) -> dict[str, np.ndarray]:
    """An input the first head is confident on (it exits) and one it is not (the deep side runs)."""
    rng = np.random.default_rng(0)
    found: dict[str, np.ndarray] = {}
    for scale in (0.01, 0.1, 1.0, 10.0, 100.0):
        for _ in range(50):
            x = (rng.standard_normal((1, width)) * scale).astype(np.float32)
            with torch.no_grad():
                h = torch.relu(model.stem(torch.from_numpy(x)))
                exits = bool(torch.softmax(model.exit_head(h), -1).amax() > model.threshold)
            found.setdefault("exit" if exits else "deep", x)
        if len(found) == 2:
            return found
    raise RuntimeError(f"no input of both kinds for the early-exit model of width {width}")


def _fixed_point_inputs(width: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {f"x*{scale:g}": (rng.standard_normal((1, width)) * scale).astype(np.float32) for scale in (0.0, 0.05, 1.0)}


def cases(names: Sequence[str] | None, widths: Sequence[int]) -> list[Case]:
    torch.manual_seed(0)
    built: list[Case] = []
    for width in widths:
        label = {64: "small", 1024: "large"}.get(width, f"w{width}")
        early = EarlyExit(width).eval()
        built.append(Case(f"early_exit_{label}", early, _early_exit_inputs(early, width)))
        loop = FixedPoint(width).eval()
        with torch.no_grad():
            loop.w.weight.mul_(0.5 / max(1.0, float(torch.linalg.matrix_norm(loop.w.weight, 2))))
        built.append(Case(f"fixed_point_{label}", loop, _fixed_point_inputs(width)))
    return [c for c in built if names is None or c.name in names]


def compiled(case: Case, predicate: str, device: str = "auto") -> tuple[Executable, list[PredicateDecision]]:
    decisions: list[PredicateDecision] = []
    example = (torch.from_numpy(next(iter(case.inputs.values()))),)
    executable = gnomon.compile(case.model, example, predicate=predicate, device=device, predications=decisions)
    return executable, decisions


def predicted(decisions: Sequence[PredicateDecision]) -> tuple[float, float]:
    """The program's control ops, host and predicated, summed (the outermost ones: inner ones are in their regions)."""
    host = sum(d.host_s or 0.0 for d in decisions)
    straight = sum(d.predicated_s or 0.0 for d in decisions)
    return host, straight


def local_device_text() -> str:
    from gnomon.cost.devices import local_device_path

    path = local_device_path()
    return path.read_text() if path.is_file() else ""


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", help="comma-separated case names (default: all)")
    parser.add_argument(
        "--widths",
        default="64,1024",
        help="the models' widths (64: small, 1024: large; the pricing was refined on these, others are held out)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    local = fusion_device("auto")
    source = "as calibrated" if "host_branch_s" in local_device_text() else "a typical figure: not calibrated yet"
    print(
        f"devices: this machine as {local.name} ({local.provenance}; a host decision"
        f" {local.host_branch_s * 1e6:.1f} us, {source}); h100: datasheet figures, predicted only"
    )
    rows: list[str] = []
    verdicts: list[bool] = []
    widths = [int(w) for w in args.widths.split(",")]
    for case in cases(args.models.split(",") if args.models else None, widths):
        host_exe, local_never = compiled(case, "never")
        straight_exe, _ = compiled(case, "always")
        auto_exe, auto_decisions = compiled(case, "auto")
        _, h100_never = compiled(case, "never", device="h100")
        _, h100_auto = compiled(case, "auto", device="h100")
        assert host_exe.host is not None, f"{case.name}: no control flow left for the host"
        assert straight_exe.host is None, f"{case.name}: predication left control flow"
        measured_host, measured_straight = [], []
        for path, x in case.inputs.items():
            reference = case.model(torch.from_numpy(x)).detach().numpy()
            for exe in (host_exe, straight_exe, auto_exe):
                np.testing.assert_allclose(exe(x)[0], reference, rtol=1e-4, atol=1e-5)
            calls = 200 if x.size <= 64 else 40
            (h, h_spread), (s, s_spread) = (
                timed(lambda e=e: e(x), args.repeats, calls) for e in (host_exe, straight_exe)
            )
            measured_host.append(h)
            measured_straight.append(s)
            host_exe.run([x], profile=True)
            trips = host_exe.profile().loop_trips  # pyright: ignore[reportAttributeAccessIssue]
            path = f"{path} ({trips})" if trips else path
            rows.append(
                f"  {case.name:<18} {path:<12} {us(h)} ±{us(h_spread).strip():>6} {us(s)} ±{us(s_spread).strip():>6}"
            )
        host_mean, straight_mean = statistics.fmean(measured_host), statistics.fmean(measured_straight)
        taken = "predicated" if auto_exe.host is None else "host"
        faster = "predicated" if straight_mean < host_mean else "host"
        verdicts.append(taken == faster)
        pred_host, pred_straight = predicted(local_never)
        h100_host, h100_straight = predicted(h100_never)
        h100_taken = "predicated" if all(d.decision == "predicated" for d in h100_auto) else "host"
        rows.append(
            f"  {case.name:<18} {'mean':<12} {us(host_mean)}         {us(straight_mean)}"
            f"          pred. {us(pred_host)} {us(pred_straight)}  took {taken:<10} faster {faster:<10}"
            f" {'right' if taken == faster else 'WRONG'}   h100 {us(h100_host)} {us(h100_straight)} -> {h100_taken}"
        )
        del auto_decisions
    print(f"  {'model':<18} {'input (trips)':<12} {'host us':>9} {'spread':>7} {'pred. us':>9} {'spread':>7}")
    print("\n".join(rows))
    print(f"decisions right on this machine: {sum(verdicts)} of {len(verdicts)}")


if __name__ == "__main__":
    main()
