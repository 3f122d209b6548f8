"""The import pipeline: a model in, a verified graph-dialect module out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ArrayAttr, FunctionType, ModuleOp, StringAttr, TensorType
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from gnomon.context import gnomon_context
from gnomon.dialects.graph.base import SymbolicDim, tensor_of
from gnomon.errors import GnomonError
from gnomon.frontends import ImportedModel, import_model
from gnomon.passes.graph_canonicalize import GraphCanonicalizePass
from gnomon.passes.graph_shape_inference import GraphShapeInferencePass
from gnomon.passes.torch_to_graph import SOURCE_ATTR, TorchToGraphPass

IMPORT_PASSES: tuple[ModulePass, ...] = (TorchToGraphPass(), GraphShapeInferencePass(), GraphCanonicalizePass())

INPUT_NAMES_ATTR = "gnomon.input_names"
OUTPUT_NAMES_ATTR = "gnomon.output_names"


def to_graph(imported: ImportedModel) -> ModuleOp:
    """Run the import passes over a frontend's torch-dialect module and verify the result."""
    module = imported.module
    module.attributes[SOURCE_ATTR] = StringAttr(imported.source)
    module.attributes[INPUT_NAMES_ATTR] = ArrayAttr(StringAttr(n) for n in imported.input_names)
    module.attributes[OUTPUT_NAMES_ATTR] = ArrayAttr(StringAttr(n) for n in imported.output_names)
    ctx = gnomon_context()
    for graph_pass in IMPORT_PASSES:
        graph_pass.apply(ctx, module)
        verify_after(module, imported.source, graph_pass.name)
        if isinstance(graph_pass, TorchToGraphPass):
            _name_input_dims(module, imported.input_dim_names)  # graph-shape-inference carries them on
    return module


def _name_input_dims(module: ModuleOp, names: Sequence[tuple[str, ...]]) -> None:
    """Give the function's dynamic input dims the names the model file has for them."""
    function = next((op for op in module.ops if isinstance(op, func.FuncOp)), None)
    if function is None or not names:
        return
    for arg, arg_names in zip(function.args, names, strict=False):
        if not isinstance(arg.type, TensorType) or len(arg_names) != arg.type.get_num_dims():
            continue
        dims = zip(arg.type.get_shape(), arg_names, strict=True)
        shape = [SymbolicDim(n) if d == DYNAMIC_INDEX and n else d for d, n in dims]
        named = tensor_of(arg.type.get_element_type(), shape)
        if named != arg.type:
            Rewriter.replace_value_with_new_type(arg, named)
    outputs = function.function_type.outputs.data
    function.function_type = FunctionType.from_lists([a.type for a in function.args], outputs)


def verify_after(module: ModuleOp, source: str, after: str) -> None:
    """A program that stops verifying is gnomon's bug, not the user's: say so, in one line. One exception: a
    reshape whose element counts disagree, because the model fixes sizes (often the batch) that the input
    shapes given to it change."""
    try:
        module.verify()
    except VerifyException as error:
        lines = [line for line in str(error).splitlines() if "does not verify" in line or line.startswith("graph.")]
        detail = lines[0].strip(" |") if lines else str(error).strip().splitlines()[0]
        if "graph.reshape: input" in detail and " elements, result " in detail:
            message = f"the input shapes do not fit {source}: a reshape in the model fixes its sizes ({detail})"
            raise GnomonError(message) from error
        raise GnomonError(f"internal error: the graph of {source} does not verify after {after}: {detail}") from error


def load(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dynamic_shapes: Any = None,
) -> ModuleOp:
    """Import a model (a path to .onnx/.pt/.pth/.pt2, an nn.Module or an ExportedProgram) into the graph dialect."""
    return to_graph(import_model(model, example_inputs, input_shapes, dynamic_shapes))
