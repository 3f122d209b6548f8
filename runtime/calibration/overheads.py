"""Micro-benchmarks of fixed costs: the runtime's launch, eager's dispatch and module calls, the threads' handoff.

Each is the median of many runs: an overhead is what every one of a model's many calls pays.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType, f32

from gnomon.cost.fit import Measured
from gnomon.cost.threads import PART_WORK
from gnomon.dialects.graph.elementwise import AddOp, ReluOp
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.runtime.calibration.profile import Lower, load, profile_suite
from gnomon.runtime.calibration.programs import Program, affine_relu, conv, max_pool, same_shape
from gnomon.runtime.calibration.timing import median_time

__all__ = [
    "dispatch_overhead",
    "launch_overhead",
    "module_call_overhead",
    "pool_handoff",
    "thin_call_probe",
    "tiny_chain",
]


def tiny_chain(launches: int) -> ModuleOp:
    """A program of `launches` one-element generated kernels: adds whose shapes alternate through reshapes (views,
    no kernel), so that no two fuse. Generated only: a library call's fixed cost is fitted apart
    (`library_call_s`), and averaging it in made every small generated launch of a model twice too slow."""
    program = Program()
    value = program.argument("v0", (1, 1, 1, 1))
    shapes = ((1, 1, 1, 1), (1, 1))
    for i in range(launches):
        value = program.add(AddOp.build(operands=[value, value], result_types=[value.type]), f"v{i + 1}")
        reshaped = TensorType(f32, shapes[(i + 1) % 2])
        value = program.add(ReshapeOp.build(operands=[value], result_types=[reshaped]), f"r{i + 1}")
    program.results.append(value)
    return program.module()


def launch_overhead(launches: int, trials: int, lower: Lower) -> float:
    """Seconds per launch of a generated kernel by gnomon's runtime, from a long and a one-kernel program of tiny
    kernels."""
    x = [np.ones((1, 1, 1, 1), np.float32)]
    long, short = load(tiny_chain(launches), lower).program, load(tiny_chain(1), lower).program
    spread = median_time(lambda: long.run(x), trials) - median_time(lambda: short.run(x), trials)
    return max(spread, 0.0) / (launches - 1)


def dispatch_overhead(ops: int, trials: int) -> float:
    """Seconds per op of PyTorch eager: tiny ops (add, relu, softmax, a reshape) called one by one."""
    import torch

    x = torch.ones(1)

    def run() -> None:
        with torch.inference_mode():
            y = x
            for _ in range(ops // 4):
                y = torch.add(y, y)
                y = torch.relu(y)
                y = torch.softmax(y, 0)
                y = y.reshape(1)

    return median_time(run, trials) / (ops // 4 * 4)


def module_call_overhead(calls: int, trials: int) -> float:
    """Seconds PyTorch eager spends in one `nn.Module` call beyond its forward: a chain of modules whose forward
    returns its input, called through `__call__` and through `forward` directly."""
    import torch

    class Passthrough(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    chain = [Passthrough() for _ in range(calls)]
    x = torch.ones(1)

    def called() -> None:
        for module in chain:
            module(x)

    def forwarded() -> None:
        for module in chain:
            module.forward(x)

    with torch.inference_mode():
        return max(median_time(called, trials) - median_time(forwarded, trials), 0.0) / calls


def _handoff_program(after_library: bool) -> ModuleOp:
    """A broadcast affine of two slices (`PART_WORK` results each) after a 1x1 convolution (a library kernel) or
    after a relu (a generated one)."""
    dims = (1, 64, 2 * PART_WORK // (64 * 64), 64)
    program = Program()
    x, w = program.argument("x", dims), program.argument("w", (64, 64, 1, 1))
    scale, shift = program.argument("a_s", (64, 1, 1)), program.argument("a_b", (64, 1, 1))
    first = conv(program, "c", x, w, 1, 0) if after_library else same_shape(program, "c", ReluOp, x)
    program.results.append(affine_relu(program, "a", first, scale, shift))
    return program.module()


def pool_handoff(trials: int, lower: Lower) -> float:
    """Extra seconds a generated kernel split over two threads takes when it follows a library (OpenMP) kernel,
    against the same kernel after a generated one. Both run on torch's OpenMP team, so this should be ~0; it is
    measured because a thread pool of generated kernels' own would wait for torch's spinning workers to give up
    the cores."""
    seconds = [profile_suite(load(_handoff_program(first), lower), trials)[-1].seconds for first in (True, False)]
    return max(seconds[0] - seconds[1], 0.0)


THIN_PROBE_POOLS = ((1, 4, 64, 64), (1, 16, 64, 64), (1, 16, 128, 128), (1, 32, 128, 128))
"""The inputs of the pools the thin-call probe's tiny kernels follow: 64 KB to 2 MB each, moving 80 KB to 2.6 MB."""


def thin_call_probe(trials: int, lower: Lower) -> list[Measured]:
    """Tiny generated kernels, each after a library call (an ATen max pool) that moved 80 KB to 2.6 MB, in a small
    program as a small model runs them: their profiled launches, whose time beyond a warm launch is their call
    path's misses (`gnomon.cost.fit.thin_call_cold`). A large program (the calibration suite) makes them several
    times dearer, its whole run's traffic evicting each launch's own objects too, which a model's is not."""
    program = Program()
    for i, dims in enumerate(THIN_PROBE_POOLS):
        pooled = max_pool(program, f"pool{i}", program.argument(f"x{i}", dims), (3, 3), 2, 1)
        tiny = same_shape(program, f"relu{i}", ReluOp, program.argument(f"t{i}", (1, 4, 4, 4)))
        program.results += [pooled, tiny]
    measured = profile_suite(load(program.module(), lower), trials)
    return [m for m in measured if m.kernel.is_generated]
