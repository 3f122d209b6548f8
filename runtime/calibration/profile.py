"""Running a calibration program through the runtime: loading it, feeding it, timing each launch.

How a graph program becomes the runtime's is the caller's to say (`Lower`, the top layer's pipeline): the runtime
runs programs, it does not choose how they are compiled.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from gnomon.cost.fit import Measured
from gnomon.cost.program import launch_call_distances
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


def profile_suite(loaded: Loaded, runs: int, warm: Sequence[bool] = ()) -> list[Measured]:
    """Median per-launch times of `runs` profiled runs (after a warm-up), one per launch, in order. A launch that
    `warm` marks runs twice in a row and its second run is timed: its inputs and its output are then in cache, as
    in a model whose planned arena hands a kernel a buffer that recent kernels used."""
    program = loaded.program
    inputs = [smooth(buffer.shape, buffer.dtype) for buffer in program.inputs]
    program.run(inputs)
    twice = [i < len(warm) and warm[i] for i in range(len(program.launches))]
    samples: list[list[float]] = []
    for _ in range(runs):
        # As `Program.run` does: the inputs copied in (the weights leave the caches), the results copied out.
        for buffer, value in zip(program.inputs, inputs, strict=True):
            np.copyto(buffer, value)
        samples.append(_timed_launches(program, twice))
        _ = [np.array(result) for result in program.results]
    launched = [launch.kernel for launch in program.launches]
    distances = launch_call_distances(loaded.module)
    # A launch timed on its second run in a row finds its code warm: each function it calls ran one run before.
    distances = [[0] * len(d) if again else d for d, again in zip(distances, twice, strict=True)]
    return [
        Measured(launch, statistics.median(run[i] for run in samples), tuple(distances[i]))
        for i, launch in enumerate(launched)
    ]


def _timed_launches(program: Program, twice: Sequence[bool]) -> list[float]:
    """Each launch's time in one run of `program`'s launches; one marked `twice` runs once untimed first. As in
    `Program.run(profile=True)`, only clock reads lie between the launches."""
    clock = time.perf_counter_ns
    seconds: list[float] = []
    stamp = clock()
    for launch, again in zip(program.launches, twice, strict=True):
        if again:
            launch.run()
            stamp = clock()
        launch.run()
        now = clock()
        seconds.append((now - stamp) * 1e-9)
        stamp = now
    return seconds
