"""The graph dialect's shape rules against their references: PyTorch for the NN ops, NumPy and Python elsewhere.

Each property builds an op on values of the drawn shapes and compares `infer_result_types()` with
the shape the reference computes; where the reference rejects the operands, the rule must raise a
`VerifyException`. Shapes are small, so the real kernels run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import DYNAMIC_INDEX, FloatAttr, TensorType, f32, f64, i1, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph import embedding, linalg, nn, reduce, tensor
from gnomon.dialects.graph.base import GraphOperation, bool_attr, i64_array, i64_attr, str_attr

Shape = tuple[int, ...]
DYN = DYNAMIC_INDEX

shape_rule = settings(max_examples=150, deadline=None)
"""Enough examples to meet the corner cases (ceil mode, empty windows, 1-d matmul operands) in a few seconds."""


def value(shape: Sequence[int], dtype: Attribute = f32) -> SSAValue:
    return create_ssa_value(TensorType(dtype, shape))


def build(
    op_class: type[GraphOperation],
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    properties: dict[str, Attribute] | None = None,
    result_types: Sequence[Attribute | Sequence[Attribute]] = (TensorType(f32, []),),
) -> GraphOperation:
    """The op on these operands; the result types only matter to ops that read them (cast, reshape, expand)."""
    return op_class.build(operands=list(operands), properties=properties or {}, result_types=list(result_types))


def inferred_shape(op: GraphOperation) -> Shape | None:
    """The single result shape the op's rule infers, or None when the rule rejects the operands."""
    try:
        (result,) = op.infer_result_types()
    except VerifyException:
        return None
    return tuple(result.get_shape())


def reference_shape(compute: Callable[[], torch.Tensor | np.ndarray]) -> Shape | None:
    """The shape of `compute()`, or None when the reference rejects its arguments."""
    try:
        return tuple(compute().shape)
    except (RuntimeError, ValueError, IndexError):
        return None


def torch_tensor(shape: Sequence[int]) -> torch.Tensor:
    """A small CPU tensor: the `meta` device skips some of the size checks the real kernels make."""
    return torch.zeros(tuple(shape))


def refines(dynamic: Shape, static: Shape) -> bool:
    """Whether the shape inferred with some `?` operand dims is compatible with the fully static one."""
    return len(dynamic) == len(static) and all(d in (s, DYN) for d, s in zip(dynamic, static, strict=True))


def erase(shape: Shape, mask: Sequence[bool]) -> Shape:
    return tuple(DYN if hide else d for d, hide in zip(shape, mask, strict=True))


small_dims = st.integers(1, 4)


def spatial_lists(count: int, low: int, high: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(low, high), min_size=count, max_size=count)


# ---- convolutions ----


@dataclass(frozen=True)
class ConvCase:
    spatial: int
    batch: int
    groups: int
    in_per_group: int
    out_per_group: int
    sizes: list[int]
    kernel: list[int]
    strides: list[int]
    padding: list[int]
    dilations: list[int]
    hidden: list[bool]
    """Which input dims the dynamic variant of the case turns into `?`."""

    def input_shape(self) -> Shape:
        return (self.batch, self.groups * self.in_per_group, *self.sizes)

    def properties(self) -> dict[str, Attribute]:
        return {
            "strides": i64_array(self.strides),
            "pads": i64_array([*self.padding, *self.padding]),
            "dilations": i64_array(self.dilations),
            "groups": i64_attr(self.groups),
        }


@st.composite
def conv_cases(draw: st.DrawFn) -> ConvCase:
    spatial = draw(st.integers(1, 3))
    return ConvCase(
        spatial=spatial,
        batch=draw(st.integers(1, 2)),
        groups=draw(st.integers(1, 3)),
        in_per_group=draw(st.integers(1, 2)),
        out_per_group=draw(st.integers(1, 2)),
        sizes=draw(spatial_lists(spatial, 1, 9)),
        kernel=draw(spatial_lists(spatial, 1, 4)),
        strides=draw(spatial_lists(spatial, 1, 3)),
        padding=draw(spatial_lists(spatial, 0, 2)),
        dilations=draw(spatial_lists(spatial, 1, 3)),
        hidden=draw(st.lists(st.booleans(), min_size=spatial + 2, max_size=spatial + 2)),
    )


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@shape_rule
@given(conv_cases(), st.booleans())
def test_conv_shape_matches_torch(case: ConvCase, with_bias: bool) -> None:
    weight = (case.groups * case.out_per_group, case.in_per_group, *case.kernel)

    def conv(x: Shape) -> GraphOperation:
        bias = [value([weight[0]])] if with_bias else []
        return build(nn.ConvOp, [value(x), value(weight), bias], case.properties())

    expected = reference_shape(
        lambda: CONV[case.spatial](
            torch_tensor(case.input_shape()), torch_tensor(weight),
            stride=case.strides, padding=case.padding, dilation=case.dilations, groups=case.groups,
        )
    )  # fmt: skip
    assert inferred_shape(conv(case.input_shape())) == expected
    if expected is not None:
        dynamic = inferred_shape(conv(erase(case.input_shape(), case.hidden)))
        assert dynamic is not None
        assert refines(dynamic, expected)


@shape_rule
@given(conv_cases(), st.booleans(), st.data())
def test_conv_transpose_shape_matches_torch(case: ConvCase, with_bias: bool, data: st.DataObject) -> None:
    # torch requires output_padding < max(stride, dilation) in every dim.
    limits = [max(s, d) for s, d in zip(case.strides, case.dilations, strict=True)]
    output_padding = [data.draw(st.integers(0, limit - 1)) for limit in limits]
    weight = (case.groups * case.in_per_group, case.out_per_group, *case.kernel)
    bias = [value([case.groups * case.out_per_group])] if with_bias else []
    properties = case.properties() | {"output_padding": i64_array(output_padding)}
    op = build(nn.ConvTransposeOp, [value(case.input_shape()), value(weight), bias], properties)
    expected = reference_shape(
        lambda: CONV_TRANSPOSE[case.spatial](
            torch_tensor(case.input_shape()), torch_tensor(weight), stride=case.strides, padding=case.padding,
            output_padding=output_padding, groups=case.groups, dilation=case.dilations,
        )
    )  # fmt: skip
    # torch's kernels disagree on an empty output (the plain one rejects it, the grouped one returns
    # an empty tensor); the graph dialect always rejects it, as torch's convolution does.
    if expected is not None and 0 in expected[2:]:
        expected = None
    assert inferred_shape(op) == expected


# ---- pooling ----


@dataclass(frozen=True)
class PoolCase:
    spatial: int
    shape: Shape
    kernel: list[int]
    strides: list[int]
    padding: list[int]
    dilations: list[int]
    ceil_mode: bool


@st.composite
def pool_cases(draw: st.DrawFn) -> PoolCase:
    spatial = draw(st.integers(1, 3))
    kernel = draw(spatial_lists(spatial, 1, 4))
    return PoolCase(
        spatial=spatial,
        shape=(draw(st.integers(1, 2)), draw(st.integers(1, 3)), *draw(spatial_lists(spatial, 1, 9))),
        kernel=kernel,
        strides=draw(spatial_lists(spatial, 1, 3)),
        # torch requires padding <= kernel / 2.
        padding=[draw(st.integers(0, k // 2)) for k in kernel],
        dilations=draw(spatial_lists(spatial, 1, 2)),
        ceil_mode=draw(st.booleans()),
    )


MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@shape_rule
@given(pool_cases())
def test_max_pool_shape_matches_torch(case: PoolCase) -> None:
    properties = {
        "kernel": i64_array(case.kernel),
        "strides": i64_array(case.strides),
        "pads": i64_array([*case.padding, *case.padding]),
        "dilations": i64_array(case.dilations),
        "ceil_mode": bool_attr(case.ceil_mode),
    }
    op = build(nn.MaxPoolOp, [value(case.shape)], properties)
    expected = reference_shape(
        lambda: MAX_POOL[case.spatial](
            torch_tensor(case.shape), case.kernel, case.strides, case.padding, case.dilations, ceil_mode=case.ceil_mode
        )
    )
    assert inferred_shape(op) == expected


@shape_rule
@given(pool_cases(), st.booleans())
def test_avg_pool_shape_matches_torch(case: PoolCase, count_include_pad: bool) -> None:
    # avg_pool3d alone also rejects a kernel larger than the unpadded input; ONNX and the 1-d/2-d ops do not.
    assume(case.spatial != 3 or all(k <= d for k, d in zip(case.kernel, case.shape[2:], strict=True)))
    properties = {
        "kernel": i64_array(case.kernel),
        "strides": i64_array(case.strides),
        "pads": i64_array([*case.padding, *case.padding]),
        "ceil_mode": bool_attr(case.ceil_mode),
        "count_include_pad": bool_attr(count_include_pad),
    }
    op = build(nn.AvgPoolOp, [value(case.shape)], properties)
    expected = reference_shape(
        lambda: AVG_POOL[case.spatial](
            torch_tensor(case.shape), case.kernel, case.strides, case.padding, case.ceil_mode, count_include_pad
        )
    )
    assert inferred_shape(op) == expected


# ---- broadcasting and matrix products ----

broadcast_shapes = st.lists(st.sampled_from([1, 1, 2, 3]), max_size=4).map(tuple)


@shape_rule
@given(broadcast_shapes, broadcast_shapes, st.data())
def test_broadcast_matches_numpy(lhs: Shape, rhs: Shape, data: st.DataObject) -> None:
    try:
        expected: Shape | None = tuple(np.broadcast_shapes(lhs, rhs))
    except ValueError:
        expected = None
    assert inferred_shape(build(ew.AddOp, [value(lhs), value(rhs)])) == expected
    compare = build(ew.LtOp, [value(lhs), value(rhs)])
    if expected is None:
        return
    (compare_type,) = compare.infer_result_types()
    assert compare_type == TensorType(i1, expected)
    hidden = data.draw(st.lists(st.booleans(), min_size=len(lhs), max_size=len(lhs)))
    dynamic = inferred_shape(build(ew.AddOp, [value(erase(lhs, hidden)), value(rhs)]))
    assert dynamic is not None
    assert refines(dynamic, expected)


matmul_shapes = st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=4).map(tuple)


@shape_rule
@given(matmul_shapes, matmul_shapes)
def test_matmul_shape_matches_numpy(lhs: Shape, rhs: Shape) -> None:
    expected = reference_shape(lambda: np.matmul(np.zeros(lhs), np.zeros(rhs)))
    assert inferred_shape(build(linalg.MatmulOp, [value(lhs), value(rhs)])) == expected


@shape_rule
@given(matmul_shapes, st.integers(1, 3), st.integers(1, 3), st.booleans())
def test_linear_shape_matches_torch(x: Shape, in_features: int, out_features: int, with_bias: bool) -> None:
    weight = (out_features, in_features)
    op = build(linalg.LinearOp, [value(x), value(weight), [value([out_features])] if with_bias else []])
    bias = torch_tensor([out_features]) if with_bias else None
    expected = reference_shape(lambda: F.linear(torch_tensor(x), torch_tensor(weight), bias))
    assert inferred_shape(op) == expected


# ---- reductions ----

reduce_shapes = st.lists(small_dims, max_size=4).map(tuple)


@shape_rule
@given(reduce_shapes, st.data(), st.booleans())
def test_reductions_match_numpy(shape: Shape, data: st.DataObject, keepdims: bool) -> None:
    rank = len(shape)
    distinct_axes = st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank)
    axes = data.draw(distinct_axes) if rank else []
    expected = np.sum(np.empty(shape), axis=tuple(axes) if axes else None, keepdims=keepdims).shape
    properties = {"axes": i64_array(axes), "keepdims": bool_attr(keepdims)}
    for op_class in (reduce.ReduceSumOp, reduce.ReduceMeanOp, reduce.ReduceMaxOp, reduce.ReduceMinOp):
        assert inferred_shape(build(op_class, [value(shape)], properties)) == expected


@shape_rule
@given(reduce_shapes.filter(bool), st.data(), st.booleans())
def test_argmax_matches_torch(shape: Shape, data: st.DataObject, keepdims: bool) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    expected = tuple(torch.argmax(torch_tensor(shape), dim=axis, keepdim=keepdims).shape)
    properties = {"axis": i64_attr(axis), "keepdims": bool_attr(keepdims)}
    (result,) = build(reduce.ArgmaxOp, [value(shape)], properties).infer_result_types()
    assert result == TensorType(i64, expected)


def test_reduction_rejects_repeated_axes() -> None:
    op = build(reduce.ReduceSumOp, [value([2, 3])], {"axes": i64_array([1, -1]), "keepdims": bool_attr(False)})
    with pytest.raises(VerifyException, match=r"axes \[1, -1\] repeat a dim"):
        op.infer_result_types()


# ---- data movement ----

optional_bound = st.none() | st.integers(-10, 10)
optional_step = st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3])


@shape_rule
@given(st.lists(st.tuples(st.integers(0, 8), optional_bound, optional_bound, optional_step), min_size=1, max_size=3))
def test_slice_matches_python_slicing(dims: list[tuple[int, int | None, int | None, int | None]]) -> None:
    shape = tuple(size for size, *_ in dims)
    slices = [slice(start, stop, step) for _, start, stop, step in dims]
    bounds = [s.indices(size) for s, size in zip(slices, shape, strict=True)]
    properties = {
        "starts": i64_array([b[0] for b in bounds]),
        "ends": i64_array([b[1] for b in bounds]),
        "steps": i64_array([b[2] for b in bounds]),
    }
    expected = np.empty(shape)[tuple(slices)].shape
    assert inferred_shape(build(tensor.SliceOp, [value(shape)], properties)) == expected


@shape_rule
@given(st.lists(reduce_shapes.filter(bool), min_size=1, max_size=3), st.integers(-4, 3))
def test_concat_matches_numpy(shapes: list[Shape], axis: int) -> None:
    expected = reference_shape(lambda: np.concatenate([np.empty(s) for s in shapes], axis=axis))
    op = build(tensor.ConcatOp, [[value(s) for s in shapes]], {"axis": i64_attr(axis)})
    # NumPy also raises for an axis out of range; the rule must then reject the op too.
    assert inferred_shape(op) == expected


@shape_rule
@given(reduce_shapes, st.lists(st.integers(1, 6), max_size=4), st.data())
def test_reshape_matches_torch(shape: Shape, target: list[int], data: st.DataObject) -> None:
    """One target dim may be `?`, torch's -1: the rule fills it in as torch does, or rejects the op."""
    inferred_dim = data.draw(st.none() | st.integers(0, len(target) - 1)) if target else None
    if inferred_dim is not None:
        target[inferred_dim] = DYN
    expected = reference_shape(lambda: torch.reshape(torch_tensor(shape), [-1 if d == DYN else d for d in target]))
    op = build(tensor.ReshapeOp, [value(shape)], result_types=[TensorType(f32, target)])
    assert inferred_shape(op) == expected


@shape_rule
@given(reduce_shapes.filter(bool), reduce_shapes, st.data())
def test_gather_matches_numpy_take(shape: Shape, indices: Shape, data: st.DataObject) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    expected = np.take(np.empty(shape), np.zeros(indices, dtype=np.int64), axis=axis).shape
    op = build(tensor.GatherOp, [value(shape), value(indices, i64)], {"axis": i64_attr(axis)})
    assert inferred_shape(op) == expected


@shape_rule
@given(reduce_shapes.filter(bool), st.data())
def test_pad_matches_numpy(shape: Shape, data: st.DataObject) -> None:
    pads = data.draw(st.lists(st.integers(0, 3), min_size=2 * len(shape), max_size=2 * len(shape)))
    rank = len(shape)
    expected = np.pad(np.empty(shape), [(pads[i], pads[i + rank]) for i in range(rank)]).shape
    properties = {"pads": i64_array(pads), "mode": str_attr("constant"), "value": FloatAttr(0.0, f64)}
    assert inferred_shape(build(tensor.PadOp, [value(shape)], properties)) == expected


@shape_rule
@given(reduce_shapes, st.data())
def test_tile_matches_numpy(shape: Shape, data: st.DataObject) -> None:
    repeats = data.draw(st.lists(st.integers(1, 3), min_size=len(shape), max_size=len(shape)))
    expected = np.tile(np.empty(shape), repeats).shape if shape else ()
    assert inferred_shape(build(tensor.TileOp, [value(shape)], {"repeats": i64_array(repeats)})) == expected


@shape_rule
@given(broadcast_shapes, broadcast_shapes)
def test_expand_matches_numpy_broadcast_to(shape: Shape, target: Shape) -> None:
    expected = reference_shape(lambda: np.broadcast_to(np.empty(shape), target))
    op = build(tensor.ExpandOp, [value(shape)], result_types=[TensorType(f32, target)])
    assert inferred_shape(op) == expected


@shape_rule
@given(reduce_shapes.filter(bool), st.data())
def test_split_matches_torch(shape: Shape, data: st.DataObject) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    try:
        expected: list[Shape] | None = [tuple(t.shape) for t in torch.split(torch_tensor(shape), sizes, dim=axis)]
    except RuntimeError:
        expected = None
    op = build(tensor.SplitOp, [value(shape)], {"axis": i64_attr(axis), "sizes": i64_array(sizes)}, [[]])
    try:
        inferred: list[Shape] | None = [tuple(t.get_shape()) for t in op.infer_result_types()]
    except VerifyException:
        inferred = None
    assert inferred == expected


@shape_rule
@given(st.integers(1, 6), st.integers(1, 4), st.booleans(), st.sampled_from(["sum", "mean", "max"]))
def test_embedding_bag_matches_torch(indices: int, bags: int, include_last_offset: bool, mode: str) -> None:
    # At least one bag: torch crashes on `mean` over zero bags.
    offsets = bags + include_last_offset
    ids, starts = torch.zeros(indices, dtype=torch.int64), torch.zeros(offsets, dtype=torch.int64)
    expected = F.embedding_bag(ids, torch.zeros(10, 3), starts, mode=mode, include_last_offset=include_last_offset)
    op = build(
        embedding.EmbeddingBagOp,
        [value([10, 3]), value([indices], i64), value([offsets], i64), []],
        {"mode": str_attr(mode), "include_last_offset": bool_attr(include_last_offset)},
    )
    assert inferred_shape(op) == tuple(expected.shape)


# ---- the verifier ----


def test_verifier_rejects_a_result_type_the_rule_does_not_imply() -> None:
    op = build(ew.ReluOp, [value([2, 3])], result_types=[TensorType(f32, [2, 4])])
    with pytest.raises(VerifyException, match=r"result type tensor<2x4xf32> does not match inferred type tensor<2x3xf"):
        op.verify()


def test_verifier_accepts_dynamic_result_dims() -> None:
    properties = {
        "strides": i64_array([1, 1]),
        "pads": i64_array([0, 0, 0, 0]),
        "dilations": i64_array([1, 1]),
        "groups": i64_attr(1),
    }
    operands = [value([1, 3, 8, 8]), value([4, 3, 3, 3]), []]
    build(nn.ConvOp, operands, properties, [TensorType(f32, [DYN, 4, DYN, 6])]).verify()
