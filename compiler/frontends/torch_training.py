"""Training steps from torch: the joint forward-backward graph of a module that returns its loss.

`torch.export` traces the module (in training mode), and `_export_forward_backward` appends the backward pass to
it: one graph of core ATen ops whose outputs are the new values of the buffers the forward pass updates (batch
norm's running statistics), the loss, and one gradient per parameter. gnomon imports it with the trained
parameters and the updated buffers as the function's leading arguments instead of frozen literals, and its results
reordered: the loss, the gradients in parameter order, the updated buffers in buffer order. Other buffers and
constants stay frozen, as in inference.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument

from gnomon.errors import InputShapeError, ModelLoadError
from gnomon.frontends.composites import decompose_composites
from gnomon.frontends.imported import ImportedModel, TrainingState
from gnomon.frontends.isolation import run_isolated
from gnomon.frontends.mlir_text import parse_torch_mlir
from gnomon.frontends.torch import (
    ASSERTS,
    exported_program,
    input_names_of,
    is_exported_archive,
    lift_listed_tensors,
    module_calls_of,
    program_text,
    reason,
    torchscript_program,
)
from gnomon.frontends.training_locations import locate_joint_graph
from gnomon.frontends.training_lstm import onednn_lstm_layers, size_workspaces

__all__ = ["LOSSES", "WithLoss", "import_torch_training", "training_model_from_file", "with_loss"]

LOSSES = {
    "cross_entropy": torch.nn.functional.cross_entropy,
    "mse": torch.nn.functional.mse_loss,
    "bce_with_logits": torch.nn.functional.binary_cross_entropy_with_logits,
    "nll": torch.nn.functional.nll_loss,
}
"""The losses `with_loss` attaches by name, as torch.nn.functional computes them (mean over the batch)."""


class WithLoss(torch.nn.Module):
    """`model` followed by a loss of its output against a target: `forward(*inputs, target)` returns the loss. The
    model is a submodule named `model`, so parameter names keep torch's with a `model.` prefix, which
    `TrainingState` strips."""

    def __init__(self, model: torch.nn.Module, loss: Any):
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        *inputs, target = args
        return self.loss(self.model(*inputs), target)


def with_loss(model: torch.nn.Module, loss_fn: str | Any) -> WithLoss:
    """`model` returning `loss_fn(model(*inputs), target)`: a name of `LOSSES` or any callable of torch tensors."""
    if isinstance(loss_fn, str):
        if loss_fn not in LOSSES:
            raise ModelLoadError(f"unknown loss {loss_fn!r}; choose one of {', '.join(LOSSES)} or pass a callable")
        loss_fn = LOSSES[loss_fn]
    elif not callable(loss_fn):
        raise ModelLoadError(f"a loss is a name ({', '.join(LOSSES)}) or a callable, not {type(loss_fn).__name__}")
    return WithLoss(model, loss_fn)


@dataclass
class _Joint:
    program: ExportedProgram
    parameters: list[str]
    """The trained parameters, by torch name, in the order of the function's leading arguments."""
    buffers: list[str]
    """The buffers the step updates, by torch name, after the parameters."""


def import_torch_training(
    model: torch.nn.Module | ExportedProgram, example_inputs: Sequence[Any] | None, source: str
) -> ImportedModel:
    """The training step of a module (or an exported program of one) whose forward returns its loss: a function of
    (parameters, updated buffers, inputs) to (loss, gradients, updated buffers)."""
    if isinstance(model, ExportedProgram):
        program = model
        state = dict(program.state_dict)
    else:
        if example_inputs is None:
            raise InputShapeError(f"{source} is a torch module: give example inputs to export it with")
        if not any(p.requires_grad for p in model.parameters()):
            raise ModelLoadError(f"{source} has no trainable parameter: there is nothing to train")
        try:
            model.train()
        except NotImplementedError:
            pass  # an exported program's module (`ExportedProgram.module()`) keeps the mode it was exported in
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The tensor attributes .*_flat_weights", UserWarning)
                program = torch.export.export(model, tuple(example_inputs), strict=False)
        except Exception as e:  # torch.export raises many exception types, all meaning "cannot export"
            raise ModelLoadError(f"torch.export cannot export {source}: {reason(e)}") from e
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    _check_loss(program, source)
    joint = _joint(program, source, _module_namer(model))
    text = run_isolated(lambda progress: program_text(joint.program, source, progress), source)
    names = [*joint.parameters, *joint.buffers]
    values = {_torch_name(model, n): state[n].detach().numpy().copy() for n in names}
    parameters = [_torch_name(model, n) for n in joint.parameters]
    buffers = [_torch_name(model, n) for n in joint.buffers]
    return ImportedModel(
        module=parse_torch_mlir(text),
        source=source,
        input_names=[*parameters, *buffers, *_batch_names(model, input_names_of(joint.program)[len(names) :])],
        output_names=["loss", *(f"grad.{n}" for n in parameters), *(f"new.{n}" for n in buffers)],
        kind="torch",
        module_calls=module_calls_of(program),
        training=TrainingState(parameters, buffers, values),
    )


def _batch_names(model: object, exported: list[str]) -> list[str]:
    """The batch's input names: `with_loss`'s wrapper takes the model's inputs, by their names in its forward, and
    the target."""
    if not isinstance(model, WithLoss):
        return exported
    parameters = inspect.signature(model.model.forward).parameters.values()
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [*named, "target"] if len(named) + 1 == len(exported) else exported


def _module_namer(model: object) -> Callable[[str], str]:
    """A module's path in the user's module (`with_loss`'s wrapper adds `model.`; its root is then `model`)."""
    if not isinstance(model, WithLoss):
        return lambda path: path
    return lambda path: "" if path == "model" else path.removeprefix("model.")


def _torch_name(model: object, name: str) -> str:
    """A state's name in the user's module: `with_loss`'s wrapper adds `model.`."""
    return name.removeprefix("model.") if isinstance(model, WithLoss) else name


def _check_loss(program: ExportedProgram, source: str) -> None:
    """A ModelLoadError unless the program returns one floating-point scalar: its loss."""
    outputs = [s for s in program.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    values = {n.name: n.meta.get("val") for n in program.graph.nodes}
    shapes = [tuple(getattr(values.get(s.arg.name), "shape", ())) for s in outputs]
    if len(outputs) != 1 or shapes[0] != ():
        got = "nothing" if not outputs else ", ".join(f"a tensor of shape {list(s)}" for s in shapes)
        raise ModelLoadError(
            f"{source} returns {got}: a model trained by gnomon returns its loss, one scalar "
            "(attach a loss with gnomon.with_loss(model, loss_fn))"
        )
    value = values.get(outputs[0].arg.name)
    if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point:
        raise ModelLoadError(f"{source} returns a loss that is not a floating-point scalar")


def _joint(program: ExportedProgram, source: str, module_name: Callable[[str], str]) -> _Joint:
    """The joint forward-backward program, with the trained parameters and updated buffers as user inputs and its
    outputs in gnomon's order, its ops located by layer (`locate_joint_graph`, modules named by `module_name`)."""
    program = decompose_composites(onednn_lstm_layers(program))
    frozen = _freeze_unused_parameters(program)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            joint = _export_forward_backward(program)
    except Exception as e:  # an op without a derivative, or autograd refusing the graph
        raise ModelLoadError(f"torch cannot differentiate {source}: {reason(e)}") from e
    finally:
        for node, value in frozen:  # the program may be the caller's
            node.meta["val"] = value
    signature, graph = joint.graph_signature, joint.graph
    size_workspaces(graph)
    for target in ASSERTS:
        for node in graph.find_nodes(op="call_function", target=target):
            graph.erase_node(node)
    graph.eliminate_dead_code()
    lift_listed_tensors(joint)
    gradients = {s.target: s.arg.name for s in signature.output_specs if s.kind == OutputKind.GRADIENT_TO_PARAMETER}
    mutations = {s.target: s.arg.name for s in signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    loss = next(s.arg.name for s in signature.output_specs if s.kind == OutputKind.LOSS_OUTPUT)
    state_of = {
        s.arg.name: s.target or ""
        for s in signature.input_specs
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER) and isinstance(s.arg, TensorArgument)
    }
    locate_joint_graph(graph, state_of, loss, module_name)
    trained: list[str] = []
    updated: list[str] = []
    specs: list[InputSpec] = []
    for spec in signature.input_specs:
        if spec.kind == InputKind.PARAMETER and spec.target in gradients:
            trained.append(spec.target or "")
            specs.append(InputSpec(InputKind.USER_INPUT, spec.arg, None))
        elif spec.kind == InputKind.BUFFER and spec.target in mutations:
            updated.append(spec.target or "")
            specs.append(InputSpec(InputKind.USER_INPUT, spec.arg, None))
        else:
            specs.append(spec)
    if not trained:
        raise ModelLoadError(f"{source}: no parameter's gradient reaches the loss: there is nothing to train")
    # The placeholders keep their order (parameters, buffers, constants, user inputs), so the function's arguments
    # are the trained parameters, the updated buffers and the user inputs, as `trained` and `updated` list them.
    signature.input_specs[:] = specs
    results = [loss, *(gradients[n] for n in trained), *(mutations[n] for n in updated)]
    output = next(iter(graph.find_nodes(op="output")))
    by_name = {node.name: node for node in graph.nodes}
    output.args = (tuple(by_name[name] for name in results),)
    signature.output_specs[:] = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(name), None) for name in results]
    for name in signature.non_persistent_buffers:
        joint.state_dict[name] = joint.constants[name]
    for name in trained:
        joint.state_dict.pop(name, None)  # inputs now, no longer frozen
    graph.lint()
    return _Joint(joint, trained, updated)


def _export_forward_backward(program: ExportedProgram) -> ExportedProgram:
    """torch's `_export_forward_backward` (its only entry point to the joint graph, probed on torch 2.13 and pinned
    with it), keeping attention's CPU flash kernel whole: core ATen's decompositions would spell its forward pass
    in math (the scores materialized and kept for the backward pass), while eager runs the kernel each way. The
    SDPA call picks that kernel as eager does (no dropout, 4-D, one head size), else its math stays."""
    from torch._decomp import core_aten_decompositions
    from torch.export.experimental import (
        _copy_graph_module_and_signature,  # pyright: ignore[reportPrivateUsage]
        _remove_detach_pass,  # pyright: ignore[reportPrivateUsage]
    )
    from torch.export.exported_program import _decompose_exported_program  # pyright: ignore[reportPrivateUsage]

    table = core_aten_decompositions()
    del table[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default]
    joint = _decompose_exported_program(
        program, cia_to_decomp={}, python_decomp_table=table, joint_loss_index=0, decompose_custom_triton_ops=False
    )
    module, signature = _copy_graph_module_and_signature(joint)
    _remove_detach_pass(module, signature)
    return joint._update(module, signature)  # pyright: ignore[reportPrivateUsage]


def _freeze_unused_parameters(program: ExportedProgram) -> list[tuple[torch.fx.Node, Any]]:
    """Parameters the forward pass never reads (an unused layer) get no gradient, and torch's joint-graph export
    refuses a parameter without one: they are traced as not requiring one, so they stay frozen and are neither
    trained nor returned, as eager's optimizers skip a parameter whose gradient is None. Returns each changed
    placeholder with its traced value, to put back."""
    placeholders = {node.name: node for node in program.graph.find_nodes(op="placeholder")}
    changed: list[tuple[torch.fx.Node, Any]] = []
    for spec in program.graph_signature.input_specs:
        node = placeholders.get(spec.arg.name) if isinstance(spec.arg, TensorArgument) else None
        if spec.kind == InputKind.PARAMETER and node is not None and not node.users:
            changed.append((node, node.meta["val"]))
            node.meta["val"] = node.meta["val"].detach()
    return changed


def training_model_from_file(
    path: Path, input_shapes: Mapping[str, Sequence[int]] | None, loss: str | None, seed: int = 0,
    batch_size: int | None = None,
) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:  # fmt: skip
    """A model file as a module that returns its loss, and a batch for it (random, seeded; `batch_size` samples,
    else the file's): a `torch.export` file (`.pt2`) or TorchScript (`.pt`, `.pth`, given `input_shapes`). A model
    that returns no scalar is trained with `loss` against a random target of its output's shape (class indices
    for cross-entropy and NLL)."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        raise ModelLoadError(
            f"{path} is an ONNX model: gnomon trains torch modules, torch.export (.pt2) and TorchScript (.pt) files"
        )
    trained: list[str] = []
    if suffix == ".pt2" or (suffix in (".pt", ".pth") and is_exported_archive(path)):
        program = exported_program(path)
    elif suffix in (".pt", ".pth"):
        if batch_size is not None and input_shapes:
            input_shapes = {name: [batch_size, *dims[1:]] for name, dims in input_shapes.items()}
        program, _ = torchscript_program(path, None, input_shapes)
        trained = [name for name, _ in torch.jit.load(str(path), map_location="cpu").named_parameters()]
    else:
        raise ModelLoadError(f"{path}: training takes a .pt2 (torch.export) or .pt/.pth (TorchScript) file")
    generator = torch.Generator().manual_seed(seed)
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    values = [placeholders[name].meta["val"] for name in input_names_of(program)]
    names = input_names_of(program)
    shapes = [_batched_shape(path, name, value, batch_size) for name, value in zip(names, values)]
    lookups = _lookup_roles(program)
    batch = tuple(
        _random_like(shape, value.dtype, generator, lookups.get(name))
        for name, shape, value in zip(names, shapes, values, strict=True)
    )
    module = program.module()
    _as_parameters(module, trained)
    output = _output_of(path, module, batch)
    if isinstance(output, torch.Tensor) and output.dim() == 0 and output.is_floating_point():
        return module, batch
    if loss is None:
        shape = list(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ModelLoadError(
            f"{path} returns {shape}, not a loss: give --loss ({', '.join(LOSSES)}) to train it against a target"
        )
    if not isinstance(output, torch.Tensor):
        raise ModelLoadError(f"{path} returns a {type(output).__name__}: --loss needs one output tensor")
    return with_loss(module, loss), (*batch, _target(loss, output, generator))


def _output_of(path: Path, module: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> Any:
    """What the module returns for the batch, its shapes and dtypes alone: run on fake tensors, so that a random
    batch that breaks the model's data checks (an index past a table, unsorted bag offsets) still tells them."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # pyright: ignore[reportPrivateImportUsage]

    try:
        with FakeTensorMode(allow_non_fake_inputs=True), torch.no_grad():
            return module(*batch)
    except Exception as e:  # torch raises many exception types, all meaning the model cannot run on this batch
        raise ModelLoadError(f"{path} cannot run on a batch of its inputs' shapes: {reason(e)}") from e


def _as_parameters(module: torch.nn.Module, names: Sequence[str]) -> None:
    """Make the named buffers parameters again: TorchScript's converter to torch.export keeps a module's parameters
    as buffers, which nothing would train."""
    for name in names:
        owner_path, _, attribute = name.rpartition(".")
        owner = module.get_submodule(owner_path)
        value = owner._buffers.pop(attribute, None)  # pyright: ignore[reportPrivateUsage]
        if value is not None:
            owner.register_parameter(attribute, torch.nn.Parameter(value.detach().clone()))


def _batched_shape(path: Path, name: str, value: Any, batch_size: int | None) -> tuple[int, ...]:
    """A traced input's shape, with `batch_size` as its leading dim. A dim fixed at export (not a torch `Dim`)
    keeps its size: a program traced at one batch may have it in its reshapes."""
    shape = tuple(value.shape)
    if batch_size is None:
        return tuple(int(d) for d in shape)
    if not shape:
        raise InputShapeError(f"--batch: input '{name}' of {path} is a scalar; it has no batch dim")
    if isinstance(shape[0], int) and shape[0] != batch_size:
        raise InputShapeError(
            f"--batch {batch_size}: input '{name}' of {path} was exported with a static batch of {shape[0]} "
            "(export it with a dynamic batch dim, torch.export.Dim)"
        )
    return (batch_size, *(int(d) for d in shape[1:]))


_VIEWS = {"aten.select.int", "aten.slice.Tensor", "aten.view.default", "aten.reshape.default",
          "aten.flatten.using_ints", "aten.squeeze.dim", "aten.unsqueeze.default", "aten.contiguous.default",
          "aten.clone.default", "aten._to_copy.default", "aten.to.dtype"}  # fmt: skip
"""Ops through which an input still reaches a lookup as the same values (a table's row of a batched index input)."""


def _lookup_roles(program: ExportedProgram) -> dict[str, tuple[str, int]]:
    """The integer inputs that reach an embedding (bag) lookup, through views: ("indices", the smallest table's
    rows) or ("offsets", 0): their random values must be valid for the lookup, not merely integers."""
    roles: dict[str, tuple[str, int]] = {}
    for node in program.graph.nodes:
        target = str(node.target)
        if node.op != "call_function" or not target.startswith(("aten.embedding", "aten._embedding_bag")):
            continue
        rows = int(node.args[0].meta["val"].shape[0])
        operands = [("indices", node.args[1])] + ([("offsets", node.args[2])] if "bag" in target else [])
        for role, value in operands:
            while isinstance(value, torch.fx.Node) and str(value.target) in _VIEWS:
                value = value.args[0]
            if isinstance(value, torch.fx.Node) and value.op == "placeholder":
                seen = roles.get(value.name, (role, rows))
                roles[value.name] = (role, min(rows, seen[1]))
    return roles


def _random_like(
    shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator, lookup: tuple[str, int] | None = None
) -> torch.Tensor:
    """Standard normal floats; integers valid for the lookup they feed (rows of the table, or bag offsets 0, 1, 2...
    along the last dim: one lookup in each bag but the last, which takes the rest), else 0 or 1."""
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=dtype)
    if lookup is not None and lookup[0] == "offsets":
        return torch.zeros(shape, dtype=dtype) if not shape else torch.arange(shape[-1], dtype=dtype).expand(shape)
    high = lookup[1] if lookup is not None else 2
    return torch.randint(0, high, shape, generator=generator, dtype=dtype)


def _target(loss: str, output: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A random target for `loss` against `output`: class indices along dim 1 for cross-entropy and NLL, values in
    [0, 1] for binary cross-entropy, normal values for MSE."""
    if loss in ("cross_entropy", "nll"):
        shape = (output.shape[0], *output.shape[2:])
        return torch.randint(0, output.shape[1], shape, generator=generator)
    if loss == "bce_with_logits":
        return torch.rand(tuple(output.shape), generator=generator)
    return torch.randn(tuple(output.shape), generator=generator)
