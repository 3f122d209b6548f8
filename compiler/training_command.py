"""`gnomon run --train`: a model file's training step, run on a batch (`gnomon memory --train` compiles it here too).

The file is a `torch.export` (`.pt2`) or TorchScript (`.pt`, `.pth`) model that returns its loss, or any such
model given `--loss`, trained against a random target (`gnomon.frontends.torch_training`); or a step `gnomon
compile --train` wrote (`gnomon.training_file`), with its state and batch. The batch is random and seeded (a
compiled step's: the one it was compiled on), or read from an `.npz` keyed by the step's input names (the model's
inputs, and `target`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnomon.errors import GnomonError
from gnomon.files import check_readable, check_writable
from gnomon.memory_command import memory_json, render_memory, render_recompute
from gnomon.optimizers import SGD, Adam, AdamW, Optimizer, optimizer_label
from gnomon.recompute import RecomputeOptions
from gnomon.training import TrainingExecutable, compile_training

if TYPE_CHECKING:
    import torch


def optimizer_from_flags(name: str, lr: float | None, momentum: float) -> Optimizer:
    """`--optimizer`, `--lr` (each optimizer's torch default when not given) and `--momentum` (SGD's)."""
    if name == "sgd":
        return SGD(lr=0.01 if lr is None else lr, momentum=momentum)
    if momentum:
        raise GnomonError(f"--momentum is SGD's; {name} has none")
    lr = 1e-3 if lr is None else lr
    if name == "sparse-adam":  # Adam, with SparseAdam's update for embedding tables
        return Adam(lr=lr, sparse=True)
    return Adam(lr=lr) if name == "adam" else AdamW(lr=lr)


def compile_training_file(
    model: Path,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    loss: str | None,
    optimizer: Optimizer,
    seed: int,
    batch: int | None = None,
    keep_gradients: bool = True,
    recompute: RecomputeOptions | None = None,
) -> tuple[TrainingExecutable, list[Any], torch.nn.Module]:
    """The training step of a model file, its random batch (of `batch` samples, else the file's), and the module
    that returns its loss."""
    from gnomon.frontends.torch_training import training_model_from_file

    check_readable(model)
    if seed < 0:
        raise GnomonError(f"--seed {seed}: a seed is a non-negative integer")
    module, example = training_model_from_file(model, input_shapes, loss, seed, batch)
    options: dict[str, Any] = {}
    if recompute is not None:
        options = {"memory_budget": recompute.budget, "recompute": recompute.solver,
                   "recompute_time_limit": recompute.time_limit_s}  # fmt: skip
    step = compile_training(module, example, optimizer, source=model.name, keep_gradients=keep_gradients, **options)
    return step, [x.numpy() for x in example], module


def train_command(
    model: Path,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    loss: str | None,
    optimizer: Optimizer,
    steps: int,
    inputs: Path | None,
    profile: bool,
    as_json: bool,
    seed: int,
    restore: Path | None = None,
    save_state: Path | None = None,
    keep_gradients: bool = True,
    recompute: RecomputeOptions | None = None,
) -> None:
    """Run `steps` training steps on one batch and print each loss (and the last step's profile), from the state
    `restore` names (else the file's), saving the state after the last step to `save_state`."""
    from gnomon.run_report import profile_summary, read_inputs, render_profile

    if steps < 1:
        raise GnomonError(f"--steps {steps}: run at least one step")
    if save_state is not None:
        check_writable(save_state, "--save-state")
    if model.suffix == ".mlir":  # `gnomon compile --train`'s file: the step, its state and its batch
        from gnomon.training_file import load_training_step

        step, batch = load_training_step(model)
        optimizer = step.optimizer
    else:
        step, batch, _ = compile_training_file(
            model, input_shapes=input_shapes, loss=loss, optimizer=optimizer, seed=seed, keep_gradients=keep_gradients,
            recompute=recompute,
        )  # fmt: skip
    if inputs is not None:
        batch = read_inputs(step, inputs)
    if restore is not None:
        step.restore(restore)
    losses = [step.step(*batch, profile=profile and index == steps - 1) for index in range(steps)]
    if save_state is not None:
        step.save(save_state)
    memory = step.memory()
    report: dict[str, Any] = {"model": str(model), "optimizer": optimizer_label(optimizer), "losses": losses}
    report["steps_taken"] = step.steps
    report["memory"] = memory_json(memory)
    if step.recompute is not None:
        report["recompute"] = step.recompute.as_json()
    if profile:
        report["profile"] = profile_summary(step.executable)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    first = step.steps - steps + 1
    for index, value in enumerate(losses, first):
        print(f"step {index}: loss {value:.6g}")
    if save_state is not None:
        print(f"training state after step {step.steps} saved to {save_state}")
    print()
    print(render_memory(memory, f"the training step of {model.name}"))
    if step.recompute is not None:
        print()
        print(render_recompute(step.recompute))
    if profile:
        print()
        print(render_profile(report["profile"]))
