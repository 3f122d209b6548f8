"""Compiled training steps: `gnomon.compile(model, example_inputs, train=...)`.

The model's joint forward-backward graph (`gnomon.frontends.torch_training`) with an optimizer's update appended
(`gnomon.optimizers`) is lowered like any program. Its state (parameters, updated buffers, the optimizer's slots
and step count) is held by the `TrainingExecutable` between steps: each `step` passes it in beside the batch and
keeps what the program returns in its place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from gnomon.errors import GnomonError
from gnomon.executable import Executable, InputError, lower
from gnomon.files import check_readable, writing
from gnomon.frontends.imported import TrainingState
from gnomon.memory_profile import MemoryProfile, memory_profile
from gnomon.optimizers import STEP, Optimizer, append_optimizer, optimizer_of
from gnomon.passes.graph_fuse import AUTO_DEVICE
from gnomon.pipeline import run_pipeline, to_graph
from gnomon.recompute import RecomputeReport, check_options, lower_within_budget

__all__ = ["TRAINING_REWRITES", "TrainingExecutable", "compile_training", "training_graph"]

TRAINING_REWRITES = "graph-fold-constants,graph-canonicalize"
"""The inference stage's rewrites that a training step allows: dropout stays, batch norm is not folded."""


class TrainingExecutable:
    """A compiled training step and the state it updates: `step(*inputs)` runs one and returns the loss.

    The state lives in the program's own input arrays, so a step copies in only the batch; the program writes the
    new state into those arrays where its memory plan can (`rt.UPDATES`), else into its arena, from where it is
    copied back; the gradients stay in the arena until asked for."""

    def __init__(self, executable: Executable, optimizer: Optimizer, parameters: list[str], buffers: list[str],
                 values: Mapping[str, np.ndarray]):  # fmt: skip
        program = executable.program
        if program is None:
            raise GnomonError("training runs on the native backend only")
        self.executable = executable
        self.optimizer = optimizer
        self.parameters = parameters
        self.buffers = buffers
        self._program = program
        self._state_count = len(parameters) + len(buffers) + len(optimizer.slots) * len(parameters) + 1
        names = executable.input_names[: self._state_count]
        self._state = dict(zip(names, program.inputs[: self._state_count], strict=True))
        for array in self._state.values():
            array[...] = 0
        for name, value in values.items():
            self._state[name][...] = value
        self.input_names = executable.input_names[self._state_count :]
        self._gradients: list[np.ndarray] = []
        self.recompute: RecomputeReport | None = None
        """What recomputation did, for a step compiled with a memory budget."""

    @property
    def state_names(self) -> list[str]:
        """The state's names: the parameters, buffers, the optimizer's slots and its step count."""
        return list(self._state)

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        return self.executable.input_shapes[self._state_count :]

    def step(self, *inputs: Any, profile: bool = False) -> float:
        """One training step on a batch (one array or tensor per input, as the model takes them): the loss.
        `profile` times every kernel (`profile()`)."""
        names = self.executable.input_names[self._state_count :]
        if len(inputs) != len(names):  # the step's state is its own: name only what the caller passes
            raise InputError(f"step takes {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
        batch = self.executable.check_inputs([*self._state.values(), *inputs])[self._state_count :]
        for buffer, value in zip(self._program.inputs[self._state_count :], batch, strict=True):
            np.copyto(buffer, value)
        outputs = self._program.run_in_place(profile)
        for current, new in zip(self._state.values(), outputs[1 : 1 + self._state_count], strict=True):
            if new.ctypes.data != current.ctypes.data:  # else written in place (`rt.UPDATES`)
                np.copyto(current, new)
        self._gradients = outputs[1 + self._state_count :]
        return float(outputs[0])

    @property
    def keeps_gradients(self) -> bool:
        """Whether the step returns its gradients (`compile(..., keep_gradients=True)`, the default)."""
        return len(self.executable.output_names) > 1 + self._state_count

    def gradients(self) -> dict[str, np.ndarray]:
        """The last step's gradient of each parameter, by its torch name (copies; empty before the first step)."""
        if not self.keeps_gradients:
            raise GnomonError("the step was compiled with keep_gradients=False: it keeps no gradient to give")
        return {name: np.array(g) for name, g in zip(self.parameters, self._gradients, strict=False)}

    def state_dict(self) -> dict[str, np.ndarray]:
        """The parameters and the buffers the step updates, by their torch names (copies)."""
        return {name: self._state[name].copy() for name in [*self.parameters, *self.buffers]}

    def optimizer_state(self) -> dict[str, np.ndarray]:
        """The optimizer's state: `optimizer.<slot>.<parameter>` per parameter, and `optimizer.step` (copies)."""
        return {name: value.copy() for name, value in self._state.items() if name.startswith("optimizer.")}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Set parameters, buffers or optimizer state by name (as `state_dict` and `optimizer_state` give them);
        an unknown name or a wrong shape is an error naming it."""
        for name, value in state.items():
            if name not in self._state:
                raise GnomonError(f"load_state_dict: the training step has no state named {name!r}")
            array = np.asarray(value.detach().numpy() if hasattr(value, "detach") else value)
            current = self._state[name]
            if array.shape != current.shape:
                raise GnomonError(f"load_state_dict: {name!r} has shape {list(current.shape)}, got {list(array.shape)}")
            current[...] = array

    def save(self, path: str | Path) -> None:
        """Write the whole training state (parameters, updated buffers, the optimizer's slots and step count) to an
        `.npz`, keyed as `state_dict` and `optimizer_state` name them; `restore` reads it back."""
        with writing(path, "the training state", "wb") as stream:  # a stream: np.savez would append .npz
            arrays: dict[str, Any] = dict(self._state)
            np.savez(stream, **arrays)

    def restore(self, path: str | Path) -> None:
        """Continue from a state `save` wrote: every array of this step's state must be in it, by name and shape."""
        path = Path(path)
        check_readable(path)
        try:
            with np.load(path, allow_pickle=False) as saved:
                arrays = {name: saved[name] for name in saved.files}
        except (OSError, ValueError) as e:
            raise GnomonError(f"{path} is not a training state written by save(): {e}") from e
        missing = [name for name in self._state if name not in arrays]
        if missing:
            raise GnomonError(f"{path} holds no {missing[0]!r}: it is the state of another model or optimizer")
        extra = sorted(set(arrays) - set(self._state))
        if extra:
            raise GnomonError(f"{path} holds {extra[0]!r}, which this training step has not: another model's state")
        self.load_state_dict(arrays)

    def state_arrays(self, *, parameters_only: bool = False) -> list[np.ndarray]:
        """The arrays the step keeps between steps (the parameters alone, with `parameters_only`), not copies."""
        names = self.parameters if parameters_only else list(self._state)
        return [self._state[name] for name in names]

    def memory(self) -> MemoryProfile:
        """The step's memory: parameters, updated buffers, optimizer state and batch outside the arena; the arena's
        size, its lower bound, and each of its tensors' lifetime, category and layer."""
        return self._memory_of(self.executable.module)

    def memory_without_recompute(self) -> MemoryProfile | None:
        """`memory()` of the same step lowered without recomputation, for a step compiled with a memory budget."""
        if self.recompute is None or self.recompute.baseline is None:
            return None
        return self._memory_of(self.recompute.baseline)

    def _memory_of(self, module: ModuleOp) -> MemoryProfile:
        outside = {
            "parameters": sum(self._state[n].nbytes for n in self.parameters),
            "buffers": sum(self._state[n].nbytes for n in self.buffers),
            "optimizer state": sum(a.nbytes for n, a in self._state.items() if n.startswith("optimizer.")),
            "batch": sum(a.nbytes for a in self._program.inputs[self._state_count :]),
        }
        first_gradient = 1 + self._state_count
        gradients = range(first_gradient, first_gradient + (len(self.parameters) if self.keeps_gradients else 0))
        return memory_profile(module, outside, gradients)

    @property
    def steps(self) -> int:
        """How many steps have run (the optimizer's step count)."""
        return int(self._state[f"optimizer.{STEP}"])

    def profile(self):
        """The last profiled step's per-kernel timings (`step(..., profile=True)`), as `Executable.profile`."""
        return self.executable.profile()


def training_graph(
    model: Any,
    example_inputs: Sequence[Any] | None,
    optimizer: Optimizer,
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    source: str | None = None,
    keep_gradients: bool = True,
) -> tuple[ModuleOp, TrainingState]:
    """The graph of a training step of a torch module (or exported program) that returns its loss: the joint
    forward-backward graph after the rewrites a training step allows, with `optimizer`'s update appended (and the
    gradients among its results, with `keep_gradients`)."""
    from gnomon.frontends import check_model_kind

    check_model_kind(model)
    if isinstance(model, str | Path):
        raise GnomonError(
            f"{model}: gnomon.compile trains a torch module or exported program; for a model file, use "
            "`gnomon run --train FILE [--loss NAME]`"
        )
    from gnomon.frontends.torch_training import import_torch_training

    source = source or type(model).__name__
    imported = import_torch_training(model, example_inputs, source)
    training = imported.training
    assert training is not None
    module = to_graph(imported, verify_each=verify_each, dump_ir=dump_ir)
    run_pipeline(module, "inference", source, verify_each=verify_each, spec=TRAINING_REWRITES)
    append_optimizer(module, optimizer, training.parameters, training.buffers, keep_gradients)
    return module, training


def compile_training(
    model: Any,
    example_inputs: Sequence[Any] | None,
    train: object,
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    device: str = AUTO_DEVICE,
    tuned: bool = True,
    source: str | None = None,
    keep_gradients: bool = True,
    memory_budget: int | float | str | None = None,
    recompute: str = "z3",
    recompute_time_limit: float = 10.0,
) -> TrainingExecutable:
    """A training step of a torch module (or exported program) that returns its loss, with `train`'s optimizer;
    `source` names it in messages (default: its class's name). Without `keep_gradients` the step keeps no gradient
    past its parameter's update (less memory; `gradients()` then has none to give). With `memory_budget` (bytes as
    an int, a share of the step's planned arena without recomputation as a float) forward values are recomputed in
    the backward pass so that the arena fits it (`gnomon.recompute`): `recompute` names the solver (z3, milp,
    greedy, sqrt, none) and `recompute_time_limit` its seconds; `step.recompute` reports the plan."""
    optimizer = optimizer_of(train)
    source = source or type(model).__name__
    if memory_budget is not None:
        check_options(memory_budget, recompute, recompute_time_limit)
    module, training = training_graph(
        model, example_inputs, optimizer, verify_each=verify_each, dump_ir=dump_ir, source=source,
        keep_gradients=keep_gradients,
    )  # fmt: skip
    report: RecomputeReport | None = None
    if memory_budget is None:
        lower(module, source, verify_each=verify_each, dump_ir=dump_ir, device=device, tuned=tuned, rewrites=False)
    else:

        def lower_with(graph: ModuleOp, recompute: str | None) -> None:
            lower(graph, source, verify_each=verify_each, dump_ir=dump_ir, device=device, tuned=tuned,
                  rewrites=False, recompute=recompute)  # fmt: skip

        module, report = lower_within_budget(module, memory_budget, recompute, recompute_time_limit, lower_with, device)
    step = TrainingExecutable(Executable(module), optimizer, training.parameters, training.buffers, training.values)
    step.recompute = report
    return step
