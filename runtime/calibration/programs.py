"""Graph programs for the calibration, built with the graph dialect's op builders.

A `Program` is one `func.func @main` on f32 tensors; the functions below append one graph op (or the few ops of
one fused kernel) to it, typed by the op's own shape rule, and name every value as a reader of the IR would.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr, TensorType, f32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from gnomon.dialects.graph.base import GraphOperation, bool_attr, f64_attr, i64_array, i64_attr
from gnomon.dialects.graph.elementwise import AddOp, DivOp, MulOp, PowOp, ReluOp
from gnomon.dialects.graph.embedding import EmbeddingBagOp, EmbeddingOp
from gnomon.dialects.graph.grad import EmbeddingBagGradOp, MaxPoolGradOp
from gnomon.dialects.graph.linalg import LinearOp, MatmulOp
from gnomon.dialects.graph.nn import (
    AttentionOp,
    AvgPoolOp,
    BatchNormTrainOp,
    ConvOp,
    GlobalAvgPoolOp,
    LayerNormOp,
    MaxPoolOp,
)
from gnomon.dialects.graph.tensor import ConcatOp, ConstantOp, SliceOp, TransposeOp

__all__ = [
    "Program",
    "Shape",
    "affine_relu",
    "attention",
    "avg_pool",
    "concat",
    "conv",
    "embedding",
    "embedding_bag",
    "global_avg_pool",
    "layer_norm",
    "linear",
    "lrn_scale",
    "matmul",
    "max_pool",
    "same_shape",
    "slice_columns",
    "transpose",
]

Shape = tuple[int, ...]


def _tensor(dims: Sequence[int]) -> TensorType[Attribute]:
    return TensorType(f32, list(dims))


def _shape(value: SSAValue) -> Shape:
    value_type = value.type
    assert isinstance(value_type, TensorType)
    return tuple(value_type.get_shape())


class Program:
    """One `func.func @main` being built: its arguments, its ops, and the values it returns."""

    def __init__(self) -> None:
        self.block = Block()
        self.results: list[SSAValue] = []

    def argument(self, name: str, dims: Shape) -> SSAValue:
        value = self.block.insert_arg(_tensor(dims), len(self.block.args))
        value.name_hint = name
        return value

    def add(self, op: Operation, name: str) -> SSAValue:
        """Append `op`; its one result is named `name`."""
        self.block.add_op(op)
        op.results[0].name_hint = name
        return op.results[0]

    def inferred(
        self,
        name: str,
        op_type: type[GraphOperation],
        operands: Sequence[SSAValue | Sequence[SSAValue]],
        properties: dict[str, Attribute] | None = None,
    ) -> SSAValue:
        """Append an `op_type` on `operands`, its result typed by the op's shape rule (`infer_result_types`)."""
        properties = properties or {}
        probe = op_type.build(operands=operands, result_types=[_tensor(())], properties=properties)
        result_types = probe.infer_result_types()
        probe.erase()
        return self.add(op_type.build(operands=operands, result_types=result_types, properties=properties), name)

    def module(self) -> ModuleOp:
        """The module of `@main`, returning `results`; the program is spent."""
        types = ([arg.type for arg in self.block.args], [result.type for result in self.results])
        self.block.add_op(func.ReturnOp(*self.results))
        return ModuleOp([func.FuncOp("main", types, Region(self.block))])


def same_shape(
    p: Program, name: str, op_type: type[GraphOperation], x: SSAValue, properties: dict[str, Attribute] | None = None
) -> SSAValue:
    """An op whose result has its input's shape: an activation, a softmax."""
    return p.add(op_type.build(operands=[x], result_types=[x.type], properties=properties or {}), name)


def linear(p: Program, name: str, x: SSAValue, w: SSAValue, b: SSAValue) -> SSAValue:
    return p.inferred(name, LinearOp, [x, w, [b]])


def matmul(p: Program, name: str, a: SSAValue, b: SSAValue) -> SSAValue:
    return p.inferred(name, MatmulOp, [a, b])


def slice_columns(p: Program, name: str, x: SSAValue, start: int, end: int) -> SSAValue:
    """Columns `start` to `end` of `x` along its last dim, whole along the others: a strided copy, not a view."""
    dims = _shape(x)
    properties: dict[str, Attribute] = {
        "starts": i64_array([0] * (len(dims) - 1) + [start]),
        "ends": i64_array([*dims[:-1], end]),
        "steps": i64_array([1] * len(dims)),
    }
    return p.inferred(name, SliceOp, [x], properties)


def conv(
    p: Program, name: str, x: SSAValue, w: SSAValue, stride: int, pad: int, groups: int = 1, layout: str | None = None
) -> SSAValue:
    properties: dict[str, Attribute] = {
        "strides": i64_array([stride] * 2),
        "pads": i64_array([pad] * 4),
        "dilations": i64_array([1, 1]),
        "groups": i64_attr(groups),
    }
    if layout is not None:
        properties["layout"] = StringAttr(layout)
    return p.inferred(name, ConvOp, [x, w, []], properties)


def max_pool(p: Program, name: str, x: SSAValue, kernel: Shape, stride: int, pad: int) -> SSAValue:
    return p.inferred(name, MaxPoolOp, [x], _max_pool_properties(kernel, stride, pad))


def _max_pool_properties(kernel: Shape, stride: int, pad: int) -> dict[str, Attribute]:
    rank = len(kernel)
    return {
        "kernel": i64_array(kernel),
        "strides": i64_array([stride] * rank),
        "pads": i64_array([pad] * 2 * rank),
        "dilations": i64_array([1] * rank),
        "ceil_mode": bool_attr(False),
    }


def avg_pool(
    p: Program, name: str, x: SSAValue, kernel: Shape, stride: int, pad: int, count_include_pad: bool
) -> SSAValue:
    rank = len(kernel)
    properties: dict[str, Attribute] = {
        "kernel": i64_array(kernel),
        "strides": i64_array([stride] * rank),
        "pads": i64_array([pad] * 2 * rank),
        "count_include_pad": bool_attr(count_include_pad),
        "ceil_mode": bool_attr(False),
    }
    return p.inferred(name, AvgPoolOp, [x], properties)


def global_avg_pool(p: Program, name: str, x: SSAValue) -> SSAValue:
    return p.inferred(name, GlobalAvgPoolOp, [x])


def transpose(p: Program, name: str, x: SSAValue, permutation: Shape) -> SSAValue:
    return p.inferred(name, TransposeOp, [x], {"permutation": i64_array(permutation)})


def concat(p: Program, name: str, xs: Sequence[SSAValue]) -> SSAValue:
    return p.inferred(name, ConcatOp, [xs], {"axis": i64_attr(1)})


def layer_norm(p: Program, name: str, x: SSAValue, gamma: SSAValue, beta: SSAValue) -> SSAValue:
    properties: dict[str, Attribute] = {"axis": i64_attr(1), "epsilon": f64_attr(1e-5)}
    op = LayerNormOp.build(operands=[x, [gamma, beta]], result_types=[x.type], properties=properties)
    return p.add(op, name)


def attention(p: Program, name: str, q: SSAValue, k: SSAValue, v: SSAValue) -> SSAValue:
    """softmax(q kᵀ / sqrt(E)) v, unmasked: ATen's fused attention."""
    properties: dict[str, Attribute] = {"scale": f64_attr(_shape(q)[-1] ** -0.5), "is_causal": bool_attr(False)}
    return p.inferred(name, AttentionOp, [q, k, v, []], properties)


def embedding_bag(p: Program, name: str, table: SSAValue, bags: int, pooling: int) -> SSAValue:
    """Sum bags of `pooling` rows each, their indices distinct rows spread over the table, as a recommender's sparse
    features are (a lowered kernel receives its indices as an argument, so its model assumes them distinct)."""
    indices, offsets = _bags(p, name, _shape(table)[0], bags, pooling)
    properties: dict[str, Attribute] = {"mode": StringAttr("sum"), "include_last_offset": bool_attr(False)}
    return p.inferred(name, EmbeddingBagOp, [table, indices, offsets, []], properties)


def embedding_bag_grad(p: Program, name: str, dy: SSAValue, rows: int, pooling: int) -> SSAValue:
    """The dense gradient of a table of `rows` rows from bags of `pooling` distinct rows each (as `embedding_bag`
    spreads them): the table zeroed, then each bag's gradient added into its rows."""
    indices, offsets = _bags(p, name, rows, _shape(dy)[0], pooling)
    properties: dict[str, Attribute] = {"mode": StringAttr("sum"), "rows": i64_attr(rows)}
    return p.inferred(name, EmbeddingBagGradOp, [dy, indices, offsets, []], properties)


def _bags(p: Program, name: str, rows: int, bags: int, pooling: int) -> tuple[SSAValue, SSAValue]:
    """Constant indices and offsets of `bags` bags of `pooling` distinct rows each, spread over `rows` rows."""
    lookups = bags * pooling
    spread = [i * 7919 % rows for i in range(lookups)]
    indices = _constant(p, f"{name}_i", DenseIntOrFPElementsAttr.from_list(TensorType(i64, [lookups]), spread))
    starts = [b * pooling for b in range(bags)]
    offsets = _constant(p, f"{name}_o", DenseIntOrFPElementsAttr.from_list(TensorType(i64, [bags]), starts))
    return indices, offsets


def batch_norm_train(p: Program, name: str, x: SSAValue, scale: SSAValue, bias: SSAValue) -> SSAValue:
    """Batch norm with the batch's statistics (training mode): its normalized output."""
    properties: dict[str, Attribute] = {"epsilon": f64_attr(1e-5), "momentum": f64_attr(0.1)}
    channels = _tensor((_shape(x)[1],))
    op = BatchNormTrainOp.build(operands=[x, scale, bias], result_types=[x.type, channels, channels],
                                properties=properties)  # fmt: skip
    return p.add(op, name)


def max_pool_grad(p: Program, name: str, dy: SSAValue, x: SSAValue, kernel: Shape, stride: int, pad: int) -> SSAValue:
    """A max pool's input gradient: each window's gradient added at its maximum."""
    return p.inferred(name, MaxPoolGradOp, [dy, x], _max_pool_properties(kernel, stride, pad))


def embedding(p: Program, name: str, table: SSAValue, lookups: int) -> SSAValue:
    """`lookups` rows of `table`, spread over it."""
    rows = _shape(table)[0]
    spread = [i * 7919 % rows for i in range(lookups)]
    indices = _constant(p, f"{name}_i", DenseIntOrFPElementsAttr.from_list(TensorType(i64, [lookups]), spread))
    return p.inferred(name, EmbeddingOp, [table, indices])


def affine_relu(p: Program, name: str, x: SSAValue, scale: SSAValue, shift: SSAValue) -> SSAValue:
    """relu(x * scale + shift) with per-channel operands: an unfolded batch norm, one generated kernel."""
    scaled = p.add(MulOp.build(operands=[x, scale], result_types=[x.type]), f"{name}_m")
    shifted = p.add(AddOp.build(operands=[scaled, shift], result_types=[x.type]), f"{name}_a")
    return p.add(ReluOp.build(operands=[shifted], result_types=[x.type]), name)


def lrn_scale(p: Program, name: str, pooled: SSAValue, x: SSAValue) -> SSAValue:
    """x / (k + alpha * pooled)^beta: a local response norm after its channel pool (AlexNet's k, alpha and beta,
    constants, so that pow's base is positive as there), one generated kernel whose pow is a libm call per element."""
    alpha, k, beta = (
        _constant(p, f"{name}_{c}", DenseIntOrFPElementsAttr.from_list(TensorType(f32, []), [value]))
        for c, value in (("a", 1e-4), ("c", 2.0), ("b", 0.75))
    )
    scaled = p.add(MulOp.build(operands=[pooled, alpha], result_types=[x.type]), f"{name}_m")
    base = p.add(AddOp.build(operands=[scaled, k], result_types=[x.type]), f"{name}_k")
    power = p.add(PowOp.build(operands=[base, beta], result_types=[x.type]), f"{name}_w")
    return p.add(DivOp.build(operands=[x, power], result_types=[x.type]), name)


def weight(p: Program, name: str, dims: Shape) -> SSAValue:
    """A constant float32 weight (a splat): the runtime knows it holds the same values every run, so that a
    convolution's is packed once, as a model's is (`gnomon.cost.convs.packs_weight`)."""
    return _constant(p, name, DenseIntOrFPElementsAttr.from_list(TensorType(f32, list(dims)), [0.01]))


def _constant(p: Program, name: str, value: DenseIntOrFPElementsAttr) -> SSAValue:
    return p.add(ConstantOp.build(properties={"value": value}, result_types=[value.type]), name)
