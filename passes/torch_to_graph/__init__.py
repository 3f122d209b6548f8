"""`torch-to-graph`: convert torch-mlir's torch dialect into gnomon's graph dialect.

Every `torch.aten.*` op with a converter becomes graph ops at the same location; literals become
`graph.constant`; the function signature moves to builtin tensors. Ops without a converter (or
whose arguments are not compile-time constants) are collected, and the pass fails with all of
them at once, each named with its source node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FunctionType,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnrealizedConversionCastOp,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import SymbolicDim, tensor_of
from gnomon.dialects.graph.constant_values import INLINE_ELEMENT_LIMIT, dense_to_resource, splat_bytes
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.dialects.torch import PrimTupleConstructOp, ValueTensorLiteralOp, ValueTensorType
from gnomon.errors import UnsupportedOp, UnsupportedOpsError
from gnomon.locations import location_name
from gnomon.passes.torch_to_graph import (
    attention,
    attention_train,
    backward,
    control_flow,
    creation,
    einsum,
    elementwise,
    embedding,
    indexing,
    linalg,
    linear_attention,
    loss,
    nn,
    onnx_control_flow,
    pool,
    quantize,
    recurrent,
    recurrent_train,
    reduce,
    resize,
    rotary,
    sampling,
    scatter,
    shape,
    spectral,
)
from gnomon.passes.torch_to_graph.args import AtenArgs, NotConvertible, torch_op_name
from gnomon.passes.torch_to_graph.registry import CONVERTERS

# The converter modules register themselves on import.
_CONVERTER_MODULES = (
    attention,
    attention_train,
    backward,
    control_flow,
    creation,
    einsum,
    elementwise,
    embedding,
    indexing,
    linalg,
    linear_attention,
    loss,
    nn,
    onnx_control_flow,
    pool,
    quantize,
    recurrent,
    recurrent_train,
    reduce,
    resize,
    rotary,
    sampling,
    scatter,
    shape,
    spectral,
)

SOURCE_ATTR = "gnomon.source"
"""Module attribute naming the model file, so that errors can say where an op came from."""

INPUT_DIM_NAMES_ATTR = "gnomon.input_dim_names"
"""Module attribute with the model file's names of each input's dims ("" where a dim has none, as ONNX's
`dim_param`): the pass names the function's dynamic input dims after them, then drops the attribute."""


@dataclass
class ConvertTorchOp(RewritePattern):
    """Convert one computational torch op through the converter table; record it when that is impossible."""

    unsupported: list[tuple[str, str, str]] = field(default_factory=list[tuple[str, str, str]])

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        name = torch_op_name(op)
        if not _is_computation(op):
            return
        entry = CONVERTERS.get(name)
        if entry is None:
            # Scalar computations (`aten.size.int`, `aten.add.int`) feed shape arguments that the
            # converters read from result types: left alone, they die with their users. An ONNX op is
            # no such thing, even when ONNX could not type its result (a custom op's, say).
            if _is_operator(op) or any(isinstance(r.type, ValueTensorType) for r in op.results):
                self.unsupported.append((name.removeprefix("torch."), location_name(op.location), ""))
            return
        arg_names, convert = entry
        try:
            args = AtenArgs(op, arg_names, rewriter)
            replacements = convert(args)
        except (NotConvertible, VerifyException) as reason:
            self.unsupported.append((name.removeprefix("torch."), location_name(op.location), str(reason)))
            return
        results = [replacements] if isinstance(replacements, SSAValue) else list(replacements)
        rewriter.replace(op, [], results)


class ConvertLiteral(RewritePattern):
    """`torch.vtensor.literal` becomes `graph.constant` with a signless builtin tensor type.

    Weights that torch-mlir's ONNX path inlined as `dense` move to `dense_resource` blobs, so
    every frontend yields the same, readable form.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ValueTensorLiteralOp, rewriter: PatternRewriter) -> None:
        result_type = op.result.type.to_builtin()
        if result_type is None:
            return
        value = op.value
        if isinstance(value, DenseResourceAttr):
            new_value: Attribute = DenseResourceAttr.from_params(value.resource_handle, result_type)
        elif value.get_type() == result_type:
            new_value = value
        else:  # torch's si64 becomes the graph dialect's signless i64: same bytes, new type
            element = result_type.get_element_type()
            assert isinstance(element, IntegerType | AnyFloat), f"unexpected literal element type {element}"
            new_value = DenseIntOrFPElementsAttr(TensorType(element, result_type.get_shape()), value.data)
        if isinstance(new_value, DenseIntOrFPElementsAttr) and len(new_value) > INLINE_ELEMENT_LIMIT:
            if splat_bytes(new_value) is None:
                new_value = dense_to_resource(new_value, location_name(op.location))
        constant = ConstantOp.build(properties={"value": new_value}, result_types=[result_type])
        constant.location = op.location
        rewriter.replace(op, constant)


def _inline_calls(module: ModuleOp) -> None:
    """ONNX functions arrive as private `func.func`s called from the graph: inline them, so that
    the graph is one function, and drop the callees."""
    functions = {f.sym_name.data: f for f in module.ops if isinstance(f, func.FuncOp)}
    for _ in range(len(functions)):  # each round inlines one level of nesting
        calls = [op for op in module.walk() if isinstance(op, func.CallOp)]
        inlinable = [(c, callee) for c in calls if (callee := _single_block_callee(functions, c)) is not None]
        if not inlinable:
            break
        for call, callee in inlinable:
            _inline(call, callee)
    called = {c.callee.root_reference.data for c in module.walk() if isinstance(c, func.CallOp)}
    for name, function in functions.items():
        if function.sym_visibility is not None and function.sym_visibility.data == "private" and name not in called:
            Rewriter.erase_op(function)


def _single_block_callee(functions: dict[str, func.FuncOp], call: func.CallOp) -> Block | None:
    callee = functions.get(call.callee.root_reference.data)
    if callee is None or len(callee.body.blocks) != 1:
        return None
    return callee.body.blocks.first


def _inline(call: func.CallOp, body: Block) -> None:
    values: dict[SSAValue, SSAValue] = dict(zip(body.args, call.arguments, strict=True))
    for op in body.ops:
        if isinstance(op, func.ReturnOp):
            Rewriter.replace_op(call, [], [values.get(v, v) for v in op.arguments])
            return
        clone = op.clone(values)
        values.update(zip(op.results, clone.results, strict=True))
        Rewriter.insert_op(clone, InsertPoint.before(call))


def _convert_arguments(block: Block) -> None:
    """Block arguments move to builtin tensors before the ops that use them are converted."""
    for arg in list(block.args):
        if isinstance(arg.type, ValueTensorType) and (builtin := arg.type.to_builtin()) is not None:
            Rewriter.replace_value_with_new_type(arg, builtin)


def _flatten_return(function: func.FuncOp) -> None:
    """Modules that return a tuple return its elements (the graph has a flat list of outputs)."""
    for op in function.walk():
        if isinstance(op, func.ReturnOp) and len(op.operands) == 1:
            owner = op.operands[0].owner
            if isinstance(owner, PrimTupleConstructOp):
                op.operands = list(owner.elements)


def _finish_signature(function: func.FuncOp) -> None:
    block = function.body.blocks.first
    assert block is not None
    returns = [op for op in block.ops if isinstance(op, func.ReturnOp)]
    outputs = returns[0].operands if returns else ()
    function.function_type = FunctionType.from_lists([a.type for a in block.args], [v.type for v in outputs])


def _is_operator(op: Operation) -> bool:
    """An ONNX op torch-mlir did not lower: a `torch.operator` named `onnx.Op`, or `domain.Op` for a custom domain."""
    name = op.attributes.get("op_name__")
    return isinstance(name, StringAttr) and name.data == "torch.operator"


def _is_computation(op: Operation) -> bool:
    """A torch op that needs a converter: any `torch.*` op torch-mlir prints generically (aten, prims,
    torchvision, ONNX ops left as `torch.operator`), not the typed constants, lists and literals."""
    return op.dialect_name() != "torch" and (_is_operator(op) or torch_op_name(op).startswith(("torch.", "onnx.")))


def _is_torch_op(op: Operation) -> bool:
    """Typed torch ops and the unregistered ones (`torch.aten.*`, `torch.prim.tolist`, ...) alike."""
    return op.dialect_name() == "torch" or _is_operator(op) or torch_op_name(op).startswith(("torch.", "onnx."))


def _erase_dead_torch_ops(module: ModuleOp) -> None:
    """After conversion, torch constants and lists that fed the converted ops have no uses left."""
    for op in list(module.walk(reverse=True)):
        if _is_torch_op(op) and all(not r.uses for r in op.results):
            Rewriter.erase_op(op)


def _check_fully_converted(module: ModuleOp) -> Sequence[Operation]:
    """Torch ops still in use after conversion: the computations among them, else whatever is left."""
    leftover = [op for op in module.walk() if isinstance(op, UnrealizedConversionCastOp) or _is_torch_op(op)]
    computations = [op for op in leftover if _is_computation(op)]
    return computations or leftover[:1]


@dataclass(frozen=True)
class TorchToGraphPass(ModulePass):
    """Convert torch-mlir's torch dialect into the graph dialect."""

    name = "torch-to-graph"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        source = op.attributes.get(SOURCE_ATTR)
        source_name = source.data if isinstance(source, StringAttr) else "the input"
        _inline_calls(op)
        functions = [f for f in op.walk() if isinstance(f, func.FuncOp)]
        for function in functions:
            _flatten_return(function)
        loops = [o for o in op.walk() if torch_op_name(o) == "torch.prim.Loop"]
        for loop in loops:
            control_flow.iteration_tensors(loop)
        bodies = [function.body for function in functions]
        bodies += [region for o in op.walk() if _is_operator(o) or o in loops for region in o.regions]
        for block in (block for region in bodies for block in region.blocks):
            _convert_arguments(block)
        convert = ConvertTorchOp()
        # Bodies first: an ONNX op's subgraph attributes are graph ops when its converter inlines them.
        PatternRewriteWalker(
            GreedyRewritePatternApplier([ConvertLiteral(), convert]), walk_regions_first=True, apply_recursively=False
        ).rewrite_module(op)
        if convert.unsupported:
            raise UnsupportedOpsError(
                [UnsupportedOp(name, node, source_name, reason) for name, node, reason in convert.unsupported]
            )
        for function in functions:
            _finish_signature(function)
        _erase_dead_torch_ops(op)
        leftover = _check_fully_converted(op)
        if leftover:
            raise UnsupportedOpsError(
                [
                    UnsupportedOp(torch_op_name(o).removeprefix("torch."), location_name(o.location), source_name)
                    for o in leftover
                ]
            )
        for function in functions:
            for arg in function.body.blocks.first.args if function.body.blocks.first else ():
                if not isinstance(arg.type, TensorType):
                    spelled = str(arg.type).replace(" ", "")
                    raise UnsupportedOpsError(
                        [
                            UnsupportedOp(
                                spelled, location_name(arg.location), source_name, "a model input that is not a tensor"
                            )
                        ]
                    )
        _name_input_dims(op)  # graph-shape-inference carries the names on


def _name_input_dims(module: ModuleOp) -> None:
    """Give the first function's dynamic input dims the names `INPUT_DIM_NAMES_ATTR` has for them."""
    names = module.attributes.pop(INPUT_DIM_NAMES_ATTR, None)
    function = next((op for op in module.ops if isinstance(op, func.FuncOp)), None)
    if not isinstance(names, ArrayAttr) or function is None:
        return
    for arg, arg_names in zip(function.args, names, strict=False):
        if not isinstance(arg.type, TensorType) or not isinstance(arg_names, ArrayAttr):
            continue
        dim_names = [n.data if isinstance(n, StringAttr) else "" for n in arg_names]
        if len(dim_names) != arg.type.get_num_dims():
            continue
        dims = zip(arg.type.get_shape(), dim_names, strict=True)
        shape = [SymbolicDim(n) if d == DYNAMIC_INDEX and n else d for d, n in dims]
        named = tensor_of(arg.type.get_element_type(), shape)
        if named != arg.type:
            Rewriter.replace_value_with_new_type(arg, named)
    outputs = function.function_type.outputs.data
    function.function_type = FunctionType.from_lists([a.type for a in function.args], outputs)
