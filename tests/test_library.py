"""Library kernels and the torch eager baseline against the reference interpreter.

The eager program runs the light networks and gnomon's torch models against the reference on every
intermediate value (test_backends checks its final outputs, with every other backend's). Every op with a torch
implementation runs alone, eagerly and as a library kernel writing into preallocated outputs; fused
blocks (conv, linear, matmul with their epilogues) are built from graph IR text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LIGHT_NETWORKS, TORCH_MODELS, ModelCache, by_model, relative_l2
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, IntegerType, ModuleOp, TensorType
from xdsl.ir import Block, Operation
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.cost.pools import ONEDNN_POOL_MIN
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.dialects.graph.control_flow import CONTROL_FLOW_OPS
from gnomon.dialects.graph.elementwise import DropoutTrainOp
from gnomon.dialects.graph.nn import BatchNormTrainOp
from gnomon.dialects.graph.recurrent_train import LstmGradOp, LstmTrainOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.dialects.kernel import LibraryCall
from gnomon.passes.graph_to_kernel.library import (
    LIBRARY_CALLS,
    OneDNNPolicy,
    fusible_epilogue,
    library_call,
    reads_transposed,
)
from gnomon.reference import run_reference
from gnomon.registry import DIALECTS
from gnomon.runtime.library import TORCH_IMPLS, bind_call, library_kernel
from gnomon.runtime.torch_eager import TorchEagerError, TorchEagerProgram, unsupported_ops


def parse(text: str) -> ModuleOp:
    module = Parser(gnomon_context(), text).parse_module()
    module.verify()
    return module


def function_block(module: ModuleOp) -> Block:
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return function.body.block


def random_inputs(module: ModuleOp, ints: tuple[int, int] = (1, 4), positive: bool = False) -> list[np.ndarray]:
    """One array per function argument: normal floats (|x| + 0.1 if positive), ints in [lo, hi), random bools."""
    rng = np.random.default_rng(0)
    arrays: list[np.ndarray] = []
    for arg in function_block(module).args:
        assert isinstance(arg.type, TensorType)
        shape, element = arg.type.get_shape(), arg.type.get_element_type()
        dtype = numpy_dtype(element)
        assert dtype is not None
        if dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        elif isinstance(element, IntegerType):
            arrays.append(rng.integers(*ints, size=shape).astype(dtype))
        else:
            x = rng.standard_normal(shape)
            arrays.append((np.abs(x) + 0.1 if positive else x).astype(dtype))
    return arrays


def assert_matches(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    if actual.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def run_kernel(
    block: Block, inputs: list[np.ndarray], onednn: OneDNNPolicy = "residual"
) -> tuple[str, list[np.ndarray]]:
    """The block's library kernel bound to fresh buffers and run once; its name and outputs."""
    kernel = library_kernel(block, onednn=onednn)
    assert kernel is not None
    terminator = block.last_op
    assert terminator is not None
    outputs: list[np.ndarray] = []
    for value in terminator.operands:
        assert isinstance(value.type, TensorType)
        dtype = numpy_dtype(value.type.get_element_type())
        assert dtype is not None
        outputs.append(np.full(value.type.get_shape(), 7, dtype))  # not zeros: a kernel must write every element
    before = [x.copy() for x in inputs]
    launch = kernel.bind([torch.from_numpy(x) for x in inputs], [torch.from_numpy(y) for y in outputs])
    with torch.inference_mode():
        launch()
    for x, original in zip(inputs, before, strict=True):
        np.testing.assert_array_equal(x, original)  # inputs are read only
    return kernel.name, outputs


# ---- networks against the reference, on every value they compute ----


def returning_every_value(module: ModuleOp) -> ModuleOp:
    """`module` with its function returning every value its ops compute, not only the final ones.

    The light networks' generated weights give nearly constant outputs (a uniform softmax); the
    intermediate values are what tells two executors apart.
    """
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = function.body.block
    values = [r for op in block.ops if not isinstance(op, ConstantOp | func.ReturnOp) for r in op.results]
    terminator = block.last_op
    assert isinstance(terminator, func.ReturnOp)
    block.erase_op(terminator)
    block.add_op(func.ReturnOp(*values))
    function.function_type = FunctionType.from_lists([a.type for a in block.args], [v.type for v in values])
    return module


def assert_all_values_match(module: ModuleOp, inputs: list[np.ndarray]) -> None:
    module = returning_every_value(module)
    expected = run_reference(module, inputs)
    outputs = TorchEagerProgram(module)(*inputs)
    assert len(outputs) == len(expected)
    for index, (actual, want) in enumerate(zip(outputs, expected, strict=True)):
        assert actual.shape == want.shape, index
        assert actual.dtype == want.dtype, index
        if want.dtype.kind in "iub":
            np.testing.assert_array_equal(actual, want)
            continue
        finite = np.isfinite(want)  # max-pool padding is -inf
        np.testing.assert_array_equal(actual[~finite], want[~finite])
        assert relative_l2(actual[finite], want[finite]) <= 1e-4, index  # as test_backends' light networks


@pytest.mark.parametrize("model", by_model(LIGHT_NETWORKS))
def test_light_network_matches_reference(model_cache: ModelCache, model: Path) -> None:
    inputs, _ = model_cache.onnxruntime(model)
    assert_all_values_match(model_cache.imported(model).clone(), inputs)


@pytest.mark.parametrize("model", by_model(TORCH_MODELS))
def test_torch_model_matches_reference(model_cache: ModelCache, model: str) -> None:
    _, inputs = model_cache.torch_model(model)
    assert_all_values_match(model_cache.imported(model).clone(), [x.numpy() for x in inputs])


# ---- every op, eagerly and as a library kernel ----


@dataclass(frozen=True)
class OpCase:
    """One op as a function of its operands: `graph.op {attrs}` over tensors of the given types."""

    id: str
    op: str
    inputs: list[str]
    outputs: list[str]
    ints: tuple[int, int] = (1, 4)
    positive: bool = False
    fixed: dict[int, list[object]] = field(default_factory=dict[int, list[object]])
    """Inputs given as values (by argument index), for operands with a domain (offsets, variances)."""

    def text(self) -> str:
        types = [f"tensor<{t}>" for t in self.inputs], [f"tensor<{t}>" for t in self.outputs]
        args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types[0]))
        results = ", ".join(f"%r{i}" for i in range(len(types[1])))
        operands = ", ".join(f"%a{i}" for i in range(len(types[0])))
        name, _, attrs = self.op.partition(" ")
        return (
            f"func.func @main({args}) -> ({', '.join(types[1])}) {{\n"
            f"  {results} = {name} {operands} {attrs} : ({', '.join(types[0])}) -> ({', '.join(types[1])})\n"
            f"  func.return {results} : {', '.join(types[1])}\n}}"
        )


def unary(name: str, attrs: str = "", tag: str = "", positive: bool = False) -> OpCase:
    case_id = f"{name}_{tag}" if tag else name
    return OpCase(case_id, f"graph.{name} {attrs}", ["2x3x4xf32"], ["2x3x4xf32"], positive=positive)


def binary(
    name: str,
    element: str = "f32",
    result: str | None = None,
    ints: tuple[int, int] = (1, 4),
    positive: bool = False,
    divisors: list[object] | None = None,
) -> OpCase:
    """lhs (2, 3, 4) against a broadcast rhs (4,); `divisors` fixes rhs."""
    return OpCase(
        f"{name}_{element}", f"graph.{name}", [f"2x3x4x{element}", f"4x{element}"], [f"2x3x4x{result or element}"],
        ints, positive, {} if divisors is None else {1: divisors},
    )  # fmt: skip


NAN_SIGNS: list[object] = [[[math.nan, -2.0, 0.0, 3.0]]]
INSIDE_UNIT: list[object] = [[-0.99, -0.7, -0.5, -0.1], [0.0, 0.3, 0.8, 0.999]]
"""Arguments inside the domain of acos, asin and atanh."""

OP_CASES = [
    *(unary(n) for n in ("abs", "ceil", "cos", "erf", "exp", "floor", "hard_swish", "neg", "reciprocal", "relu",
                         "round", "selu", "sigmoid", "sign", "silu", "sin", "softsign", "tanh")),
    *(unary(n, positive=True) for n in ("log", "rsqrt", "sqrt")),
    *(unary(n) for n in ("asinh", "atan", "sinh")),
    *(OpCase(n, f"graph.{n}", ["2x4xf32"], ["2x4xf32"], fixed={0: INSIDE_UNIT}) for n in ("acos", "asin", "atanh")),
    OpCase("acosh", "graph.acosh", ["2x4xf32"], ["2x4xf32"], fixed={0: [[1.0, 1.01, 1.5, 2.0], [3.0, 10.0, 1e3, 1e6]]}),
    OpCase("sign_nan", "graph.sign", ["1x1x4xf32"], ["1x1x4xf32"], fixed={0: NAN_SIGNS}),
    unary("gelu", '{approximate = "none"}', "none"),
    unary("gelu", '{approximate = "tanh"}', "tanh"),
    unary("elu", "{alpha = 0.5 : f64}"),
    unary("leaky_relu", "{alpha = 0.1 : f64}"),
    unary("softplus", "{beta = 2.0 : f64, threshold = 1.0 : f64}"),
    unary("hard_sigmoid", "{alpha = 0.2 : f64, beta = 0.5 : f64}", "onnx"),
    unary("hard_sigmoid", "{alpha = 0.16666666666666666 : f64, beta = 0.5 : f64}", "torch"),
    unary("clip", "{min = 0.0 : f64, max = 6.0 : f64}", "relu6"),
    unary("clip", "{min = 0xFFF0000000000000 : f64, max = 0.5 : f64}", "no_min"),
    OpCase("clip_i64", "graph.clip {min = 1.5 : f64, max = 2.5 : f64}", ["8xi64"], ["8xi64"], ints=(-3, 5)),
    unary("dropout", "{ratio = 0.5 : f64}"),
    OpCase("not", "graph.not", ["2x3xi1"], ["2x3xi1"]),
    OpCase("cast_f32_i32", "graph.cast", ["2x3x4xf32"], ["2x3x4xi32"]),
    OpCase("cast_f32_i1", "graph.cast", ["2x3x4xf32"], ["2x3x4xi1"]),
    OpCase("cast_i64_f32", "graph.cast", ["2x3xi64"], ["2x3xf32"]),
    *(binary(n) for n in ("add", "sub", "mul", "div", "max", "min", "rem", "prelu")),
    binary("pow", positive=True),
    *(binary(n, "i64", ints=(-5, 6)) for n in ("add", "mul", "max", "sub")),
    binary("div", "i64", ints=(-9, 10), divisors=[-3, 2, 5, -1]),
    binary("rem", "i64", ints=(-9, 10), divisors=[-3, 2, 5, -1]),
    binary("fmod", divisors=[-1.5, 0.7, 2.0, -0.3]),
    binary("fmod", "i64", ints=(-9, 10), divisors=[-3, 2, 5, -1]),
    *(binary(n, "i1") for n in ("and", "or")),
    *(binary(n, "i32", ints=(-50, 50)) for n in ("bitwise_and", "bitwise_or", "bitwise_xor")),
    OpCase("bitwise_not_i64", "graph.bitwise_not", ["2x3xi64"], ["2x3xi64"], ints=(-9, 10)),
    OpCase("bitcast_f32_i32", "graph.bitcast", ["2x3xf32"], ["2x3xi32"]),
    OpCase("shift_left_i32", "graph.shift_left", ["2x4xi32", "4xi32"], ["2x4xi32"], ints=(-9, 10),
           fixed={1: [1, 31, 32, -1]}),
    OpCase("shift_right_i64", "graph.shift_right", ["2x4xi64", "4xi64"], ["2x4xi64"], ints=(-9, 10),
           fixed={1: [1, 63, 64, -2]}),
    OpCase("shift_right_ui8", "graph.shift_right", ["2x4xui8", "4xui8"], ["2x4xui8"], ints=(0, 255),
           fixed={1: [1, 7, 8, 200]}),
    *(binary(n, "i64", "i1", ints=(0, 3)) for n in ("eq", "ne", "lt", "le", "gt", "ge")),
    binary("lt", "f32", "i1"),
    OpCase("where", "graph.where", ["2x3x4xi1", "2x3x4xf32", "f32"], ["2x3x4xf32"]),
    # ---- linalg ----
    OpCase("matmul_2d", "graph.matmul", ["3x5xf32", "5x4xf32"], ["3x4xf32"]),
    OpCase("matmul_3d_2d", "graph.matmul", ["2x3x5xf32", "5x4xf32"], ["2x3x4xf32"]),
    OpCase("matmul_batch_broadcast", "graph.matmul", ["1x3x5xf32", "2x5x4xf32"], ["2x3x4xf32"]),
    OpCase("matmul_vector", "graph.matmul", ["5xf32", "2x5x4xf32"], ["2x4xf32"]),
    OpCase("matmul_matrix_vector", "graph.matmul", ["3x5xf32", "5xf32"], ["3xf32"]),
    OpCase("det", "graph.det", ["2x3x3xf32"], ["2xf32"]),
    OpCase("det_f64", "graph.det", ["4x4xf64"], ["f64"]),
    OpCase("det_f16", "graph.det", ["3x2x2xf16"], ["3xf16"]),
    OpCase("linear", "graph.linear", ["2x3x5xf32", "4x5xf32", "4xf32"], ["2x3x4xf32"]),
    OpCase("linear_no_bias_1d", "graph.linear", ["5xf32", "4x5xf32"], ["4xf32"]),
    # ---- nn ----
    OpCase("conv", "graph.conv {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,"
           " dilations = array<i64: 1, 1>, groups = 1 : i64}",
           ["2x3x6x6xf32", "4x3x3x3xf32", "4xf32"], ["2x4x6x6xf32"]),
    OpCase("conv_uneven_pads", "graph.conv {strides = array<i64: 2, 1>, pads = array<i64: 0, 1, 2, 0>,"
           " dilations = array<i64: 1, 2>, groups = 1 : i64}", ["1x3x7x7xf32", "4x3x3x3xf32"], ["1x4x4x4xf32"]),
    OpCase("conv_grouped_dilated", "graph.conv {strides = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>,"
           " dilations = array<i64: 2, 2>, groups = 2 : i64}", ["1x4x5x5xf32", "6x2x3x3xf32"], ["1x6x5x5xf32"]),
    OpCase("conv_grouped_1x1", "graph.conv {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,"
           " dilations = array<i64: 1, 1>, groups = 3 : i64}", ["2x6x4x5xf32", "9x2x1x1xf32", "9xf32"],
           ["2x9x4x5xf32"]),
    OpCase("conv_grouped_1x1_no_bias", "graph.conv {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,"
           " dilations = array<i64: 1, 1>, groups = 4 : i64}", ["1x8x3x3xf32", "4x2x1x1xf32"], ["1x4x3x3xf32"]),
    OpCase("conv1d", "graph.conv {strides = array<i64: 2>, pads = array<i64: 1, 1>, dilations = array<i64: 1>,"
           " groups = 1 : i64}", ["2x3x9xf32", "4x3x3xf32", "4xf32"], ["2x4x5xf32"]),
    OpCase("conv3d", "graph.conv {strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>,"
           " dilations = array<i64: 1, 1, 1>, groups = 1 : i64}", ["1x2x4x4x4xf32", "3x2x2x2x2xf32"],
           ["1x3x3x3x3xf32"]),
    OpCase("conv_transpose", "graph.conv_transpose {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,"
           " dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, groups = 1 : i64}",
           ["1x4x3x3xf32", "4x2x3x3xf32", "2xf32"], ["1x2x6x6xf32"]),
    OpCase("conv_transpose_uneven", "graph.conv_transpose {strides = array<i64: 2, 2>, pads = array<i64: 0, 1, 2, 0>,"
           " dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 2 : i64}",
           ["1x4x3x3xf32", "4x1x3x3xf32"], ["1x2x5x6xf32"]),
    OpCase("max_pool", "graph.max_pool {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false}",
           ["1x2x7x7xf32"], ["1x2x4x4xf32"]),
    OpCase("max_pool_uneven_ceil", "graph.max_pool {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 1, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true}",
           ["1x2x6x6xf32"], ["1x2x4x4xf32"]),
    OpCase("max_pool1d_dilated", "graph.max_pool {kernel = array<i64: 2>, strides = array<i64: 1>,"
           " pads = array<i64: 0, 0>, dilations = array<i64: 2>, ceil_mode = false}", ["2x3x8xf32"], ["2x3x6xf32"]),
    OpCase("avg_pool_channel_window", "graph.avg_pool {kernel = array<i64: 5, 1, 1>, strides = array<i64: 1, 1, 1>,"
           " pads = array<i64: 0, 0, 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true}",
           ["1x1x12x4x5xf32"], ["1x1x8x4x5xf32"]),
    OpCase("avg_pool_row_window", "graph.avg_pool {kernel = array<i64: 1, 3>, strides = array<i64: 1, 1>,"
           " pads = array<i64: 0, 0, 0, 0>, ceil_mode = true, count_include_pad = false}",
           ["2x3x4x6xf32"], ["2x3x4x4xf32"]),
    OpCase("avg_pool_include_pad", "graph.avg_pool {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 1, 1, 1>, ceil_mode = false, count_include_pad = true}",
           ["1x2x7x7xf32"], ["1x2x4x4xf32"]),
    OpCase("avg_pool_exclude_pad_ceil", "graph.avg_pool {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 1, 1, 1>, ceil_mode = true, count_include_pad = false}",
           ["1x2x8x8xf32"], ["1x2x5x5xf32"]),
    OpCase("avg_pool_uneven", "graph.avg_pool {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 0, 0, 1, 1>, ceil_mode = false, count_include_pad = false}",
           ["1x2x5x5xf32"], ["1x2x3x3xf32"]),
    OpCase("avg_pool_uneven_include", "graph.avg_pool {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 0, 0, 1>, ceil_mode = true, count_include_pad = true}",
           ["1x2x5x5xf32"], ["1x2x3x3xf32"]),
    OpCase("avg_pool1d", "graph.avg_pool {kernel = array<i64: 3>, strides = array<i64: 2>,"
           " pads = array<i64: 1, 1>, ceil_mode = false, count_include_pad = false}", ["2x3x8xf32"], ["2x3x4xf32"]),
    OpCase("adaptive_avg_pool", "graph.adaptive_avg_pool {output_size = array<i64: 3, 2>}",
           ["1x2x7x5xf32"], ["1x2x3x2xf32"]),
    OpCase("adaptive_avg_pool1d", "graph.adaptive_avg_pool {output_size = array<i64: 3>}",
           ["2x2x7xf32"], ["2x2x3xf32"]),
    OpCase("adaptive_max_pool", "graph.adaptive_max_pool {output_size = array<i64: 2, 2>}",
           ["1x2x5x5xf32"], ["1x2x2x2xf32"]),
    OpCase("global_avg_pool", "graph.global_avg_pool", ["2x3x4x5xf32"], ["2x3x1x1xf32"]),
    OpCase("global_max_pool", "graph.global_max_pool", ["2x3x4x5xf32"], ["2x3x1x1xf32"]),
    OpCase("batch_norm", "graph.batch_norm {epsilon = 1.0e-05 : f64}",
           ["2x3x4x4xf32", "3xf32", "3xf32", "3xf32", "3xf32"], ["2x3x4x4xf32"], fixed={4: [0.5, 1.0, 2.0]}),
    OpCase("batch_norm_2d", "graph.batch_norm {epsilon = 1.0e-03 : f64}",
           ["4x3xf32", "3xf32", "3xf32", "3xf32", "3xf32"], ["4x3xf32"], fixed={4: [0.5, 1.0, 2.0]}),
    OpCase("layer_norm", "graph.layer_norm {axis = 1 : i64, epsilon = 1.0e-05 : f64}",
           ["2x3x4xf32", "3x4xf32", "3x4xf32"], ["2x3x4xf32"]),
    OpCase("layer_norm_plain", "graph.layer_norm {axis = -1 : i64, epsilon = 1.0e-05 : f64}",
           ["2x3x4xf32"], ["2x3x4xf32"]),
    OpCase("instance_norm", "graph.instance_norm {epsilon = 1.0e-05 : f64}",
           ["2x3x4x4xf32", "3xf32", "3xf32"], ["2x3x4x4xf32"]),
    OpCase("group_norm", "graph.group_norm {num_groups = 2 : i64, epsilon = 1.0e-05 : f64}",
           ["2x4x3x3xf32", "4xf32", "4xf32"], ["2x4x3x3xf32"]),
    OpCase("lrn", "graph.lrn {size = 3 : i64, alpha = 1.0e-01 : f64, beta = 0.75 : f64, bias = 2.0 : f64}",
           ["2x5x3x3xf32"], ["2x5x3x3xf32"]),
    OpCase("softmax", "graph.softmax {axis = 1 : i64}", ["2x5x3xf32"], ["2x5x3xf32"]),
    OpCase("log_softmax", "graph.log_softmax {axis = -1 : i64}", ["2x5x3xf32"], ["2x5x3xf32"]),
    OpCase("attention", "graph.attention {scale = 0.3 : f64, is_causal = false}",
           ["2x2x5x4xf32", "2x2x6x4xf32", "2x2x6x3xf32"], ["2x2x5x3xf32"]),
    OpCase("attention_causal_3d", "graph.attention {scale = 0.5 : f64, is_causal = true}",
           ["2x5x4xf32", "2x5x4xf32", "2x5x3xf32"], ["2x5x3xf32"]),
    OpCase("attention_float_mask", "graph.attention {scale = 0.5 : f64, is_causal = false}",
           ["2x5x4xf32", "2x6x4xf32", "2x6x3xf32", "5x6xf32"], ["2x5x3xf32"]),
    OpCase("attention_bool_mask_causal", "graph.attention {scale = 0.5 : f64, is_causal = true}",
           ["2x5x4xf32", "2x5x4xf32", "2x5x3xf32", "1x5x5xi1"], ["2x5x3xf32"],
           fixed={3: [[[True] * 5, [False, True, True, False, True], [True, True, False, True, True],
                       [True, False, True, True, True], [True] * 5]]}),
    OpCase("attention_fully_masked_row", "graph.attention {scale = 0.5 : f64, is_causal = false}",
           ["2x3x4xf32", "2x4x4xf32", "2x4x3xf32", "3x4xf32"], ["2x3x3xf32"],
           fixed={3: [[0.0, -1.0, 0.5, 0.0], [-math.inf] * 4, [0.0, -math.inf, 0.0, 0.0]]}),
    # attention in training: the CPU flash kernel each way (the backward reads any output and log-sum-exp)
    OpCase("attention_train", "graph.attention_train {scale = 0.3 : f64, is_causal = false}",
           ["2x2x5x4xf32", "2x2x6x4xf32", "2x2x6x4xf32"], ["2x2x5x4xf32", "2x2x5xf32"]),
    OpCase("attention_train_masked_causal", "graph.attention_train {scale = 0.5 : f64, is_causal = true}",
           ["1x2x5x4xf32", "1x2x5x4xf32", "1x2x5x4xf32", "5x5xf32"], ["1x2x5x4xf32", "1x2x5xf32"]),
    OpCase("attention_grad", "graph.attention_grad {scale = 0.3 : f64, is_causal = false}",
           ["2x2x5x4xf32", "2x2x5x4xf32", "2x2x6x4xf32", "2x2x6x4xf32", "2x2x5x4xf32", "2x2x5xf32"],
           ["2x2x5x4xf32", "2x2x6x4xf32", "2x2x6x4xf32"]),
    OpCase("attention_grad_masked_causal", "graph.attention_grad {scale = 0.5 : f64, is_causal = true}",
           ["1x2x5x4xf32", "1x2x5x4xf32", "1x2x5x4xf32", "1x2x5x4xf32", "1x2x5x4xf32", "1x2x5xf32", "1x5xf32"],
           ["1x2x5x4xf32", "1x2x5x4xf32", "1x2x5x4xf32"]),
    # grid sampling: ATen's grid_sampler, and ONNX's semantics composed where ATen's differ
    OpCase("grid_sample_linear_zeros",
           'graph.grid_sample {mode = "linear", padding_mode = "zeros", align_corners = false}',
           ["2x3x5x4xf32", "2x3x6x2xf32"], ["2x3x3x6xf32"]),
    OpCase("grid_sample_cubic_reflection",
           'graph.grid_sample {mode = "cubic", padding_mode = "reflection", align_corners = true}',
           ["1x2x4x5xf32", "1x4x3x2xf32"], ["1x2x4x3xf32"]),
    OpCase("grid_sample_cubic_border",
           'graph.grid_sample {mode = "cubic", padding_mode = "border", align_corners = false}',
           ["1x2x4x5xf32", "1x4x3x2xf32"], ["1x2x4x3xf32"]),
    OpCase("grid_sample_nearest_reflection",
           'graph.grid_sample {mode = "nearest", padding_mode = "reflection", align_corners = false}',
           ["1x2x4x5xf32", "1x4x3x2xf32"], ["1x2x4x3xf32"]),
    OpCase("grid_sample_volumetric_cubic",
           'graph.grid_sample {mode = "cubic", padding_mode = "zeros", align_corners = false}',
           ["1x2x3x4x5xf32", "1x2x3x2x3xf32"], ["1x2x2x3x2xf32"]),
    # ---- reductions ----
    *(OpCase(f"{n}_keepdims", f"graph.{n} {{axes = array<i64: 0, 2>, keepdims = true}}", ["2x3x4xf32"], ["1x3x1xf32"])
      for n in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")),
    *(OpCase(f"{n}_all", f"graph.{n} {{axes = array<i64>, keepdims = false}}", ["2x3x4xf32"], ["f32"])
      for n in ("reduce_sum", "reduce_mean", "reduce_prod")),
    OpCase("reduce_sum_i32", "graph.reduce_sum {axes = array<i64: -1>, keepdims = false}", ["2x3xi32"], ["2xi32"]),
    OpCase("reduce_mean_i64", "graph.reduce_mean {axes = array<i64: 1>, keepdims = false}", ["2x3xi64"], ["2xi64"],
           ints=(-5, 6)),
    OpCase("reduce_prod_i64", "graph.reduce_prod {axes = array<i64: 0, 1>, keepdims = false}", ["2x3xi64"], ["i64"]),
    OpCase("argmax", "graph.argmax {axis = 1 : i64, keepdims = false}", ["2x5x3xf32"], ["2x3xi64"]),
    OpCase("argmin_ties", "graph.argmin {axis = -1 : i64, keepdims = true}", ["2x6xi64"], ["2x1xi64"]),
    OpCase("topk_ties", "graph.topk {k = 3 : i64, axis = 1 : i64, largest = true}", ["2x6xi64"],
           ["2x3xi64", "2x3xi64"], ints=(0, 3)),
    OpCase("topk_smallest", "graph.topk {k = 2 : i64, axis = 0 : i64, largest = false}", ["5x3xf32"],
           ["2x3xf32", "2x3xi64"]),
    OpCase("cumsum", "graph.cumsum {axis = 1 : i64, exclusive = false, reverse = false}", ["2x5xf32"], ["2x5xf32"]),
    OpCase("cumsum_exclusive_reverse", "graph.cumsum {axis = 0 : i64, exclusive = true, reverse = true}",
           ["3x4xi64"], ["3x4xi64"], ints=(-5, 6)),
    OpCase("cumprod_exclusive", "graph.cumprod {axis = -1 : i64, exclusive = true, reverse = false}",
           ["2x5xi32"], ["2x5xi32"], ints=(-3, 4)),
    OpCase("cumprod_reverse", "graph.cumprod {axis = 1 : i64, exclusive = false, reverse = true}",
           ["2x5xf64"], ["2x5xf64"]),
    # ---- data movement ----
    OpCase("reshape", "graph.reshape", ["2x3x4xf32"], ["6x4xf32"]),
    OpCase("transpose", "graph.transpose {permutation = array<i64: 2, 0, 1>}", ["2x3x4xf32"], ["4x2x3xf32"]),
    OpCase("concat", "graph.concat {axis = 1 : i64}", ["2x3x4xf32", "2x1x4xf32", "2x2x4xf32"], ["2x6x4xf32"]),
    OpCase("split", "graph.split {axis = -1 : i64, sizes = array<i64: 1, 3>}",
           ["2x3x4xf32"], ["2x3x1xf32", "2x3x3xf32"]),
    OpCase("slice", "graph.slice {starts = array<i64: 0, 1, 1>, ends = array<i64: 2, 3, 4>,"
           " steps = array<i64: 1, 1, 2>}",
           ["2x3x4xf32"], ["2x2x2xf32"]),
    OpCase("slice_backwards", "graph.slice {starts = array<i64: 1, 2, 3>, ends = array<i64: -1, 0, -1>,"
           " steps = array<i64: -1, -1, -2>}", ["2x3x4xf32"], ["2x2x2xf32"]),
    OpCase("gather", "graph.gather {axis = 1 : i64}", ["2x4x3xf32", "2x3xi64"], ["2x2x3x3xf32"], ints=(-4, 4)),
    OpCase("gather_scalar_index", "graph.gather {axis = 0 : i64}", ["4x3xf32", "i32"], ["3xf32"], ints=(-4, 4)),
    OpCase("gather_elements", "graph.gather_elements {axis = 1 : i64}", ["2x4xf32", "2x3xi64"], ["2x3xf32"],
           ints=(-4, 4)),
    OpCase("scatter_elements_repeated", 'graph.scatter_elements {axis = 1 : i64, reduction = "none"}',
           ["3x4xf32", "3x6xi64", "3x6xf32"], ["3x4xf32"], ints=(-4, 4)),
    OpCase("scatter_elements_add", 'graph.scatter_elements {axis = 0 : i64, reduction = "add"}',
           ["4x3xf32", "5x3xi32", "5x3xf32"], ["4x3xf32"], ints=(-4, 4)),
    OpCase("scatter_elements_mul", 'graph.scatter_elements {axis = 1 : i64, reduction = "mul"}',
           ["3x4xi64", "3x5xi64", "3x5xi64"], ["3x4xi64"], ints=(-4, 4)),
    *(OpCase(f"scatter_elements_{r}", f'graph.scatter_elements {{axis = -1 : i64, reduction = "{r}"}}',
             ["4x5xf32", "2x3xi64", "2x3xf32"], ["4x5xf32"], ints=(-5, 5)) for r in ("max", "min")),
    OpCase("slice_scatter", "graph.slice_scatter {starts = array<i64: 0, 1>, ends = array<i64: 3, 8>,"
           " steps = array<i64: 1, 3>}", ["3x8xf32", "3x3xf32"], ["3x8xf32"]),
    OpCase("pad_constant", 'graph.pad {pads = array<i64: 0, 1, -1, 0, 2, 1>, mode = "constant", value = 1.5 : f64}',
           ["2x3x4xf32"], ["2x6x4xf32"]),
    OpCase("pad_lowest", 'graph.pad {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 0>, mode = "constant",'
           " value = -1.7976931348623157E+308 : f64}", ["1x2x3x3xf32"], ["1x2x5x4xf32"]),
    OpCase("pad_reflect", 'graph.pad {pads = array<i64: 0, 2, 3, 0, 1, 2>, mode = "reflect", value = 0.0 : f64}',
           ["2x3x4xf32"], ["2x6x9xf32"]),
    OpCase("pad_replicate", 'graph.pad {pads = array<i64: 1, 0, -1, 2, 2, 5>, mode = "replicate", value = 0.0 : f64}',
           ["2x3x4xf32"], ["5x5x8xf32"]),
    OpCase("pad_wrap", 'graph.pad {pads = array<i64: 0, 7, -1, 2, 1, 3>, mode = "wrap", value = 0.0 : f64}',
           ["2x3x4xf32"], ["4x11x6xf32"]),
    OpCase("expand", "graph.expand", ["3x1xf32"], ["2x3x4xf32"]),
    OpCase("tile", "graph.tile {repeats = array<i64: 2, 1, 3>}", ["2x3x4xf32"], ["4x3x12xf32"]),
    OpCase("iota", "graph.iota {axis = 1 : i64}", ["2x5xf32"], ["5xi64"]),
    # ---- recurrent layers: ATen's kernels, and a step loop for ONNX's extras ----
    OpCase("lstm", "graph.lstm {reverse = false, input_forget = false}",
           ["5x2x4xf32", "12x4xf32", "12x3xf32", "12xf32", "12xf32", "2x3xf32", "2x3xf32"],
           ["5x2x3xf32", "2x3xf32", "2x3xf32"]),
    OpCase("lstm_reverse_peepholes_clip_coupled", "graph.lstm {reverse = true, clip = 0.5 : f64, input_forget = true}",
           ["5x2x4xf32", "12x4xf32", "12x3xf32", "12xf32", "12xf32", "2x3xf32", "2x3xf32", "9xf32"],
           ["5x2x3xf32", "2x3xf32", "2x3xf32"]),
    *(OpCase(f"gru_{'after' if after else 'before'}_reset",
             f"graph.gru {{reverse = {str(after).lower()}, linear_before_reset = {str(after).lower()}}}",
             ["5x2x4xf64", "9x4xf64", "9x3xf64", "9xf64", "9xf64", "2x3xf64"], ["5x2x3xf64", "2x3xf64"])
      for after in (False, True)),
    *(OpCase(f"rnn_{nonlinearity}{'_clip' if clip else ''}",
             f'graph.rnn {{reverse = true, {clip}nonlinearity = "{nonlinearity}"}}',
             ["5x2x4xf32", "3x4xf32", "3x3xf32", "3xf32", "3xf32", "2x3xf32"], ["5x2x3xf32", "2x3xf32"])
      for nonlinearity, clip in (("tanh", ""), ("relu", "clip = 0.7 : f64, "))),
    # ---- lookups ----
    OpCase("embedding", "graph.embedding", ["10x4xf32", "2x3xi64"], ["2x3x4xf32"], ints=(-10, 10)),
    *(OpCase(f"embedding_bag_{mode}", f'graph.embedding_bag {{mode = "{mode}", include_last_offset = false}}',
             ["10x4xf32", "7xi64", "4xi64"], ["4x4xf32"], ints=(0, 10), fixed={2: [0, 2, 2, 5]})
      for mode in ("sum", "mean", "max")),
    OpCase("embedding_bag_weighted_last_offset", 'graph.embedding_bag {mode = "sum", include_last_offset = true}',
           ["10x4xf32", "7xi32", "4xi32", "7xf32"], ["3x4xf32"], ints=(0, 10), fixed={2: [0, 3, 3, 7]}),
    # ---- training ----
    OpCase("batch_norm_train", "graph.batch_norm_train {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64}",
           ["4x3x5x5xf32", "3xf32", "3xf32"], ["4x3x5x5xf32", "3xf32", "3xf32"]),
    OpCase("conv_weight_grad", "graph.conv_weight_grad {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 0, 1, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64}",
           ["2x4x7x7xf32", "2x6x4x3xf32"], ["6x2x3x3xf32"]),
    OpCase("conv_weight_grad_dilated_1d", "graph.conv_weight_grad {kernel = array<i64: 3>, strides = array<i64: 1>,"
           " pads = array<i64: 2, 2>, dilations = array<i64: 2>, groups = 1 : i64}",
           ["2x3x9xf32", "2x5x9xf32"], ["5x3x3xf32"]),
    OpCase("max_pool_grad", "graph.max_pool_grad {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true}",
           ["1x2x4x4xf32", "1x2x8x8xf32"], ["1x2x8x8xf32"]),
    OpCase("avg_pool_grad", "graph.avg_pool_grad {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 1, 1, 1>, ceil_mode = true, count_include_pad = false}",
           ["1x2x5x5xf32", "1x2x8x8xf32"], ["1x2x8x8xf32"]),
    OpCase("avg_pool_grad_counting_pads", "graph.avg_pool_grad {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,"
           " pads = array<i64: 1, 1, 1, 1>, ceil_mode = false, count_include_pad = true}",
           ["1x2x5x5xf32", "1x2x8x8xf32"], ["1x2x8x8xf32"]),
    OpCase("embedding_bag_grad_mean", 'graph.embedding_bag_grad {mode = "mean", rows = 10 : i64}',
           ["4x3xf32", "7xi64", "4xi64"], ["10x3xf32"], ints=(0, 10), fixed={2: [0, 2, 2, 5]}),
    OpCase("embedding_bag_grad_weighted_last_offset", 'graph.embedding_bag_grad {mode = "sum", rows = 10 : i64}',
           ["3x3xf32", "7xi64", "4xi64", "7xf32"], ["10x3xf32"], ints=(0, 10), fixed={2: [0, 3, 3, 6]}),
    OpCase("embedding_bag_update_mean", 'graph.embedding_bag_update {mode = "mean", scale = -0.5 : f64}',
           ["10x3xf32", "4x3xf32", "7xi64", "4xi64"], ["10x3xf32"], ints=(0, 10), fixed={3: [0, 2, 2, 5]}),
    OpCase("embedding_bag_update_weighted", 'graph.embedding_bag_update {mode = "sum", scale = 2.0 : f64}',
           ["10x3xf32", "3x3xf32", "7xi64", "4xi64", "7xf32"], ["10x3xf32"], ints=(0, 10),
           fixed={3: [0, 3, 3, 6]}),
    # Rows 1 and 3 looked up more than once, in a bag and across bags; an empty bag; in the second, the last
    # index past the last bag's end (row 0 not looked up). exp_avg_sq positive, as a second moment is.
    OpCase("embedding_bag_adam_update_mean", 'graph.embedding_bag_adam_update {mode = "mean", beta1 = 0.8 : f64,'
           " beta2 = 0.9 : f64, eps = 1.0e-06 : f64}",
           ["10x3xf32", "10x3xf32", "10x3xf32", "4x3xf32", "7xi64", "4xi64", "f32"], ["10x3xf32"] * 3,
           fixed={2: [0.05 * (1 + i % 7) for i in range(30)], 4: [1, 3, 1, 7, 3, 3, 0], 5: [0, 2, 2, 5], 6: [0.1]}),
    OpCase("embedding_bag_adam_update_weighted", 'graph.embedding_bag_adam_update {mode = "sum", beta1 = 0.9 : f64,'
           " beta2 = 0.999 : f64, eps = 1.0e-08 : f64}",
           ["10x3xf32", "10x3xf32", "10x3xf32", "3x3xf32", "7xi64", "4xi64", "f32", "7xf32"], ["10x3xf32"] * 3,
           fixed={2: [0.05 * (1 + i % 7) for i in range(30)], 4: [1, 3, 1, 7, 3, 3, 0], 5: [0, 3, 3, 6], 6: [0.1]}),
]  # fmt: skip


def op_case_inputs(case: OpCase, module: ModuleOp) -> list[np.ndarray]:
    inputs = random_inputs(module, case.ints, case.positive)
    for index, value in case.fixed.items():
        inputs[index] = np.asarray(value, inputs[index].dtype).reshape(inputs[index].shape)
    return inputs


@pytest.mark.parametrize("case", OP_CASES, ids=[c.id for c in OP_CASES])
def test_op_matches_reference_eagerly_and_as_kernel(case: OpCase) -> None:
    module = parse(case.text())
    inputs = op_case_inputs(case, module)
    expected = run_reference(module, inputs)
    for actual, want in zip(TorchEagerProgram(module)(*inputs), expected, strict=True):
        assert_matches(actual, want)
    _, outputs = run_kernel(function_block(module), inputs)
    for actual, want in zip(outputs, expected, strict=True):
        assert_matches(actual, want)


def _pool_module(op: str, attributes: str, shape: str, result: str) -> ModuleOp:
    return parse(f"""
    func.func @main(%x: tensor<{shape}xf32>) -> tensor<{result}xf32> {{
      %y = graph.{op} %x {{{attributes}}} : (tensor<{shape}xf32>) -> tensor<{result}xf32>
      func.return %y : tensor<{result}xf32>
    }}""")


def test_max_pool_on_onednn_propagates_a_nan_as_the_reference_does() -> None:
    """A large input goes to oneDNN's max pooling, which drops NaN; a window holding one must still give NaN, as
    ATen's, ONNX's and the reference's max do, and the others the same maxima."""
    window = "kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,"
    module = _pool_module("max_pool", window + " dilations = array<i64: 1, 1>, ceil_mode = false", "1x16x65x65",
                          "1x16x32x32")  # fmt: skip
    x = np.random.default_rng(0).standard_normal((1, 16, 65, 65)).astype(np.float32)
    assert x.size >= ONEDNN_POOL_MIN
    _, (clean,) = run_kernel(function_block(module), [x])
    np.testing.assert_array_equal(clean, run_reference(module, [x])[0])
    x[0, 1, 4, 4] = np.nan
    _, (output,) = run_kernel(function_block(module), [x])
    expected = run_reference(module, [x])[0]
    assert np.isnan(expected).sum() == 4  # the four windows around (4, 4)
    np.testing.assert_array_equal(output, expected)  # NaN where the reference has NaN, equal elsewhere


@pytest.mark.parametrize("include_pad", ["true", "false"])
def test_avg_pool_on_onednn_matches_the_reference(include_pad: str) -> None:
    window = "kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,"
    module = _pool_module("avg_pool", window + f" ceil_mode = false, count_include_pad = {include_pad}",
                          "1x96x28x28", "1x96x28x28")  # fmt: skip
    x = np.random.default_rng(1).standard_normal((1, 96, 28, 28)).astype(np.float32)
    assert x.size >= ONEDNN_POOL_MIN
    _, (output,) = run_kernel(function_block(module), [x])
    assert_matches(output, run_reference(module, [x])[0])


def test_constants_as_program_values_and_kernels() -> None:
    module = parse("""
    func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xi64>) {
      %c = graph.constant {value = dense<[1.0, -2.0, 0.5]> : tensor<3xf32>} : () -> tensor<3xf32>
      %s = graph.constant {value = dense<4> : tensor<3xi64>} : () -> tensor<3xi64>
      %y = graph.mul %x, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      func.return %y, %s : tensor<2x3xf32>, tensor<3xi64>
    }""")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    program = TorchEagerProgram(module)
    product, splat = program(x)
    np.testing.assert_array_equal(product, x * np.array([1.0, -2.0, 0.5], np.float32))
    np.testing.assert_array_equal(splat, [4, 4, 4])
    splat[0] = 0  # a returned constant is the caller's copy
    np.testing.assert_array_equal(program(x)[1], [4, 4, 4])
    np.testing.assert_array_equal(program(torch.from_numpy(x))[0], product)  # torch tensors are inputs too
    constant_only = parse("""
    func.func @main() -> tensor<3xf32> {
      %c = graph.constant {value = dense<[1.0, -2.0, 0.5]> : tensor<3xf32>} : () -> tensor<3xf32>
      func.return %c : tensor<3xf32>
    }""")
    _, outputs = run_kernel(function_block(constant_only), [])
    np.testing.assert_array_equal(outputs[0], [1.0, -2.0, 0.5])


def test_every_graph_op_has_a_torch_implementation() -> None:
    graph = DIALECTS["graph"]()
    # Control flow runs on the host (gnomon.runtime.host), around library and generated kernels.
    assert sorted(op.name for op in graph.operations if op not in TORCH_IMPLS and op not in CONTROL_FLOW_OPS) == []


def test_every_torch_implementation_has_an_op_case() -> None:
    covered = {case.op.split(" ")[0] for case in OP_CASES} | {ConstantOp.name}  # constants: the test above
    # An LSTM layer's training pair runs together (the backward reads the forward's workspace), through whole
    # training steps: tests/test_lstm_training.py.
    covered |= {LstmTrainOp.name, LstmGradOp.name}
    # Dropout's draws are random: tests/test_training.py checks its outputs against its mask.
    covered |= {DropoutTrainOp.name}
    assert covered == {op_type.name for op_type in TORCH_IMPLS}


def test_unsupported_ops_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """An op without a torch implementation (every graph op has one: this one's is taken away) is named."""
    monkeypatch.delitem(TORCH_IMPLS, BatchNormTrainOp)
    module = parse("""
    func.func @main(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) -> tensor<2x3x4xf32> {
      %y, %m, %v = graph.batch_norm_train %x, %s, %s {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64}
        : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
      func.return %y : tensor<2x3x4xf32>
    }""")
    assert unsupported_ops(module) == ["graph.batch_norm_train"]
    with pytest.raises(TorchEagerError, match=r"no torch implementation for graph\.batch_norm_train"):
        TorchEagerProgram(module)
    assert library_kernel(function_block(module)) is None


def test_input_count_is_checked() -> None:
    program = TorchEagerProgram(parse(OP_CASES[0].text()))
    with pytest.raises(TorchEagerError, match="takes 1 inputs, got 2"):
        program(np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 4), np.float32))


# ---- fused blocks ----

CONV = (
    "graph.conv %x, %w{bias} {{strides = array<i64: 1, 1>, pads = array<i64: {pads}>, dilations = array<i64: 1, 1>,"
    " groups = 1 : i64}} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>{bias_type}) -> tensor<2x4x6x6xf32>"
)


def conv_block(epilogue: str, bias: bool = True, pads: str = "1, 1, 1, 1", extra_args: str = "") -> str:
    conv = CONV.format(bias=", %b" if bias else "", bias_type=", tensor<4xf32>" if bias else "", pads=pads)
    return f"""
    func.func @main(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>{extra_args})
        -> tensor<2x4x6x6xf32> {{
      %c = {conv}
      {epilogue}
    }}"""


T = "tensor<2x4x6x6xf32>"
FUSED_BLOCKS = {
    "conv_bias_relu": (
        conv_block(f"%y = graph.relu %c : ({T}) -> {T}\n func.return %y : {T}"),
        "mkldnn._convolution_pointwise+relu",
        "aten.convolution+relu",
    ),
    "conv_add_relu": (
        conv_block(
            f"%s = graph.add %r, %c : ({T}, {T}) -> {T}\n %y = graph.relu %s : ({T}) -> {T}\n func.return %y : {T}",
            extra_args=f", %r: {T}",
        ),
        "mkldnn._convolution_pointwise+add+relu",
        "aten.convolution+add+relu",
    ),
    "conv_bias_add_residual": (
        conv_block(
            f"%s = graph.add %c, %v : ({T}, tensor<4x1x1xf32>) -> {T}\n"
            f" %t = graph.add %s, %r : ({T}, {T}) -> {T}\n func.return %t : {T}",
            bias=False,
            extra_args=f", %v: tensor<4x1x1xf32>, %r: {T}",
        ),
        "mkldnn._convolution_pointwise+add+add",
        "aten.convolution+add+add",
    ),
    "conv_uneven_pads_gelu": (
        conv_block(
            f'%y = graph.gelu %c {{approximate = "tanh"}} : ({T}) -> {T}\n func.return %y : {T}', pads="2, 0, 0, 2"
        ),
        "mkldnn._convolution_pointwise+gelu",
        "aten.convolution+gelu",
    ),
    "conv_clip": (
        conv_block(f"%y = graph.clip %c {{min = 0.0 : f64, max = 6.0 : f64}} : ({T}) -> {T}\n func.return %y : {T}"),
        "mkldnn._convolution_pointwise+clip",
        "aten.convolution+clip",
    ),
    "conv_two_biases_hard_swish": (  # oneDNN takes one bias: the second is added in place
        conv_block(
            f"%s = graph.add %c, %v : ({T}, tensor<1x4x1x1xf32>) -> {T}\n"
            f" %y = graph.hard_swish %s : ({T}) -> {T}\n func.return %y : {T}",
            extra_args=", %v: tensor<1x4x1x1xf32>",
        ),
        "aten.convolution+add+hard_swish",
        "aten.convolution+add+hard_swish",
    ),
    "linear_gelu": (
        """
        func.func @main(%x: tensor<2x3x8xf32>, %w: tensor<5x8xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
          %l = graph.linear %x, %w, %b : (tensor<2x3x8xf32>, tensor<5x8xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
          %y = graph.gelu %l {approximate = "none"} : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
          func.return %y : tensor<2x3x5xf32>
        }""",
        "aten.linear+gelu",
        "aten.linear+gelu",
    ),
    "matmul_bias_leaky_relu": (
        """
        func.func @main(%a: tensor<3x8xf32>, %m: tensor<8x5xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
          %l = graph.matmul %a, %m : (tensor<3x8xf32>, tensor<8x5xf32>) -> tensor<3x5xf32>
          %s = graph.add %b, %l : (tensor<5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
          %y = graph.leaky_relu %s {alpha = 0.2 : f64} : (tensor<3x5xf32>) -> tensor<3x5xf32>
          func.return %y : tensor<3x5xf32>
        }""",
        "aten.matmul+add+leaky_relu",
        "aten.matmul+add+leaky_relu",
    ),
}


@pytest.mark.parametrize("onednn", ["always", "never", "residual"])
@pytest.mark.parametrize("case", FUSED_BLOCKS, ids=list(FUSED_BLOCKS))
def test_fused_block_matches_reference(case: str, onednn: OneDNNPolicy) -> None:
    text, onednn_name, inplace_name = FUSED_BLOCKS[case]
    module = parse(text)
    inputs = random_inputs(module)
    expected = run_reference(module, inputs)
    name, outputs = run_kernel(function_block(module), inputs, onednn)
    residual = onednn_name.endswith(("+add+relu", "+add+add"))
    fused = onednn == "always" or (onednn == "residual" and residual)
    assert name == (onednn_name if fused else inplace_name)
    assert_matches(outputs[0], expected[0])


POINTWISE_CONV = """
    func.func @main(%x: tensor<2x6x5x5xf32>, %w: tensor<4x6x1x1xf32>, %b: tensor<4xf32>, %r: tensor<2x4x5x5xf32>)
        -> tensor<2x4x5x5xf32> {
      %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
          dilations = array<i64: 1, 1>, groups = 1 : i64}
          : (tensor<2x6x5x5xf32>, tensor<4x6x1x1xf32>, tensor<4xf32>) -> tensor<2x4x5x5xf32>
      %s = graph.add %c, %r : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
      %y = graph.relu %s : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
      func.return %y : tensor<2x4x5x5xf32>
    }"""


@pytest.mark.parametrize("onednn", ["never", "residual"])
def test_pointwise_conv_is_a_blas_product_per_image(onednn: OneDNNPolicy) -> None:
    # A 1x1 stride-1 conv is W @ x[n] into the output, its residual add and relu in place, even where
    # the policy would fuse a residual in oneDNN: BLAS is the faster half.
    module = parse(POINTWISE_CONV)
    inputs = random_inputs(module)
    name, outputs = run_kernel(function_block(module), inputs, onednn)
    assert name == "aten.mm+add+relu"
    assert_matches(outputs[0], run_reference(module, inputs)[0])


def test_pointwise_conv_without_bias_alone() -> None:
    module = parse("""
    func.func @main(%x: tensor<1x6x5x5xf32>, %w: tensor<4x6x1x1xf32>) -> tensor<1x4x5x5xf32> {
      %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
          dilations = array<i64: 2, 2>, groups = 1 : i64}
          : (tensor<1x6x5x5xf32>, tensor<4x6x1x1xf32>) -> tensor<1x4x5x5xf32>
      func.return %c : tensor<1x4x5x5xf32>
    }""")
    inputs = random_inputs(module)
    name, outputs = run_kernel(function_block(module), inputs)
    assert name == "aten.mm"
    assert_matches(outputs[0], run_reference(module, inputs)[0])


TRANSPOSED_OPERANDS = {
    "batched_rhs": (
        """
        func.func @main(%z: tensor<4x3x8xf32>) -> tensor<4x3x3xf32> {
          %t = graph.transpose %z {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
          %d = graph.matmul %z, %t : (tensor<4x3x8xf32>, tensor<4x8x3xf32>) -> tensor<4x3x3xf32>
          func.return %d : tensor<4x3x3xf32>
        }""",
        "aten.matmul",
    ),
    "both_with_epilogue": (
        """
        func.func @main(%a: tensor<8x3xf32>, %m: tensor<5x8xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
          %ta = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
          %tm = graph.transpose %m {permutation = array<i64: 1, 0>} : (tensor<5x8xf32>) -> tensor<8x5xf32>
          %l = graph.matmul %ta, %tm : (tensor<3x8xf32>, tensor<8x5xf32>) -> tensor<3x5xf32>
          %s = graph.add %l, %b : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
          %y = graph.relu %s : (tensor<3x5xf32>) -> tensor<3x5xf32>
          func.return %y : tensor<3x5xf32>
        }""",
        "aten.matmul+add+relu",
    ),
}


@pytest.mark.parametrize("case", TRANSPOSED_OPERANDS, ids=list(TRANSPOSED_OPERANDS))
def test_matmul_reads_transposed_operands_as_views(case: str) -> None:
    text, name = TRANSPOSED_OPERANDS[case]
    module = parse(text)
    inputs = random_inputs(module)
    kernel_name, outputs = run_kernel(function_block(module), inputs)
    assert kernel_name == name
    assert_matches(outputs[0], run_reference(module, inputs)[0])


def test_only_last_two_dim_transposes_into_a_matmul_are_views() -> None:
    ops = fused_ops("""
    func.func @main(%z: tensor<4x4x4xf32>) -> (tensor<4x4x4xf32>, tensor<4x4x4xf32>) {
      %batch = graph.transpose %z {permutation = array<i64: 1, 0, 2>} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
      %d = graph.matmul %z, %batch : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
      %twice = graph.transpose %z {permutation = array<i64: 0, 2, 1>} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
      %e = graph.matmul %d, %twice : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
      %f = graph.add %twice, %e : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
      %g = graph.transpose %e {permutation = array<i64: 0, 2, 1>} : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
      func.return %f, %g : tensor<4x4x4xf32>, tensor<4x4x4xf32>
    }""")
    batch, _, twice, _, _, returned = ops[:6]
    assert not reads_transposed(batch)  # a batch-dim permutation: BLAS cannot read it as a view
    assert not reads_transposed(twice)  # a second user needs it computed
    assert not reads_transposed(returned)  # not read by a matmul


def test_single_softmax_kernel_writes_into_its_buffer() -> None:
    module = parse("""
    func.func @main(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
      %y = graph.softmax %x {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
      func.return %y : tensor<4x10xf32>
    }""")
    kernel = library_kernel(function_block(module))
    assert kernel is not None
    assert kernel.name == "aten._softmax"
    x = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    out = np.zeros((4, 10), np.float32)
    launch = kernel.bind([torch.from_numpy(x)], [torch.from_numpy(out)])
    for _ in range(2):  # bound once, run per inference
        launch()
        assert_matches(out, run_reference(module, [x])[0])
        x += 1.0  # new inputs in the same buffer
        out[:] = 0


def fused_ops(text: str) -> list[Operation]:
    return list(function_block(parse(text)).ops)


def test_fusible_epilogue_follows_the_grammar() -> None:
    conv, add, relu, _ = fused_ops(FUSED_BLOCKS["conv_add_relu"][0])
    assert fusible_epilogue(conv, add)
    assert fusible_epilogue(conv, relu)
    assert not fusible_epilogue(add, relu)
    linear, gelu, _ = fused_ops(FUSED_BLOCKS["linear_gelu"][0])
    assert fusible_epilogue(linear, gelu)
    module = parse(f"""
    func.func @main(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %r: {T}) -> {T} {{
      %c = {CONV.format(bias=", %b", bias_type=", tensor<4xf32>", pads="1, 1, 1, 1")}
      %s = graph.sub %c, %r : ({T}, {T}) -> {T}
      %a = graph.add %c, %r : ({T}, {T}) -> {T}
      %t = graph.tanh %a : ({T}) -> {T}
      %e = graph.exp %c : ({T}) -> {T}
      %d = graph.add %c, %c : ({T}, {T}) -> {T}
      %u = graph.relu %c : ({T}) -> {T}
      %uu = graph.relu %u : ({T}) -> {T}
      func.return %t : {T}
    }}""")
    conv, sub, add, tanh, exp, double, relu, relu_relu, _ = function_block(module).ops
    assert fusible_epilogue(conv, add)
    assert fusible_epilogue(conv, relu)
    for op in (sub, tanh, exp, double, relu_relu):  # not oneDNN post-ops: no tanh after a residual add
        assert not fusible_epilogue(conv, op)


def test_blocks_library_calls_cannot_compute() -> None:
    two_outputs = f"""
    func.func @main(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> ({T}, {T}) {{
      %c = {CONV.format(bias=", %b", bias_type=", tensor<4xf32>", pads="1, 1, 1, 1")}
      %y = graph.relu %c : ({T}) -> {T}
      func.return %c, %y : {T}, {T}
    }}"""
    two_activations = conv_block(
        f"%y = graph.relu %c : ({T}) -> {T}\n %z = graph.sigmoid %y : ({T}) -> {T}\n func.return %z : {T}"
    )
    for text in (two_outputs, two_activations):
        assert library_kernel(function_block(parse(text))) is None


# ---- the runtime honours the declared capability table, both ways ----


def test_library_implements_exactly_the_declared_ops() -> None:
    graph = DIALECTS["graph"]()
    declared = {op for op in graph.operations if op in LIBRARY_CALLS}
    assert declared == {op for op in graph.operations if op in TORCH_IMPLS}
    assert set(LIBRARY_CALLS) == set(TORCH_IMPLS)


EPILOGUE_ANCHORS = {  # arguments, the anchor op %c, its result type, a bias vector's type
    "conv": (
        "%x: tensor<1x3x5x5xf32>, %w: tensor<4x3x3x3xf32>",
        "graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,"
        " groups = 1 : i64} : (tensor<1x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x3x3xf32>",
        "1x4x3x3xf32",
        "4x1x1xf32",
    ),
    "linear": (
        "%x: tensor<2x3x5xf32>, %w: tensor<4x5xf32>",
        "graph.linear %x, %w : (tensor<2x3x5xf32>, tensor<4x5xf32>) -> tensor<2x3x4xf32>",
        "2x3x4xf32",
        "4xf32",
    ),
    "matmul": (
        "%x: tensor<2x3x5xf32>, %w: tensor<5x4xf32>",
        "graph.matmul %x, %w : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>",
        "2x3x4xf32",
        "4xf32",
    ),
}
ACTIVATION_CASES = {"relu", "sigmoid", "tanh", "hard_swish", "silu", "gelu_none", "gelu_tanh", "clip_relu6",
                    "clip_no_min", "leaky_relu", "hard_sigmoid_torch"}  # fmt: skip
"""The unary cases an anchor fuses: oneDNN's post-ops (hard_sigmoid only with torch's parameters)."""
EPILOGUES = [
    *((c.id, f"{c.op.split(' ', 1)[0]} %c {c.op.partition(' ')[2]} : (tensor<R>) -> tensor<R>", c.id in
       ACTIVATION_CASES, False) for c in OP_CASES if c.inputs == c.outputs == ["2x3x4xf32"]),
    *((f"{n}_bias", f"graph.{n} %c, %v : (tensor<R>, tensor<B>) -> tensor<R>", n == "add", False)
      for n in ("add", "sub", "mul", "div", "max", "pow", "prelu")),
    *((f"{n}_residual", f"graph.{n} %c, %r : (tensor<R>, tensor<R>) -> tensor<R>", False, n == "add")
      for n in ("add", "sub", "mul", "max")),
]  # fmt: skip
"""Every f32 unary op case and some binary ops after an anchor: id, the op's text (R: the anchor's result type, B: a
bias vector's), whether any anchor fuses it, and whether a conv does."""


@pytest.mark.parametrize("anchor", EPILOGUE_ANCHORS)
@pytest.mark.parametrize(("case", "text", "fused", "conv_fused"), EPILOGUES, ids=[e[0] for e in EPILOGUES])
def test_runtime_binds_exactly_the_declared_epilogues(
    anchor: str, case: str, text: str, fused: bool, conv_fused: bool
) -> None:
    arguments, anchor_op, result, bias = EPILOGUE_ANCHORS[anchor]
    module = parse(f"""
    func.func @main({arguments}, %v: tensor<{bias}>, %r: tensor<{result}>) -> tensor<{result}> {{
      %c = {anchor_op}
      %y = {text.replace("tensor<R>", f"tensor<{result}>").replace("tensor<B>", f"tensor<{bias}>")}
      func.return %y : tensor<{result}>
    }}""")
    block = function_block(module)
    first, op = list(block.ops)[:2]
    declared = fused or (conv_fused and anchor == "conv")
    call = library_call(block)
    assert (call is not None) == declared == fusible_epilogue(first, op)
    if call is None:  # the runtime refuses it even when asked for it
        assert bind_call(LibraryCall(LIBRARY_CALLS[type(first)], (op.name.removeprefix("graph."),)), block) is None
        assert library_kernel(block) is None
        return
    inputs = random_inputs(module)
    expected = run_reference(module, inputs)[0]
    for onednn in ("always", "never"):
        name, outputs = run_kernel(block, inputs, onednn)
        assert name == library_call(block, onednn=onednn).name  # pyright: ignore[reportOptionalMemberAccess]
        assert_matches(outputs[0], expected)


def test_runtime_binds_calls_only_as_declared() -> None:
    module = parse(FUSED_BLOCKS["linear_gelu"][0])
    block = function_block(module)
    assert bind_call(LibraryCall("aten.linear", ("gelu",)), block) is not None
    for wrong in (
        LibraryCall("aten.matmul", ("gelu",)),  # not the anchor's call
        LibraryCall("aten.linear", ("relu",)),  # not the block's epilogue
        LibraryCall("aten.linear"),
        LibraryCall("mkldnn._convolution_pointwise", ("gelu",)),  # oneDNN's fused calls are convolutions
        LibraryCall("aten.linear", ("gelu",), (1,)),  # no transposed operand in the block
    ):
        assert bind_call(wrong, block) is None, wrong


@pytest.mark.parametrize(("batch", "packed"), [(1, 2), (64, 2), (2, 0)])
def test_large_linear_layers_run_on_a_weight_packed_once_and_give_torch_numbers(batch: int, packed: int) -> None:
    """A linear layer whose constant weight `packs_linear_weight` accepts runs on oneDNN's packed copy, made once
    when the kernel is bound (with its epilogue in place after it); a small one on BLAS's addmm."""
    import gnomon
    from gnomon.runtime.library import kernel as library

    torch.manual_seed(5)
    width = 1024 if packed else 64
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width)).eval()
    x = torch.randn(batch, width)
    made: list[int] = []
    original = library.REORDER_LINEAR_WEIGHT

    def spy(weight: torch.Tensor, rows: int) -> torch.Tensor:
        made.append(rows)
        return original(weight, rows)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(library, "REORDER_LINEAR_WEIGHT", spy)
        executable = gnomon.compile(model, (x,))
        [out] = executable(x.numpy())
        executable(x.numpy())
    assert made == [batch] * packed
    with torch.inference_mode():
        assert relative_l2(out, model(x).numpy()) <= 1e-5
