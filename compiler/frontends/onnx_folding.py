"""Folding an ONNX graph's shape arithmetic to constants, before torch-mlir sees it.

Exporters and ONNX's function bodies compute shape-like values at run time from `Shape` and `Size` of tensors:
a Split's sizes, a Reshape's target, a ReduceMean's axes. With static shapes they are constants, but torch-mlir
reads only literals: it leaves a ReduceMean whose axes are computed unlowered, lowers a Reshape to a computed
target as `prim.NumToTensor` scalars, and segfaults on a Split whose sizes are computed. So a node of a few cheap,
deterministic ops whose inputs are known (small integer initializers and Constant nodes, the shape of a tensor
that ONNX's shape inference knows fully) and whose outputs are small integer or boolean tensors is evaluated with
onnx's reference implementation and replaced by a Constant node of the same name. Float computations stay: they
are data, which the compiled program computes in its own precision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

FOLD_LIMIT = 1024
"""Fold only values this small: the shape arithmetic of exported models, not data."""

FOLDABLE = frozenset(
    {
        "Abs", "Add", "And", "Cast", "Concat", "ConstantOfShape", "Div", "Equal", "Expand", "Gather", "Greater",
        "Identity", "Less", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range", "ReduceProd", "Reshape",
        "Shape", "Size", "Slice", "Squeeze", "Sub", "Unsqueeze", "Where",
    }
)  # fmt: skip
"""The ops folded: shape arithmetic, each evaluated by onnx's reference implementation."""

_EVALUATED = FOLDABLE | {"Constant"}

_INTEGER_TYPES = frozenset(
    {
        TensorProto.BOOL, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
        TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
    }
)  # fmt: skip

_DEFAULT_DOMAINS = ("", "ai.onnx")


def fold_shape_arithmetic(model: onnx.ModelProto) -> bool:
    """Replaces the main graph's foldable nodes (see the module's doc) by Constant nodes, in place; whether any
    was. The caller infers shapes first: a tensor's shape is known from the model's value infos."""
    graph = model.graph
    shapes = _static_shapes(graph)
    known = {t.name: numpy_helper.to_array(t) for t in graph.initializer if _small_integer(t.data_type, t.dims)}
    opsets = {o.domain or "": o.version for o in model.opset_import}
    folded = False
    for index, node in enumerate(graph.node):
        if node.domain not in _DEFAULT_DOMAINS or len(node.output) != 1:
            continue
        value = _value(node, known, shapes, opsets)
        if value is None or value.dtype.kind not in "biu" or value.size > FOLD_LIMIT:
            continue
        known[node.output[0]] = value
        if node.op_type != "Constant":
            constant = helper.make_node(
                "Constant", [], [node.output[0]], name=node.name, value=numpy_helper.from_array(value)
            )
            graph.node[index].CopyFrom(constant)
            folded = True
    if folded:
        _drop_dead_arithmetic(graph)
    return folded


def _drop_dead_arithmetic(graph: onnx.GraphProto) -> None:
    """Removes the shape arithmetic that nothing reads any more (the Shape node whose Size was folded), which
    torch-mlir would import, and gnomon fail to convert where the shape is dynamic."""
    read = {value.name for value in graph.output}
    kept: list[onnx.NodeProto] = []
    for node in reversed(graph.node):
        if node.op_type in _EVALUATED and not any(name in read for name in node.output):
            continue
        kept.append(node)
        read.update(node.input)
        read.update(name for subgraph in _subgraphs(node) for inner in subgraph.node for name in inner.input)
    if len(kept) < len(graph.node):
        del graph.node[:]
        graph.node.extend(reversed(kept))


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The node's subgraphs (`If` branches, `Loop` bodies) and theirs: their nodes may read the outer graph's values."""
    for attribute in node.attribute:
        for subgraph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
            yield subgraph
            for inner in subgraph.node:
                yield from _subgraphs(inner)


def _value(
    node: onnx.NodeProto, known: Mapping[str, np.ndarray], shapes: Mapping[str, list[int]], opsets: dict[str, int]
) -> np.ndarray | None:
    """The node's output when it can be known here, else None."""
    if node.op_type in ("Shape", "Size"):
        shape = shapes.get(node.input[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return np.array(math.prod(shape), np.int64)
        attributes = {a.name: a.i for a in node.attribute}
        # ONNX clamps start and end as Python's slicing does.
        return np.array(shape[attributes.get("start", 0) : attributes.get("end", len(shape))], np.int64)
    if node.op_type not in _EVALUATED or not all(name == "" or name in known for name in node.input):
        return None
    if node.op_type == "Constant" and not _small_constant(node):
        return None
    try:
        with np.errstate(all="ignore"):
            (value,) = ReferenceEvaluator(node, opsets=opsets).run(None, {n: known[n] for n in node.input if n})
    except Exception:  # an invalid node: torch-mlir's import reports it, in its own words
        return None
    return np.asarray(value)


def _small_constant(node: onnx.NodeProto) -> bool:
    """Whether a Constant node holds a small integer tensor (read without decoding a large weight)."""
    for attribute in node.attribute:
        if attribute.name == "value":
            return _small_integer(attribute.t.data_type, attribute.t.dims)
        if attribute.name == "value_int":
            return True
        if attribute.name == "value_ints":
            return len(attribute.ints) <= FOLD_LIMIT
    return False


def _small_integer(data_type: int, dims: Iterable[int]) -> bool:
    return data_type in _INTEGER_TYPES and math.prod(dims) <= FOLD_LIMIT


def _static_shapes(graph: onnx.GraphProto) -> dict[str, list[int]]:
    """The fully known shape of each value that has one (inputs, initializers, inferred values, outputs)."""
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tensor.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[value.name] = [d.dim_value for d in tensor.shape.dim]
    return shapes
