"""`gnomon run --train` and `gnomon memory --train`: a model file's training step, run on a batch or measured.

The file is a `torch.export` (`.pt2`) or TorchScript (`.pt`, `.pth`) model that returns its loss, or any such
model given `--loss`, trained against a random target (`gnomon.frontends.torch_training`). The batch is random
and seeded, or read from an `.npz` keyed by the step's input names (the model's inputs, and `target`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gnomon.errors import GnomonError
from gnomon.files import check_readable
from gnomon.optimizers import SGD, Adam, AdamW, Optimizer
from gnomon.step_memory import ARENA_CATEGORIES, StepMemory
from gnomon.training import TrainingExecutable, compile_training


def optimizer_from_flags(name: str, lr: float | None, momentum: float) -> Optimizer:
    """`--optimizer`, `--lr` (each optimizer's torch default when not given) and `--momentum` (SGD's)."""
    if name == "sgd":
        return SGD(lr=0.01 if lr is None else lr, momentum=momentum)
    if momentum:
        raise GnomonError(f"--momentum is SGD's; {name} has none")
    maker = Adam if name == "adam" else AdamW
    return maker(lr=1e-3 if lr is None else lr)


def compile_training_file(
    model: Path,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    loss: str | None,
    optimizer: Optimizer,
    seed: int,
) -> tuple[TrainingExecutable, list[Any]]:
    """The training step of a model file, and its random batch."""
    from gnomon.frontends.torch_training import training_model_from_file

    check_readable(model)
    if seed < 0:
        raise GnomonError(f"--seed {seed}: a seed is a non-negative integer")
    module, batch = training_model_from_file(model, input_shapes, loss, seed)
    step = compile_training(module, batch, optimizer, source=model.name)
    return step, [x.numpy() for x in batch]


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
) -> None:
    """Run `steps` training steps on one batch and print each loss (and the last step's profile)."""
    from gnomon.run_report import profile_summary, read_inputs, render_profile

    if steps < 1:
        raise GnomonError(f"--steps {steps}: run at least one step")
    step, batch = compile_training_file(model, input_shapes=input_shapes, loss=loss, optimizer=optimizer, seed=seed)
    if inputs is not None:
        batch = read_inputs(step, inputs)
    losses = [step.step(*batch, profile=profile and index == steps - 1) for index in range(steps)]
    memory = step.memory()
    report: dict[str, Any] = {"model": str(model), "optimizer": repr(optimizer), "losses": losses}
    report["memory"] = memory_json(memory)
    if profile:
        report["profile"] = profile_summary(step.executable)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    for index, value in enumerate(losses, 1):
        print(f"step {index}: loss {value:.6g}")
    print()
    print(render_memory(memory))
    if profile:
        print()
        print(render_profile(report["profile"]))


def memory_command(
    model: Path,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    loss: str | None,
    optimizer: Optimizer,
    as_json: bool,
    seed: int,
) -> None:
    """Print a model file's training step's memory by category."""
    step, _ = compile_training_file(model, input_shapes=input_shapes, loss=loss, optimizer=optimizer, seed=seed)
    memory = step.memory()
    if as_json:
        print(json.dumps({"model": str(model), "optimizer": repr(optimizer), **memory_json(memory)}, indent=2))
        return
    print(render_memory(memory))


def memory_json(memory: StepMemory) -> dict[str, Any]:
    return {
        "total_bytes": memory.total,
        "parameters_bytes": memory.parameters,
        "buffers_bytes": memory.buffers,
        "optimizer_bytes": memory.optimizer,
        "batch_bytes": memory.batch,
        "arena_bytes": memory.arena,
        "arena_lower_bound_bytes": memory.arena_lower_bound,
        "at_arena_peak": {
            category.replace(" ", "_") + "_bytes": memory.at_peak[category] for category in ARENA_CATEGORIES
        },
    }


def render_memory(memory: StepMemory) -> str:
    rows = [
        ("parameters", memory.parameters),
        ("buffers (batch-norm statistics)", memory.buffers),
        ("optimizer state", memory.optimizer),
        ("batch", memory.batch),
        (f"arena ({memory.arena / max(memory.arena_lower_bound, 1):.3f}x its lower bound)", memory.arena),
        *((f"  at its peak: {category}", memory.at_peak[category]) for category in ARENA_CATEGORIES),
        ("step total", memory.total),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(["memory of the step", *(f"{name:<{width}}  {_mib(value):>10}" for name, value in rows)])


def _mib(size: int) -> str:
    return f"{size / 2**20:.3f} MiB"
