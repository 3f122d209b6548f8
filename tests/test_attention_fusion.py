"""graph-fuse's attention fusion: written-out matmul, softmax and matmul made one `graph.attention` when priced
faster, computing what the ops computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import relative_l2
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

import gnomon
from gnomon.context import gnomon_context
from gnomon.dialects.graph.nn import AttentionOp, SoftmaxOp
from gnomon.executable import Executable
from gnomon.models import TransformerBlock
from gnomon.passes.graph_fuse import FusionDecision, GraphFusePass, fusion_decisions
from gnomon.passes.graph_fuse_attention import FuseWrittenAttention
from gnomon.passes.graph_to_kernel import ATTENTION_ATTR
from gnomon.pipeline import run_pipeline


def _tensor(shape: tuple[int, ...], element: str = "f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


def written_attention(
    batch: tuple[int, ...], rows: int, keys: int, width: int, value_width: int, scale_at: str, key_form: str,
    mask: str, mask_first: bool = False,
) -> tuple[str, list[tuple[tuple[int, ...], str]]]:  # fmt: skip
    """An attention written out in graph ops: the text, and its arguments' shapes and element types.

    `scale_at`: none, scores_mul, scores_div, query, key; `key_form`: transposed (k^T is an argument), swap (k
    transposed by its last two dims), heads (k as [batch..., keys, width] arrives [keys, batch..., width] and one
    transpose makes k^T); `mask`: none, full, row (added: all the scores' shape, or broadcast over the query rows),
    keep (a boolean mask selecting the scores where it holds, a very negative fill elsewhere, as torch.where), fill
    (the fill where it holds, as masked_fill)."""
    q_shape, v_shape = (*batch, rows, width), (*batch, keys, value_width)
    scores, kt_shape = (*batch, rows, keys), (*batch, width, keys)
    rank = len(scores)
    lines: list[str] = []
    if key_form == "transposed":
        k_shape, kt = kt_shape, "%k"
    else:
        swap = key_form == "swap"
        k_shape = (*batch, keys, width) if swap else (keys, *batch, width)
        order = [*range(rank - 2), rank - 1, rank - 2] if swap else [*range(1, rank - 1), rank - 1, 0]
        permutation = ", ".join(map(str, order))
        kt = "%kt"
        lines.append(
            f"%kt = graph.transpose %k {{permutation = array<i64: {permutation}>}}"
            f" : ({_tensor(k_shape)}) -> {_tensor(kt_shape)}"
        )
    lines.append("%c = graph.constant {value = dense<0.35> : tensor<f32>} : () -> tensor<f32>")
    q = "%q"
    if scale_at == "query":
        lines.append(f"%qs = graph.mul %q, %c : ({_tensor(q_shape)}, tensor<f32>) -> {_tensor(q_shape)}")
        q = "%qs"
    if scale_at == "key":
        lines.append(f"%kts = graph.mul %c, {kt} : (tensor<f32>, {_tensor(kt_shape)}) -> {_tensor(kt_shape)}")
        kt = "%kts"
    lines.append(f"%s = graph.matmul {q}, {kt} : ({_tensor(q_shape)}, {_tensor(kt_shape)}) -> {_tensor(scores)}")
    current = "%s"
    if scale_at in ("scores_mul", "scores_div"):
        op = "mul" if scale_at == "scores_mul" else "div"
        lines.append(f"%t = graph.{op} %s, %c : ({_tensor(scores)}, tensor<f32>) -> {_tensor(scores)}")
        current = "%t"
    arguments = [("%q", q_shape, "f32"), ("%k", k_shape, "f32"), ("%v", v_shape, "f32")]
    if mask in ("full", "row"):
        m_shape = scores if mask == "full" else (1, keys)
        arguments.append(("%m", m_shape, "f32"))
        pair = f"%m, {current}" if mask_first else f"{current}, %m"
        types = f"{_tensor(m_shape)}, {_tensor(scores)}" if mask_first else f"{_tensor(scores)}, {_tensor(m_shape)}"
        lines.append(f"%u = graph.add {pair} : ({types}) -> {_tensor(scores)}")
        current = "%u"
    elif mask in ("keep", "fill"):
        arguments.append(("%m", scores, "i1"))
        lines.append("%low = graph.constant {value = dense<-3.0e+38> : tensor<f32>} : () -> tensor<f32>")
        pair, types = (f"{current}, %low", f"{_tensor(scores)}, tensor<f32>")
        if mask == "fill":
            pair, types = (f"%low, {current}", f"tensor<f32>, {_tensor(scores)}")
        lines.append(f"%u = graph.where %m, {pair} : ({_tensor(scores, 'i1')}, {types}) -> {_tensor(scores)}")
        current = "%u"
    out = (*batch, rows, value_width)
    lines.append(f"%p = graph.softmax {current} {{axis = -1 : i64}} : ({_tensor(scores)}) -> {_tensor(scores)}")
    lines.append(f"%o = graph.matmul %p, %v : ({_tensor(scores)}, {_tensor(v_shape)}) -> {_tensor(out)}")
    signature = ", ".join(f"{name}: {_tensor(shape, element)}" for name, shape, element in arguments)
    text = f"func.func @main({signature}) -> {_tensor(out)} {{\n  " + "\n  ".join(lines)
    text += f"\n  func.return %o : {_tensor(out)}\n}}"
    return text, [(shape, element) for _, shape, element in arguments]


def _reference(inputs: list[np.ndarray], scale_at: str, key_form: str, mask: str) -> np.ndarray:
    q, k, v = (x.astype(np.float64) for x in inputs[:3])
    if key_form == "transposed":
        kt = k
    elif key_form == "swap":
        kt = np.swapaxes(k, -1, -2)
    else:
        kt = np.moveaxis(k, 0, -1)
    scores = q @ kt
    scores = scores / 0.35 if scale_at == "scores_div" else scores * (0.35 if scale_at != "none" else 1.0)
    if mask in ("full", "row"):
        scores = scores + inputs[3]
    elif mask in ("keep", "fill"):
        scores = np.where(inputs[3] == (mask == "keep"), scores, -np.inf)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    return (scores / scores.sum(-1, keepdims=True)) @ v


def _parse(text: str) -> ModuleOp:
    return Parser(gnomon_context(), text).parse_module()


def _rewrite(module: ModuleOp, price: object) -> None:
    pattern = FuseWrittenAttention(price)  # type: ignore[arg-type]
    PatternRewriteWalker(GreedyRewritePatternApplier([pattern], dce_enabled=False)).rewrite_module(module)


def _favour_fused(ops: object) -> float:
    return 0.0 if any(isinstance(op, AttentionOp) for op in ops) else 1.0  # type: ignore[union-attr]


def _favour_written(ops: object) -> float:
    return 1.0 if any(isinstance(op, AttentionOp) for op in ops) else 0.0  # type: ignore[union-attr]


def _ops(module: ModuleOp) -> list[Operation]:
    return [op for op in module.walk() if op.name.startswith("graph.")]


@settings(max_examples=10, deadline=None)
@given(
    batch=st.sampled_from([(), (3,), (2, 3)]),
    rows=st.integers(1, 12),
    keys=st.integers(1, 12),
    width=st.integers(1, 9),
    value_width=st.integers(1, 9),
    scale_at=st.sampled_from(["none", "scores_mul", "scores_div", "query", "key"]),
    key_form=st.sampled_from(["transposed", "swap", "heads"]),
    mask=st.sampled_from(["none", "full", "row", "keep", "fill"]),
    mask_first=st.booleans(),
)
def test_written_attention_becomes_one_op_computing_the_same(
    batch: tuple[int, ...], rows: int, keys: int, width: int, value_width: int, scale_at: str, key_form: str,
    mask: str, mask_first: bool,
) -> None:  # fmt: skip
    text, arguments = written_attention(batch, rows, keys, width, value_width, scale_at, key_form, mask, mask_first)
    module = _parse(text)
    _rewrite(module, _favour_fused)
    names = [op.name for op in _ops(module) if op.name != "graph.constant"]
    assert "graph.attention" in names
    assert not {"graph.softmax", "graph.matmul", "graph.mul", "graph.div", "graph.add", "graph.where"} & set(names)
    rng = np.random.default_rng(rows * 1000 + keys * 10 + width)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape, element in arguments if element == "f32"]
    if mask in ("keep", "fill"):  # every query keeps its first key: a row masked whole is NaN written out
        kept = rng.random(arguments[3][0]) < 0.6
        kept[..., 0] = True
        inputs.append(kept if mask == "keep" else ~kept)
    run_pipeline(
        module, "lowering", "test", spec="graph-fuse{device=generic-cpu threads=2},graph-to-kernel,kernel-to-rt"
    )
    [out] = Executable(module)(*inputs)
    assert relative_l2(out, _reference(inputs, scale_at, key_form, mask)) <= 1e-5


def test_an_attention_predicted_slower_fused_stays_written_with_its_figures() -> None:
    text, _ = written_attention((2,), 8, 8, 4, 4, "scores_div", "swap", "row")
    module = _parse(text)
    _rewrite(module, _favour_written)
    softmax = next(op for op in _ops(module) if isinstance(op, SoftmaxOp))
    decision = softmax.attributes[ATTENTION_ATTR]
    assert isinstance(decision, DictionaryAttr)
    assert decision.data["decision"] == StringAttr("split")
    assert {"separate_s", "fused_s"} <= set(decision.data)
    assert not any(isinstance(op, AttentionOp) for op in _ops(module))


@pytest.mark.parametrize("device", ["generic-cpu", "h100"])
def test_the_pass_takes_the_option_predicted_faster(device: str) -> None:
    for rows in (8, 256):
        text, _ = written_attention((4,), rows, rows, 32, 32, "scores_mul", "swap", "full")
        module = _parse(text)
        GraphFusePass(device=device, threads=2).apply(gnomon_context(), module)
        [decision] = [d for d in fusion_decisions(module) if d.question == "attention"]
        (_, separate), (_, fused) = decision.options
        assert decision.decision == ("fuse" if fused <= separate else "split")
        assert any(isinstance(op, AttentionOp) for op in _ops(module)) == (decision.decision == "fuse")


def _written_variants() -> list[str]:
    """Attentions the fusion must leave alone: their probabilities kept, or the mask scaled with the scores."""
    scores, out = "tensor<2x6x6xf32>", "tensor<2x6x4xf32>"
    head = f"%q: tensor<2x6x4xf32>, %kt: tensor<2x4x6xf32>, %v: tensor<2x6x4xf32>, %m: {scores}"
    kept = f"""func.func @main({head}) -> ({out}, {scores}) {{
  %s = graph.matmul %q, %kt : (tensor<2x6x4xf32>, tensor<2x4x6xf32>) -> {scores}
  %p = graph.softmax %s {{axis = -1 : i64}} : ({scores}) -> {scores}
  %o = graph.matmul %p, %v : ({scores}, tensor<2x6x4xf32>) -> {out}
  func.return %o, %p : {out}, {scores}
}}"""
    scaled_mask = f"""func.func @main({head}) -> {out} {{
  %s = graph.matmul %q, %kt : (tensor<2x6x4xf32>, tensor<2x4x6xf32>) -> {scores}
  %u = graph.add %s, %m : ({scores}, {scores}) -> {scores}
  %c = graph.constant {{value = dense<0.5> : tensor<f32>}} : () -> tensor<f32>
  %t = graph.mul %u, %c : ({scores}, tensor<f32>) -> {scores}
  %p = graph.softmax %t {{axis = -1 : i64}} : ({scores}) -> {scores}
  %o = graph.matmul %p, %v : ({scores}, tensor<2x6x4xf32>) -> {out}
  func.return %o : {out}
}}"""
    over_rows = (
        kept.replace("{axis = -1 : i64}", "{axis = 1 : i64}")
        .replace("%o, %p", "%o")
        .replace(f"-> ({out}, {scores})", f"-> {out}")
        .replace(f"{out}, {scores}\n", f"{out}\n")
    )
    return [kept, scaled_mask, over_rows]


@pytest.mark.parametrize("text", _written_variants(), ids=["probabilities-kept", "mask-scaled", "softmax-over-rows"])
def test_what_is_not_attention_is_left_alone(text: str) -> None:
    module = _parse(text)
    _rewrite(module, _favour_fused)
    assert not any(isinstance(op, AttentionOp) for op in _ops(module))
    assert all(ATTENTION_ATTR not in op.attributes for op in _ops(module))


def test_a_model_with_written_attention_runs_fused_and_matches_torch() -> None:
    model = TransformerBlock(d_model=64, heads=4, seq=128, explicit_attention=True).eval()
    x = torch.randn(2, 128, 64)
    decisions: list[FusionDecision] = []
    executable = gnomon.compile(model, (x,), device="generic-cpu", decisions=decisions)
    [attention] = [d for d in decisions if d.question == "attention"]
    assert attention.decision == "fuse"
    assert attention.location == "attn"
    [out] = executable(x.numpy())
    assert relative_l2(out, model(x).detach().numpy()) <= 1e-5


def test_an_onnx_export_of_written_attention_is_fused_and_matches_torch(tmp_path: Path) -> None:
    """ONNX before opset 23 has no attention op: the exporter writes MatMul, Div, Softmax, MatMul, which gnomon
    imports as written and graph-fuse makes one graph.attention again."""
    model = TransformerBlock(d_model=64, heads=4, seq=128, explicit_attention=True).eval()
    x = torch.randn(1, 128, 64)
    path = tmp_path / "block.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    decisions: list[FusionDecision] = []
    executable = gnomon.compile(str(path), device="generic-cpu", decisions=decisions)
    assert [d.decision for d in decisions if d.question == "attention"] == ["fuse"]
    [out] = executable(x.numpy())
    with torch.inference_mode():
        assert relative_l2(out, model(x).numpy()) <= 1e-5
