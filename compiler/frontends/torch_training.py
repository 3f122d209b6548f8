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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument

from gnomon.errors import InputShapeError, ModelLoadError
from gnomon.frontends.imported import ImportedModel, TrainingState
from gnomon.frontends.isolation import run_isolated
from gnomon.frontends.mlir_text import parse_torch_mlir
from gnomon.frontends.torch import ASSERTS, input_names_of, lift_listed_tensors, program_text, reason

__all__ = ["LOSSES", "WithLoss", "import_torch_training", "with_loss"]

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
        model.train()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The tensor attributes .*_flat_weights", UserWarning)
                program = torch.export.export(model, tuple(example_inputs), strict=False)
        except Exception as e:  # torch.export raises many exception types, all meaning "cannot export"
            raise ModelLoadError(f"torch.export cannot export {source}: {reason(e)}") from e
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    _check_loss(program, source)
    joint = _joint(program, source)
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


def _joint(program: ExportedProgram, source: str) -> _Joint:
    """The joint forward-backward program, with the trained parameters and updated buffers as user inputs and its
    outputs in gnomon's order."""
    # torch's only entry point to the joint graph (probed on torch 2.13; pinned with torch).
    from torch.export.experimental import _export_forward_backward  # pyright: ignore[reportPrivateUsage]

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            joint = _export_forward_backward(program, joint_loss_index=0)
    except Exception as e:  # an op without a derivative, or autograd refusing the graph
        raise ModelLoadError(f"torch cannot differentiate {source}: {reason(e)}") from e
    signature, graph = joint.graph_signature, joint.graph
    for target in ASSERTS:
        for node in graph.find_nodes(op="call_function", target=target):
            graph.erase_node(node)
    graph.eliminate_dead_code()
    lift_listed_tensors(joint)
    gradients = {s.target: s.arg.name for s in signature.output_specs if s.kind == OutputKind.GRADIENT_TO_PARAMETER}
    mutations = {s.target: s.arg.name for s in signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    loss = next(s.arg.name for s in signature.output_specs if s.kind == OutputKind.LOSS_OUTPUT)
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
