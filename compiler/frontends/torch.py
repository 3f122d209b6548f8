"""The torch frontends: live modules, exported programs, TorchScript and `torch.export` files.

All of them become an `ExportedProgram`, which `run_decompositions({})` functionalizes
(in-place ops such as `relu_` become their value forms) while keeping composite ops whole:
conv, linear, layer norm, GELU, softmax, scaled dot-product attention and embedding bags
stay single ops (batch norm becomes `_native_batch_norm_legit_no_training`, still one op).
torch-mlir's own decomposition table would lower most of them to arithmetic, so it is not
used. torch-mlir's FxImporter then freezes parameters and buffers into `dense_resource`
literals; each op's location names the torch module that ran it (`layer1.0.conv1`). The
FxImporter runs in a forked child (`isolation`), so that a torch-mlir crash is an error, not a dead process.
"""

# torch-mlir's MLIR bindings are a C extension without type stubs: pyright cannot see their names.
# pyright: reportAttributeAccessIssue=false, reportUnknownParameterType=false

from __future__ import annotations

import dataclasses
import logging
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch._export.converter import TS2EPConverter
from torch._ops import HigherOrderOperator
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.utils import _pytree as pytree
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_importer import ContextCache, FxImporter
from torch_mlir.passmanager import PassManager

from gnomon.errors import InputShapeError, ModelLoadError
from gnomon.frontends.composites import DECOMPOSITIONS
from gnomon.frontends.imported import ImportedModel
from gnomon.frontends.isolation import Progress, run_isolated
from gnomon.frontends.mlir_text import parse_torch_mlir, to_text
from gnomon.frontends.torch_control_flow import ControlFlowNodeImporter, torchscript_loops

# torch 2.13's loader and decompositions of a loaded program use the pytree API it deprecates (through copyreg, so
# no module filter matches): its warning is not the user's concern, and is printed from inside torch only.
warnings.filterwarnings("ignore", r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning)

_NO_MODULE = ("", "_empty_nn_module_stack_from_metadata_hook")
"""Module paths that name no module: the root, and the placeholder torch.export's passes add."""

ASSERTS = (torch.ops.aten._assert_scalar.default, torch.ops.aten._assert_tensor_metadata.default)


def import_torch(
    model: torch.nn.Module | ExportedProgram,
    example_inputs: Sequence[Any] | None,
    source: str,
    dynamic_shapes: Any = None,
) -> ImportedModel:
    """Imports a live module (exported with `example_inputs`, and `dynamic_shapes` as torch.export
    takes them, e.g. `({0: Dim("batch")},)`) or an exported program."""
    if isinstance(model, ExportedProgram):
        return _import_program(model, source, "torch")
    if example_inputs is None:
        raise InputShapeError(f"{source} is a torch module: give example inputs to export it with")
    # A hook, unlike a wrapper module, keeps the module paths that locations are named after.
    hook = model.register_forward_hook(lambda _module, _args, outputs: _plain_outputs(outputs))
    try:
        with warnings.catch_warnings():
            # nn.LSTM, GRU and RNN refresh their list of weights on each call, which export warns about.
            warnings.filterwarnings("ignore", "The tensor attributes .*_flat_weights", UserWarning)
            program = torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:  # torch.export raises many exception types, all meaning "cannot export"
        raise ModelLoadError(f"torch.export cannot export {source}: {reason(e)}") from e
    finally:
        hook.remove()
    return _import_program(program, source, "torch", dim_names=_user_dim_names(program, dynamic_shapes))


def _plain_outputs(value: Any) -> Any:
    """Dataclasses and named tuples as dicts, Nones dropped.

    torch.export flattens tuples, lists and dicts but refuses unregistered dataclasses; a
    None output carries no data. Dict keys and field names become the output names.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        value = dict(zip(getattr(value, "_fields"), value, strict=True))
    if isinstance(value, dict):
        return {key: _plain_outputs(item) for key, item in value.items() if item is not None}
    if isinstance(value, tuple | list):
        return type(value)(_plain_outputs(item) for item in value if item is not None)
    return value


def import_torchscript(
    path: Path,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> ImportedModel:
    """Imports a TorchScript file, run on `example_inputs` or on random float32 data of `input_shapes`."""
    program, names = torchscript_program(path, example_inputs, input_shapes)
    return _import_program(program, path.name, "torchscript", input_names=names)


def torchscript_program(
    path: Path,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> tuple[ExportedProgram, list[str]]:
    """A TorchScript file as an exported program, and its inputs' names."""
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except (RuntimeError, ValueError) as e:
        raise ModelLoadError(f"{path} is not a loadable TorchScript file: {reason(e)}") from e
    try:
        graph = module.graph
    except RuntimeError as e:  # a scripted nn.LSTM, GRU or RNN has only its overloads (forward_tensor...)
        raise ModelLoadError(
            f"{path}: the TorchScript module has no forward method to import (script a module that calls it)"
        ) from e
    # Graph inputs are named like `x.1`; the first is the module itself.
    names = [value.debugName().split(".")[0] for value in graph.inputs()][1:]
    if example_inputs is None:
        example_inputs = _random_inputs(path, names, input_shapes or {})
    try:
        # The converter warns about each state-dict entry (e.g. `num_batches_tracked`) that goes unused.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with torchscript_loops():
                program = TS2EPConverter(module, tuple(example_inputs)).convert()
        # The converter makes every dim dynamic (`Dim.AUTO`); re-export for the inputs' static shapes.
        program = torch.export.export(program.module(), tuple(example_inputs), strict=False)
    except Exception as e:  # the converter fails with whatever the TorchScript op handlers raise
        raise ModelLoadError(f"{path}: cannot convert TorchScript to torch.export: {_conversion_reason(e)}") from e
    return program, names


def _conversion_reason(error: BaseException) -> str:
    """The converter wraps a failure in "TS2EPConverter failed for node <kind>" once per enclosing node: the
    innermost node, and the error that caused it."""
    node, cause = "", error
    while True:
        if str(cause).startswith("TS2EPConverter failed for node"):
            node = reason(str(cause))
        if cause.__cause__ is None:
            break
        cause = cause.__cause__
    return f"{node}: {reason(str(cause))}" if node and cause is not error else reason(str(error))


def import_exported_file(path: Path) -> ImportedModel:
    """Imports a program saved by `torch.export.save` (`.pt2`, or a `.pt` holding the same archive)."""
    return _import_program(exported_program(path), path.name, "torch")


def exported_program(path: Path) -> ExportedProgram:
    """The program a `torch.export.save` file holds."""
    # On a damaged archive torch logs its own traceback before falling back to an older reader, whose
    # error is the one raised; the user gets that error's one line, not both.
    logger = logging.getLogger("torch.export")
    disabled, logger.disabled = logger.disabled, True
    try:
        with path.open("rb") as file:
            program = torch.export.load(file)
    except Exception as e:  # zipfile, pickle and deserializer errors alike
        raise ModelLoadError(f"{path} is not a loadable torch.export file: {reason(e)}") from e
    finally:
        logger.disabled = disabled
    return program


def is_exported_archive(path: Path) -> bool:
    """Whether the file is a `torch.export.save` archive (TorchScript files are zips too)."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(name.rsplit("/", 1)[-1] == "archive_format" for name in archive.namelist())


def _random_inputs(
    path: Path, names: Sequence[str], input_shapes: Mapping[str, Sequence[int]]
) -> tuple[torch.Tensor, ...]:
    for name in input_shapes:
        if name not in names:
            raise InputShapeError(f"--input-shape names no input '{name}' of {path}; inputs are: {', '.join(names)}")
    if any(name not in input_shapes for name in names):
        raise InputShapeError(
            f"{path} is a TorchScript file: give --input-shape for each input (inputs: {', '.join(names)})"
        )
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.rand(tuple(input_shapes[name]), generator=generator) for name in names)


def _input_dims(program: ExportedProgram) -> list[tuple[Any, ...]]:
    """The dims of each user input, as the program traced them (ints, or SymInts for dynamic dims)."""
    users = set(program.graph_signature.user_inputs)
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in users]
    return [tuple(getattr(n.meta.get("val"), "shape", ())) for n in placeholders]


def _symbol(dim: Any) -> str:
    """torch's name for a dynamic dim (`s77`), or "" for a static one."""
    return str(dim.node.expr) if isinstance(dim, torch.SymInt) else ""


def _user_dim_names(program: ExportedProgram, dynamic_shapes: Any) -> dict[str, str]:
    """torch's symbol -> the name of the `Dim` the user gave it, for positional `dynamic_shapes`."""
    if not isinstance(dynamic_shapes, tuple | list):
        return {}
    names: dict[str, str] = {}
    for dims, spec in zip(_input_dims(program), dynamic_shapes, strict=False):
        for index, dim in spec.items() if isinstance(spec, dict) else ():
            user_name = getattr(dim, "__name__", "")
            if user_name and isinstance(index, int) and index < len(dims) and (symbol := _symbol(dims[index])):
                names[symbol] = user_name
    return names


def _dim_bounds(program: ExportedProgram, dim_names: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """The range torch.export kept for each dynamic input dim with a finite top (`Dim(min=, max=)`), by the name
    gnomon gives the dim."""
    import sympy

    bounds: dict[str, tuple[int, int]] = {}
    for dims in _input_dims(program):
        for dim in dims:
            if not isinstance(dim, torch.SymInt) or (found := program.range_constraints.get(dim.node.expr)) is None:
                continue
            if not isinstance(found.upper, sympy.Integer):  # no top given (torch's int_oo)
                continue
            low, high = int(found.lower), int(found.upper)
            bounds[dim_names.get(_symbol(dim), _symbol(dim))] = (max(low, 1), high)
    return bounds


def _import_program(
    program: ExportedProgram,
    source: str,
    kind: str,
    input_names: list[str] | None = None,
    dim_names: Mapping[str, str] | None = None,
) -> ImportedModel:
    try:
        program = program.run_decompositions(DECOMPOSITIONS)
    except Exception as e:  # decomposition re-traces the program and can fail like export does
        raise ModelLoadError(f"{source}: torch.export cannot functionalize the program: {reason(e)}") from e
    # Runtime asserts (on TorchScript's size arithmetic, data-dependent sizes, `.to()` metadata), in the
    # program and in its `torch.cond` branches and `torch.while_loop` bodies (child graph modules), check
    # what the static shapes and dtypes gnomon compiles for already say; without them the scalar code they
    # check is dead.
    for graph in [m.graph for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]:
        for target in ASSERTS:
            for node in graph.find_nodes(op="call_function", target=target):
                graph.erase_node(node)
        graph.eliminate_dead_code()
    lift_listed_tensors(program)
    mutated = sorted(program.graph_signature.buffers_to_mutate.values())
    if mutated:
        raise ModelLoadError(f"{source} updates buffers when run ({', '.join(mutated)}): call .eval() before importing")
    # torch-mlir looks buffers up in the state dict, but non-persistent ones live in `constants`.
    for name in program.graph_signature.non_persistent_buffers:
        program.state_dict[name] = program.constants[name]
    text = run_isolated(lambda progress: program_text(program, source, progress), source)
    return ImportedModel(
        module=parse_torch_mlir(text),
        source=source,
        input_names=input_names if input_names is not None else input_names_of(program),
        output_names=_output_names(program),
        kind=kind,
        input_dim_names=[
            tuple((dim_names or {}).get(_symbol(d), _symbol(d)) for d in dims) for dims in _input_dims(program)
        ],
        dim_bounds=_dim_bounds(program, dim_names or {}),
        module_calls=module_calls_of(program) if kind == "torch" else 0,
    )


def module_calls_of(program: ExportedProgram) -> int:
    """The module calls of an eager run of the exported module: the distinct entries of its ops' module stacks,
    the root's included (each call of a module has its own key: a module called twice has two). A module that
    runs no op (an `nn.Identity`) leaves no entry and is not counted."""
    calls: set[str] = set()
    for node in program.graph.nodes:
        calls.update(node.meta.get("nn_module_stack") or {})
    return len(calls)


def lift_listed_tensors(program: ExportedProgram) -> None:
    """Parameters, buffers and tensor constants used inside a list argument (TorchScript's converter makes them,
    e.g. the empty initial key of a transformer's KV cache in `cat([c_lifted_tensor_0, key])`) are read through
    `get_attr` nodes instead. FxImporter freezes state by substituting each such placeholder's tensor into its
    users' arguments, and then refuses a raw tensor inside a list; a `get_attr` node it imports as a literal.
    A 1-d empty tensor in `cat` is dropped instead: torch.cat skips those whatever the others' rank, and
    gnomon's concat would not."""
    signature, graph, module = program.graph_signature, program.graph, program.graph_module
    sources = [
        (signature.inputs_to_lifted_tensor_constants, program.constants),
        (signature.inputs_to_buffers, program.state_dict),
        (signature.inputs_to_parameters, program.state_dict),
    ]
    state = {
        name: value
        for names, values in sources
        for name, key in names.items()
        if isinstance(value := values.get(key), torch.Tensor)
    }

    def tensor_of(item: Any) -> torch.Tensor | None:
        if isinstance(item, torch.fx.Node) and item.op == "placeholder":
            return state.get(item.name)
        return item if isinstance(item, torch.Tensor) else None

    # A higher-order op's operand tuples are no lists: torch-mlir's importer passes their tensors one by one.
    for node in [n for n in graph.nodes if n.op == "call_function" and not isinstance(n.target, HigherOrderOperator)]:
        for index, arg in enumerate(node.args):
            if not isinstance(arg, list | tuple) or all(tensor_of(x) is None for x in arg):
                continue
            items: list[Any] = list(arg)
            if node.target is torch.ops.aten.cat.default:
                kept = [x for x in items if (t := tensor_of(x)) is None or t.dim() != 1 or t.numel() != 0]
                items = kept or items
            with graph.inserting_before(node):
                for position, item in enumerate(items):
                    if (tensor := tensor_of(item)) is not None:
                        name = f"_gnomon_listed_{node.name}_{index}_{position}"
                        module.register_buffer(name, tensor, persistent=False)
                        items[position] = graph.get_attr(name)
            node.update_arg(index, items)


def program_text(program: ExportedProgram, source: str, progress: Progress) -> str:
    """Runs in a forked child (see `isolation`): FxImporter's module, canonicalized, as text."""
    # OpenMP's threads do not survive fork: a parallel region here would wait for them forever.
    torch.set_num_threads(1)
    context = ir.Context()
    context.enable_multithreading(False)
    torch_d.register_dialect(context)
    importer = _ModulePathImporter(context)
    try:
        progress("importing the program")
        importer.import_frozen_program(program, func_name="main")
        progress("canonicalizing the imported program")
        with context:
            PassManager.parse("builtin.module(canonicalize)").run(importer.module.operation)
    except ir.MLIRError as e:
        detail = e.error_diagnostics[0].message if e.error_diagnostics else e.message
        raise ModelLoadError(f"{source}: torch-mlir cannot import the program: {reason(detail)}") from e
    except (NotImplementedError, AssertionError, KeyError, RuntimeError) as e:
        raise ModelLoadError(f"{source}: torch-mlir cannot import the program: {reason(e)}") from e
    progress("printing the imported module")
    return to_text(importer.module)


class _ModulePathLocations(ContextCache):
    """Locates each op by the innermost module that ran it, or by its FX node name at the top level."""

    def get_node_location(self, node: torch.fx.Node) -> ir.Location | None:
        stack: dict[str, tuple[str, Any]] = node.meta.get("nn_module_stack") or {}
        # Where torch.while_loop's tracing reached a module through a closure, it names the module by that
        # source (`L['args'][1].__closure__[0]...`), which is no module path.
        paths = [path for path, _ in stack.values() if not path.startswith("L[")]
        path = paths[-1] if paths else ""
        return ir.Location.name(node.name if path in _NO_MODULE else path, context=self._c)


class _ModulePathImporter(FxImporter):
    """An FxImporter whose locations are `_ModulePathLocations` instead of Python stack frames, and which
    imports `torch.cond` and `torch.while_loop` (`ControlFlowNodeImporter`)."""

    def __init__(self, context: ir.Context) -> None:
        super().__init__(context=context, graph_node_importer_cls=ControlFlowNodeImporter)
        self._cc = _ModulePathLocations(context, py_attr_tracker=self._py_attr_tracker)


def input_names_of(program: ExportedProgram) -> list[str]:
    """The names of the program's inputs; `user_inputs` would give a constant input's value instead."""
    specs = program.graph_signature.input_specs
    return [spec.arg.name for spec in specs if spec.kind == InputKind.USER_INPUT]


def _output_names(program: ExportedProgram) -> list[str]:
    """Keys and attribute names of dict, dataclass or named-tuple outputs; `output_<i>` otherwise."""
    spec = program.call_spec.out_spec
    count = len(program.graph_signature.user_outputs)
    if spec is None or spec.num_leaves != count:
        return [f"output_{i}" for i in range(count)]
    leaves, _ = pytree.tree_flatten_with_path(pytree.tree_unflatten(list(range(count)), spec))
    names: list[str] = []
    for index, (path, _) in enumerate(leaves):
        parts = [_key_name(key) for key in path]
        named = any(not isinstance(key, pytree.SequenceKey) for key in path)
        names.append(".".join(parts) if named else f"output_{index}")
    return names


def _key_name(key: Any) -> str:
    match key:
        case pytree.MappingKey():
            return str(key.key)
        case pytree.GetAttrKey():
            return key.name
        case pytree.SequenceKey():
            return str(key.idx)
        case _:
            return str(key)


def reason(error: Exception | str) -> str:
    """The first sentence of an error: torch's messages go on for paragraphs."""
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else type(error).__name__
    return first.split(". ", 1)[0].rstrip(".")
