"""`gnomon.analyze`: a model's predicted cost on a device, op by op and end to end, for one of two targets.

This module loads (and for the `gnomon` target, compiles) the model; `gnomon.cost` prices it: `gnomon.cost.program`
for `gnomon` (the kernels its runtime launches), `gnomon.cost.eager` for `torch-eager` (the imported graph, op by
op, as PyTorch eager runs it). With a device file from datasheets (`calibrated = false`) every figure is
analytical; `gnomon calibrate` measures this machine into the `local` device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType

from gnomon.cost.devices import Device, load_device
from gnomon.cost.eager import eager_report
from gnomon.cost.eager_training import eager_training_report
from gnomon.cost.program import program_report
from gnomon.cost.report import TARGETS, AnalysisError, Report
from gnomon.cost.steps import count_parameters
from gnomon.dialects.graph.base import dim_names
from gnomon.errors import GnomonError

if TYPE_CHECKING:
    from gnomon.optimizers import Optimizer
    from gnomon.training import TrainingExecutable

__all__ = ["EagerTrainingGraph", "analyze", "eager_training_graph", "onnx_batch_shapes"]


def analyze(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    device: str | Device = "local",
    target: str = "gnomon",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    batch: int | None = None,
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    train: object = None,
    loss: str | None = None,
    keep_gradients: bool = True,
) -> Report:
    """Predict `model`'s cost on `device` (a name, a device file, or `local`: the last `gnomon calibrate`).

    `model` is what `gnomon.load` takes; `batch` rebinds the inputs' first dim (files: through `input_shapes`;
    gnomon's own models: through their `example_inputs(batch)`); `verify_each` and `dump_ir` are
    `gnomon.pipeline.load`'s. `train` (as `gnomon.compile` takes it) predicts one training step of a module that
    returns its loss (a file's, or given `loss`), as `gnomon.compile(..., train=...)` compiles it (`gnomon`) or as
    PyTorch eager runs it with the same optimizer (`torch-eager`); `keep_gradients` is `gnomon.compile`'s.
    """
    training = train is not None and train is not False
    if isinstance(model, str | Path) and Path(model).suffix == ".mlir":
        return _compiled_report(Path(model), device, target, training)
    if training:
        return _training_report(
            model, example_inputs, input_shapes, loss, device, target, train, verify_each, keep_gradients
        )
    if not keep_gradients:
        raise AnalysisError("keep_gradients=False is a training step's option: add train= (--train)")
    if loss is not None:
        raise AnalysisError("a loss is attached to train a model: add train= (--train)")
    from gnomon.frontends import check_model_kind
    from gnomon.pipeline import load

    if target not in TARGETS:
        raise AnalysisError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    check_model_kind(model)  # a wrong argument is named before a missing calibration
    resolved = load_device(device) if isinstance(device, str) else device
    name = str(model) if isinstance(model, str | Path) else type(model).__name__
    if batch is not None:
        example_inputs, input_shapes = _rebatched(model, batch, example_inputs, input_shapes)
    try:
        module = load(model, example_inputs, input_shapes, verify_each=verify_each, dump_ir=dump_ir)
    except GnomonError as error:
        if batch is None:
            raise
        raise AnalysisError(f"--batch {batch}: {error}") from error
    _check_static(module, name)
    if target == "torch-eager":
        return eager_report(module, resolved, name)
    from gnomon.executable import lower

    lowered = lower(module, name, verify_each=verify_each, dump_ir=dump_ir)
    return program_report(lowered, resolved, name, count_parameters(lowered))


def _check_static(module: ModuleOp, name: str) -> None:
    """A prediction is for static shapes: a dynamic input dim is one line saying how to fix it."""
    dims = sorted(
        {
            dim_name or "?"
            for function in module.ops
            if isinstance(function, func.FuncOp)
            for arg in function.function_type.inputs.data
            if isinstance(arg, TensorType)
            for d, dim_name in zip(arg.get_shape(), dim_names(arg), strict=True)
            if d == DYNAMIC_INDEX
        }
    )
    if dims:
        raise AnalysisError(
            f"{name} has dynamic input dims ({', '.join(dims)}); a prediction is for static shapes: give the batch"
            " (--batch N) or the input shapes (--input-shape NAME=DIMS)"
        )


def _training_report(
    model: Any,
    example_inputs: Sequence[Any] | None,
    input_shapes: Mapping[str, Sequence[int]] | None,
    loss: str | None,
    device: str | Device,
    target: str,
    train: object,
    verify_each: bool,
    keep_gradients: bool,
) -> Report:
    """A training step's prediction: for `gnomon`, the lowered step, as `compile_training` lowers it; for
    `torch-eager`, the step's graph as eager runs it (`gnomon.cost.eager_training`)."""
    from gnomon.optimizers import optimizer_of
    from gnomon.training import compile_training

    if target not in TARGETS:
        raise AnalysisError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    resolved = load_device(device) if isinstance(device, str) else device
    if target == "torch-eager":
        graph = eager_training_graph(model, example_inputs, input_shapes, loss, train, verify_each)
        return graph.report(resolved)
    name = str(model) if isinstance(model, str | Path) else type(model).__name__
    model, example_inputs = _training_model(model, example_inputs, input_shapes, loss)
    optimizer = optimizer_of(train)
    step = compile_training(
        model, example_inputs, optimizer, verify_each=verify_each, source=name, keep_gradients=keep_gradients
    )
    return program_report(step.executable.module, resolved, name, _trained_parameters(step))


@dataclass(frozen=True)
class EagerTrainingGraph:
    """A training step's graph as the torch-eager target prices it (the joint graph, the optimizer appended)."""

    name: str
    module: ModuleOp
    parameters: list[str]
    """The trained parameters, in the graph's order (its gradients are its last results, in this order)."""
    totals: tuple[int, int]
    """Their elements and bytes."""
    optimizer: Optimizer

    def report(self, device: Device) -> Report:
        return eager_training_report(self.module, device, self.name, self.optimizer, len(self.parameters), self.totals)


def eager_training_graph(
    model: Any,
    example_inputs: Sequence[Any] | None,
    input_shapes: Mapping[str, Sequence[int]] | None,
    loss: str | None,
    train: object,
    verify_each: bool = False,
) -> EagerTrainingGraph:
    """The step's graph of `model` (what `analyze(..., train=)` takes) with `train`'s optimizer."""
    from gnomon.optimizers import optimizer_of
    from gnomon.training import training_graph

    name = str(model) if isinstance(model, str | Path) else type(model).__name__
    model, example_inputs = _training_model(model, example_inputs, input_shapes, loss)
    optimizer = optimizer_of(train)
    module, training = training_graph(model, example_inputs, optimizer, verify_each=verify_each, source=name)
    values = [training.values[n] for n in training.parameters]
    totals = (sum(v.size for v in values), sum(v.nbytes for v in values))
    return EagerTrainingGraph(name, module, list(training.parameters), totals, optimizer)


def _training_model(
    model: Any, example_inputs: Sequence[Any] | None, input_shapes: Mapping[str, Sequence[int]] | None, loss: str | None
) -> tuple[Any, Sequence[Any] | None]:
    """A model that returns its loss, and its example inputs: a file's as its loss makes it, a module with `loss`."""
    from gnomon.frontends.torch_training import training_model_from_file, with_loss

    if isinstance(model, str | Path):
        return training_model_from_file(Path(model), input_shapes, loss)
    return (with_loss(model, loss) if loss is not None else model), example_inputs


def _trained_parameters(step: TrainingExecutable) -> tuple[int, int]:
    arrays = step.state_arrays(parameters_only=True)
    return sum(a.size for a in arrays), sum(a.nbytes for a in arrays)


def _compiled_report(path: Path, device: str | Device, target: str, training: bool) -> Report:
    """A file `gnomon compile` wrote (with `training`, a training step), priced as compiled: the `gnomon` target
    only, as `torch-eager` prices the model's graph, which the file does not hold."""
    from gnomon.executable import load_compiled
    from gnomon.training_file import is_training_step, load_training_step

    if target != "gnomon":
        raise AnalysisError(f"{path} is a compiled program: the {target} target prices a model, so analyze its file")
    if training:
        step, _ = load_training_step(path)
        module, parameters = step.executable.module, _trained_parameters(step)
    else:
        module = load_compiled(path).module
        if is_training_step(module):
            raise AnalysisError(f"{path} is a compiled training step: add --train")
        parameters = count_parameters(module)
    resolved = load_device(device) if isinstance(device, str) else device
    return program_report(module, resolved, str(path), parameters)


def _rebatched(
    model: Any, batch: int, example_inputs: Sequence[Any] | None, input_shapes: Mapping[str, Sequence[int]] | None
) -> tuple[Sequence[Any] | None, Mapping[str, Sequence[int]] | None]:
    """Example inputs or input shapes whose first dim is `batch`."""
    if batch < 1:
        raise AnalysisError(f"--batch must be at least 1, got {batch}")
    if input_shapes:
        return example_inputs, {name: [batch, *dims[1:]] for name, dims in input_shapes.items()}
    if not isinstance(model, str | Path):
        make: Any = getattr(model, "example_inputs", None)  # gnomon.models' modules make inputs at any batch
        if example_inputs is not None or make is None:
            raise AnalysisError("batch: give a torch module's example inputs at the batch size you want instead")
        return make(batch), None
    path = Path(model)
    if path.suffix.lower() != ".onnx":
        raise AnalysisError(f"--batch with {path.name}: give the input shapes (--input-shape NAME=DIMS) instead")
    return None, onnx_batch_shapes(path, batch)


def onnx_batch_shapes(path: Path, batch: int) -> dict[str, list[int]]:
    """The shapes of an ONNX model's inputs with their first dim bound to `batch`."""
    import onnx

    if not path.is_file():
        raise AnalysisError(f"no such file: {path}")
    graph = onnx.load(path, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    shapes: dict[str, list[int]] = {}
    for value in graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        rest = [d.dim_value for d in dims[1:]]
        if not dims or any(d <= 0 for d in rest):
            raise AnalysisError(
                f"--batch: input '{value.name}' of {path.name} has no batch dim or other dynamic dims; "
                "give its shape with --input-shape"
            )
        shapes[value.name] = [batch, *rest]
    return shapes
