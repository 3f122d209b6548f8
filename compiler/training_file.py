"""A compiled training step as a file: `gnomon compile --train` writes it, `gnomon run --train` runs it.

The file is the step's lowered program (as `gnomon compile` writes one) with what a step needs beyond it as module
attributes: `gnomon.training`, the optimizer's settings and the names of the parameters and updated buffers; and,
in the file's resource section as the weights of an inference program are, the state at the first step
(`gnomon.state.<name>`: parameters, buffers, the optimizer's slots and step count) and the seeded batch it was
compiled on (`gnomon.batch.<input>`), which `gnomon run --train` trains on unless given `--inputs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, DenseResourceAttr, DictionaryAttr, MemRefType, ModuleOp, StringAttr

from gnomon.dialects.graph.constant_values import constant_to_numpy, dense_to_resource, numpy_to_dense
from gnomon.errors import GnomonError
from gnomon.executable import load_compiled
from gnomon.files import writing
from gnomon.optimizers import optimizer_from_spec, optimizer_spec
from gnomon.printing import print_module
from gnomon.training import TrainingExecutable

__all__ = ["TRAINING_ATTR", "is_training_step", "load_training_step", "save_training_step"]

TRAINING_ATTR = "gnomon.training"
STATE_PREFIX = "gnomon.state."
BATCH_PREFIX = "gnomon.batch."


def is_training_step(module: ModuleOp) -> bool:
    """Whether a compiled program is a training step `save_training_step` wrote."""
    return TRAINING_ATTR in module.attributes


def save_training_step(step: TrainingExecutable, batch: Sequence[np.ndarray], path: Path) -> None:
    """Write `step` (its program, optimizer, names and present state) and `batch` to `path`."""
    module = step.executable.module.clone()
    program = step.executable.program
    assert program is not None  # a training step runs on the native backend
    inputs = [arg.type for arg in program.function.body.block.args if isinstance(arg.type, MemRefType)]
    types = dict(zip(step.executable.input_names, inputs, strict=True))
    module.attributes[TRAINING_ATTR] = DictionaryAttr({
        "optimizer": StringAttr(optimizer_spec(step.optimizer)),
        "parameters": ArrayAttr([StringAttr(name) for name in step.parameters]),
        "buffers": ArrayAttr([StringAttr(name) for name in step.buffers]),
    })  # fmt: skip
    state = {**step.state_dict(), **step.optimizer_state()}
    named = [(STATE_PREFIX, name, value) for name, value in state.items()]
    named += [(BATCH_PREFIX, name, value) for name, value in zip(step.input_names, batch, strict=True)]
    for prefix, name, value in named:
        dense = numpy_to_dense(np.asarray(value), types[name].get_element_type())
        module.attributes[prefix + name] = dense_to_resource(dense, name)
    with writing(path, "-o") as stream:  # with each op's location: the memory report's layers
        print_module(module, stream, locations=True)


def load_training_step(path: Path) -> tuple[TrainingExecutable, list[np.ndarray]]:
    """The training step `save_training_step` wrote to `path`, at the state it was saved with, and its batch."""
    executable = load_compiled(path)
    module = executable.module
    if not is_training_step(module):
        raise GnomonError(
            f"{path} is an inference program, not a training step (write one with `gnomon compile --train`)"
        )
    settings = module.attributes[TRAINING_ATTR]
    assert isinstance(settings, DictionaryAttr)
    optimizer = optimizer_from_spec(_string(settings.data["optimizer"]))
    parameters, buffers = (_strings(settings.data[key]) for key in ("parameters", "buffers"))
    step = TrainingExecutable(executable, optimizer, parameters, buffers, {})
    state = {name: _array(module, STATE_PREFIX + name, path) for name in step.state_names}
    step.load_state_dict(state)
    return step, [_array(module, BATCH_PREFIX + name, path) for name in step.input_names]


def _array(module: ModuleOp, key: str, path: Path) -> np.ndarray:
    attr = module.attributes.get(key)
    if not isinstance(attr, DenseResourceAttr):
        raise GnomonError(f"{path} holds no {key.split('.', 2)[-1]!r} ({key}): not a whole training step")
    return constant_to_numpy(attr)


def _string(attr: object) -> str:
    assert isinstance(attr, StringAttr)
    return attr.data


def _strings(attr: object) -> list[str]:
    assert isinstance(attr, ArrayAttr)
    return [_string(item) for item in attr.data]
