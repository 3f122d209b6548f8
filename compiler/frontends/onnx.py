"""The ONNX frontend: an `.onnx` file to the torch dialect, through torch-mlir.

Stages: load and validate; name anonymous nodes (locations are node names); apply
`--input-shape` overrides (`_follow_batch`: reshapes that spell out a batch of 1 follow a new batch
size); upgrade old opsets (torch-mlir's ONNX lowerings reject e.g.
opset-9 MaxPool and BatchNormalization); infer shapes with data propagation; import
with torch-mlir's `onnx_importer`; lower `onnx.*` ops to `torch.aten.*` and canonicalize,
which folds constant shape arithmetic (ConstantOfShape becomes a splat literal) without
decomposing conv, batch norm or pooling. ONNX ops torch-mlir has no lowering for stay
`torch.operator {name = "onnx.Foo"}`, for the torch-to-graph conversion to report.
"""

# torch-mlir's MLIR bindings are a C extension without type stubs: pyright cannot see their names.
# pyright: reportAttributeAccessIssue=false, reportUnknownParameterType=false

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper, shape_inference, version_converter
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras import onnx_importer
from torch_mlir.passmanager import PassManager

from gnomon.errors import InputShapeError, ModelLoadError
from gnomon.frontends.imported import ImportedModel
from gnomon.frontends.mlir_text import to_xdsl

MIN_OPSET = 17
"""Older default-domain opsets are upgraded to this one before import."""

PIPELINE = "builtin.module(func.func(convert-torch-onnx-to-torch), canonicalize)"


def import_onnx(path: Path, input_shapes: Mapping[str, Sequence[int]] | None = None) -> ImportedModel:
    """Imports an ONNX model; `input_shapes` replaces the shapes of the named inputs."""
    model = _load(path)
    _name_nodes(model.graph)
    initializers = {t.name for t in model.graph.initializer}
    # Old exporters list weights as graph inputs too; only the others are model inputs.
    inputs = [value for value in model.graph.input if value.name not in initializers]
    if input_shapes:
        _follow_batch(model, inputs, input_shapes)
        _override_shapes(path, model.graph, inputs, input_shapes)
    model, upgrade_error = _upgrade(model)
    try:
        model = shape_inference.infer_shapes(model, data_prop=True)
    except (onnx.shape_inference.InferenceError, ValueError) as e:
        raise ModelLoadError(f"{path}: ONNX shape inference failed: {_first_line(e)}") from e
    module = _import(path, model, upgrade_error)
    return ImportedModel(
        module=to_xdsl(module),
        source=path.name,
        input_names=[value.name for value in inputs],
        output_names=[value.name for value in model.graph.output],
        kind="onnx",
        input_dim_names=[_dim_params(value) for value in inputs],
    )


def _dim_params(value: onnx.ValueInfoProto) -> tuple[str, ...]:
    """The symbolic name of each dim of an input (`dim_param`, e.g. "batch"); "" for a sized dim."""
    dims = value.type.tensor_type.shape.dim
    return tuple(d.dim_param if d.HasField("dim_param") else "" for d in dims)


def _load(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise ModelLoadError(f"no such file: {path}")
    try:
        model = onnx.load(path)
    except DecodeError as e:
        raise ModelLoadError(f"{path} is not a valid ONNX model: {_first_line(e)}") from e
    # Arbitrary bytes can decode as a protobuf with no graph at all.
    if not model.HasField("graph"):
        raise ModelLoadError(f"{path} is not a valid ONNX model: it has no graph")
    return model


def _name_nodes(graph: onnx.GraphProto) -> None:
    """Names anonymous nodes `OpType_<index>`, in subgraphs too, so every location names a node."""
    for index, node in enumerate(graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"
        for attribute in node.attribute:
            if attribute.HasField("g"):
                _name_nodes(attribute.g)
            for subgraph in attribute.graphs:
                _name_nodes(subgraph)


def _follow_batch(
    model: onnx.ModelProto, inputs: Sequence[onnx.ValueInfoProto], input_shapes: Mapping[str, Sequence[int]]
) -> None:
    """When an override changes an input's batch of 1, a Reshape whose constant target starts with that 1 (most
    exporters write a flatten as Reshape(x, [1, -1]) at batch 1) gets 0 there instead: ONNX's "copy the input's
    dim". Where the reshape's input has a dim 0 of 1 in the file, 0 and 1 mean the same in the file, so this only
    changes what a new batch does: the batch follows through, as it would have with a batch-polymorphic export.
    A target shared with another op, or under `allowzero`, is left alone; its reshape then reports the mismatch."""
    rebatched = any(
        name in input_shapes and dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1
        and list(input_shapes[name][:1]) != [1]
        for value in inputs
        for name, dims in [(value.name, value.type.tensor_type.shape.dim)]
    )  # fmt: skip
    if not rebatched:
        return
    graph = model.graph
    inferred = shape_inference.infer_shapes(model).graph
    first_dims: dict[str, int] = {}
    for value in (*inferred.input, *inferred.value_info, *inferred.output):
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value"):
            first_dims[value.name] = dims[0].dim_value
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    for target in graph.initializer:
        if target.data_type != onnx.TensorProto.INT64 or len(target.dims) != 1 or target.name not in users:
            continue  # not a reshape target: never decode a weight
        shape = numpy_helper.to_array(target).copy()
        if shape.size == 0 or shape[0] != 1:
            continue
        follows = [
            node.op_type == "Reshape" and list(node.input[1:2]) == [target.name] and node.input[0] != target.name
            and first_dims.get(node.input[0]) == 1 and not any(a.name == "allowzero" and a.i for a in node.attribute)
            for node in users[target.name]
        ]  # fmt: skip
        if all(follows):
            shape[0] = 0
            target.CopyFrom(numpy_helper.from_array(shape, target.name))


def _override_shapes(
    path: Path,
    graph: onnx.GraphProto,
    inputs: Sequence[onnx.ValueInfoProto],
    input_shapes: Mapping[str, Sequence[int]],
) -> None:
    by_name = {value.name: value for value in inputs}
    for name, dims in input_shapes.items():
        value = by_name.get(name)
        if value is None:
            names = ", ".join(by_name)
            raise InputShapeError(f"--input-shape names no input '{name}' of {path}; inputs are: {names}")
        tensor_type = value.type.tensor_type
        rank = len(tensor_type.shape.dim)
        if tensor_type.HasField("shape") and rank != len(dims):
            spelled = "x".join(str(d) for d in dims)
            raise InputShapeError(
                f"--input-shape {name}={spelled} has rank {len(dims)} but input '{name}' of {path} has rank {rank}"
            )
        tensor_type.shape.ClearField("dim")
        for d in dims:
            tensor_type.shape.dim.add().dim_value = d
    # Shapes recorded for the old input shapes would contradict the new ones.
    graph.ClearField("value_info")
    for output in graph.output:
        output.type.tensor_type.ClearField("shape")


def _upgrade(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str | None]:
    """The model at `MIN_OPSET` or above, or the original and why upgrading failed."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), MIN_OPSET)
    if opset >= MIN_OPSET:
        return model, None
    try:
        return version_converter.convert_version(model, MIN_OPSET), None
    except Exception as e:  # the converter raises bare RuntimeErrors and C++ errors alike
        return model, f"upgrading it from opset {opset} to {MIN_OPSET} failed too: {_first_line(e)}"


def _import(path: Path, model: onnx.ModelProto, upgrade_error: str | None) -> ir.Module:
    """torch-mlir's import and ONNX-to-torch lowering; its diagnostics become one ModelLoadError."""
    context = ir.Context()
    torch_d.register_dialect(context)
    try:
        # The importer warns about values without types; only real failures matter here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = onnx_importer.ModelInfo(model)
            module = info.create_module(context=context)
            onnx_importer.NodeImporter.define_function(info.main_graph, module.operation).import_all()
        with context:
            PassManager.parse(PIPELINE).run(module.operation)
    except ir.MLIRError as e:
        diagnostic = e.error_diagnostics[0] if e.error_diagnostics else None
        where = f"{diagnostic.location}: {diagnostic.message}" if diagnostic is not None else e.message
        raise ModelLoadError(_failure(path, _first_line(where), upgrade_error)) from e
    except (onnx_importer.OnnxImportError, NotImplementedError, ValueError, KeyError) as e:
        raise ModelLoadError(_failure(path, _first_line(e), upgrade_error)) from e
    return module


def _failure(path: Path, reason: str, upgrade_error: str | None) -> str:
    message = f"{path}: torch-mlir cannot import the model: {reason}"
    return f"{message} ({upgrade_error})" if upgrade_error is not None else message


def _first_line(error: Exception | str) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
