"""Micro-benchmarks of fixed costs: the runtime's launch, eager's dispatch and module calls, the threads' handoff.

Each is the median of many runs: an overhead is what every one of a model's many calls pays.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType, f32

from gnomon.cost.eager import MMAP_THRESHOLD, PAGE_BYTES
from gnomon.cost.fit import Measured
from gnomon.cost.threads import PART_WORK
from gnomon.dialects.graph.elementwise import AddOp, ReluOp
from gnomon.dialects.graph.tensor import ReshapeOp
from gnomon.runtime.calibration.profile import Lower, load, profile_suite
from gnomon.runtime.calibration.programs import Program, affine_relu, conv, max_pool, same_shape
from gnomon.runtime.calibration.timing import median_time

__all__ = [
    "dispatch_overhead",
    "eager_training_overheads",
    "host_branch_overhead",
    "launch_overhead",
    "module_call_overhead",
    "page_fault_overhead",
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


def host_branch_overhead(trials: int, lower: Lower) -> float:
    """Seconds one decision of control flow on the host costs beyond its kernels (`Device.host_branch_s`): a
    one-kernel program, then a branch on the host into another, against the two kernels in one program."""
    from gnomon.runtime.host import Branch, HostPlan, HostProgram, HostRegion, Segment

    first, second = (lower(tiny_chain(1)) for _ in range(2))
    taken = HostRegion((), (Segment(second, (0,), (3,)),), (3,))
    steps = (Segment(first, (0,), (1,)), Branch(2, taken, HostRegion((), (), (1,)), (4,)))
    branched = HostProgram(HostPlan(HostRegion((0,), steps, (4,)), {2: np.array(True)}, 5))
    straight = load(tiny_chain(2), lower).program
    x = [np.ones((1, 1, 1, 1), np.float32)]
    return max(median_time(lambda: branched.run(x), trials) - median_time(lambda: straight.run(x), trials), 0.0)


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


def _handoff_program(after_library: bool, slices: int) -> ModuleOp:
    """A broadcast affine of `slices` slices (`PART_WORK` results each) after a 1x1 convolution (a library kernel)
    or after a relu (a generated kernel of its own: reshapes around it keep the affine from joining it)."""
    dims = (1, 64, slices * PART_WORK // (64 * 64), 64)
    program = Program()
    x, w = program.argument("x", dims), program.argument("w", (64, 64, 1, 1))
    scale, shift = program.argument("a_s", (64, 1, 1)), program.argument("a_b", (64, 1, 1))
    if after_library:
        first = conv(program, "c", x, w, 1, 0)
    else:
        flat = program.add(
            ReshapeOp.build(operands=[x], result_types=[TensorType(f32, (64, math.prod(dims) // 64))]), "f"
        )
        relu = same_shape(program, "c", ReluOp, flat)
        first = program.add(ReshapeOp.build(operands=[relu], result_types=[x.type]), "u")
    program.results.append(affine_relu(program, "a", first, scale, shift))
    return program.module()


def pool_handoff(trials: int, lower: Lower) -> float:
    """Extra seconds a generated kernel split over two threads takes when it follows a library (OpenMP) kernel,
    against the same kernel after a generated one, beyond what the same comparison gives a kernel of one slice (its
    launch path's misses after a library call, priced apart: `thin_call_cold_s`). Both run on torch's OpenMP team,
    so this should be ~0; it is measured because a thread pool of generated kernels' own would wait for torch's
    spinning workers to give up the cores. (Until the generated predecessor was kept a kernel of its own, it fused
    with the affine, and the probe compared the affine with both: 0 in every calibration.)"""

    def after(library: bool, slices: int) -> float:
        return profile_suite(load(_handoff_program(library, slices), lower), trials)[-1].seconds

    return max((after(True, 2) - after(False, 2)) - (after(True, 1) - after(False, 1)), 0.0)


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


def _backward_time(make_loss: Callable[[], Any], leaf: Any, trials: int) -> float:
    """The median seconds of `make_loss().backward()`, each loss built outside the timed region."""
    times = []
    for _ in range(trials + 1):
        loss = make_loss()
        start = time.perf_counter()
        loss.backward()
        times.append(time.perf_counter() - start)
        leaf.grad = None
    return statistics.median(times[1:])


def eager_training_overheads(ops: int, trials: int) -> dict[str, float]:
    """PyTorch eager's host seconds in a training step beyond its ops' dispatch (`gnomon.cost.eager_training`).

    - `autograd_record_s`: per forward op, what recording it for autograd adds: a chain of tiny relus and scalar
      multiplies on a tensor that requires grad, against the same chain under `inference_mode`.
    - `autograd_node_s`: per node of the backward pass, the engine's work and the dispatch of the one op each
      node's formula runs here (threshold_backward, mul): the chain's backward, per op, from two chain lengths.
    - `<optimizer>_step_s` and `<optimizer>_param_s`: `zero_grad()` and `step()` of torch.optim's `foreach` SGD,
      SGD with momentum and Adam over tiny parameters: the fixed part and the part per parameter, from 4 and 64
      parameters (per tensor, torch's CPU `foreach` ops dispatch one kernel each, and its Python loops over them).
    """
    import torch

    one = torch.ones(1)
    leaf = torch.ones(1, requires_grad=True)

    def chain(x: torch.Tensor, count: int) -> torch.Tensor:
        for _ in range(count // 2):
            x = torch.relu(x) * 2.0
        return x

    def recorded() -> None:
        chain(leaf, ops)

    def inferred() -> None:
        with torch.inference_mode():
            chain(one, ops)

    recording = min(median_time(recorded, trials) for _ in range(3)) - min(
        median_time(inferred, trials) for _ in range(3)
    )
    figures = {"autograd_record_s": max(recording, 0.0) / ops}
    # The backward alone is timed (its forward built untimed) and the smallest of three medians kept: a
    # difference of two noisy step times went to zero on a busy machine.
    backward = {
        count: min(_backward_time(lambda count=count: chain(leaf, count), leaf, trials) for _ in range(3))
        for count in (ops // 4, ops)
    }
    per_node = (backward[ops] - backward[ops // 4]) / (ops - ops // 4)
    # Never below the engine's whole pass per node where noise still swamps the difference: an upper bound, not 0.
    figures["autograd_node_s"] = per_node if per_node > 0 else backward[ops] / ops
    makers: dict[str, Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]] = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=0.01, foreach=True),
        "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9, foreach=True),
        "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=True),
    }
    for name, make in makers.items():
        seconds = {}
        for count in (4, 64):
            parameters = [torch.nn.Parameter(torch.ones(1)) for _ in range(count)]
            optimizer = make(parameters)

            def update(parameters: list[torch.nn.Parameter] = parameters, optimizer: Any = optimizer) -> None:
                optimizer.zero_grad()
                for p in parameters:
                    p.grad = one
                optimizer.step()

            def grads_only(parameters: list[torch.nn.Parameter] = parameters) -> None:
                for p in parameters:
                    p.grad = one

            update()  # creates the optimizer's state
            seconds[count] = max(median_time(update, trials * 4) - median_time(grads_only, trials * 4), 0.0)
        per_parameter = (seconds[64] - seconds[4]) / 60
        figures[f"{name}_param_s"] = max(per_parameter, 0.0)
        figures[f"{name}_step_s"] = max(seconds[4] - 4 * per_parameter, 0.0)
    return figures


def page_fault_overhead(trials: int) -> float:
    """Seconds per 4 KiB page a kernel takes on first touching fresh memory (`Efficiency.page_fault_s`): filling a
    new anonymous mapping (as glibc maps an allocation above its mmap threshold) and unmapping it, against filling
    one already mapped, on torch's threads, per page. Mapped here, not through malloc: malloc serves a large block
    from freed heap memory when the process has some (a calibration after other work measured 0)."""
    import mmap

    import torch

    size = 2 * MMAP_THRESHOLD

    def fresh() -> None:
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        torch.frombuffer(memory, dtype=torch.float32).fill_(1.0)  # the tensor dies here, before the unmap
        memory.close()

    mapped = torch.empty(size // 4)
    mapped.fill_(1.0)
    fresh_s = min(median_time(fresh, trials) for _ in range(3))
    mapped_s = min(median_time(lambda: mapped.fill_(1.0), trials) for _ in range(3))
    return max(fresh_s - mapped_s, 0.0) / (size // PAGE_BYTES)


def post_op_overhead(trials: int) -> float:
    """Seconds oneDNN's convolution takes longer with a post-op (`Efficiency.post_op_s`): a tiny channels-last
    convolution on a packed weight, as the runtime calls `mkldnn._convolution_pointwise` for a convolution and its
    epilogue, with a ReLU post-op against none. Here 2.6-4.4 us in six calibrations (3-5 us by hand whatever the
    output's size, 8K-300K elements), more than a separate generated ReLU of a small output costs; at least a
    nanosecond (where torch has no oneDNN, or a post-op measured no slower)."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return 1e-9
    pointwise = torch.ops.mkldnn._convolution_pointwise.default
    x = torch.ones(1, 16, 16, 16).to(memory_format=torch.channels_last)
    geometry = ([1, 1], [1, 1], [1, 1], 1)
    weight = torch._C._nn.mkldnn_reorder_conv2d_weight(  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        torch.ones(16, 16, 3, 3).to_mkldnn(), *geometry, list(x.shape)
    )
    bias = torch.zeros(16)

    def convolution(attr: str) -> Callable[[], object]:
        return lambda: pointwise(x, weight, bias, *geometry, attr, [], "")

    plain_s = min(median_time(convolution("none"), trials) for _ in range(3))
    relu_s = min(median_time(convolution("relu"), trials) for _ in range(3))
    return max(relu_s - plain_s, 1e-9)  # a device file's factors are positive: a nanosecond stands for none
