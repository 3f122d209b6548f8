"""The ONNX frontend: an `.onnx` file to the torch dialect, through torch-mlir.

Stages: load and validate (an opset newer than onnx knows is refused); name anonymous nodes (locations
are node names); apply
`--input-shape` overrides (`_follow_batch`: reshapes that spell out a batch of 1 follow a new batch
size); upgrade old opsets (torch-mlir's ONNX lowerings reject e.g.
opset-9 MaxPool and BatchNormalization); infer shapes with data propagation; fold shape arithmetic over
static shapes to constants (`onnx_folding`: torch-mlir reads only literals); import
with torch-mlir's `onnx_importer`; lower `onnx.*` ops to `torch.aten.*` and canonicalize,
which folds constant shape arithmetic (ConstantOfShape becomes a splat literal) without
decomposing conv, batch norm or pooling. ONNX ops torch-mlir has no lowering for stay
`torch.operator {name = "onnx.Foo"}` (`com.example.Foo` for a custom domain's), for the
torch-to-graph conversion to convert or report; so do the ops gnomon converts itself (`OWN_LOWERINGS`), which
are held back from the lowering. Import and lowering run in a forked child (`isolation`):
a torch-mlir crash is an error that names the node, found by bisection when the lowering crashed.
"""

# torch-mlir's MLIR bindings are a C extension without type stubs: pyright cannot see their names.
# pyright: reportAttributeAccessIssue=false, reportUnknownParameterType=false

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper, shape_inference, version_converter
from torch_mlir import ir
from torch_mlir.dialects import func as func_d
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras import onnx_importer
from torch_mlir.passmanager import PassManager
from xdsl.dialects.builtin import ModuleOp

from gnomon.errors import ImporterCrashError, InputShapeError, ModelLoadError, UnsupportedOp, UnsupportedOpsError
from gnomon.frontends.imported import ImportedModel
from gnomon.frontends.isolation import Progress, run_isolated
from gnomon.frontends.mlir_text import parse_torch_mlir, to_text
from gnomon.frontends.onnx_folding import fold_shape_arithmetic

MIN_OPSET = 17
"""Older default-domain opsets are upgraded to this one before import."""

PIPELINE = "builtin.module(func.func(convert-torch-onnx-to-torch), canonicalize)"

OWN_LOWERINGS = frozenset({
    # Lowered only in part (ScatterElements without max and min, 2-D Col2Im with symmetric pads, MaxUnpool without
    # output_shape, whose indices torch-mlir takes per channel where ONNX's count across the tensor), failing the
    # whole import on the rest.
    "onnx.Col2Im", "onnx.MaxUnpool", "onnx.ScatterElements",
    # Lowered to torch's quantized tensors (`quantize_per_tensor`, `int_repr`...), which gnomon has no type for;
    # torch-mlir crashes on some (a uint16 QuantizeLinear) and subtracts MatMulInteger's per-row zero point along
    # the wrong axis.
    "onnx.ConvInteger", "onnx.DequantizeLinear", "onnx.DynamicQuantizeLinear", "onnx.MatMulInteger",
    "onnx.QLinearConv", "onnx.QLinearMatMul", "onnx.QuantizeLinear",
    # Lowered to a `prim.Loop` over the steps (and not at all in reverse or both directions), where gnomon has one
    # graph op per layer and direction.
    "onnx.GRU", "onnx.LSTM", "onnx.RNN",
    # Lowered against ONNX's semantics: LpNormalization divides a zero vector by its zero norm (ONNX gives zeros);
    # RotaryEmbedding by the pattern of com.microsoft's op (the importer names both `onnx.RotaryEmbedding`), whose
    # inputs come in another order (the cos cache is read as the position ids) and which needs position ids.
    # Custom-domain ops are renamed before these are held back, so only the default domain's are.
    "onnx.LpNormalization", "onnx.RotaryEmbedding",
    # Lowered through complex tensors (DFT, STFT), or failing the whole import on some attributes (GridSample's
    # cubic and volumetric forms, LpPool's dilations and auto padding).
    "onnx.DFT", "onnx.GridSample", "onnx.LpPool", "onnx.STFT",
    # Lowered only as a counted loop with a runtime trip count (and not at all when the body computes the condition);
    # Scan to a loop that writes each step's output into an empty slice. Both become graph.while.
    "onnx.Loop", "onnx.Scan",
})  # fmt: skip
"""ONNX ops held back from torch-mlir's lowering: torch-to-graph converts them all, with ONNX's semantics. Some
nodes of other ops are held back too (`_kept_node`)."""

_HALF_RANGE = (",f16>", ",bf16>")
"""The endings of the result types of a Range that torch-mlir's lowering rejects (and fails the import on): half
floats, which torch-to-graph folds as ONNX's reference computes them. Range of other types is lowered."""

_HELD = "gnomon.held."
"""The prefix that hides an op of `OWN_LOWERINGS` (or a half-float Range) from torch-mlir's lowering while it runs."""

_LOWERING = "lowering the ONNX ops to torch ops"
"""The child's progress step for `PIPELINE`: a crash in it is bisected to a node."""

_DEFAULT_DOMAINS = ("", "ai.onnx")
"""ONNX's own domain, by its two spellings; any other is a custom domain."""


def _kept_node(node: onnx.NodeProto) -> bool:
    """Whether gnomon converts this node itself though torch-mlir lowers its op in other forms: where that lowering
    would be wrong (SpaceToDepth's opset-28 CRD mode as DCR; MaxPool's indices as torch's, per image plane and into
    the padded input; a dilated AveragePool's ceil mode as padding that count_include_pad counts) or fails the
    whole import (ConvTranspose's asymmetric auto padding)."""
    if node.domain not in _DEFAULT_DOMAINS:
        return False
    attributes = {a.name: a for a in node.attribute}
    if node.op_type == "AveragePool":
        return "dilations" in attributes and any(d != 1 for d in attributes["dilations"].ints)
    if node.op_type == "ConvTranspose":
        return "auto_pad" in attributes and attributes["auto_pad"].s in (b"SAME_UPPER", b"SAME_LOWER")
    if node.op_type == "MaxPool":
        return len(node.output) > 1 and node.output[1] != ""
    if node.op_type == "SpaceToDepth":
        return "mode" in attributes and attributes["mode"].s != b"DCR"
    return False


def _held_name(op: ir.Operation, name: str, kept_nodes: set[tuple[str, str]]) -> str:
    """`name`, or its held form for an op of `OWN_LOWERINGS`, a half-float Range or a node `_kept_node` keeps."""
    half_range = name == "onnx.Range" and len(op.results) == 1 and str(op.results[0].type).endswith(_HALF_RANGE)
    located = _NAME_LOC.match(str(op.location))
    kept = located is not None and (located["name"], name) in kept_nodes
    return _HELD + name if name in OWN_LOWERINGS or half_range or kept else name


def _released_name(_: ir.Operation, name: str) -> str:
    return name.removeprefix(_HELD)


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
    model = _inferred(path, model)
    # Each round's constants may complete shapes that the next round's Shape nodes read.
    while fold_shape_arithmetic(model):
        model = _inferred(path, model)
    _type_flex_attention_modifiers(model)
    return ImportedModel(
        module=_import(path, model, upgrade_error),
        source=path.name,
        input_names=[value.name for value in inputs],
        output_names=[value.name for value in model.graph.output],
        kind="onnx",
        input_dim_names=[_dim_params(value) for value in inputs],
    )


def _inferred(path: Path, model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(model, data_prop=True)
    except (onnx.shape_inference.InferenceError, ValueError) as e:
        raise ModelLoadError(f"{path}: ONNX shape inference failed: {_first_line(e)}") from e


_FLEX_MODIFIERS = ("prob_mod", "score_mod")
"""FlexAttention's subgraph attributes, in the order torch-mlir imports them as regions (by name)."""

_SOFTMAX_PRECISION: dict[int, int] = {
    onnx.TensorProto.FLOAT16: onnx.TensorProto.FLOAT,
    onnx.TensorProto.BFLOAT16: onnx.TensorProto.FLOAT,
}
"""FlexAttention's default softmax precision for an input type: f32 for half precision, else the input's type."""


def _type_flex_attention_modifiers(model: onnx.ModelProto) -> None:
    """Types the modifier subgraphs of FlexAttention (ai.onnx.preview), which ONNX's shape inference leaves
    untyped and torch-mlir then cannot lower: the scores or probabilities they take are (B, Hq, L, S) from Q and K,
    in the softmax's precision, and each subgraph's values are inferred from that. A FlexAttention with one
    modifier gets the other as the identity, so that its converter can tell the regions apart: torch-mlir keeps
    no names for them. A node whose Q and K have unknown dims is left alone."""
    graph = model.graph
    types = {value.name: value.type.tensor_type for value in (*graph.input, *graph.value_info, *graph.output)}
    for node in graph.node:
        graph_type = onnx.AttributeProto.GRAPH
        subgraphs = {a.name: a for a in node.attribute if a.name in _FLEX_MODIFIERS and a.type == graph_type}
        if (node.domain, node.op_type) != ("ai.onnx.preview", "FlexAttention") or not subgraphs:
            continue
        q, k = (types.get(name) for name in node.input[:2])
        if q is None or k is None or len(q.shape.dim) != 4 or len(k.shape.dim) != 4:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in (*q.shape.dim[:3], k.shape.dim[2])]
        if 0 in dims:
            continue
        precision = next((a.i for a in node.attribute if a.name == "softmax_precision"), 0)
        element = precision or _SOFTMAX_PRECISION.get(q.elem_type, q.elem_type)
        for name in _FLEX_MODIFIERS:
            attribute = subgraphs.get(name)
            if attribute is None:
                given, taken = f"{node.name}_{name}_input", f"{node.name}_{name}_output"
                identity = onnx.helper.make_graph(
                    [onnx.helper.make_node("Identity", [given], [taken])],
                    name,
                    [onnx.helper.make_tensor_value_info(given, element, dims)],
                    [onnx.helper.make_tensor_value_info(taken, element, dims)],
                )
                node.attribute.append(onnx.helper.make_attribute(name, identity))
                continue
            _infer_subgraph(model, attribute.g, element, dims)


def _infer_subgraph(model: onnx.ModelProto, subgraph: onnx.GraphProto, element: int, dims: Sequence[int]) -> None:
    """Gives the subgraph's one input the type (`element`, `dims`) and its values the types ONNX infers from it;
    a subgraph whose inference fails (one that reads values of the outer graph) keeps what it had."""
    if len(subgraph.input) != 1:
        return
    subgraph.input[0].CopyFrom(onnx.helper.make_tensor_value_info(subgraph.input[0].name, element, dims))
    alone = onnx.helper.make_model(subgraph, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        inferred = shape_inference.infer_shapes(alone, strict_mode=True, data_prop=True).graph
    except (onnx.shape_inference.InferenceError, ValueError):
        return
    for field in ("value_info", "output"):
        subgraph.ClearField(field)
        getattr(subgraph, field).extend(getattr(inferred, field))


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
    opset, newest = _opset(model), onnx.defs.onnx_opset_version()
    if opset > newest:
        raise ModelLoadError(f"{path} needs ONNX opset {opset}, but the newest that gnomon's onnx knows is {newest}")
    return model


def _opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset (`MIN_OPSET` if it declares none)."""
    return next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), MIN_OPSET)


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
    opset = _opset(model)
    if opset >= MIN_OPSET:
        return model, None
    try:
        return version_converter.convert_version(model, MIN_OPSET), None
    except Exception as e:  # the converter raises bare RuntimeErrors and C++ errors alike
        return model, f"upgrading it from opset {opset} to {MIN_OPSET} failed too: {_first_line(e)}"


def _import(path: Path, model: onnx.ModelProto, upgrade_error: str | None) -> ModuleOp:
    """torch-mlir's import and ONNX-to-torch lowering, in a child process (see `isolation`): a crash there is a
    one-line error naming the node that caused it, and the user's process survives."""
    try:
        text = run_isolated(lambda progress: _import_text(path, model, upgrade_error, progress), str(path))
    except ImporterCrashError as crash:
        if crash.step != _LOWERING:
            raise
        # The lowering is one C++ pass over all nodes: find the one it dies on by bisecting.
        culprit = run_isolated(lambda _: _crashing_node(model), str(path))
        if culprit is None:
            raise
        raise ImporterCrashError(crash.source, crash.what, f"lowering {culprit}", crash.reason) from crash
    return parse_torch_mlir(text)


def _import_text(path: Path, model: onnx.ModelProto, upgrade_error: str | None, progress: Progress) -> str:
    """Runs in the child: the lowered module's text. torch-mlir's diagnostics become one user error."""
    try:
        module = _imported(model, progress)
        progress(_LOWERING)
        with module.context:
            PassManager.parse(PIPELINE).run(module.operation)
        _rename_operators(module, _released_name)
    except ir.MLIRError as e:
        diagnostic = e.error_diagnostics[0] if e.error_diagnostics else None
        if diagnostic is not None and (unsupported := _unlowered(path, model, diagnostic)) is not None:
            raise unsupported from e
        where = f"{diagnostic.location}: {diagnostic.message}" if diagnostic is not None else e.message
        raise ModelLoadError(_failure(path, _first_line(where), upgrade_error)) from e
    except (onnx_importer.OnnxImportError, NotImplementedError, ValueError, KeyError) as e:
        raise ModelLoadError(_failure(path, _first_line(e), upgrade_error)) from e
    progress("printing the imported module")
    return to_text(module)


def _imported(model: onnx.ModelProto, progress: Progress) -> ir.Module:
    """torch-mlir's import of the model, reporting each node before importing it; custom-domain ops are
    renamed `domain.Op` (the importer names every op `onnx.Op`, so `com.example.Relu` would pass for a Relu), and
    the ops of `OWN_LOWERINGS` held back from the lowering."""
    context = ir.Context()
    context.enable_multithreading(False)  # no thread pool to start in a forked child: one function needs none
    torch_d.register_dialect(context)
    # The importer warns about values without types; only real failures matter here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = onnx_importer.ModelInfo(model)
        module = info.create_module(context=context)
        importer = onnx_importer.NodeImporter.define_function(info.main_graph, module.operation)
        function = list(module.body.operations)[-1]
        _import_nodes(importer, info.main_graph, function, progress)
    custom = _custom_ops(model)
    if custom:
        _rename_custom_ops(module, custom)
    kept_nodes = {(node.name, f"onnx.{node.op_type}") for node in _nodes(model.graph) if _kept_node(node)}

    def held_name(op: ir.Operation, name: str) -> str:
        return _held_name(op, name, kept_nodes)

    _rename_operators(module, held_name)
    return module


def _import_nodes(
    importer: onnx_importer.NodeImporter, graph: onnx_importer.GraphInfo, function: ir.Operation, progress: Progress
) -> None:
    """`NodeImporter.import_all`, reporting each node before importing it."""
    for initializer in graph.initializer_map.values():
        importer.import_initializer(initializer)
    importer.get_none()
    for node in graph.graph_proto.node:
        progress(f"importing {node.op_type} node '{node.name}'")
        importer.import_node(node)
    values = importer._nv_map  # pyright: ignore[reportPrivateUsage]: the importer exposes the graph's values no other way
    outputs: list[ir.Value] = []
    for output in graph.graph_proto.output:
        if output.name not in values:
            raise onnx_importer.OnnxImportError(f"Non topologically produced ONNX graph output '{output.name}'")
        outputs.append(values[output.name])
    with ir.InsertionPoint(function.regions[0].blocks[0]), ir.Location.unknown():
        func_d.ReturnOp(outputs)


def _custom_ops(model: onnx.ModelProto) -> dict[tuple[str, str], str]:
    """(node name, `onnx.Op`) -> `domain.Op` for each node of a custom domain that no model function defines."""
    functions = {(f.domain, f.name) for f in model.functions}
    custom: dict[tuple[str, str], str] = {}
    for node in _nodes(model.graph):
        if node.domain not in _DEFAULT_DOMAINS and (node.domain, node.op_type) not in functions:
            custom[node.name, f"onnx.{node.op_type}"] = f"{node.domain}.{node.op_type}"
    return custom


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The graph's nodes and those of its subgraphs (`If` branches, `Loop` bodies)."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _nodes(attribute.g)
            for subgraph in attribute.graphs:
                yield from _nodes(subgraph)


_NAME_LOC = re.compile(r'^loc\("(?P<name>[^"]*)"\)$')


def _rename_operators(module: ir.Module, rename: Callable[[ir.Operation, str], str]) -> None:
    """Give each `torch.operator` the name `rename` makes of it and its own."""

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "torch.operator":
            name = ir.StringAttr(op.attributes["name"]).value
            if (new := rename(op, name)) != name:
                op.attributes["name"] = ir.StringAttr.get(new, context=module.context)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _rename_custom_ops(module: ir.Module, custom: Mapping[tuple[str, str], str]) -> None:
    def rename(op: ir.Operation) -> ir.WalkResult:
        if op.name == "torch.operator" and (located := _NAME_LOC.match(str(op.location))) is not None:
            qualified = custom.get((located["name"], ir.StringAttr(op.attributes["name"]).value))
            if qualified is not None:
                op.attributes["name"] = ir.StringAttr.get(qualified, context=module.context)
        return ir.WalkResult.ADVANCE

    module.operation.walk(rename)


_ILLEGAL_OPERATOR = re.compile(r"failed to legalize operation 'torch\.operator'.*?\{name = \"(?P<op>[^\"]+)\"")


def _unlowered(path: Path, model: onnx.ModelProto, diagnostic: ir.DiagnosticInfo) -> UnsupportedOpsError | None:
    """An ONNX op torch-mlir has a lowering for but could not apply, as an unsupported op; when its inputs come
    from custom-domain ops (whose outputs ONNX cannot type), those ops are to blame instead, and so is the node
    upstream whose output ONNX could not shape (a Scan's): torch-mlir types such a value as 0-d."""
    failed = _ILLEGAL_OPERATOR.search(diagnostic.message)
    located = _NAME_LOC.match(str(diagnostic.location))
    if failed is None or located is None:
        return None
    node_name = located["name"]
    custom = _custom_ops(model)
    nodes = list(_nodes(model.graph))
    producers = {output: node for node in nodes for output in node.output}
    inputs = [name for node in nodes if node.name == node_name for name in node.input]
    if any((p := producers.get(name)) is not None and (p.name, f"onnx.{p.op_type}") in custom for name in inputs):
        return UnsupportedOpsError(UnsupportedOp(op, node, path.name) for (node, _), op in custom.items())
    source = _shapeless_source(model.graph, producers, inputs)
    if source is not None:
        reason = f"ONNX infers no shape for its output, which torch-mlir needs to lower node '{node_name}'"
        return UnsupportedOpsError([UnsupportedOp(f"onnx.{source.op_type}", source.name, path.name, reason)])
    return UnsupportedOpsError([UnsupportedOp(failed["op"], node_name, path.name, "torch-mlir cannot lower it")])


def _shapeless_source(
    graph: onnx.GraphProto, producers: Mapping[str, onnx.NodeProto], inputs: Sequence[str]
) -> onnx.NodeProto | None:
    """The first node, going up from `inputs`, with an output that ONNX's shape inference left without a shape
    while its own inputs have one; None when every input has a shape."""
    subgraphs = (a.g for n in _nodes(graph) for a in n.attribute if a.HasField("g"))  # a Loop body's values
    values = [v for g in (graph, *subgraphs) for v in (*g.input, *g.value_info, *g.output)]
    # Only a tensor can lack a shape: a sequence (a Loop's SequenceEmpty) is not to blame.
    shaped = {v.name for v in values if not v.type.HasField("tensor_type") or v.type.tensor_type.HasField("shape")}
    shaped |= {t.name for t in graph.initializer}
    source = None
    while (missing := next((n for n in inputs if n and n not in shaped and n in producers), None)) is not None:
        source = producers[missing]
        inputs = list(source.input)
    return source


def _crashing_node(model: onnx.ModelProto) -> str | None:
    """Runs in a child: the first node whose lowering crashes, found by bisecting over prefixes of the graph,
    each lowered in a grandchild; None if lowering the whole graph does not crash here."""
    module = _imported(model, lambda _: None)
    function = next(op for op in module.body.operations if "sym_visibility" not in op.attributes)
    ops = list(function.regions[0].blocks[0].operations)[:-1]  # the return goes with any cut
    good, bad = 0, len(ops)
    if not _lowering_crashes(module, function, len(ops)):
        return None
    while bad - good > 1:
        middle = (good + bad) // 2
        if _lowering_crashes(module, function, middle):
            bad = middle
        else:
            good = middle
    culprit = ops[bad - 1]
    located = _NAME_LOC.match(str(culprit.location))
    name = ir.StringAttr(culprit.attributes["name"]).value if "name" in culprit.attributes else culprit.name
    name = name.removeprefix(_HELD)  # a crash in a held Loop's or Scan's body
    return f"{name.removeprefix('onnx.')} node '{located['name']}'" if located is not None else name


def _lowering_crashes(module: ir.Module, function: ir.Operation, count: int) -> bool:
    """Whether lowering the function cut after its first `count` ops kills the process (a forked one)."""
    pid = os.fork()
    if pid == 0:
        try:
            block = function.regions[0].blocks[0]
            for op in reversed(list(block.operations)[count:]):
                op.erase()
            with module.context, ir.Location.unknown():
                func_d.ReturnOp([], ip=ir.InsertionPoint(block))
                inputs = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).inputs
                function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, []))
                PassManager.parse(PIPELINE).run(module.operation)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


def _failure(path: Path, reason: str, upgrade_error: str | None) -> str:
    message = f"{path}: torch-mlir cannot import the model: {reason}"
    return f"{message} ({upgrade_error})" if upgrade_error is not None else message


def _first_line(error: Exception | str) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
