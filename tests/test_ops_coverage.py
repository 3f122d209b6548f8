"""Ops of ONNX's node conformance suite that gnomon compiles: each ONNX node is built into a one-node model,
compiled natively (and interpreted by the reference backend) and checked against ONNX's own reference
implementation (`onnx.reference`); where gnomon generates code for an op, a test says so.

Covered: LayerNormalization with its Mean and InvStdDev outputs, RMSNormalization, fp16 and bf16 Attention,
BitShift (out-of-range and negative shift counts as ONNX defines them), BitwiseAnd/Or/Xor/Not, BitCast, CumSum and
CumProd (exclusive, reverse), arithmetic on unsigned integers wider than ATen's uint8, the classification losses
(NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss; torch's nll_loss and cross_entropy against PyTorch),
Resize (nearest, linear and cubic, by every coordinate mode torch-mlir passes on), and TopK (ties in index order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import gnomon

RNG = np.random.default_rng(0)


def _model(
    path: Path,
    node: onnx.NodeProto,
    inputs: dict[str, np.ndarray],
    constants: dict[str, np.ndarray] | None = None,
    opset: int = 23,
) -> Path:
    """A one-node model: `inputs` are graph inputs, `constants` initializers (ONNX's tests pass axes and
    shift counts as inputs; gnomon needs them known at compile time)."""
    values = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for name, x in inputs.items()
    ]
    initializers = [numpy_helper.from_array(x, name) for name, x in (constants or {}).items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output]
    graph = helper.make_graph([node], "g", values, outputs, initializers)
    model = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), strict_mode=True
    )
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
