"""`graph-fuse`: fusion decided by predicted time, recorded in the IR, lowered as decided, and computing what the
unfused program computes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import make_onnx, relative_l2
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.parser import Parser

from gnomon import cli
from gnomon.context import gnomon_context
from gnomon.dialects import kernel
from gnomon.errors import GnomonError
from gnomon.executable import Executable, lower
from gnomon.passes.graph_fuse import GraphFusePass, fusion_decisions
from gnomon.passes.graph_to_kernel import FUSION_ATTR, GraphToKernelPass, default_kind, fusion_group, kernel_ops
from gnomon.pipeline import run_pipeline

BLOCK = """
func.func @main(%x: tensor<2x16x24x24xf32>, %r: tensor<2x16x24x24xf32>) -> tensor<2x1xf32> {
  %w = graph.constant {value = dense<0.05> : tensor<16x16x3x3xf32>} : () -> tensor<16x16x3x3xf32>
  %b = graph.constant {value = dense<0.1> : tensor<16xf32>} : () -> tensor<16xf32>
  %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,
      dilations = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<2x16x24x24xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<2x16x24x24xf32>
  %a = graph.add %c, %r : (tensor<2x16x24x24xf32>, tensor<2x16x24x24xf32>) -> tensor<2x16x24x24xf32>
  %y = graph.relu %a : (tensor<2x16x24x24xf32>) -> tensor<2x16x24x24xf32>
  %s = graph.sigmoid %y : (tensor<2x16x24x24xf32>) -> tensor<2x16x24x24xf32>
  %m = graph.mul %s, %y : (tensor<2x16x24x24xf32>, tensor<2x16x24x24xf32>) -> tensor<2x16x24x24xf32>
  %f = graph.reshape %m : (tensor<2x16x24x24xf32>) -> tensor<2x9216xf32>
  %lw = graph.constant {value = dense<0.001> : tensor<10x9216xf32>} : () -> tensor<10x9216xf32>
  %l = graph.linear %f, %lw : (tensor<2x9216xf32>, tensor<10x9216xf32>) -> tensor<2x10xf32>
  %g = graph.gelu %l : (tensor<2x10xf32>) -> tensor<2x10xf32>
  %p = graph.reduce_sum %g {axes = array<i64: -1>, keepdims = true} : (tensor<2x10xf32>) -> tensor<2x1xf32>
  %k = graph.constant {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %q = graph.mul %p, %k : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  func.return %q : tensor<2x1xf32>
}
"""


def parse(text: str) -> ModuleOp:
    return Parser(gnomon_context(), text).parse_module()


def main_function(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def fused(text: str, device: str = "generic-cpu") -> ModuleOp:
    module = parse(text)
    GraphFusePass(device=device, threads=2).apply(gnomon_context(), module)
    return module


@pytest.mark.parametrize("device", ["generic-cpu", "h100"])
def test_each_priced_choice_takes_the_option_predicted_faster(device: str) -> None:
    decisions = fusion_decisions(fused(BLOCK, device))
    questions = {(d.op, d.question) for d in decisions}
    # The conv's epilogue, the generated chain after it, the linear's gelu and the reduction's kind are all priced.
    assert {("add", "join"), ("relu", "join"), ("mul", "join"), ("gelu", "join"), ("reduce_sum", "kind")} <= questions
    for decision in decisions:
        (name_a, a), (name_b, b) = decision.options
        assert a > 0
        assert b > 0
        if decision.question == "join":
            assert decision.decision == ("fuse" if b <= a else "split"), decision
        else:
            assert decision.decision == (name_a if a < b else name_b), decision


def test_groups_are_contiguous_and_cover_every_kernel_op() -> None:
    module = fused(BLOCK)
    ops, prologues = kernel_ops(main_function(module))
    groups = [fusion_group(op) for op in ops]
    assert None not in groups
    assert groups == sorted(groups)
    assert groups[0] == 0
    assert sorted(set(groups)) == list(range(len(set(groups))))  # no group skipped
    assert not prologues


def _regroup(module: ModuleOp, groups: list[int]) -> None:
    """Put the function's kernel ops into these groups, each with its default kind, as graph-fuse would record."""
    ops, _ = kernel_ops(main_function(module))
    for op, group in zip(ops, groups, strict=True):
        op.attributes[FUSION_ATTR] = DictionaryAttr(
            {"group": IntegerAttr(group, i64), "kind": StringAttr(default_kind(op))}
        )


CHAIN = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = graph.tanh %e : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = graph.neg %t : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %n : tensor<4x8xf32>
}
"""


@pytest.mark.parametrize(
    ("groups", "kernels"), [([0, 0, 0], ["exp_tanh_neg_0"]), ([0, 1, 1], ["exp_0", "tanh_neg_1"]), ([0, 1, 2], 3)]
)
def test_graph_to_kernel_lowers_the_groups_it_is_given(groups: list[int], kernels: list[str] | int) -> None:
    module = parse(CHAIN)
    _regroup(module, groups)
    GraphToKernelPass(threads=2).apply(gnomon_context(), module)
    names = [op.kernel_name.data for op in main_function(module).body.ops if isinstance(op, kernel.GeneratedOp)]
    assert names == kernels if isinstance(kernels, list) else len(names) == kernels
    # The decisions are the graph's, not the kernels' code: identical kernels stay identical.
    assert FUSION_ATTR not in str(module)


def test_a_group_that_cannot_be_one_kernel_is_refused() -> None:
    text = """
func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = graph.tanh %y : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = graph.add %e, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
"""
    module = parse(text)
    _regroup(module, [0, 0, 0])
    message = (
        "graph-to-kernel: graph.tanh at ? is in fusion group 0, but cannot join that kernel "
        "(it must be the only user of the kernel's result)"
    )
    with pytest.raises(GnomonError, match=re.escape(message)):
        GraphToKernelPass(threads=2).apply(gnomon_context(), module)


def _outputs(text: str, groups: list[int] | None, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run `text` compiled as graph-fuse decides (`groups` None), or with these groups."""
    module = parse(text)
    if groups is None:
        lower(module, device="generic-cpu")
    else:
        run_pipeline(module, "inference", "test")
        _regroup(module, groups)
        run_pipeline(module, "lowering", "test", spec="graph-to-kernel,kernel-to-rt")
    return Executable(module)(*inputs)


def _every_op_alone(text: str) -> list[int]:
    module = parse(text)
    run_pipeline(module, "inference", "test")
    ops, _ = kernel_ops(main_function(module))
    return list(range(len(ops)))


def test_fused_and_unfused_programs_compute_the_same() -> None:
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((2, 16, 24, 24)).astype(np.float32) for _ in range(2)]
    [fused_out] = _outputs(BLOCK, None, inputs)
    [alone] = _outputs(BLOCK, _every_op_alone(BLOCK), inputs)
    assert relative_l2(fused_out, alone) <= 1e-5


UNARY = ["sin", "tanh", "neg", "sigmoid", "relu", "abs", "gelu", "erf"]  # bounded: no chain overflows


@settings(max_examples=6, deadline=None)
@given(
    rows=st.integers(1, 9),
    cols=st.integers(1, 40),
    chain=st.lists(st.sampled_from(UNARY), min_size=2, max_size=4),
    broadcast=st.booleans(),
)
def test_random_elementwise_chains_fuse_to_what_they_compute_apart(
    rows: int, cols: int, chain: list[str], broadcast: bool
) -> None:
    shape = f"{rows}x{cols}xf32"
    other = f"{cols}xf32" if broadcast else shape
    lines = [f"  %v0 = graph.add %x, %b : (tensor<{shape}>, tensor<{other}>) -> tensor<{shape}>"]
    for index, name in enumerate(chain):
        lines.append(f"  %v{index + 1} = graph.{name} %v{index} : (tensor<{shape}>) -> tensor<{shape}>")
    text = (
        f"func.func @main(%x: tensor<{shape}>, %b: tensor<{other}>) -> tensor<{shape}> {{\n"
        + "\n".join(lines)
        + f"\n  func.return %v{len(chain)} : tensor<{shape}>\n}}"
    )
    rng = np.random.default_rng(rows * 100 + cols)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32)]
    inputs.append(rng.standard_normal((cols,) if broadcast else (rows, cols)).astype(np.float32))
    [fused_out] = _outputs(text, None, inputs)
    [alone] = _outputs(text, _every_op_alone(text), inputs)
    assert relative_l2(fused_out, alone) <= 1e-5


def test_compile_explains_every_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = make_onnx("conv_block", tmp_path / "conv_block.onnx")
    program = tmp_path / "m.mlir"
    assert cli.main(["compile", str(model), "-o", str(program), "--device", "generic-cpu", "--explain"]) == 0
    output = capsys.readouterr().out.splitlines()
    # First the layout table (tests/test_graph_layout.py checks it), then the fusion decisions.
    start = next(i for i, line in enumerate(output) if line.startswith("fusion decisions ("))
    assert output[0].startswith("layout decisions (")
    lines = output[start:]
    assert "generic-cpu: datasheet figures, not measured" in lines[0]
    rows = [line.split() for line in lines[2:]]
    assert rows
    assert all(row[2] in ("join", "kind") for row in rows)
    for row in rows:  # group op question A-name A us B-name B us decision location
        a, b, decision = float(row[4]), float(row[7]), row[9]
        if row[2] == "join" and decision != "required":
            assert decision == ("fuse" if b <= a else "split")


def test_compile_names_an_unknown_fusion_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = make_onnx("conv_block", tmp_path / "conv_block.onnx")
    assert cli.main(["compile", str(model), "-o", str(tmp_path / "m.mlir"), "--device", "h900"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("gnomon: error: unknown device 'h900'; known devices: a100")


def _norm_text(rows: int, cols: int, body: list[str], result: str) -> str:
    lines = "\n".join(f"  {line}" for line in body)
    return (
        f"func.func @main(%x: tensor<{rows}x{cols}xf32>, %w: tensor<{cols}xf32>) -> tensor<{result}> {{\n"
        f"{lines}\n  func.return %out : tensor<{result}>\n}}"
    )


def _rms_norm(rows: int, cols: int) -> str:
    full, row = f"tensor<{rows}x{cols}xf32>", f"tensor<{rows}x1xf32>"
    return _norm_text(
        rows,
        cols,
        [
            f"%sq = graph.mul %x, %x : ({full}, {full}) -> {full}",
            f"%ms = graph.reduce_mean %sq {{axes = array<i64: -1>, keepdims = true}} : ({full}) -> {row}",
            "%eps = graph.constant {value = dense<1.0e-06> : tensor<f32>} : () -> tensor<f32>",
            f"%v = graph.add %ms, %eps : ({row}, tensor<f32>) -> {row}",
            f"%r = graph.rsqrt %v : ({row}) -> {row}",
            f"%n = graph.mul %x, %r : ({full}, {row}) -> {full}",
            f"%out = graph.mul %n, %w : ({full}, tensor<{cols}xf32>) -> {full}",
        ],
        f"{rows}x{cols}xf32",
    )


def _sum_of_squares(rows: int, cols: int) -> str:
    full = f"tensor<{rows}x{cols}xf32>"
    return _norm_text(
        rows,
        cols,
        [
            f"%d = graph.sub %x, %w : ({full}, tensor<{cols}xf32>) -> {full}",
            f"%sq = graph.mul %d, %d : ({full}, {full}) -> {full}",
            f"%out = graph.reduce_sum %sq {{axes = array<i64: -1>, keepdims = false}} : ({full}) -> tensor<{rows}xf32>",
        ],
        f"{rows}xf32",
    )


def _centered(rows: int, cols: int) -> str:
    full, row = f"tensor<{rows}x{cols}xf32>", f"tensor<{rows}x1xf32>"
    return _norm_text(
        rows,
        cols,
        [
            f"%m = graph.reduce_mean %x {{axes = array<i64: -1>, keepdims = true}} : ({full}) -> {row}",
            f"%c = graph.sub %x, %m : ({full}, {row}) -> {full}",
            f"%out = graph.mul %c, %w : ({full}, tensor<{cols}xf32>) -> {full}",
        ],
        f"{rows}x{cols}xf32",
    )


def _numpy_norms(kind: str, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    if kind == "rms_norm":
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w
    if kind == "sum_of_squares":
        return np.sum((x - w) ** 2, axis=-1)
    return (x - x.mean(axis=-1, keepdims=True)) * w


NORMS = {"rms_norm": _rms_norm, "sum_of_squares": _sum_of_squares, "centered": _centered}


@pytest.mark.parametrize("kind", sorted(NORMS))
@pytest.mark.parametrize(("rows", "cols"), [(1, 7), (6, 64), (33, 300)])
def test_a_reduction_fuses_its_prologue_and_normalizing_epilogue(kind: str, rows: int, cols: int) -> None:
    text = NORMS[kind](rows, cols)
    module = parse(text)
    lower(module, device="generic-cpu")
    launched = [op for op in module.walk() if isinstance(op, kernel.FuncOp)]
    assert len(launched) == 1, [k.sym_name.data for k in launched]  # the whole norm is one generated kernel
    rng = np.random.default_rng(rows + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    [out] = Executable(module)(x, w)
    expected = _numpy_norms(kind, x.astype(np.float64), w.astype(np.float64))
    assert relative_l2(out, expected) <= 1e-5
    [alone] = _outputs(text, _every_op_alone(text), [x, w])
    assert relative_l2(out, alone) <= 1e-5
