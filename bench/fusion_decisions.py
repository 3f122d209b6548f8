"""Do `graph-fuse`'s decisions hold on this machine? Each priced choice, predicted and measured.

For every choice `graph-fuse` prices in a model, after `graph-layout` as in the lowering pipeline (a join: the
open kernel and the candidate apart or fused; a kind: a matmul, reduction or softmax generated or called from the
library; an attention: written out or one `graph.attention`), the ops involved are cut out into a program of their
own, lowered both ways (with the groups fixed; an attention's two programs as `graph-fuse` groups them), and each
way is run by the runtime with every launch timed; a way's time is the sum of its launches (launch overhead, library
calls and kernel: what `gnomon.cost.kernel_cost` predicts), the smallest of several medians, the two ways taking
turns run by run. The table puts the predicted speedup of option B over option A (fused over separate; library over
generated) beside the measured one; the summary counts how often their signs agree (issue 16's acceptance asks for
90%) and how often the option taken was measured faster, the same count over the choices whose measured speedup is
no tie (`TIE`), how far the predicted speedups are from the measured, and sums the measured time of the options
taken, of graph-to-kernel's fixed rule and of the options not taken: many choices are near ties, where a sign says
little and the sums say what it cost.

    python bench/fusion_decisions.py [--device auto] [--models mobilenet_v2_w16_e6,...] [--batch 1]

Models: the validation set's (`bench/validation_set.py`) by name, or the bundled light ONNX networks. Nothing is
tuned here; run it alone on the machine (never beside the tests or another benchmark).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, FloatAttr, FunctionType, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

sys.path.insert(0, str(Path(__file__).parent))

from gnomon.bundled import light_models
from gnomon.context import gnomon_context
from gnomon.dialects.graph.nn import AttentionOp, SoftmaxOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.passes.graph_fuse import Fuser, GraphFusePass, fusion_device
from gnomon.passes.graph_fuse_attention import FuseWrittenAttention, match_attention
from gnomon.passes.graph_layout import GraphLayoutPass
from gnomon.passes.graph_to_kernel import (
    ATTENTION_ATTR,
    FUSION_ATTR,
    Group,
    Kind,
    default_kind,
    fusion_group,
    fusion_kind,
    kernel_ops,
    legal_join,
    library_kind,
    set_groups,
)
from gnomon.pipeline import load, run_pipeline
from gnomon.runtime.calibration.profile import smooth
from gnomon.runtime.executor import Program

DEFAULT_MODELS = (
    "mobilenet_v2_w16_e6",
    "mobilenet_v3_w16",
    "convnext_w16_s2",
    "vit_p4_d64",
    "encoder_s32_d64",
    "decoder_rotary_s32_d64",
    "unet_w8_l2",
    "mixer_p4_d64",
    "light_squeezenet",
    "light_shufflenet",
)


TIE = 0.05
"""A measured speedup within this of 1 is a tie here: two runs of this bench (the same code and calibration, 255 runs
a way) flipped the measured sign of 24 of 176 choices; of the 100 that measured 5% or more off 1 in both, 1 flipped
(at 3%, 9 of 119)."""


@dataclass(frozen=True)
class Way:
    """One option of a choice: its ops' groups (index into the cut-out ops) and each group's kind; or, for an
    attention, a program of its own that `spec` lowers."""

    name: str
    groups: tuple[int, ...]
    kinds: tuple[Kind, ...]
    module: ModuleOp | None = None
    spec: str = ""


@dataclass
class Choice:
    model: str
    op: str
    question: str
    taken: str
    ways: tuple[Way, Way]
    module: ModuleOp
    predicted: tuple[float, float] = (0.0, 0.0)
    measured: tuple[float, float] = (0.0, 0.0)


def _graph_module(name: str, batch: int) -> ModuleOp:
    """A light ONNX network (at its own batch) or a validation model at `batch`, in the graph dialect."""
    light = {p.stem: p for p in light_models()}
    if name in light:
        return load(light[name])
    from validation_set import VALIDATION_SET

    entry = VALIDATION_SET[name]
    model = entry.build()
    return load(model, entry.example_inputs(model, batch))


def _cut_out(ops: Sequence[Operation]) -> tuple[ModuleOp, list[Operation]]:
    """A module whose one function computes `ops` (cloned) from their operands, returning the last op's result;
    constants are cloned in, other operands become arguments. Also the cloned ops, in order."""
    inside = {result for op in ops for result in op.results}
    outside: list[SSAValue] = []
    for op in ops:
        outside += [v for v in op.operands if v not in inside and v not in outside]
    arguments = [v for v in outside if not isinstance(v.owner, ConstantOp)]
    block = Block(arg_types=[v.type for v in arguments])
    mapping: dict[SSAValue, SSAValue] = dict(zip(arguments, block.args, strict=True))
    for value in outside:
        if isinstance(value.owner, ConstantOp):
            constant = value.owner.clone()
            block.add_op(constant)
            mapping[value] = constant.results[0]
    clones: list[Operation] = []
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        clone.attributes.pop(FUSION_ATTR, None)
        block.add_op(clone)
        clones.append(clone)
    result = mapping[ops[-1].results[0]]
    block.add_op(func.ReturnOp(result))
    function = func.FuncOp("main", FunctionType.from_lists(list(block.arg_types), [result.type]), Region(block))
    return ModuleOp([function]), clones


def _choices(model: str, module: ModuleOp) -> list[Choice]:
    """Every priced choice in `module` (already through `graph-fuse`), each with its ops cut out."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ops, prologues = kernel_ops(function)
    choices: list[Choice] = []
    for index, op in enumerate(ops):
        fusion = op.attributes.get(FUSION_ATTR)
        if not isinstance(fusion, DictionaryAttr) or prologues.get(op):
            continue
        group = fusion_group(op)
        if "fused_s" in fusion.data:
            decision = fusion.data["decision"]
            assert isinstance(decision, StringAttr)
            # The kernel the op was priced against: its own group if it joined, else the one before it.
            open_group = group if decision.data == "fuse" else fusion_group(ops[index - 1])
            members = [o for o in ops[:index] if fusion_group(o) == open_group]
            kind = fusion_kind(members[0]) or default_kind(members[0])
            cut, clones = _cut_out([*members, op])
            n = len(members)
            alone = default_kind(clones[-1])
            ways = (Way("separate", (0,) * n + (1,), (kind, alone)), Way("fused", (0,) * (n + 1), (kind,)))
            choices.append(Choice(model, op.name, "join", decision.data, ways, cut))
        elif "library_s" in fusion.data:
            taken = [o for o in ops[index:] if fusion_group(o) == group]
            cut, clones = _cut_out(taken)
            n = len(taken)
            generated = Way("generated", (0,) * n, ("generated",))
            # The library call with its epilogue, then the rest grouped as graph-to-kernel groups it by itself.
            first = Group([clones[0]], library_kind(clones[0]), [])
            groups = [first]
            for clone in clones[1:]:
                if legal_join(groups[-1], clone):
                    groups[-1].ops.append(clone)
                else:
                    groups.append(Group([clone], default_kind(clone), []))
            indices = tuple(i for i, group in enumerate(groups) for _ in group.ops)
            library = Way("library", indices, tuple(group.kind for group in groups))
            kind = fusion_kind(op)
            choices.append(
                Choice(
                    model, op.name, "kind", "generated" if kind == "generated" else "library", (generated, library), cut
                )
            )
    return choices


def _attention_choices(model: str, module: ModuleOp, device: str) -> list[Choice]:
    """Every written-out attention of `module` (before `graph-fuse`), in program order: its ops cut out as they
    are, and the same made one `graph.attention`, each lowered by `graph-fuse` (attention fusion off) as the pass
    would lower it."""
    spec = f'graph-fuse{{device="{device}" attention=false}},graph-to-kernel,kernel-to-rt'
    choices: list[Choice] = []
    for softmax in [op for op in module.walk() if isinstance(op, SoftmaxOp)]:
        match = match_attention(softmax)
        if match is None:
            continue
        written, _ = _cut_out(match.ops)
        fused = written.clone()
        pattern = FuseWrittenAttention(lambda ops: 0.0 if any(isinstance(o, AttentionOp) for o in ops) else 1.0)
        PatternRewriteWalker(GreedyRewritePatternApplier([pattern], dce_enabled=False)).rewrite_module(fused)
        ways = (Way("separate", (), (), written, spec), Way("fused", (), (), fused, spec))
        choices.append(Choice(model, "attention", "attention", "", ways, written))
    return choices


def _attention_decisions(module: ModuleOp) -> list[tuple[str, tuple[float, float]]]:
    """graph-fuse's attention decisions in program order: taken way and (separate, fused) predictions."""
    decisions = []
    for op in module.walk():
        figures = op.attributes.get(ATTENTION_ATTR)
        if not isinstance(figures, DictionaryAttr) or "fused_s" not in figures.data:
            continue
        decision, separate, fused = (figures.data[k] for k in ("decision", "separate_s", "fused_s"))
        assert isinstance(separate, FloatAttr)
        assert isinstance(fused, FloatAttr)
        taken = "fused" if decision == StringAttr("fuse") else "separate"
        decisions.append((taken, (separate.value.data, fused.value.data)))
    return decisions


def _lowered(choice: Choice, way: Way) -> ModuleOp:
    if way.module is not None:
        return run_pipeline(way.module.clone(), "lowering", choice.model, spec=way.spec)
    module = choice.module.clone()
    set_groups(next(op for op in module.ops if isinstance(op, func.FuncOp)), way.groups, way.kinds)
    return run_pipeline(module, "lowering", choice.model, spec="graph-to-kernel,kernel-to-rt")


def _predicted(choice: Choice, way: Way, fuser: Fuser) -> float:
    function = next(op for op in choice.module.ops if isinstance(op, func.FuncOp))
    ops, _ = kernel_ops(function)
    groups = [Group([o for o, g in zip(ops, way.groups) if g == i], way.kinds[i], []) for i in range(len(way.kinds))]
    return sum(fuser.price(group) for group in groups)


def _inputs(program: Program) -> list[np.ndarray]:
    return [
        smooth(b.shape, b.dtype) if np.issubdtype(b.dtype, np.floating) else np.zeros(b.shape, b.dtype)
        for b in program.inputs
    ]


def _launches(program: Program, inputs: list[np.ndarray]) -> float:
    # Copied in, as a model's kernel finds its input: just written, in cache (`run` could read `inputs` where they
    # lie, last touched a run ago).
    program.load(inputs)
    program.run_in_place(profile=True)
    return sum(t.seconds for t in program.profile.timings)


def measure(choice: Choice, runs: int, repeats: int) -> tuple[float, float]:
    """The smallest of `repeats` medians of `runs` runs of each way, the two ways taking turns run by run (which
    goes first alternates), so that a drift of the machine's speed reaches both alike."""
    programs = [Program(_lowered(choice, way)) for way in choice.ways]
    inputs = [_inputs(p) for p in programs]
    for program, given in zip(programs, inputs, strict=True):
        program.run(given)  # compile and warm
    best = [math.inf, math.inf]
    for _ in range(repeats):
        samples: list[list[float]] = [[], []]
        for run in range(runs):
            for k in (0, 1) if run % 2 == 0 else (1, 0):
                samples[k].append(_launches(programs[k], inputs[k]))
        best = [min(best[k], statistics.median(samples[k])) for k in (0, 1)]
    return best[0], best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="the device graph-fuse decides with (default: auto)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model names")
    parser.add_argument("--batch", type=int, default=1, help="batch of the validation models (default 1)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs per median")
    parser.add_argument("--repeats", type=int, default=3, help="medians per way; the smallest counts")
    args = parser.parse_args()
    device = fusion_device(args.device)
    threads = os.cpu_count() or 1
    fuser = Fuser(device, threads)
    print(f"device: {device.provenance}; load average before: {os.getloadavg()[0]:.2f}")
    started = time.perf_counter()
    rows: list[Choice] = []
    for name in args.models.split(","):
        module = _graph_module(name, args.batch)
        run_pipeline(module, "inference", name)
        # As the lowering pipeline runs them: graph-fuse decides on the layouts graph-layout chose.
        GraphLayoutPass(device=args.device).apply(gnomon_context(), module)
        attentions = _attention_choices(name, module, args.device)
        GraphFusePass(device=args.device, threads=threads).apply(gnomon_context(), module)
        decided = _attention_decisions(module)
        assert len(decided) == len(attentions), "each written-out attention is priced once"
        for choice, (taken, predicted) in zip(attentions, decided, strict=True):
            choice.taken, choice.predicted = taken, predicted
        for choice in [*_choices(name, module), *attentions]:
            if choice.question != "attention":
                choice.predicted = (
                    _predicted(choice, choice.ways[0], fuser),
                    _predicted(choice, choice.ways[1], fuser),
                )
            choice.measured = measure(choice, args.runs, args.repeats)
            rows.append(choice)
    print(
        f"\n{'model':<24} {'op':<20} {'choice':<6} {'taken':<9} {'predicted A/B us':>20} {'measured A/B us':>20}"
        f" {'pred x':>7} {'meas x':>7}  agree"
    )
    agree = taken_faster = 0
    sums = {"taken": 0.0, "fixed rule": 0.0, "not taken": 0.0}
    factors: list[float] = []  # how far each predicted speedup is from the measured one, as a factor
    clear: list[bool] = []  # sign agreement where the measured speedup is no tie
    for c in rows:
        (a, b), (ma, mb) = c.predicted, c.measured
        # Speedup of option B over option A (fused over separate; library over generated), predicted and measured.
        predicted_x, measured_x = a / b, ma / mb
        same = (predicted_x >= 1) == (measured_x >= 1)
        agree += same
        factors.append(abs(math.log(predicted_x / measured_x)))
        if abs(math.log(measured_x)) >= math.log(1 + TIE):
            clear.append(same)
        taken_is_b = c.taken == c.ways[1].name or (c.question == "join" and c.taken == "fuse")
        taken_faster += (mb <= ma) if taken_is_b else (ma <= mb)
        sums["taken"] += mb if taken_is_b else ma
        sums["not taken"] += ma if taken_is_b else mb
        sums["fixed rule"] += _fixed_rule(c, ma, mb)
        print(
            f"{c.model:<24} {c.op.removeprefix('graph.'):<20} {c.question:<6} {c.taken:<9}"
            f" {a * 1e6:>9.1f} {b * 1e6:>9.1f} {ma * 1e6:>9.1f} {mb * 1e6:>9.1f}"
            f" {predicted_x:>7.2f} {measured_x:>7.2f}  {'yes' if same else 'NO'}"
        )
    if rows:
        print(
            f"\n{len(rows)} choices: predicted and measured speedup agree in sign in {agree} ({agree / len(rows):.0%});"
            f" the option taken was measured faster in {taken_faster} ({taken_faster / len(rows):.0%})"
        )
        print(
            f"the {len(clear)} whose measured speedup is no tie (off 1 by {TIE:.0%} or more) agree in {sum(clear)}; "
            f"predicted speedups are off the measured by a factor of {math.exp(statistics.fmean(factors)):.3f} "
            f"(geomean), {math.exp(max(factors)):.2f} at most"
        )
        print(
            "measured time of these ops, summed over the choices: the options taken "
            f"{sums['taken'] * 1e6:.0f} us, graph-to-kernel's fixed rule (every legal join; the library for a matmul "
            f"or softmax) {sums['fixed rule'] * 1e6:.0f} us, the options not taken {sums['not taken'] * 1e6:.0f} us"
        )
    print(f"{time.perf_counter() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}")


def _fixed_rule(choice: Choice, a: float, b: float) -> float:
    """The measured time of what `graph-to-kernel` does without `graph-fuse`: it takes every legal join (option
    B, fused), and generates a reduction but calls the library for a matmul or softmax."""
    if choice.question == "join":
        return b
    if choice.question == "attention":  # graph-to-kernel alone runs the ops as written
        return a
    return a if "reduce" in choice.op else b


if __name__ == "__main__":
    main()
