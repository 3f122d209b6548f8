"""Generated kernels (kernel-to-linalg, MLIR's JIT, the disk cache) against the reference semantics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.dialects import kernel
from gnomon.dialects.graph.constant_values import numpy_dtype
from gnomon.passes.kernel_to_linalg import CodegenError, generatable, lower_kernel
from gnomon.reference import run_reference
from gnomon.runtime.codegen import compilation_count, compile_kernel


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every kernel of this module compiles into a fresh cache directory."""
    directory = tmp_path_factory.mktemp("kernels")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GNOMON_CACHE_DIR", str(directory))
        yield directory


def tensor(shape: Sequence[int], dtype: str) -> str:
    dims = "".join(f"{d}x" if d >= 0 else "?x" for d in shape)
    return f"tensor<{dims}{dtype}>"


def function(args: Sequence[tuple[Sequence[int], str]], body: Sequence[str], results: Sequence[tuple[str, str]]) -> str:
    """A func.func's text: `body` lines may name the arguments %a0, %a1, ...; `results` are (value, type)."""
    params = ", ".join(f"%a{i}: {tensor(s, d)}" for i, (s, d) in enumerate(args))
    returns = ", ".join(t for _, t in results)
    lines = "\n".join(f"  {line}" for line in body)
    values = ", ".join(v for v, _ in results)
    return f"func.func @f({params}) -> ({returns}) {{\n{lines}\n  func.return {values} : {returns}\n}}"


def parse(text: str) -> tuple[ModuleOp, func.FuncOp]:
    module = Parser(gnomon_context(), text).parse_module()
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return module, functions[0]


def as_kernel(
    function_op: func.FuncOp, tile: Sequence[int] = (), order: Sequence[int] = (), threads: int = 2
) -> kernel.FuncOp:
    """The function's body as a generated kernel.func (func.return becomes kernel.yield)."""
    body = function_op.body.clone()
    terminator = body.block.last_op
    assert isinstance(terminator, func.ReturnOp)
    body.block.insert_op_before(kernel.YieldOp(*terminator.operands), terminator)
    body.block.erase_op(terminator)
    output = function_op.function_type.outputs.data[0]
    assert isinstance(output, TensorType)
    rank = output.get_num_dims()
    schedule = kernel.ScheduleAttr.get(list(tile) or [0] * rank, 8, list(order) or list(range(rank)), threads)
    return kernel.FuncOp(function_op.sym_name.data, function_op.function_type, body, schedule=schedule)


def run_generated(
    kernel_op: kernel.FuncOp, inputs: Sequence[np.ndarray], threads: int | None = None
) -> list[np.ndarray]:
    compiled = compile_kernel(kernel_op)
    outputs: list[np.ndarray] = []
    for output in kernel_op.function_type.outputs.data:
        assert isinstance(output, TensorType)
        dtype = numpy_dtype(output.get_element_type())
        assert dtype is not None
        outputs.append(np.empty(output.get_shape(), dtype))
    compiled.bind(inputs, outputs, threads)()
    return outputs


def check(
    text: str, inputs: Sequence[np.ndarray], names: Sequence[str], rtol: float = 2e-6, atol: float = 1e-6
) -> None:
    """The generated kernel of `text`'s function gives the reference's results (NaN where it gives NaN)."""
    module, function_op = parse(text)
    expected = run_reference(module, inputs)
    actual = run_generated(as_kernel(function_op), inputs)
    for name, got, want in zip(names, actual, expected, strict=True):
        assert got.dtype == want.dtype, name
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


RNG = np.random.default_rng(0)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-40, 1e-4, -1e-4, 0.5, 0.625, 1.0, -1.0, 3.9, 4.1]
SPECIAL += [20.0, 88.7, 88.8, -88.0, -104.0, -110.0, 100.0, -737.0]


def floats(dtype: type[np.floating], count: int = 1500) -> np.ndarray:
    """Special values, normals, and magnitudes from 1e-35 to 1e35 of both signs."""
    magnitudes = np.exp(RNG.uniform(-80, 80, count)) * RNG.choice([-1, 1], count)
    return np.concatenate([SPECIAL, RNG.standard_normal(count) * 4, magnitudes]).astype(dtype)


UNARY = [
    "abs", "ceil", "cos", "erf", "exp", "floor", "hard_swish", "log", "neg", "reciprocal", "relu", "round", "rsqrt",
    "selu", "sigmoid", "sign", "silu", "sin", "softsign", "sqrt", "tanh",
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "sinh",
    'gelu {approximate = "none"}', 'gelu {approximate = "tanh"}', "elu {alpha = 1.0 : f64}",
    "leaky_relu {alpha = 0.01 : f64}", "softplus {beta = 1.0 : f64, threshold = 20.0 : f64}",
    "softplus {beta = 2.0 : f64, threshold = 10.0 : f64}", "hard_sigmoid {alpha = 0.2 : f64, beta = 0.5 : f64}",
    "clip {min = 0.0 : f64, max = 6.0 : f64}", "clip {min = 0xFFF0000000000000 : f64, max = 1.0 : f64}",
    "dropout {ratio = 0.5 : f64}",
]  # fmt: skip


@pytest.mark.parametrize(("dtype", "np_dtype"), [("f32", np.float32), ("f64", np.float64)])
def test_unary_float_ops_match_reference(dtype: str, np_dtype: type[np.floating]) -> None:
    # One kernel computes every op (one generic with an output per op), so this is one compilation.
    x = floats(np_dtype)
    t = tensor(x.shape, dtype)
    body = [
        f"%r{i} = graph.{op.partition(' ')[0]} %a0 {op.partition(' ')[2]} : ({t}) -> {t}" for i, op in enumerate(UNARY)
    ]
    text = function([(x.shape, dtype)], body, [(f"%r{i}", t) for i in range(len(UNARY))])
    check(text, [x], UNARY, rtol=2e-6 if dtype == "f32" else 1e-12, atol=1e-6 if dtype == "f32" else 1e-12)


BINARY = ["add", "sub", "mul", "div", "max", "min", "pow", "rem", "fmod", "prelu"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
BROADCASTS = [((3, 4, 5), (3, 4, 5)), ((3, 4, 5), (5,)), ((3, 1, 5), (4, 1)), ((), (3,)), ((2, 1, 1, 4), (1, 3, 5, 1))]


def values(dtype: str, shape: Sequence[int]) -> np.ndarray:
    if dtype in ("f32", "f64"):
        return np.asarray(RNG.standard_normal(shape) * 3, np.float32 if dtype == "f32" else np.float64)
    if dtype in ("i32", "i64"):
        return np.asarray(RNG.integers(-20, 20, shape), np.int32 if dtype == "i32" else np.int64)
    return np.asarray(RNG.integers(0, 2, shape), np.bool_)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i64", "i32", "i1"])
@pytest.mark.parametrize(("lhs", "rhs"), BROADCASTS, ids=[f"{a}-{b}" for a, b in BROADCASTS])
def test_binary_ops_broadcast_like_numpy(dtype: str, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> None:
    a, b = values(dtype, lhs), values(dtype, rhs)
    if dtype[0] == "f":
        a = np.asarray(np.abs(a))  # pow of negative bases is NaN on both sides; positive bases test more
    elif dtype != "i1":
        b = np.where(b == 0, b.dtype.type(3), b)  # integer x / 0 is undefined (the reference's is a cast of inf)
    out = np.broadcast_shapes(lhs, rhs)
    ta, tb = tensor(lhs, dtype), tensor(rhs, dtype)
    ops = [(op, dtype) for op in BINARY] + [(op, "i1") for op in COMPARE] + [(op, dtype) for op in ("and", "or")]
    body: list[str] = []
    names: list[str] = []
    results: list[tuple[str, str]] = []
    for op, result_dtype in ops:
        line = f"%{op} = graph.{op} %a0, %a1 : ({ta}, {tb}) -> {tensor(out, result_dtype)}"
        _, candidate = parse(function([(lhs, dtype), (rhs, dtype)], [line], [(f"%{op}", tensor(out, result_dtype))]))
        if generatable(next(iter(candidate.body.block.ops))):
            body.append(line)
            names.append(op)
            results.append((f"%{op}", tensor(out, result_dtype)))
    assert names, "some binary op is generatable for every type"
    check(function([(lhs, dtype), (rhs, dtype)], body, results), [a, b], names)


TYPES = ["f32", "f64", "i32", "i64", "i1"]


def test_casts_between_all_supported_types() -> None:
    body: list[str] = []
    results: list[tuple[str, str]] = []
    names: list[str] = []
    for i, source in enumerate(TYPES):
        for target in TYPES:
            body.append(f"%c_{source}_{target} = graph.cast %a{i} : ({tensor([40], source)}) -> {tensor([40], target)}")
            results.append((f"%c_{source}_{target}", tensor([40], target)))
            names.append(f"{source} -> {target}")
    inputs = [values(t, [40]) for t in TYPES]
    inputs[0][:3] = [0.0, -0.0, 0.75]
    check(function([([40], t) for t in TYPES], body, results), inputs, names)


def test_integer_and_logic_unary_ops() -> None:
    names = ["abs", "neg", "relu", "sign"]
    t64, t1 = tensor([30], "i64"), tensor([30], "i1")
    body = [f"%{op} = graph.{op} %a0 : ({t64}) -> {t64}" for op in names] + [f"%not = graph.not %a1 : ({t1}) -> {t1}"]
    results = [(f"%{op}", t64) for op in names] + [("%not", t1)]
    check(
        function([([30], "i64"), ([30], "i1")], body, results),
        [values("i64", [30]), values("i1", [30])],
        [*names, "not"],
    )


@pytest.mark.parametrize("dtype", ["f32", "i64", "i1"])
def test_where_broadcasts_all_three_operands(dtype: str) -> None:
    tc, ta, tb, out = tensor([4, 1], "i1"), tensor([3], dtype), tensor([], dtype), tensor([4, 3], dtype)
    text = function(
        [([4, 1], "i1"), ([3], dtype), ([], dtype)],
        [f"%w = graph.where %a0, %a1, %a2 : ({tc}, {ta}, {tb}) -> {out}"],
        [("%w", out)],
    )
    check(text, [values("i1", [4, 1]), values(dtype, [3]), values(dtype, [])], ["where"])


def test_fused_chain_is_one_generic_and_matches_reference() -> None:
    x, bias, scale = tensor([2, 8, 16], "f32"), tensor([16], "f32"), tensor([8, 1], "f32")
    body = [
        f"%s = graph.add %a0, %a1 : ({x}, {bias}) -> {x}",
        f"%r = graph.relu %s : ({x}) -> {x}",
        f"%m = graph.mul %r, %a2 : ({x}, {scale}) -> {x}",
        f"%g = graph.sigmoid %m : ({x}) -> {x}",
    ]
    text = function([([2, 8, 16], "f32"), ([16], "f32"), ([8, 1], "f32")], body, [("%g", x)])
    _, function_op = parse(text)
    lowered = lower_kernel(as_kernel(function_op))
    names = [op.name for op in lowered.function.walk()]
    assert names.count("linalg.generic") == 1
    assert "memref.alloc" not in names  # intermediates stay in registers
    check(text, [values("f32", [2, 8, 16]), values("f32", [16]), values("f32", [8, 1])], ["chain"])


@pytest.mark.parametrize(
    ("shape", "permutation", "tile"),
    [
        ((64, 48), (1, 0), (16, 16)),
        ((64, 48), (1, 0), ()),
        ((3, 5, 7, 2), (0, 2, 3, 1), ()),
        ((33, 17), (1, 0), (8, 0)),
    ],
)
def test_transposes(shape: tuple[int, ...], permutation: tuple[int, ...], tile: tuple[int, ...]) -> None:
    source, out = tensor(shape, "f32"), tensor([shape[p] for p in permutation], "f32")
    perm = ", ".join(map(str, permutation))
    line = f"%t = graph.transpose %a0 {{permutation = array<i64: {perm}>}} : ({source}) -> {out}"
    text = function([(shape, "f32")], [line], [("%t", out)])
    _, function_op = parse(text)
    x = values("f32", shape)
    for threads in (1, 2):
        (got,) = run_generated(as_kernel(function_op, tile=tile), [x], threads)
        np.testing.assert_array_equal(got, np.transpose(x, permutation))


def test_transpose_and_expand_fuse_with_elementwise_ops() -> None:
    a, at, b, out = tensor([8, 4], "f32"), tensor([4, 8], "f32"), tensor([1, 8], "f32"), tensor([3, 4, 8], "f32")
    body = [
        f"%t = graph.transpose %a0 {{permutation = array<i64: 1, 0>}} : ({a}) -> {at}",
        f"%e = graph.expand %a1 : ({b}) -> {out}",
        f"%s = graph.add %t, %e : ({at}, {out}) -> {out}",
        f"%u = graph.tanh %s : ({out}) -> {out}",
    ]
    check(
        function([([8, 4], "f32"), ([1, 8], "f32")], body, [("%u", out)]),
        [values("f32", [8, 4]), values("f32", [1, 8])],
        ["fused"],
    )


@settings(max_examples=6, deadline=None)
@given(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1, max_side=5), st.booleans())
def test_broadcasting_property(shapes: object, threaded: bool) -> None:
    input_shapes, result = shapes.input_shapes, shapes.result_shape  # type: ignore[attr-defined]
    lhs, rhs = tensor(input_shapes[0], "f32"), tensor(input_shapes[1], "f32")
    out = tensor(result, "f32")
    text = function(
        [(input_shapes[0], "f32"), (input_shapes[1], "f32")],
        [
            f"%m = graph.mul %a0, %a1 : ({lhs}, {rhs}) -> {out}",
            f"%r = graph.leaky_relu %m {{alpha = 0.1 : f64}} : ({out}) -> {out}",
        ],
        [("%r", out)],
    )
    module, function_op = parse(text)
    inputs = [values("f32", input_shapes[0]), values("f32", input_shapes[1])]
    (got,) = run_generated(as_kernel(function_op), inputs, threads=2 if threaded else 1)
    np.testing.assert_allclose(got, run_reference(module, inputs)[0], rtol=1e-6)


def test_threads_give_identical_results() -> None:
    t = tensor([256, 1024], "f32")
    body = [
        f'%g = graph.gelu %a0 {{approximate = "none"}} : ({t}) -> {t}',
        f"%s = graph.add %g, %a1 : ({t}, {t}) -> {t}",
    ]
    _, function_op = parse(function([([256, 1024], "f32"), ([256, 1024], "f32")], body, [("%s", t)]))
    kernel_op = as_kernel(function_op, threads=4)
    inputs = [values("f32", [256, 1024]), values("f32", [256, 1024])]
    single = run_generated(kernel_op, inputs, threads=1)[0]
    for threads in (2, 3, 4):
        np.testing.assert_array_equal(run_generated(kernel_op, inputs, threads)[0], single)


@pytest.mark.parametrize(("m", "k", "n"), [(7, 5, 19), (12, 300, 40), (64, 256, 64), (100, 513, 1000)])
def test_matmul_with_epilogue(m: int, k: int, n: int) -> None:
    ta, tb, tc, tbias = tensor([m, k], "f32"), tensor([k, n], "f32"), tensor([m, n], "f32"), tensor([n], "f32")
    body = [
        f"%c = graph.matmul %a0, %a1 : ({ta}, {tb}) -> {tc}",
        f"%d = graph.add %c, %a2 : ({tc}, {tbias}) -> {tc}",
        f"%r = graph.relu %d : ({tc}) -> {tc}",
    ]
    module, function_op = parse(function([([m, k], "f32"), ([k, n], "f32"), ([n], "f32")], body, [("%r", tc)]))
    inputs = [values("f32", [m, k]), values("f32", [k, n]), values("f32", [n])]
    (expected,) = run_reference(module, inputs)
    kernel_op = as_kernel(function_op)
    for threads in (1, 2):
        (got,) = run_generated(kernel_op, inputs, threads)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.sqrt(k))


REDUCTIONS = [
    ((4, 6, 50), (2,), False),
    ((4, 6, 50), (1, 2), True),
    ((3, 1000), (), False),
    ((1, 7, 9), (-1,), True),
    ((300, 64), (1,), False),
]


@pytest.mark.parametrize(("shape", "axes", "keepdims"), REDUCTIONS)
def test_reductions_over_trailing_axes(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> None:
    rank = len(shape)
    reduced = sorted(a % rank for a in axes) or list(range(rank))
    out = tensor([1 if i in reduced else d for i, d in enumerate(shape) if keepdims or i not in reduced], "f32")
    listed = f"array<i64: {', '.join(map(str, axes))}>" if axes else "array<i64>"
    ops = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]
    attributes = f"{{axes = {listed}, keepdims = {str(keepdims).lower()}}}"
    body = [f"%{op} = graph.{op} %a0 {attributes} : ({tensor(shape, 'f32')}) -> {out}" for op in ops]
    # A kernel holds one reduction (the anchor of its loop nests), so this is one kernel per op.
    x = np.asarray(RNG.uniform(0.5, 1.5, shape) * RNG.choice([-1, 1], shape), np.float32)
    for op, line in zip(ops, body, strict=True):
        # Summation order differs from NumPy's pairwise sum: cancellation leaves ~1e-6 absolute noise.
        check(function([(shape, "f32")], [line], [(f"%{op}", out)]), [x], [op], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale", [[10], [10, 1], [1, 10], [4, 1, 1], [10, 10]])
@pytest.mark.parametrize("normalize", [False, True])
def test_reduction_prologue_broadcasts_over_some_reduced_axes(scale: list[int], normalize: bool) -> None:
    """A reduction over two axes whose prologue reads an operand broadcast along one of them (a bilinear
    upsample's weights, by row or by column, in a training step): the reduced axes keep loops of their own, where
    one flat column index could not address the operand (it read past its end). Also through a normalizing
    epilogue that goes back to the input's shape."""
    x, s_type, row = tensor([2, 4, 10, 10], "f32"), tensor(scale, "f32"), tensor([2, 4, 1, 1], "f32")
    body = [
        f"%p = graph.mul %a0, %a1 : ({x}, {s_type}) -> {x}",
        f"%m = graph.reduce_mean %p {{axes = array<i64: 2, 3>, keepdims = true}} : ({x}) -> {row}",
    ]
    result = ("%m", row)
    if normalize:
        body.append(f"%r = graph.sub %p, %m : ({x}, {row}) -> {x}")
        result = ("%r", x)
    module, function_op = parse(function([([2, 4, 10, 10], "f32"), (scale, "f32")], body, [result]))
    inputs = [values("f32", (2, 4, 10, 10)), values("f32", tuple(scale))]
    (expected,) = run_reference(module, inputs)
    for threads in (1, 2):
        (got,) = run_generated(as_kernel(function_op), inputs, threads)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(4, 10), (2, 3, 1000), (1, 1, 5)])
def test_softmax_over_the_last_axis(op: str, shape: tuple[int, ...]) -> None:
    t = tensor(shape, "f32")
    text = function([(shape, "f32")], [f"%r = graph.{op} %a0 {{axis = -1 : i64}} : ({t}) -> {t}"], [("%r", t)])
    check(text, [values("f32", shape) * 4], [op], rtol=1e-5)


def test_reduction_and_softmax_epilogues_follow_their_rows() -> None:
    x, row, mask = tensor([8, 16, 64], "f32"), tensor([8, 16, 1], "f32"), tensor([16, 64], "f32")
    norm = [
        f"%m = graph.reduce_mean %a0 {{axes = array<i64: 2>, keepdims = true}} : ({x}) -> {row}",
        f"%s = graph.add %m, %a1 : ({row}, tensor<f32>) -> {row}",
        f"%r = graph.abs %s : ({row}) -> {row}",
    ]
    masked = [
        f"%s = graph.softmax %a0 {{axis = 2 : i64}} : ({x}) -> {x}",
        f"%r = graph.mul %s, %a1 : ({x}, {mask}) -> {x}",
    ]
    for body, args in (
        (norm, [([8, 16, 64], "f32"), ([], "f32")]),
        (masked, [([8, 16, 64], "f32"), ([16, 64], "f32")]),
    ):
        module, function_op = parse(function(args, body, [("%r", body[-1].split(" -> ")[-1])]))
        inputs = [values("f32", shape) for shape, _ in args]
        (expected,) = run_reference(module, inputs)
        for threads in (1, 2, 3):
            (got,) = run_generated(as_kernel(function_op), inputs, threads)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("shape", "axes", "row"), [((8, 16, 64), "2", [8, 16, 1]), ((16, 64), "0, 1", [1, 1])])
def test_reduction_epilogue_of_another_element_type(shape: tuple[int, ...], axes: str, row: list[int]) -> None:
    # A row max compared with a bound is i1 (Attention's fully-masked-row test): the max accumulates in a buffer
    # of its own, not in the i1 output.
    x, out = tensor(list(shape), "f32"), tensor(row, "i1")
    body = [
        f"%m = graph.reduce_max %a0 {{axes = array<i64: {axes}>, keepdims = true}} : ({x}) -> {tensor(row, 'f32')}",
        f"%r = graph.gt %m, %a1 : ({tensor(row, 'f32')}, tensor<f32>) -> {out}",
    ]
    args = [(list(shape), "f32"), ([], "f32")]
    module, function_op = parse(function(args, body, [("%r", out)]))
    x_values = values("f32", shape)
    bound = np.median(x_values.max(axis=-1))  # about half the rows above it
    inputs = [x_values, np.array(bound, np.float32)]
    (expected,) = run_reference(module, inputs)
    assert 0 < expected.sum() < expected.size or expected.size == 1
    for threads in (1, 2):
        (got,) = run_generated(as_kernel(function_op), inputs, threads)
        np.testing.assert_array_equal(got, expected)


def test_generatable() -> None:
    def op(args: Sequence[tuple[Sequence[int], str]], line: str, result: str) -> bool:
        _, function_op = parse(
            function(args, [f"%r = {line} : ({', '.join(tensor(*a) for a in args)}) -> {result}"], [("%r", result)])
        )
        return generatable(next(iter(function_op.body.block.ops)))

    f32x4, i64x4 = ([4], "f32"), ([4], "i64")
    assert op([f32x4], "graph.sigmoid %a0", "tensor<4xf32>")
    assert not op([i64x4], "graph.sigmoid %a0", "tensor<4xi64>")  # a float op on integers
    assert not op([i64x4, i64x4], "graph.pow %a0, %a1", "tensor<4xi64>")
    assert op([([-1], "f32")], "graph.relu %a0", "tensor<?xf32>")  # `?` dims are read at run time
    assert not op([([-1, 4], "f32"), ([4, 5], "f32")], "graph.matmul %a0, %a1", "tensor<?x5xf32>")  # static plans
    assert not op([([4], "f16")], "graph.relu %a0", "tensor<4xf16>")
    assert op([([3, 4], "f32"), ([4, 5], "f32")], "graph.matmul %a0, %a1", "tensor<3x5xf32>")
    assert not op([([2, 3, 4], "f32"), ([4, 5], "f32")], "graph.matmul %a0, %a1", "tensor<2x3x5xf32>")  # batched
    assert op([([2, 4], "f32")], "graph.reduce_sum %a0 {axes = array<i64: 1>, keepdims = false}", "tensor<2xf32>")
    assert not op([([2, 4], "f32")], "graph.reduce_sum %a0 {axes = array<i64: 0>, keepdims = false}", "tensor<4xf32>")
    assert not op([([2, 4], "i64")], "graph.reduce_sum %a0 {axes = array<i64: 1>, keepdims = false}", "tensor<2xi64>")
    assert op([([2, 4], "f32")], "graph.softmax %a0 {axis = -1 : i64}", "tensor<2x4xf32>")
    assert not op([([2, 4], "f32")], "graph.softmax %a0 {axis = 0 : i64}", "tensor<2x4xf32>")


def test_lowering_rejects_what_it_cannot_generate() -> None:
    t, out = tensor([2, 4], "f32"), tensor([4], "f32")
    line = f"%r = graph.reduce_sum %a0 {{axes = array<i64: 0>, keepdims = false}} : ({t}) -> {out}"
    _, function_op = parse(function([([2, 4], "f32")], [line], [("%r", out)]))
    with pytest.raises(CodegenError, match=r"cannot generate code for graph.reduce_sum"):
        compile_kernel(as_kernel(function_op))
    square = tensor([8, 8], "f32")
    transposed = [
        f"%c = graph.matmul %a0, %a0 : ({square}, {square}) -> {square}",
        f"%r = graph.transpose %c {{permutation = array<i64: 1, 0>}} : ({square}) -> {square}",
    ]
    _, function_op = parse(function([([8, 8], "f32")], transposed, [("%r", square)]))
    with pytest.raises(CodegenError, match=r"its epilogue must read .* pointwise"):
        lower_kernel(as_kernel(function_op))


def test_bind_checks_arrays() -> None:
    t = tensor([4, 4], "f32")
    _, function_op = parse(function([([4, 4], "f32")], [f"%r = graph.neg %a0 : ({t}) -> {t}"], [("%r", t)]))
    compiled = compile_kernel(as_kernel(function_op))
    x, y = np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32)
    with pytest.raises(CodegenError, match="argument 0 must be a float32 array of shape"):
        compiled.bind([np.zeros((4, 4), np.float64)], [y])
    with pytest.raises(CodegenError, match="argument 1 is not C-contiguous"):
        compiled.bind([x], [np.zeros((4, 4), np.float32).T])
    with pytest.raises(CodegenError, match="takes 1 inputs and 1 outputs"):
        compiled.bind([x, x], [y])


def _affine_relu_kernel() -> kernel.FuncOp:
    """x * scale + shift, then relu, with per-channel scale and shift: an unfolded batch norm."""
    t, c = tensor([2, 16, 9, 9], "f32"), tensor([16, 1, 1], "f32")
    lines = [
        f"%m = graph.mul %a0, %a1 : ({t}, {c}) -> {t}",
        f"%s = graph.add %m, %a2 : ({t}, {c}) -> {t}",
        f"%r = graph.relu %s : ({t}) -> {t}",
    ]
    args = [([2, 16, 9, 9], "f32"), ([16, 1, 1], "f32"), ([16, 1, 1], "f32")]
    _, function_op = parse(function(args, lines, [("%r", t)]))
    return as_kernel(function_op)


@pytest.mark.parametrize("threads", [1, 2])
def test_in_place_kernel_overwrites_its_input(threads: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 9, 9)).astype(np.float32)
    scale, shift = rng.standard_normal((2, 16, 1, 1)).astype(np.float32)
    expected = np.maximum(x * scale + shift, 0)
    compiled = compile_kernel(_affine_relu_kernel(), in_place=0)
    compiled.bind([x, scale, shift], [x], threads)()
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def test_in_place_kernel_needs_its_input_as_output() -> None:
    compiled = compile_kernel(_affine_relu_kernel(), in_place=0)
    x, c = np.zeros((2, 16, 9, 9), np.float32), np.zeros((16, 1, 1), np.float32)
    with pytest.raises(CodegenError, match="compiled in place, its output must be input 0"):
        compiled.bind([x, c, c], [np.zeros_like(x)])
    with pytest.raises(CodegenError, match="only a pointwise kernel's one result may overwrite an input"):
        compile_kernel(_affine_relu_kernel(), in_place=1)


def test_identical_kernels_compile_once_per_process() -> None:
    t = tensor([3, 7, 11], "f32")
    text = function([([3, 7, 11], "f32")], [f"%r = graph.softsign %a0 : ({t}) -> {t}"], [("%r", t)])
    _, function_op = parse(text)
    first = as_kernel(function_op)
    second = as_kernel(function_op)
    second.sym_name = kernel.StringAttr("another_name")
    before = compilation_count()
    compiled = compile_kernel(first)
    again = compile_kernel(second)
    assert compilation_count() == before + 1
    assert not compiled.from_cache
    assert compiled.compile_seconds > 0
    assert again.from_cache
    assert again.compile_seconds == 0
    assert again.name == "another_name"


_CACHE_SCRIPT = """
import json, sys, time
import numpy as np
from xdsl.parser import Parser
from gnomon.context import gnomon_context
from gnomon.runtime.codegen import compilation_count, compile_kernel
text = sys.argv[1]
module = Parser(gnomon_context(), text).parse_module()
start = time.perf_counter()
compiled = compile_kernel(next(iter(module.ops)))
seconds = time.perf_counter() - start
x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
y = np.empty((32, 64), np.float32)
compiled.bind([x], [y])()
print(json.dumps({"from_cache": compiled.from_cache, "compilations": compilation_count(), "seconds": seconds,
                  "mlir_imported": "torch_mlir" in sys.modules, "correct": bool((y == x.T).all())}))
"""

_CACHED_KERNEL = """
kernel.func @transpose_cached(%x: tensor<64x32xf32>) -> tensor<32x64xf32> attributes {kind = "generated",
    schedule = #kernel.schedule<tile = [16, 16], vector = 8, order = [0, 1], threads = 2>} {
  %t = graph.transpose %x {permutation = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  kernel.yield %t : tensor<32x64xf32>
}
"""


def test_second_process_loads_kernels_from_the_disk_cache(tmp_path: Path) -> None:
    env = {**os.environ, "GNOMON_CACHE_DIR": str(tmp_path / "cache")}

    def run() -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-c", _CACHE_SCRIPT, _CACHED_KERNEL], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    first, second = run(), run()
    assert first == {**first, "from_cache": False, "compilations": 1, "mlir_imported": True, "correct": True}
    assert second == {**second, "from_cache": True, "compilations": 0, "mlir_imported": False, "correct": True}
    assert [p.suffix for p in (tmp_path / "cache").iterdir() if not p.name.startswith("pool-")] == [".so"]
