"""Running a calibration program through the runtime: loading it, feeding it, timing each launch.

How a graph program becomes the runtime's is the caller's to say (`Lower`, the top layer's pipeline): the runtime
runs programs, it does not choose how they are compiled.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from gnomon.cost.fit import Measured
from gnomon.cost.program import launch_call_distances
from gnomon.dialects import kernel
from gnomon.runtime.executor import Program

__all__ = ["Loaded", "Lower", "load", "profile_suite", "smooth"]

Lower = Callable[[ModuleOp], ModuleOp]
"""A graph program to the runtime's, in place (`gnomon.executable.lower`)."""


@dataclass(frozen=True)
class Loaded:
    """A calibration program, lowered and loaded by the runtime."""

    module: ModuleOp
    """The lowered module: its `kernel.func`s are what the fit prices."""
    program: Program


def load(module: ModuleOp, lower: Lower) -> Loaded:
    """`module` (a copy of it) lowered by `lower` and loaded by the runtime."""
    lowered = lower(module.clone())
    return Loaded(lowered, Program(lowered))


def smooth(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """Smoothly varying values, like a network's activations. Not noise: random values are the worst case for a
    kernel whose branches depend on the data (ATen's max pooling)."""
    index = np.arange(math.prod(shape), dtype=np.float64)
    return (np.sin(index / 7.0) * np.cos(index / 131.0)).reshape(shape).astype(dtype)


def profile_suite(loaded: Loaded, runs: int) -> list[Measured]:
    """Median per-launch times of `runs` profiled runs (after a warm-up), one per launch, in order."""
    program = loaded.program
    inputs = [smooth(buffer.shape, buffer.dtype) for buffer in program.inputs]
    program.run(inputs)
    samples: list[list[float]] = []
    for _ in range(runs):
        program.run(inputs, profile=True)
        samples.append([t.seconds for t in program.profile.timings])
    kernels = {op.sym_name.data: op for op in loaded.module.ops if isinstance(op, kernel.FuncOp)}
    launched = [kernels[timing.kernel] for timing in program.profile.timings]
    distances = launch_call_distances(loaded.module)
    return [
        Measured(launch, statistics.median(run[i] for run in samples), tuple(distances[i]))
        for i, launch in enumerate(launched)
    ]
