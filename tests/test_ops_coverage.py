"""Ops of ONNX's node conformance suite that gnomon compiles: each ONNX node is built into a one-node model,
compiled natively (and interpreted by the reference backend) and checked against ONNX's own reference
implementation (`onnx.reference`); where gnomon generates code for an op, a test says so.

Each `# ---- ... ----` section covers one op family; torch converters of the same ops are checked against PyTorch
beside them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import relative_l2
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import gnomon
from gnomon.errors import GnomonError, ModelLoadError, UnsupportedOpsError

RNG = np.random.default_rng(0)


def _model(
    path: Path,
    node: onnx.NodeProto | list[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    constants: dict[str, np.ndarray] | None = None,
    opset: int = 23,
    preview: bool = False,
) -> Path:
    """A one-node model (or one of independent nodes, each output a graph output): `inputs` are graph inputs,
    `constants` initializers (ONNX's tests pass axes and shift counts as inputs; gnomon needs them known at compile
    time); `preview` imports ai.onnx.preview too."""
    nodes = node if isinstance(node, list) else [node]
    values = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for name, x in inputs.items()
    ]
    initializers = [numpy_helper.from_array(x, name) for name, x in (constants or {}).items()]
    outputs = [helper.make_empty_tensor_value_info(name) for n in nodes for name in n.output if name]
    graph = helper.make_graph(nodes, "g", values, outputs, initializers)
    opsets = [helper.make_opsetid("", opset), *([helper.make_opsetid("ai.onnx.preview", 1)] if preview else [])]
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=opsets), strict_mode=True)
    onnx.save(model, path)
    return path


def _check(path: Path, inputs: dict[str, np.ndarray], backend: str = "native", atol: float = 1e-6) -> None:
    """gnomon's outputs equal onnx.reference's: exactly for integers, to rtol 1e-5 (and `atol`) for floats."""
    model = onnx.load(path)
    expected: list[Any] = ReferenceEvaluator(model).run(None, inputs)
    got = gnomon.compile(path, backend=backend).run(list(inputs.values()))
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        assert g.shape == e.shape
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=atol)
        else:
            np.testing.assert_array_equal(g, e)


def _kernels(path: Path) -> dict[str, str]:
    """The compiled program's kernels: name -> kind ("generated", or the library call)."""
    module = gnomon.compile(path).module
    kinds: dict[str, str] = {}
    for op in module.walk():
        if op.name == "kernel.func":
            kinds[str(op.properties["sym_name"]).strip('"')] = str(op.properties["kind"]).strip('"')
    return kinds


# ---- normalizations ----


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_layer_normalization_returns_mean_and_inverse_std(tmp_path: Path, axis: int) -> None:
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    normalized = x.shape[axis % 3 :]
    scale, bias = RNG.standard_normal(normalized).astype(np.float32), RNG.standard_normal(normalized).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv_std"], axis=axis, epsilon=1e-3)
    inputs = {"x": x, "s": scale, "b": bias}
    _check(_model(tmp_path / "ln.onnx", node, inputs), inputs)


@pytest.mark.parametrize(("shape", "axis"), [((3, 4), -1), ((2, 3, 4, 5), 1), ((2, 3, 5), 0)])
def test_rms_normalization(tmp_path: Path, shape: tuple[int, ...], axis: int) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    scale = RNG.standard_normal(shape[axis % len(shape) :]).astype(np.float32)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-4)
    inputs = {"x": x, "s": scale}
    _check(_model(tmp_path / "rms.onnx", node, inputs), inputs)


def test_rms_normalization_on_the_reference_backend(tmp_path: Path) -> None:
    x, scale = RNG.standard_normal((2, 8)).astype(np.float32), RNG.standard_normal(8).astype(np.float32)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"])
    inputs = {"x": x, "s": scale}
    _check(_model(tmp_path / "rms.onnx", node, inputs), inputs, backend="reference")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("causal", [0, 1])
def test_half_precision_attention_rounds_once(tmp_path: Path, causal: int, dtype: type[Any]) -> None:
    """fp16 and bf16 attention are computed in f32 and rounded once: within half an ulp of the exact (float64)
    result, where fp16 scores and sums are off by several ulps (as onnx.reference's are). bf16 arrays, which
    torch cannot take from NumPy, reach the library call as their bits."""
    q, k, v = (RNG.standard_normal((2, 3, 4, 8)).astype(dtype) for _ in range(3))
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=causal)
    path = _model(tmp_path / "attention.onnx", node, {"q": q, "k": k, "v": v})
    (got,) = gnomon.compile(path).run([q, k, v])
    scores = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(8)
    if causal:
        scores = np.where(np.tril(np.ones((4, 4), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    exact = weights / weights.sum(-1, keepdims=True) @ v.astype(np.float64)
    assert got.dtype == dtype
    half_ulp = 2.0 ** -(np.finfo(dtype).nmant + 1)
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=half_ulp, atol=2**-25)


def _normal(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    return {name: RNG.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("rank", [3, 4])
def test_attention_with_a_kv_cache(tmp_path: Path, rank: int, causal: int) -> None:
    """past_key / past_value come before K and V (the present key and value); the causal mask is offset by the
    past's length; 4 query heads share 2 KV heads; the QK output after the bias (mode 2)."""
    batch, queries, past = 2, 3, 5
    if rank == 4:
        shapes = {"q": (batch, 4, queries, 8), "k": (batch, 2, queries, 8), "v": (batch, 2, queries, 6)}
        heads = {}
    else:
        shapes = {"q": (batch, queries, 32), "k": (batch, queries, 16), "v": (batch, queries, 12)}
        heads = {"q_num_heads": 4, "kv_num_heads": 2}
    shapes |= {"mask": (queries, past + queries), "past_k": (batch, 2, past, 8), "past_v": (batch, 2, past, 6)}
    inputs = _normal(shapes)
    node = helper.make_node(
        "Attention",
        ["q", "k", "v", "mask", "past_k", "past_v"],
        ["y", "present_k", "present_v", "qk"],
        is_causal=causal,
        qk_matmul_output_mode=2,
        **heads,
    )
    _check(_model(tmp_path / "attention.onnx", node, inputs), inputs)


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_attention_softcap_and_qk_output(tmp_path: Path, mode: int) -> None:
    """The softcap before the mask; query row 1 attends no key: zeros in Y and in the probabilities (mode 3)."""
    inputs: dict[str, np.ndarray] = _normal({"q": (2, 2, 3, 8), "k": (2, 2, 5, 8), "v": (2, 2, 5, 4)})
    inputs["mask"] = RNG.random((3, 5)) < 0.7
    inputs["mask"][0, 0], inputs["mask"][1] = True, False
    node = helper.make_node(
        "Attention", ["q", "k", "v", "mask"], ["y", "", "", "qk"], softcap=1.5, qk_matmul_output_mode=mode
    )
    _check(_model(tmp_path / "attention.onnx", node, inputs), inputs)


def test_attention_qk_output_mode_0_is_the_raw_scores(tmp_path: Path) -> None:
    """Mode 0 gives q kᵀ · scale before the softcap, as ONNX's spec and function body say (onnx.reference's
    Attention returns the softcapped scores when there is a softcap)."""
    inputs = _normal({"q": (1, 2, 3, 8), "k": (1, 2, 4, 8), "v": (1, 2, 4, 8)})
    node = helper.make_node("Attention", ["q", "k", "v"], ["y", "", "", "qk"], softcap=1.5, scale=0.25)
    path = _model(tmp_path / "attention.onnx", node, inputs)
    _, qk = gnomon.compile(path).run(list(inputs.values()))
    np.testing.assert_allclose(qk, inputs["q"] @ inputs["k"].swapaxes(-1, -2) * 0.25, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("causal", "left", "right"), [(1, -1, -1), (1, 1, -1), (0, 2, 1)])
def test_attention_with_per_batch_kv_lengths(tmp_path: Path, causal: int, left: int, right: int) -> None:
    """nonpad_kv_seqlen, a run-time input, masks each batch's padding keys and offsets its causal mask and window
    by its length minus the queries': batch 1 has fewer keys than queries, so its first query attends none."""
    inputs = _normal({"q": (2, 2, 3, 8), "k": (2, 2, 6, 8), "v": (2, 2, 6, 4), "mask": (2, 3, 6)})
    inputs["lengths"] = np.array([6, 2], np.int64)
    node = helper.make_node(
        "Attention",
        ["q", "k", "v", "mask", "", "", "lengths"],
        ["y"],
        is_causal=causal,
        left_window_size=left,
        right_window_size=right,
    )
    _check(_model(tmp_path / "attention.onnx", node, inputs, opset=25), inputs)


def test_attention_window_after_a_kv_cache_with_a_short_mask(tmp_path: Path) -> None:
    """A window around each query's position after the cache; a boolean mask over fewer keys than the past and
    the new ones, padded with False."""
    inputs: dict[str, np.ndarray] = _normal(
        {"q": (1, 2, 3, 4), "k": (1, 2, 3, 4), "v": (1, 2, 3, 4), "past_k": (1, 2, 2, 4), "past_v": (1, 2, 2, 4)}
    )
    inputs["mask"] = RNG.random((1, 1, 3, 4)) < 0.8
    node = helper.make_node(
        "Attention",
        ["q", "k", "v", "mask", "past_k", "past_v"],
        ["y", "present_k", "present_v"],
        left_window_size=1,
        right_window_size=1,
    )
    _check(_model(tmp_path / "attention.onnx", node, inputs, opset=25), inputs)


@pytest.mark.parametrize(
    ("mode", "cache", "update", "axis", "starts"),
    [
        ("linear", (2, 3, 6, 4), (2, 3, 2, 4), -2, [1, 4]),
        ("circular", (2, 3, 6, 4), (2, 3, 3, 4), -2, [5, 2]),
        ("linear", (2, 6, 3), (2, 3, 3), 1, None),
        ("circular", (2, 4, 5), (2, 4, 3), -1, [3, 0]),
    ],
)
def test_tensor_scatter(
    tmp_path: Path,
    mode: str,
    cache: tuple[int, ...],
    update: tuple[int, ...],
    axis: int,
    starts: list[int] | None,
) -> None:
    """The update written from each batch's write index on (0 without write_indices), wrapping in mode circular."""
    inputs = _normal({"cache": cache, "update": update})
    if starts is not None:
        inputs["starts"] = np.array(starts, np.int64)
    node = helper.make_node("TensorScatter", list(inputs), ["present"], mode=mode, axis=axis)
    _check(_model(tmp_path / "scatter.onnx", node, inputs, opset=24), inputs)


# ---- bit shifts and bitwise ops ----

SHIFT_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint64]


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", SHIFT_DTYPES)
def test_bit_shift(tmp_path: Path, direction: str, dtype: type[np.integer[Any]]) -> None:
    """Counts at or past the width (and negative ones) shift every bit out: 0, or -1 for a negative value
    shifted right, as ONNX (after NumPy) defines them."""
    info = np.iinfo(dtype)
    width = info.bits
    x = np.array([1, 3, info.max, info.min, info.max // 3, 5, 7, info.min + 1], dtype)
    counts = [1, 2, width - 1, 1, width, width + 3, 0, 3]
    if info.min < 0:
        counts[-1] = -2
    y = np.array(counts, dtype)
    node = helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction)
    inputs = {"x": x, "y": y}
    _check(_model(tmp_path / "shift.onnx", node, inputs), inputs)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.uint64])
def test_bitwise_binary_ops_broadcast(tmp_path: Path, op: str, dtype: type[np.integer[Any]]) -> None:
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (3, 4), dtype=dtype, endpoint=True)
    y = RNG.integers(info.min, info.max, (4,), dtype=dtype, endpoint=True)
    inputs = {"x": x, "y": y}
    _check(_model(tmp_path / "bitwise.onnx", helper.make_node(op, ["x", "y"], ["z"]), inputs), inputs)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.uint64])
def test_bitwise_not(tmp_path: Path, dtype: type[np.integer[Any]]) -> None:
    info = np.iinfo(dtype)
    inputs = {"x": RNG.integers(info.min, info.max, (2, 5), dtype=dtype, endpoint=True)}
    _check(_model(tmp_path / "not.onnx", helper.make_node("BitwiseNot", ["x"], ["y"]), inputs), inputs)


def test_bitwise_ops_on_int32_are_generated_kernels(tmp_path: Path) -> None:
    """i32/i64 shifts and bitwise ops are arith ops in gnomon's loops; uint64 goes to NumPy (ATen has no kernels)."""
    x = np.arange(8, dtype=np.int32)
    inputs = {"x": x, "y": x}
    shift = _model(tmp_path / "shift.onnx", helper.make_node("BitShift", ["x", "y"], ["z"], direction="LEFT"), inputs)
    assert list(_kernels(shift).values()) == ["generated"]
    wide = {"x": x.astype(np.uint64), "y": x.astype(np.uint64)}
    xor = _model(tmp_path / "xor.onnx", helper.make_node("BitwiseXor", ["x", "y"], ["z"]), wide)
    assert "generated" not in _kernels(xor).values()
    _check(xor, wide)


def test_bit_shift_on_the_reference_backend(tmp_path: Path) -> None:
    inputs = {"x": np.array([-8, 4, -1, 64], np.int8), "y": np.array([8, 1, -3, 1], np.int8)}
    node = helper.make_node("BitShift", ["x", "y"], ["z"], direction="RIGHT")
    _check(_model(tmp_path / "shift.onnx", node, inputs), inputs, backend="reference")


@pytest.mark.parametrize(
    ("source", "target", "shape"),
    [
        (np.float32, np.int32, (2, 3)),
        (np.float64, np.int64, ()),
        (np.uint32, np.int32, (4,)),
        (np.bool_, np.uint8, (5,)),
    ],
)
def test_bitcast_keeps_the_bytes(tmp_path: Path, source: type[Any], target: type[Any], shape: tuple[int, ...]) -> None:
    x = (RNG.standard_normal(shape) * 1e3).astype(source)
    node = helper.make_node("BitCast", ["x"], ["y"], to=helper.np_dtype_to_tensor_dtype(np.dtype(target)))
    (got,) = gnomon.compile(_model(tmp_path / "bitcast.onnx", node, {"x": x}, opset=26)).run([x])
    assert got.dtype == target
    np.testing.assert_array_equal(got, x.view(target))


# ---- scans ----


@pytest.mark.parametrize(
    ("op", "exclusive", "reverse", "dtype", "axis"),
    [
        ("CumSum", 0, 0, np.float32, 1),
        ("CumSum", 1, 0, np.float64, -1),
        ("CumSum", 0, 1, np.int32, 0),
        ("CumSum", 1, 1, np.int64, 1),
        ("CumProd", 0, 0, np.int64, 0),
        ("CumProd", 1, 0, np.float32, 1),
        ("CumProd", 0, 1, np.float64, -2),
        ("CumProd", 1, 1, np.int32, 1),
    ],
)
def test_cumulative_ops(
    tmp_path: Path, op: str, exclusive: int, reverse: int, dtype: type[np.number[Any]], axis: int
) -> None:
    x = RNG.integers(-3, 4, (3, 5)).astype(dtype)
    node = helper.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    inputs = {"x": x}
    _check(_model(tmp_path / "scan.onnx", node, inputs, {"axis": np.array(axis, np.int64)}, opset=26), inputs)


def test_cumsum_on_the_reference_backend(tmp_path: Path) -> None:
    inputs = {"x": RNG.standard_normal((4, 3)).astype(np.float32)}
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)
    path = _model(tmp_path / "scan.onnx", node, inputs, {"axis": np.array(0, np.int64)})
    _check(path, inputs, backend="reference")


# ---- unsigned integers ----


@pytest.mark.parametrize("op", ["Add", "Sub", "Div", "Mod", "Max", "Greater"])
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_arithmetic(tmp_path: Path, op: str, dtype: type[np.integer[Any]]) -> None:
    """Values above the signed range compare and divide as unsigned ones; differences wrap around."""
    info = np.iinfo(dtype)
    x = np.array([info.max, info.max // 2 + 3, 7, 0, 12], dtype)
    y = np.array([3, 5, info.max - 1, 9, 12], dtype)
    inputs = {"x": x, "y": y}
    _check(_model(tmp_path / "uint.onnx", helper.make_node(op, ["x", "y"], ["z"]), inputs), inputs)


# ---- quantization ----

QUANTIZED = [np.uint8, np.int8, np.uint16, np.int16]
LAYOUTS = [(1, 0, ()), (1, 0, (4,)), (-1, 0, (5,)), (1, 3, (3, 2, 5)), (0, 2, (2, 4, 5))]
"""(axis, block_size, scale shape) for a (3, 4, 5) tensor: per tensor, per axis, and per block (the last one short)."""


def _quantization_parameters(
    dtype: type[np.integer[Any]], shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (3, 4, 5) x, and a scale and zero point of `shape`: power-of-two scales, so that x / scale is exact and
    hits halves (ties round to even), and values beyond dtype's range (they saturate)."""
    info = np.iinfo(dtype)
    steps = RNG.integers(int(info.min) - 40, int(info.max) + 40, (3, 4, 5)) + RNG.choice([0.0, 0.5], (3, 4, 5))
    scale = RNG.choice([0.25, 0.5, 2.0], shape).astype(np.float32)
    zero_point = RNG.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    return (steps * 0.5).astype(np.float32), scale, zero_point


@pytest.mark.parametrize("dtype", QUANTIZED)
@pytest.mark.parametrize(("axis", "block_size", "shape"), LAYOUTS)
def test_quantize_linear(
    tmp_path: Path, dtype: type[np.integer[Any]], axis: int, block_size: int, shape: tuple[int, ...]
) -> None:
    x, scale, zero_point = _quantization_parameters(dtype, shape)
    inputs = {"x": x, "scale": scale, "zero_point": zero_point}
    node = helper.make_node("QuantizeLinear", list(inputs), ["y"], axis=axis, block_size=block_size)
    _check(_model(tmp_path / "quantize.onnx", node, inputs), inputs)


@pytest.mark.parametrize(
    ("dtype", "attributes"),
    [(np.float16, {}), (np.float32, {"output_dtype": onnx.TensorProto.INT16}), (np.float32, {"precision": 10})],
)
def test_quantize_linear_without_a_zero_point(tmp_path: Path, dtype: type[Any], attributes: dict[str, int]) -> None:
    """A half-precision division (x's own, or the `precision` asked); uint8 results, or `output_dtype`'s."""
    inputs = {"x": (RNG.integers(-100, 400, (4, 6)) * 0.75).astype(dtype), "scale": np.array(1.5, dtype)}
    node = helper.make_node("QuantizeLinear", list(inputs), ["y"], **attributes)
    _check(_model(tmp_path / "quantize.onnx", node, inputs), inputs)


@pytest.mark.parametrize("dtype", [*QUANTIZED, np.int32])
@pytest.mark.parametrize(("axis", "block_size", "shape"), LAYOUTS)
def test_dequantize_linear(
    tmp_path: Path, dtype: type[np.integer[Any]], axis: int, block_size: int, shape: tuple[int, ...]
) -> None:
    """An i32 zero point makes the difference f64, as NumPy's promotion does in the reference."""
    info = np.iinfo(dtype)
    x = RNG.integers(int(info.min), int(info.max), (3, 4, 5), endpoint=True).astype(dtype)
    zero_point = RNG.integers(int(info.min), int(info.max), shape, endpoint=True).astype(dtype)
    inputs = {"x": x, "scale": RNG.uniform(0.01, 2, shape).astype(np.float32), "zero_point": zero_point}
    node = helper.make_node("DequantizeLinear", list(inputs), ["y"], axis=axis, block_size=block_size)
    _check(_model(tmp_path / "dequantize.onnx", node, inputs), inputs)


@pytest.mark.parametrize("output_dtype", [0, onnx.TensorProto.FLOAT])
def test_dequantize_linear_with_a_half_precision_scale(tmp_path: Path, output_dtype: int) -> None:
    """The result has the scale's type unless `output_dtype` names another."""
    inputs = {"x": RNG.integers(-128, 128, (4, 6)).astype(np.int8), "scale": np.array(0.3, np.float16)}
    node = helper.make_node("DequantizeLinear", list(inputs), ["y"], output_dtype=output_dtype)
    _check(_model(tmp_path / "dequantize.onnx", node, inputs), inputs, atol=1e-3)


@pytest.mark.parametrize("low", [-3.0, 0.5, -7.0, 0.0])
def test_dynamic_quantize_linear(tmp_path: Path, low: float) -> None:
    """Ranges across zero, above it (min is taken as 0), below it (max is taken as 0) and empty (all zeros)."""
    x = (low + RNG.uniform(0, 6 if low < 0 else 2 * low, (3, 7))).astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero_point"])
    _check(_model(tmp_path / "dynamic.onnx", node, {"x": x}), {"x": x})


@pytest.mark.parametrize(("a_dtype", "b_dtype"), [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)])
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16])
def test_qlinear_matmul(tmp_path: Path, a_dtype: type[Any], b_dtype: type[Any], scale_dtype: type[Any]) -> None:
    """A batch times a matrix with a scale and zero point per column of b; i32 products, some saturating."""
    a_info, b_info = np.iinfo(a_dtype), np.iinfo(b_dtype)
    inputs = {
        "a": RNG.integers(int(a_info.min), int(a_info.max), (2, 5, 16), endpoint=True).astype(a_dtype),
        "a_scale": np.array(0.02, scale_dtype),
        "a_zero_point": np.array(a_info.max // 2 - 3, a_dtype),
        "b": RNG.integers(int(b_info.min), int(b_info.max), (16, 7), endpoint=True).astype(b_dtype),
        "b_scale": RNG.uniform(0.01, 0.03, 7).astype(scale_dtype),
        "b_zero_point": RNG.integers(0, 20, 7).astype(b_dtype),
        "y_scale": np.array(0.4, scale_dtype),
        "y_zero_point": np.array(5, b_dtype),
    }
    node = helper.make_node("QLinearMatMul", list(inputs), ["y"])
    _check(_model(tmp_path / "qmatmul.onnx", node, inputs), inputs)


def test_matmul_integer(tmp_path: Path) -> None:
    inputs = {
        "a": RNG.integers(0, 256, (3, 4, 6)).astype(np.uint8),
        "b": RNG.integers(-128, 128, (6, 5)).astype(np.int8),
        "a_zero_point": np.array(128, np.uint8),
        "b_zero_point": RNG.integers(-5, 5, 5).astype(np.int8),
    }
    node = helper.make_node("MatMulInteger", list(inputs), ["y"])
    _check(_model(tmp_path / "mmi.onnx", node, inputs), inputs)


def test_matmul_integer_refuses_a_vector_zero_point_for_a(tmp_path: Path) -> None:
    """ONNX's spec takes it per row, its reference along the last axis: where they disagree, gnomon refuses."""
    inputs = {
        "a": RNG.integers(0, 256, (3, 3)).astype(np.uint8),
        "b": RNG.integers(0, 256, (3, 2)).astype(np.uint8),
        "a_zero_point": np.array([1, 2, 3], np.uint8),
    }
    path = _model(tmp_path / "mmi.onnx", helper.make_node("MatMulInteger", list(inputs), ["y"]), inputs)
    message = (
        "unsupported op onnx.MatMulInteger at node 'MatMulInteger_0' in mmi.onnx (a vector a_zero_point of 3"
        " elements: per row by ONNX's spec, along the last axis by its reference)"
    )
    with pytest.raises(GnomonError, match=f"^{re.escape(message)}$"):
        gnomon.compile(path)


CONV_ATTRIBUTES: list[dict[str, Any]] = [
    {},
    {"pads": [1, 0, 2, 1], "strides": [2, 1]},
    {"dilations": [2, 2], "group": 2},
    {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
    {"auto_pad": "SAME_UPPER", "dilations": [1, 2]},
]


@pytest.mark.parametrize("attributes", CONV_ATTRIBUTES)
def test_conv_integer(tmp_path: Path, attributes: dict[str, Any]) -> None:
    """A zero point per output channel for the weight; padding counts as x's zero point."""
    inputs = {
        "x": RNG.integers(0, 256, (2, 4, 7, 8)).astype(np.uint8),
        "w": RNG.integers(-128, 128, (6, 4 // attributes.get("group", 1), 3, 3)).astype(np.int8),
        "x_zero_point": np.array(100, np.uint8),
        "w_zero_point": RNG.integers(-3, 3, 6).astype(np.int8),
    }
    node = helper.make_node("ConvInteger", list(inputs), ["y"], **attributes)
    _check(_model(tmp_path / "convinteger.onnx", node, inputs), inputs)


@pytest.mark.parametrize("backend", ["native", "reference"])
@pytest.mark.parametrize("attributes", CONV_ATTRIBUTES[1:3])
@pytest.mark.parametrize("y_dtype", [np.uint8, np.int8])
def test_qlinear_conv(tmp_path: Path, backend: str, attributes: dict[str, Any], y_dtype: type[Any]) -> None:
    """A bias, and a scale and zero point per output channel for the weight."""
    inputs = {
        "x": RNG.integers(-128, 128, (2, 4, 7, 8)).astype(np.int8),
        "x_scale": np.array(0.05, np.float32),
        "x_zero_point": np.array(-7, np.int8),
        "w": RNG.integers(0, 256, (6, 4 // attributes.get("group", 1), 3, 3)).astype(np.uint8),
        "w_scale": RNG.uniform(0.002, 0.01, 6).astype(np.float32),
        "w_zero_point": RNG.integers(120, 136, 6).astype(np.uint8),
        "y_scale": np.array(0.3, np.float32),
        "y_zero_point": np.array(np.iinfo(y_dtype).max // 2, y_dtype),
        "B": RNG.integers(-2000, 2000, 6).astype(np.int32),
    }
    node = helper.make_node("QLinearConv", list(inputs), ["y"], **attributes)
    _check(_model(tmp_path / "qconv.onnx", node, inputs), inputs, backend)


# ---- losses ----


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_classification_losses_with_weights_and_an_ignored_class(tmp_path: Path, op: str, reduction: str) -> None:
    x = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    target = RNG.integers(0, 5, (4, 3)).astype(np.int64)
    target[0, 0] = target[2, 1] = -1  # ignored, and out of range: it must not be gathered
    weight = RNG.uniform(0.5, 2, 5).astype(np.float32)
    inputs = {"x": x, "t": target, "w": weight}
    node = helper.make_node(op, ["x", "t", "w"], ["loss"], reduction=reduction, ignore_index=-1)
    _check(_model(tmp_path / "loss.onnx", node, inputs), inputs)


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_torch_losses_match_pytorch(loss: str) -> None:
    import torch

    class Loss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("weight", torch.rand(7) + 0.5)  # class weights are not trained

        def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            scores = x if loss == "cross_entropy" else torch.log_softmax(x, 1)
            function = getattr(torch.nn.functional, loss)
            return function(scores, target, weight=self.get_buffer("weight"), ignore_index=2)

    x, target = torch.randn(6, 7), torch.tensor([0, 2, 6, 2, 3, 1])
    model = Loss().eval()
    (got,) = gnomon.compile(model, example_inputs=(x, target)).run([x.numpy(), target.numpy()])
    np.testing.assert_allclose(got, model(x, target).detach().numpy(), rtol=1e-5)


# ---- resize ----


@pytest.mark.parametrize(
    ("mode", "coordinates", "rounding", "scales", "sizes"),
    [
        ("linear", "half_pixel", "", [1, 1, 1.7, 0.6], None),
        ("linear", "align_corners", "", [1, 1, 0.6, 0.6], None),
        ("linear", "pytorch_half_pixel", "", None, [2, 3, 1, 7]),
        ("cubic", "half_pixel", "", [1, 1, 2.0, 1.5], None),
        ("cubic", "asymmetric", "", None, [2, 3, 9, 4]),
        ("nearest", "half_pixel", "round_prefer_ceil", None, [2, 3, 9, 4]),
        ("nearest", "asymmetric", "floor", [1, 1, 2.5, 0.5], None),
        ("nearest", "half_pixel", "ceil", [1, 1, 3.0, 1.0], None),
    ],
)
def test_resize(
    tmp_path: Path, mode: str, coordinates: str, rounding: str, scales: list[float] | None, sizes: list[int] | None
) -> None:
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    attributes: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": coordinates}
    if rounding:
        attributes["nearest_mode"] = rounding
    constants = {"roi": np.zeros(0, np.float32)}
    if scales is not None:
        constants["scales"] = np.array(scales, np.float32)
        node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attributes)
    else:
        constants["sizes"] = np.array(sizes, np.int64)
        node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], **attributes)
    # Weighing four taps of unit-scale data in f32 leaves about 1e-6 absolute error against the f64 reference.
    _check(_model(tmp_path / "resize.onnx", node, {"x": x}, constants, opset=19), {"x": x}, atol=1e-5)


# ---- top k ----


@pytest.mark.parametrize("backend", ["native", "reference"])
@pytest.mark.parametrize(("axis", "largest"), [(-1, 1), (0, 0), (1, 1)])
def test_top_k_keeps_equal_values_in_index_order(tmp_path: Path, backend: str, axis: int, largest: int) -> None:
    x = RNG.integers(0, 4, (5, 6, 7)).astype(np.float32)  # many ties
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest)
    path = _model(tmp_path / "topk.onnx", node, {"x": x}, {"k": np.array([3], np.int64)})
    _check(path, {"x": x}, backend)


def test_torch_topk_matches_pytorch() -> None:
    import torch

    class TopK(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.topk(x, 4, dim=1, largest=False)

    x = torch.randn(3, 10, 5)  # no ties: torch.topk's order among equal values is unspecified
    values, indices = gnomon.compile(TopK(), example_inputs=(x,)).run([x.numpy()])
    expected = TopK()(x)
    np.testing.assert_array_equal(values, expected[0].numpy())
    np.testing.assert_array_equal(indices, expected[1].numpy())


def test_top_k_larger_than_its_axis_is_a_verifier_error() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context

    text = """func.func @f(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %v, %i = graph.topk %x {k = 4 : i64, axis = 1 : i64, largest = true}
      : (tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xi64>)
  func.return %v : tensor<2x4xf32>
}"""
    module = Parser(gnomon_context(), text).parse_module()
    with pytest.raises(Exception, match=r"graph.topk: k 4 is outside 0..3, the size of axis 1"):
        module.verify()


# ---- scatters ----


@pytest.mark.parametrize("backend", ["native", "reference"])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, -1])
def test_scatter_elements(tmp_path: Path, backend: str, reduction: str, axis: int) -> None:
    """Repeated indices (the last update wins without a reduction, as in ONNX's reference) and negative ones."""
    data = RNG.standard_normal((4, 5)).astype(np.float32)
    shape = (6, 5) if axis == 0 else (4, 7)
    indices = RNG.integers(-data.shape[axis], data.shape[axis], shape).astype(np.int64)
    updates = RNG.standard_normal(shape).astype(np.float32)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis, reduction=reduction)
    inputs = {"x": data, "i": indices, "u": updates}
    _check(_model(tmp_path / "scatter.onnx", node, inputs), inputs, backend)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("depth", [1, 2])
def test_scatter_nd(tmp_path: Path, reduction: str, depth: int) -> None:
    data = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    # Negative indices; the last two rows name one place twice.
    indices = np.array([[-1, 2], [0, 3], [2, -4], [0, 3]], np.int64)[:, :depth]
    updates = RNG.standard_normal((4, *data.shape[depth:])).astype(np.float32)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    inputs = {"x": data, "i": indices, "u": updates}
    _check(_model(tmp_path / "scatter_nd.onnx", node, inputs), inputs)


@pytest.mark.parametrize("output_shape", [None, [2, 3, 7, 6]])
def test_max_unpool_indices_count_across_the_tensor(tmp_path: Path, output_shape: list[int] | None) -> None:
    """ONNX's MaxPool indices (and so MaxUnpool's) count across batch and channels, not within each plane; a
    larger output_shape pads the unpooled tensor at the end of each dim."""
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    attributes = {"kernel_shape": [2, 2], "strides": [2, 2]}
    pool = _model(tmp_path / "pool.onnx", helper.make_node("MaxPool", ["x"], ["y", "i"], **attributes), {"x": x})
    pooled, indices = ReferenceEvaluator(onnx.load(pool)).run(None, {"x": x})
    inputs = {"y": pooled, "i": indices}
    if output_shape is None:
        node = helper.make_node("MaxUnpool", ["y", "i"], ["z"], **attributes)
        _check(_model(tmp_path / "unpool.onnx", node, inputs), inputs)
        return
    node = helper.make_node("MaxUnpool", ["y", "i", "shape"], ["z"], **attributes)
    _check(_model(tmp_path / "unpool.onnx", node, inputs, {"shape": np.array(output_shape, np.int64)}), inputs)


@pytest.mark.parametrize(
    ("image", "block", "attributes"),
    [
        ([5, 6], [2, 3], {"pads": [1, 0, 0, 2], "strides": [2, 1], "dilations": [1, 2]}),
        ([3, 4, 5], [2, 1, 3], {"strides": [1, 2, 1]}),
    ],
)
def test_col2im(tmp_path: Path, image: list[int], block: list[int], attributes: dict[str, list[int]]) -> None:
    """Asymmetric pads and 3-d images, which torch-mlir's lowering refuses."""
    n = len(image)
    pads = attributes.get("pads", [0] * 2 * n)
    strides, dilations = attributes.get("strides", [1] * n), attributes.get("dilations", [1] * n)
    positions = [
        (d + pads[i] + pads[n + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i, d in enumerate(image)
    ]
    x = RNG.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(positions)))).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attributes)
    constants = {"image": np.array(image, np.int64), "block": np.array(block, np.int64)}
    _check(_model(tmp_path / "col2im.onnx", node, {"x": x}, constants), {"x": x})


def _torch_scatters() -> dict[str, Any]:
    """Each a function of x (4, 6), an index i (3, 4) valid along either dim with repeats, s (5, 5) larger than the
    index (torch scatters its corner), j (3) and k (3) distinct pairs of indices and v (3, 6) values."""
    import torch

    def put_separated(x: torch.Tensor, j: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        y = x.reshape(2, 2, 6).clone()
        y[j % 2, :, k] = v[:, :2]  # separated index tensors: the indexed dims go first
        return y

    def put_after_a_slice(x: torch.Tensor, j: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        y = x.reshape(2, 2, 6).clone()
        y[:, j % 2, k] = v[:2, :3]
        return y

    def slice_assigned(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y[1:4, 1::2] = v[:, :3]
        return y

    def select_assigned(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y[:, -2] = v[0, :4]
        return y

    return {
        "scatter": lambda x, i, s: x.scatter(1, i, s),
        "scatter_value": lambda x, i, s: x.scatter(0, i, 2.5),
        "scatter_add": lambda x, i, s: x.scatter_add(0, i, s),
        "scatter_reduce_prod": lambda x, i, s: x.scatter_reduce(1, i, s, "prod"),
        "scatter_reduce_amax_alone": lambda x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=False),
        "scatter_reduce_amin_alone": lambda x, i, s: x.scatter_reduce(1, i, s, "amin", include_self=False),
        "scatter_reduce_sum_alone": lambda x, i, s: x.scatter_reduce(1, i, s, "sum", include_self=False),
        "scatter_reduce_amin_alone_i64": lambda x, i, s: (
            (x * 9).long().scatter_reduce(1, i, (s * 9).long(), "amin", include_self=False)
        ),
        "index_put_accumulate": lambda x, j, k, v: x.index_put((j % 2,), v[0], accumulate=True),
        "index_put_pairs": lambda x, j, k, v: x.index_put((j, k), v[:, 0]),
        "index_put_separated": put_separated,
        "index_put_after_a_slice": put_after_a_slice,
        "index_add": lambda x, j, k, v: x.index_add(0, j % 2, v, alpha=2.0),
        "slice_scatter": lambda x, j, k, v: slice_assigned(x, v),
        "select_scatter": lambda x, j, k, v: select_assigned(x, v),
    }


@pytest.mark.parametrize("case", list(_torch_scatters()))
def test_torch_scatters_match_pytorch(case: str) -> None:
    import torch

    function = _torch_scatters()[case]

    class Scatter(torch.nn.Module):
        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return function(*args)

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=generator)
    if case.startswith("scatter"):
        inputs = (x, torch.randint(0, 4, (3, 4), generator=generator), torch.randn(5, 5, generator=generator))
    else:
        inputs = (x, torch.tensor([3, 0, 1]), torch.tensor([5, 2, 2]), torch.randn(3, 6, generator=generator))
    (got,) = gnomon.compile(Scatter(), example_inputs=inputs).run([t.numpy() for t in inputs])
    np.testing.assert_allclose(got, function(*inputs).numpy(), rtol=1e-6)


def test_torch_max_unpool_and_fold_match_pytorch() -> None:
    """torch's unpooling indices count within each (n, c) plane; fold (col2im) sums overlapping blocks."""
    import torch

    class UnpoolFold(torch.nn.Module):
        def forward(
            self, pooled: torch.Tensor, indices: torch.Tensor, columns: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            unpooled = torch.nn.functional.max_unpool2d(pooled, indices, 2, output_size=[7, 6])
            folded = torch.nn.functional.fold(columns, (5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2))
            return unpooled, folded

    # gnomon's max pooling returns no indices: they come from torch's.
    pooled, indices = torch.nn.functional.max_pool2d(torch.randn(2, 3, 7, 6), 2, return_indices=True)
    inputs = (pooled, indices, torch.randn(2, 4 * 6, 15))
    model = UnpoolFold()
    got = gnomon.compile(model, example_inputs=inputs).run([t.numpy() for t in inputs])
    for g, e in zip(got, model(*inputs), strict=True):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-6)


def test_torch_scatter_mean_is_refused() -> None:
    import torch

    from gnomon.errors import UnsupportedOpsError

    class Mean(torch.nn.Module):
        def forward(self, x: torch.Tensor, i: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            return x.scatter_reduce(0, i, s, "mean")

    inputs = (torch.randn(4, 3), torch.randint(0, 4, (2, 3)), torch.randn(2, 3))
    with pytest.raises(UnsupportedOpsError) as error:
        gnomon.load(Mean(), example_inputs=inputs)
    assert str(error.value) == (
        "unsupported op aten.scatter_reduce.two at node 'scatter_reduce' in Mean (scatter reduction 'mean')"
    )


# ---- recurrent layers ----

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _recurrent_model(
    tmp_path: Path, op: str, direction: str, layout: int, peepholes: bool = False, **attributes: Any
) -> tuple[Path, dict[str, np.ndarray]]:
    """A one-node LSTM, GRU or RNN of hidden size 5 over 4 steps of 3 sequences of 2 features, its weights, biases
    (and peepholes) as initializers; the input and the initial states (scaled to keep the gates off saturation) are
    graph inputs, batch first under layout 1."""
    directions, hidden, gates = 2 if direction == "bidirectional" else 1, 5, _GATES[op]
    steps, batch = 4, 3
    x = RNG.standard_normal((batch, steps, 2) if layout else (steps, batch, 2)).astype(np.float32)
    state_shape = (batch, directions, hidden) if layout else (directions, batch, hidden)
    inputs = {"X": x, "initial_h": (0.5 * RNG.standard_normal(state_shape)).astype(np.float32)}
    constants = {
        "W": (0.5 * RNG.standard_normal((directions, gates * hidden, 2))).astype(np.float32),
        "R": (0.5 * RNG.standard_normal((directions, gates * hidden, hidden))).astype(np.float32),
        "B": (0.5 * RNG.standard_normal((directions, 2 * gates * hidden))).astype(np.float32),
    }
    names = ["X", "W", "R", "B", "", "initial_h"]
    outputs = ["Y", "Y_h"]
    if op == "LSTM":
        inputs["initial_c"] = (0.5 * RNG.standard_normal(state_shape)).astype(np.float32)
        names.append("initial_c")
        outputs.append("Y_c")
        if peepholes:
            constants["P"] = (0.5 * RNG.standard_normal((directions, 3 * hidden))).astype(np.float32)
            names.append("P")
    node = helper.make_node(op, names, outputs, hidden_size=hidden, direction=direction, layout=layout, **attributes)
    return _model(tmp_path / f"{op.lower()}.onnx", node, inputs, constants, opset=22), inputs


@pytest.mark.parametrize("backend", ["native", "reference"])
@pytest.mark.parametrize(
    ("op", "direction", "layout", "peepholes", "attributes"),
    [
        ("LSTM", "forward", 0, False, {}),
        ("LSTM", "reverse", 1, True, {}),
        ("LSTM", "bidirectional", 0, True, {}),
        ("GRU", "bidirectional", 1, False, {}),  # the reset gate before the recurrent product: ONNX's default
        ("GRU", "reverse", 0, False, {"linear_before_reset": 1}),  # after it: torch's GRU
        ("RNN", "bidirectional", 0, False, {}),
        ("RNN", "reverse", 1, False, {"activations": ["Tanh"]}),
    ],
    ids=["lstm", "lstm_reverse_batchwise_peepholes", "lstm_bidirectional_peepholes", "gru_bidirectional_batchwise",
         "gru_reverse_linear_before_reset", "rnn_bidirectional", "rnn_reverse_batchwise"],
)  # fmt: skip
def test_recurrent_layers_match_onnx(
    tmp_path: Path, backend: str, op: str, direction: str, layout: int, peepholes: bool, attributes: dict[str, Any]
) -> None:
    path, inputs = _recurrent_model(tmp_path, op, direction, layout, peepholes, **attributes)
    _check(path, inputs, backend, atol=1e-5)


def test_lstm_clip_and_coupled_forget_gate(tmp_path: Path) -> None:
    """onnx.reference ignores clip and input_forget: the library's step loop and the NumPy reference, two
    implementations of the op's equations, agree, and differ from the reference that ignores them."""
    path, inputs = _recurrent_model(tmp_path, "LSTM", "bidirectional", 0, True, clip=0.5, input_forget=1)
    native = gnomon.compile(path).run(list(inputs.values()))
    reference = gnomon.compile(path, backend="reference").run(list(inputs.values()))
    ignored: list[Any] = ReferenceEvaluator(onnx.load(path)).run(None, inputs)
    for n, r, i in zip(native, reference, ignored, strict=True):
        np.testing.assert_allclose(n, r, rtol=1e-5, atol=1e-6)
        assert not np.allclose(n, i, atol=1e-3)


@pytest.mark.parametrize(
    ("attributes", "sequence_lens", "reason"),
    [
        ({"activations": ["Relu", "Tanh", "Tanh"]}, None,
         "activations ['relu', 'tanh', 'tanh']: only sigmoid, tanh, tanh per direction are supported"),
        ({}, [4, 2, 4], "sequence_lens [4, 2, 4] shorter than the 4 steps of X"),
    ],
    ids=["activations", "sequence_lens"],
)  # fmt: skip
def test_recurrent_variants_not_converted_are_refused(
    tmp_path: Path, attributes: dict[str, Any], sequence_lens: list[int] | None, reason: str
) -> None:
    path, _ = _recurrent_model(tmp_path, "LSTM", "forward", 0, **attributes)
    if sequence_lens is not None:
        model = onnx.load(path)
        model.graph.initializer.append(numpy_helper.from_array(np.array(sequence_lens, np.int32), "sequence_lens"))
        model.graph.node[0].input[4] = "sequence_lens"
        onnx.save(model, path)
    with pytest.raises(UnsupportedOpsError) as raised:
        gnomon.load(path)
    assert str(raised.value) == f"unsupported op onnx.LSTM at node 'LSTM_0' in lstm.onnx ({reason})"


def _recurrent_torch_models() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """torch modules around nn.LSTM, GRU and RNN (scriptable, unlike the bare layers) and their example inputs."""
    import torch
    from torch import nn

    class LanguageModel(nn.Module):
        """Embedding, a 2-layer LSTM over batch-first token sequences, a linear head over the vocabulary."""

        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(50, 16)
            self.lstm = nn.LSTM(16, 32, 2, batch_first=True)
            self.head = nn.Linear(32, 50)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            y, _ = self.lstm(self.embedding(ids))
            return self.head(y)

    class Layer(nn.Module):
        def __init__(self, layer: nn.GRU | nn.RNN) -> None:
            super().__init__()
            self.layer = layer

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.layer(x)

    class LstmWithStates(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=True)

        def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y, (h_n, c_n) = self.lstm(x, (h, c))
            return y, h_n, c_n

    torch.manual_seed(0)
    sequence = torch.randn(5, 3, 8)
    return {
        "lstm_language_model": (LanguageModel(), (torch.randint(0, 50, (2, 7)),)),
        "gru": (Layer(nn.GRU(8, 12)), (sequence,)),
        "gru_bidirectional_batch_first": (
            Layer(nn.GRU(8, 12, num_layers=2, bidirectional=True, batch_first=True)),
            (sequence,),
        ),
        "lstm_bidirectional_with_states": (LstmWithStates(), (sequence, torch.randn(4, 3, 12), torch.randn(4, 3, 12))),
        "rnn_relu_bidirectional_without_bias": (
            Layer(nn.RNN(8, 12, nonlinearity="relu", bias=False, bidirectional=True)),
            (sequence,),
        ),
    }


def _through_door(door: str, model: Any, inputs: tuple[Any, ...], tmp_path: Path) -> Any:
    """`gnomon.compile` of `model` through one door: the module itself (torch.export), a `.pt2` file, a traced or
    scripted TorchScript file, or an ONNX file from torch's TorchScript-based or dynamo exporter."""
    import torch

    match door:
        case "module":
            return gnomon.compile(model, example_inputs=inputs)
        case "pt2":
            torch.export.save(torch.export.export(model, inputs), tmp_path / "model.pt2")
            return gnomon.compile(tmp_path / "model.pt2")
        case "traced" | "scripted":
            script = torch.jit.trace(model, inputs) if door == "traced" else torch.jit.script(model)
            torch.jit.save(script, str(tmp_path / "model.pt"))
            return gnomon.compile(tmp_path / "model.pt", example_inputs=inputs)
        case _:
            if door == "onnx_dynamo":
                pytest.importorskip("onnxscript")
            torch.onnx.export(model, inputs, tmp_path / "model.onnx", dynamo=door == "onnx_dynamo")
            return gnomon.compile(tmp_path / "model.onnx")


_EVERY_DOOR = ("module", "pt2", "traced", "scripted", "onnx", "onnx_dynamo")


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize(
    ("name", "door"),
    [
        *((name, door) for name in ("lstm_language_model", "gru") for door in _EVERY_DOOR),
        *((name, door) for name in ("gru_bidirectional_batch_first", "lstm_bidirectional_with_states",
                                    "rnn_relu_bidirectional_without_bias") for door in ("module", "onnx")),
    ],
)  # fmt: skip
def test_recurrent_models_match_torch_through_every_door(tmp_path: Path, name: str, door: str) -> None:
    import torch

    model, inputs = _recurrent_torch_models()[name]
    model.eval()
    expected = [t.detach().numpy() for t in torch.utils._pytree.tree_leaves(model(*inputs))]
    got = _through_door(door, model, inputs, tmp_path).run([x.numpy() for x in inputs])
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        assert relative_l2(g, e) <= 1e-4


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_scripted_bare_recurrent_layer_is_a_clear_error(tmp_path: Path) -> None:
    """torch scripts nn.GRU into its overloads, forward_tensor and forward_packed, and no forward."""
    import torch

    torch.jit.save(torch.jit.script(torch.nn.GRU(8, 12)), str(tmp_path / "gru.pt"))
    with pytest.raises(ModelLoadError) as raised:
        gnomon.load(tmp_path / "gru.pt", input_shapes={"x": [5, 3, 8]})
    assert str(raised.value) == (
        f"{tmp_path / 'gru.pt'}: the TorchScript module has no forward method to import (script a module that calls it)"
    )


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell", "RNNCell"])
def test_recurrent_cells_are_linear_and_elementwise_ops(cell: str) -> None:
    import torch

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = getattr(torch.nn, cell)(8, 12)

        def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> Any:
            return self.cell(x, (h, c)) if cell == "LSTMCell" else self.cell(x, h)

    model = Step().eval()
    inputs = (torch.randn(3, 8), torch.randn(3, 12), torch.randn(3, 12))
    expected = [t.detach().numpy() for t in torch.utils._pytree.tree_leaves(model(*inputs))]
    exe = gnomon.compile(model, example_inputs=inputs)
    got = exe.run([x.numpy() for x in inputs])
    for g, e in zip(got, expected, strict=True):
        assert relative_l2(g, e) <= 1e-6
    names = {op.name for op in gnomon.load(model, example_inputs=inputs).walk()}
    assert "graph.linear" in names
    assert not names & {"graph.lstm", "graph.gru", "graph.rnn"}


# ---- rotary embedding, swish and Lp normalization ----


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
@pytest.mark.parametrize("form", ["4d", "3d", "no_position_ids", "position_ids_of_one_row"])
def test_rotary_embedding(tmp_path: Path, form: str, rotary_dim: int, interleaved: int) -> None:
    """Whole and partial rotation, halves or interleaved pairs, (batch, heads, seq, head) or 3-d input split into
    heads, caches indexed by position ids (one row of them broadcasting over the batch) or not."""
    batch, heads, seq, head_size = 2, 3, 5, 8
    half = (rotary_dim or head_size) // 2
    shape = (batch, seq, heads * head_size) if form == "3d" else (batch, heads, seq, head_size)
    inputs = {"x": RNG.standard_normal(shape).astype(np.float32)}
    if form == "no_position_ids":
        angles = RNG.uniform(0, 6, (batch, seq, half))
    else:
        angles = RNG.uniform(0, 6, (20, half))
        rows = 1 if form == "position_ids_of_one_row" else batch
        inputs["position_ids"] = RNG.integers(0, 20, (rows, seq)).astype(np.int64)
    inputs = {"x": inputs["x"], "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)} | {
        name: value for name, value in inputs.items() if name == "position_ids"
    }
    attributes = {"interleaved": interleaved, "rotary_embedding_dim": rotary_dim}
    if form == "3d":
        attributes["num_heads"] = heads
    node = helper.make_node("RotaryEmbedding", list(inputs), ["y"], **attributes)
    _check(_model(tmp_path / "rotary.onnx", node, inputs), inputs)


@pytest.mark.parametrize("alpha", [1.0, 1.7])
@pytest.mark.parametrize("op", ["Swish", "SwiGLU"])
def test_swish_and_swiglu(tmp_path: Path, op: str, alpha: float) -> None:
    inputs = {"a": RNG.standard_normal((3, 7)).astype(np.float32)}
    if op == "SwiGLU":
        inputs["b"] = RNG.standard_normal((3, 7)).astype(np.float32)
    node = helper.make_node(op, list(inputs), ["y"], alpha=alpha)
    _check(_model(tmp_path / "swish.onnx", node, inputs, opset=28), inputs)


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_leaves_zero_vectors_zero(tmp_path: Path, p: int, axis: int) -> None:
    """x / norm(x), and 0 where the norm is 0 (ONNX's reference). Checked against NumPy: onnx.reference sums x, not
    |x|, for the 1-norm."""
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    x[:, 1] = x[2, :] = 0
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=axis)
    (got,) = gnomon.compile(_model(tmp_path / "lp.onnx", node, {"x": x})).run([x])
    norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True)
    np.testing.assert_allclose(got, np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)), rtol=1e-6)


# ---- inverse trigonometric and hyperbolic functions, IsInf, Mod with fmod ----

TRIGONOMETRIC = ["Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Sinh"]


@pytest.mark.parametrize(("dtype", "kind"), [(np.float32, "generated"), (np.float64, "generated"),
                                              (np.float16, "library")])  # fmt: skip
def test_inverse_trigonometric_and_hyperbolic_functions(tmp_path: Path, dtype: type[Any], kind: str) -> None:
    # Acosh takes [1, inf); the others take (-1, 1) (asinh, atan and sinh take more: large arguments too).
    x = np.concatenate([RNG.uniform(-0.999, 0.999, 40), [0.0, -0.0]]).astype(dtype)
    big = np.concatenate([RNG.uniform(1, 60, 40), [1.0, 65000.0]]).astype(dtype)
    nodes = [helper.make_node(op, ["big" if op in ("Acosh", "Asinh", "Atan") else "x"], [op]) for op in TRIGONOMETRIC]
    path = _model(tmp_path / "trigonometric.onnx", nodes, {"x": x, "big": big})
    # float16 rounds each result once on both sides, but from float32 values that may differ in their last bit.
    _check(path, {"x": x, "big": big}, atol=1e-3 if dtype == np.float16 else 1e-6)
    assert set(_kernels(path).values()) == {kind}  # generated: libm's functions; float16: ATen's


@pytest.mark.parametrize(("positive", "negative"), [(1, 1), (1, 0), (0, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_is_inf_detects_either_sign(tmp_path: Path, positive: int, negative: int, dtype: type[Any]) -> None:
    x = np.array([-np.inf, -1.5, 0.0, np.nan, np.inf, 6e4, -6e4], dtype)
    node = helper.make_node("IsInf", ["x"], ["y"], detect_positive=positive, detect_negative=negative)
    _check(_model(tmp_path / "isinf.onnx", node, {"x": x}), {"x": x})


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int32, np.int64])
def test_mod_with_fmod_takes_the_sign_of_the_dividend(tmp_path: Path, dtype: type[Any]) -> None:
    if np.dtype(dtype).kind == "f":
        x = (RNG.standard_normal((3, 8)) * 10).astype(dtype)
        y = np.array([1.5, -1.5, 0.7, -0.3, 4.0, -4.0, 2.5, 100.0], dtype)
    else:
        x = RNG.integers(-50, 50, (3, 8)).astype(dtype)
        y = np.array([3, -3, 7, -7, 1, -1, 50, 2], dtype)
    node = helper.make_node("Mod", ["x", "y"], ["z"], fmod=1)
    _check(_model(tmp_path / "fmod.onnx", node, {"x": x, "y": y}), {"x": x, "y": y})


def test_torch_inverse_trigonometric_fmod_isinf_det_and_circular_pad_match_pytorch() -> None:
    import torch
    import torch.nn.functional as F

    class Ops(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, ...]:
            u = torch.tanh(x)  # inside (-1, 1)
            functions = (torch.acos(u), torch.arcsin(u), torch.atan(x), torch.asinh(x), torch.acosh(1 + x.abs()))
            return (
                *functions, torch.atanh(u), torch.sinh(x), torch.fmod(x, 0.7), torch.fmod(n, torch.tensor([3, -3, 2])),
                torch.isinf(x / u.round()), torch.isinf(n), torch.linalg.det(m), torch.det(m),
                F.pad(x.reshape(1, 4, 3), (2, 3), mode="circular"),
            )  # fmt: skip

    inputs = (torch.randn(4, 3) * 3, torch.randint(-20, 20, (4, 3)), torch.randn(2, 3, 3))
    got = gnomon.compile(Ops(), example_inputs=inputs).run([t.numpy() for t in inputs])
    expected = Ops()(*inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.numpy().dtype
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-6)


# ---- einsum ----

EINSUMS = [
    ("ij->ji", [(3, 4)]),
    ("...ii->...i", [(3, 5, 5)]),
    ("i,i", [(5,)] * 2),
    ("->", [()]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("ba,ab", [(3, 2), (2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("abc,cd,de->eba", [(2, 3, 4), (4, 5), (5, 6)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum(tmp_path: Path, equation: str, shapes: list[tuple[int, ...]]) -> None:
    inputs = {f"x{i}": RNG.standard_normal(shape).astype(np.float32) for i, shape in enumerate(shapes)}
    node = helper.make_node("Einsum", list(inputs), ["y"], equation=equation)
    _check(_model(tmp_path / "einsum.onnx", node, inputs), inputs, atol=1e-5)


TORCH_EINSUMS = [
    ("ij,ij->i", [(1, 4), (3, 4)]),  # subscripts broadcast
    ("ij,kj", [(2, 1), (3, 4)]),  # a contracted subscript broadcast: sum(x) * sum(y)
    ("...j,...j->...", [(2, 1, 4), (3, 4)]),
    ("...i->i", [(2, 3, 4)]),  # ellipsis dims the output lacks are summed
    ("bi,bi,b->b", [(1, 3), (1, 3), (5,)]),
    ("Bi,iB->", [(3, 2), (2, 3)]),
    ("iji->j", [(3, 4, 3)]),
]


@pytest.mark.parametrize(("equation", "shapes"), TORCH_EINSUMS, ids=[e for e, _ in TORCH_EINSUMS])
def test_torch_einsum_matches_pytorch(equation: str, shapes: list[tuple[int, ...]]) -> None:
    import torch

    class Einsum(torch.nn.Module):
        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            return torch.einsum(equation, *xs)

    xs = tuple(torch.randn(shape, dtype=torch.float64) for shape in shapes)
    (got,) = gnomon.compile(Einsum(), example_inputs=xs).run([x.numpy() for x in xs])
    np.testing.assert_allclose(got, Einsum()(*xs).numpy(), rtol=1e-12, atol=1e-12)


def test_einsum_of_unequal_sizes_of_a_subscript_is_refused(tmp_path: Path) -> None:
    x = np.zeros((3, 4), np.float32)
    graph = helper.make_graph(
        [helper.make_node("Einsum", ["x"], ["y"], equation="ii->i", name="diag")],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]), tmp_path / "diag.onnx")
    with pytest.raises(UnsupportedOpsError) as error:
        gnomon.compile(tmp_path / "diag.onnx")
    assert str(error.value) == (
        "unsupported op aten.einsum at node 'diag' in diag.onnx (einsum subscript 'i' has sizes 3 and 4)"
    )


# ---- determinants, ranges of float16, wrap padding ----


@pytest.mark.parametrize(("shape", "dtype"), [((3, 3), np.float32), ((2, 4, 5, 5), np.float64)])
def test_det(tmp_path: Path, shape: tuple[int, ...], dtype: type[Any]) -> None:
    x = RNG.standard_normal(shape).astype(dtype)
    _check(_model(tmp_path / "det.onnx", helper.make_node("Det", ["x"], ["y"]), {"x": x}), {"x": x})


@pytest.mark.parametrize("opset", [23, 27])  # opset 27 computes in float32 (stash_type), 23 in Python floats
@pytest.mark.parametrize(("start", "limit", "delta"), [(1.1, 30.7, 0.35), (10.0, -3.0, -0.7)])
def test_range_of_float16(tmp_path: Path, opset: int, start: float, limit: float, delta: float) -> None:
    bounds = {name: np.array(v, np.float16) for name, v in (("start", start), ("limit", limit), ("delta", delta))}
    node = helper.make_node("Range", list(bounds), ["y"])
    _check(_model(tmp_path / "range.onnx", node, {}, bounds, opset=opset), {})


def test_range_of_float16_needs_constant_bounds(tmp_path: Path) -> None:
    bounds = {name: np.array(1, np.float16) for name in ("start", "limit", "delta")}
    path = _model(tmp_path / "range.onnx", helper.make_node("Range", list(bounds), ["y"], name="range"), bounds)
    with pytest.raises(UnsupportedOpsError) as error:
        gnomon.compile(path)
    assert str(error.value) == (
        "unsupported op onnx.Range at node 'range' in range.onnx"
        " (Range with bounds that are not constants (a data-dependent shape))"
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_wrap_pad_repeats_the_input_past_its_size(tmp_path: Path, dtype: type[Any]) -> None:
    x = RNG.integers(-9, 9, (2, 3, 4)).astype(dtype)
    pads = {"pads": np.array([0, 4, 1, 1, 7, 0], np.int64)}
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")
    _check(_model(tmp_path / "pad.onnx", node, {"x": x}, pads), {"x": x})


# ---- stateful sequence ops and flex attention ----


def _linear_attention_inputs(
    rule: str, steps: int, heads: tuple[int, int], decay_width: str, beta_width: str, past: bool
) -> tuple[list[str], dict[str, np.ndarray]]:
    """LinearAttention's input names and values, keys L2-normalized per head as the delta rules want them."""
    (q_heads, kv_heads), dims = heads, 8
    keys = RNG.standard_normal((2, steps, kv_heads, dims))
    inputs = {
        "q": RNG.standard_normal((2, steps, q_heads * dims)),
        "k": (keys / np.linalg.norm(keys, axis=-1, keepdims=True)).reshape(2, steps, -1),
        "v": RNG.standard_normal((2, steps, kv_heads * 6)),
    }
    names = ["q", "k", "v", "state" if past else "", "", ""]
    if past:
        inputs["state"] = RNG.standard_normal((2, kv_heads, dims, 6)) * 0.1
    if rule in ("gated", "gated_delta"):
        names[4] = "decay"
        inputs["decay"] = -np.abs(RNG.standard_normal((2, steps, kv_heads * (dims if decay_width == "key" else 1))))
    if rule in ("delta", "gated_delta"):
        names[5] = "beta"
        inputs["beta"] = RNG.random((2, steps, kv_heads if beta_width == "head" else 1))
    while not names[-1]:
        names.pop()
    return names, {name: x.astype(np.float32) for name, x in inputs.items()}


@pytest.mark.parametrize(
    ("rule", "decay_width", "beta_width", "past"),
    [
        ("linear", "", "", True),
        ("gated", "key", "", True),
        ("gated", "head", "", False),
        ("delta", "", "head", True),
        ("gated_delta", "key", "head", False),
        ("gated_delta", "head", "one", True),
    ],
)
def test_linear_attention_over_chunks(tmp_path: Path, rule: str, decay_width: str, beta_width: str, past: bool) -> None:
    """11 steps in chunks of 4 (the last one short) of 4 query heads over 2 key/value heads: the chunkwise closed
    form, each chunk starting from the state the last one left, gives the step-by-step recurrence's output and
    state."""
    names, inputs = _linear_attention_inputs(rule, 11, (4, 2), decay_width, beta_width, past)
    node = helper.make_node(
        "LinearAttention", names, ["y", "present"], update_rule=rule, q_num_heads=4, kv_num_heads=2, chunk_size=4
    )
    _check(_model(tmp_path / "linear_attention.onnx", node, inputs, opset=27), inputs, atol=1e-5)


def test_delta_rule_with_one_repeated_key_stays_exact(tmp_path: Path) -> None:
    """One key over all 64 steps of a chunk with β = 1: each step overwrites the value stored under the key. The
    chunk's triangular system has ones all below its diagonal, where a power series of it would sum terms up to
    C(63, 31) ~ 1e18; the block inversion only ever holds entries of the inverse (0 and ±1)."""
    names, inputs = _linear_attention_inputs("delta", 64, (1, 1), "", "head", True)
    inputs["k"] = np.repeat(inputs["k"][:, :1], 64, axis=1)
    inputs["beta"] = np.ones_like(inputs["beta"])
    node = helper.make_node(
        "LinearAttention", names, ["y", "present"], update_rule="delta", q_num_heads=1, kv_num_heads=1
    )
    _check(_model(tmp_path / "linear_attention.onnx", node, inputs, opset=27), inputs, atol=1e-5)


def test_causal_conv_with_state_longer_than_its_input(tmp_path: Path) -> None:
    """A kernel of 5 over 2 steps after a past state, with a bias and SiLU: the present state keeps the last 4
    positions of the past state followed by the input."""
    inputs = _normal({"x": (2, 3, 2), "w": (3, 1, 5), "b": (3,), "past": (2, 3, 4)})
    node = helper.make_node("CausalConvWithState", ["x", "w", "b", "past"], ["y", "present"], activation="silu")
    _check(_model(tmp_path / "causal_conv.onnx", node, inputs, opset=27), inputs)


def _modifier(name: str, op: str, value: float, dtype: int = onnx.TensorProto.FLOAT) -> onnx.GraphProto:
    """A FlexAttention modifier subgraph: its input `op` a constant."""
    given, taken = helper.make_tensor_value_info("x", dtype, None), helper.make_tensor_value_info("y", dtype, None)
    constant = helper.make_tensor("c", dtype, [], [value])
    return helper.make_graph([helper.make_node(op, ["x", "c"], ["y"])], name, [given], [taken], [constant])


def test_flex_attention_with_both_modifiers_over_grouped_heads(tmp_path: Path) -> None:
    """score_mod and prob_mod, both inlined around the softmax, with 4 query heads over 2 key/value heads."""
    inputs = _normal({"q": (2, 4, 5, 8), "k": (2, 2, 6, 8), "v": (2, 2, 6, 3)})
    node = helper.make_node(
        "FlexAttention",
        ["q", "k", "v"],
        ["y"],
        domain="ai.onnx.preview",
        scale=0.3,
        score_mod=_modifier("score_mod", "Sub", 0.25),
        prob_mod=_modifier("prob_mod", "Mul", 2.0),
    )
    _check(_model(tmp_path / "flex.onnx", node, inputs, opset=26, preview=True), inputs)


def test_flex_attention_with_a_double_softmax_precision(tmp_path: Path) -> None:
    """softmax_precision double for float inputs: f32 scores, then the softmax, its score_mod and the product with
    V in f64, rounded back to f32."""
    inputs = _normal({"q": (1, 2, 4, 8), "k": (1, 2, 4, 8), "v": (1, 2, 4, 8)})
    node = helper.make_node(
        "FlexAttention",
        ["q", "k", "v"],
        ["y"],
        domain="ai.onnx.preview",
        softmax_precision=onnx.TensorProto.DOUBLE,
        score_mod=_modifier("score_mod", "Mul", 0.5, onnx.TensorProto.DOUBLE),
    )
    _check(_model(tmp_path / "flex.onnx", node, inputs, opset=26, preview=True), inputs)


# ---- grid sampling ----


@pytest.mark.parametrize("backend", ["native", "reference"])
@pytest.mark.parametrize(
    ("mode", "padding", "align"),
    [
        ("linear", "zeros", 0),
        ("linear", "reflection", 1),
        ("nearest", "border", 0),
        ("nearest", "reflection", 0),  # ONNX rounds before reflecting: not torch's grid_sample
        ("cubic", "border", 0),  # ONNX clamps the point before its taps: not torch's grid_sample
        ("cubic", "reflection", 1),
    ],
)
def test_grid_sample(tmp_path: Path, backend: str, mode: str, padding: str, align: int) -> None:
    x = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    grid = RNG.uniform(-2.5, 2.5, (2, 6, 7, 2)).astype(np.float32)  # points beyond the input too
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    inputs = {"x": x, "grid": grid}
    _check(_model(tmp_path / "grid_sample.onnx", node, inputs, opset=22), inputs, backend, atol=1e-5)


@pytest.mark.parametrize(("mode", "padding"), [("nearest", "reflection"), ("linear", "border"), ("cubic", "zeros")])
def test_volumetric_and_1d_grid_sample(tmp_path: Path, mode: str, padding: str) -> None:
    for shape, grid_shape in (((1, 2, 3, 4, 5), (1, 2, 3, 4, 3)), ((2, 3, 6), (2, 5, 1))):
        x = RNG.standard_normal(shape).astype(np.float32)
        grid = RNG.uniform(-1.5, 1.5, grid_shape).astype(np.float32)
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding)
        inputs = {"x": x, "grid": grid}
        _check(_model(tmp_path / "grid_sample.onnx", node, inputs, opset=22), inputs, atol=1e-5)


def test_torch_grid_sample_matches_pytorch() -> None:
    import torch

    class Sample(torch.nn.Module):
        def forward(self, x: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            functional = torch.nn.functional
            bilinear = functional.grid_sample(x, grid, padding_mode="reflection", align_corners=False)
            bicubic = functional.grid_sample(x, grid, mode="bicubic", align_corners=True)
            return bilinear, bicubic

    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 3 - 1.5
    got = gnomon.compile(Sample(), example_inputs=(x, grid)).run([x.numpy(), grid.numpy()])
    for g, e in zip(got, Sample()(x, grid), strict=True):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-6)


def test_torch_grid_sample_that_differs_from_onnx_is_refused() -> None:
    import torch

    class Sample(torch.nn.Module):
        def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=False)

    x, grid = torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2)
    with pytest.raises(UnsupportedOpsError) as error:
        gnomon.compile(Sample(), example_inputs=(x, grid))
    assert str(error.value) == (
        "unsupported op aten.grid_sampler at node 'grid_sampler' in Sample (cubic grid sampling with border padding:"
        " torch's differs from ONNX's, which gnomon implements)"
    )


@pytest.mark.parametrize(("spatial", "align"), [((5, 6), 0), ((3, 4, 5), 1)])
def test_affine_grid(tmp_path: Path, spatial: tuple[int, ...], align: int) -> None:
    dims = len(spatial)
    theta = RNG.standard_normal((2, dims, dims + 1)).astype(np.float32)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    size = np.array([2, 3, *spatial], np.int64)
    _check(_model(tmp_path / "affine_grid.onnx", node, {"theta": theta}, {"size": size}, opset=20), {"theta": theta})


def test_torch_affine_grid_matches_pytorch() -> None:
    import torch

    class Grid(torch.nn.Module):
        def forward(self, theta: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.affine_grid(theta, [2, 3, 4, 5], align_corners=False)

    theta = torch.randn(2, 2, 3)
    (got,) = gnomon.compile(Grid(), example_inputs=(theta,)).run([theta.numpy()])
    np.testing.assert_allclose(got, Grid()(theta).numpy(), rtol=1e-5, atol=1e-6)


# ---- pooling gnomon composes ----


@pytest.mark.parametrize(
    "attributes",
    [
        {"kernel_shape": [3, 2], "dilations": [2, 3], "pads": [2, 0, 1, 2], "count_include_pad": 1},
        {"kernel_shape": [2, 2], "dilations": [2, 2], "strides": [3, 2], "ceil_mode": 1, "count_include_pad": 1},
        {"kernel_shape": [3, 2], "dilations": [1, 2], "pads": [0, 1, 2, 1], "strides": [2, 1]},
    ],
)
def test_dilated_average_pool(tmp_path: Path, attributes: dict[str, Any]) -> None:
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], **attributes)
    _check(_model(tmp_path / "average_pool.onnx", node, {"x": x}, opset=22), {"x": x})


@pytest.mark.parametrize(
    "attributes",
    [
        {"kernel_shape": [3, 2], "p": 1, "dilations": [2, 2], "pads": [1, 0, 2, 1]},
        {"kernel_shape": [2, 3], "p": 3, "auto_pad": "SAME_UPPER", "strides": [2, 1]},
        {"kernel_shape": [2], "p": 2, "strides": [2], "ceil_mode": 1},
    ],
)
def test_lp_pool(tmp_path: Path, attributes: dict[str, Any]) -> None:
    shape = (2, 3, 9) if len(attributes["kernel_shape"]) == 1 else (2, 3, 7, 8)
    x = RNG.standard_normal(shape).astype(np.float32)
    node = helper.make_node("LpPool", ["x"], ["y"], **attributes)
    _check(_model(tmp_path / "lp_pool.onnx", node, {"x": x}, opset=22), {"x": x}, atol=1e-5)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_span_the_whole_tensor(tmp_path: Path, storage_order: int) -> None:
    """ONNX's indices count every image plane before (n, c)'s, and with storage_order 1 a plane column-major.
    Strides and dilations route onnx.reference through its loop that computes them as ONNX defines."""
    x = RNG.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(np.float32)  # no ties
    node = helper.make_node(
        "MaxPool", ["x"], ["y", "indices"], kernel_shape=[3, 2], strides=[2, 1], dilations=[1, 2], pads=[1, 1, 1, 0],
        storage_order=storage_order,
    )  # fmt: skip
    _check(_model(tmp_path / "max_pool.onnx", node, {"x": x}, opset=22), {"x": x})


def test_torch_max_pool_indices_match_pytorch() -> None:
    import torch

    class Pool(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1, dilation=1, return_indices=True)

    x = torch.randperm(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).float()  # no ties: torch's choice among them is its own
    values, indices = gnomon.compile(Pool(), example_inputs=(x,)).run([x.numpy()])
    expected = Pool()(x)
    np.testing.assert_array_equal(values, expected[0].numpy())
    np.testing.assert_array_equal(indices, expected[1].numpy())


# ---- transposed convolution, SpaceToDepth, DFT, STFT ----


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_with_uneven_auto_padding(tmp_path: Path, auto_pad: str) -> None:
    x, w = RNG.standard_normal((1, 2, 4, 3)).astype(np.float32), RNG.standard_normal((2, 3, 3, 4)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 3])
    inputs = {"x": x, "w": w}
    _check(_model(tmp_path / "conv_transpose.onnx", node, inputs, opset=22), inputs, atol=1e-5)


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
def test_space_to_depth(tmp_path: Path, mode: str) -> None:
    x = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode)
    _check(_model(tmp_path / "space_to_depth.onnx", node, {"x": x}, opset=28), {"x": x})


@pytest.mark.parametrize(
    ("shape", "attributes", "length"),
    [
        ((2, 7, 3, 1), {"axis": 1}, None),
        ((2, 7, 3, 2), {"axis": 2, "inverse": 1}, 5),  # truncated
        ((2, 5, 1), {"axis": 1, "onesided": 1}, 8),  # zero padded
        ((3, 5, 2), {"axis": 1, "inverse": 1, "onesided": 1}, None),  # irfft
    ],
)
def test_dft(tmp_path: Path, shape: tuple[int, ...], attributes: dict[str, Any], length: int | None) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    constants = {"length": np.array(length, np.int64)} if length is not None else {}
    node = helper.make_node("DFT", ["x", "length" if length is not None else ""], ["y"], **attributes)
    _check(_model(tmp_path / "dft.onnx", node, {"x": x}, constants, opset=17), {"x": x}, atol=1e-5)


def test_dft_axis_as_input(tmp_path: Path) -> None:
    x = RNG.standard_normal((2, 6, 4, 2)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"])
    constants = {"axis": np.array(-3, np.int64)}
    _check(_model(tmp_path / "dft.onnx", node, {"x": x}, constants, opset=20), {"x": x}, atol=1e-5)


@pytest.mark.parametrize(("parts", "window", "onesided"), [(1, True, 1), (2, False, 0)])
def test_stft(tmp_path: Path, parts: int, window: bool, onesided: int) -> None:
    x = RNG.standard_normal((2, 40, parts)).astype(np.float32)
    constants = {"step": np.array(6, np.int64), "length": np.array(10, np.int64)}
    if window:
        constants["window"] = np.hanning(10).astype(np.float32)
    node = helper.make_node("STFT", ["x", "step", "window" if window else "", "length"], ["y"], onesided=onesided)
    _check(_model(tmp_path / "stft.onnx", node, {"x": x}, constants, opset=17), {"x": x}, atol=1e-5)
