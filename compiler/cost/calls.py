"""What a call costs beyond its kernel: a library call's fixed cost, warm or cold; eager PyTorch's ATen calls;
libm calls inside a CPU kernel. Which library function a kernel calls is read from its structured `call`
(`gnomon.dialects.kernel.LibraryCall`), never from a string.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from xdsl.dialects.builtin import TensorType, f32

from gnomon.cost.analytical import OpCost, efficiency
from gnomon.cost.devices import Device
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.elementwise import PowOp


def same_library_function(before: kernel.FuncOp, kernel_func: kernel.FuncOp) -> bool:
    """Whether two library kernels call the same library function (`aten.linear` of `aten.linear+relu`)."""
    call_before, call = before.call, kernel_func.call
    return call_before is not None and call is not None and call_before.callee == call.callee


def within_core_caches(cost: OpCost, device: Device) -> bool:
    """Whether a kernel moved no more than one core's caches hold, so that it evicted nothing of the code and
    bookkeeping of the call before it."""
    return cost.bytes <= sum(level.capacity_bytes for level in device.memory[:-1] if level.per_core)


def warm_call(previous: tuple[kernel.FuncOp, OpCost] | None, kernel_func: kernel.FuncOp, device: Device) -> bool:
    """Whether a launch of `kernel_func` finds its library function's code and bookkeeping in cache: the launch
    before it (`previous`, with its cost) called the same function and moved no more than one core's caches hold,
    so that its traffic evicted none of it. Only CPUs are modelled so."""
    if device.kind != "cpu" or previous is None or not same_library_function(previous[0], kernel_func):
        return False
    return within_core_caches(previous[1], device)


EAGER_LIBRARY_MODELS = frozenset({"conv", "depthwise-conv", "gemm", "pool", "embedding", "attention"})
"""The cost models of the ops whose eager ATen call is a library call, as gnomon's runtime makes it (oneDNN's and
BLAS's primitives, ATen's pooling and embedding-bag kernels), so it pays the runtime's `library_call_s`; eager's
elementwise ops, copies and norms are thin wrappers around their loops and pay only the dispatch that the
calibration measures on tiny ops."""


def eager_call_s(name: str, cost: OpCost, previous: tuple[str, OpCost] | None, device: Device) -> float:
    """What the ATen call of an eager op (`name`, `cost`) takes beyond dispatch: a library op
    (`EAGER_LIBRARY_MODELS`) pays `library_call_s`, or `library_call_warm_s` where the library op before it
    (`previous`, name and cost) was the same op and small, as `warm_call()` has it for gnomon's runtime; any other
    op, nothing."""
    if cost.model not in EAGER_LIBRARY_MODELS:
        return 0.0
    eff = efficiency(device)
    if device.kind == "cpu" and previous is not None:
        name_before, cost_before = previous
        if name_before == name and within_core_caches(cost_before, device):
            return eff.library_call_warm_s
    return eff.library_call_s


def libm_calls(ops: Sequence[GraphOperation]) -> int:
    """The libm calls a CPU kernel of `ops` makes per call: one per result element of an f32 pow. gnomon's code
    generator leaves it to libm's `powf` (its own exp, log, tanh and erf are vectorizable arith ops), and ATen's CPU
    pow calls it per element too, each call costing tens of multiplies."""
    calls = 0
    for op in ops:
        result = op.results[0].type
        if isinstance(op, PowOp) and isinstance(result, TensorType) and result.element_type == f32:
            calls += math.prod(result.get_shape())
    return calls


def with_libm_calls(cost: OpCost, ops: Sequence[GraphOperation], device: Device, cores: int | None) -> OpCost:
    """`cost` with the libm calls of `ops` on a CPU, split over `cores` (default: all)."""
    calls = libm_calls(ops) if device.kind == "cpu" else 0
    if calls == 0:
        return cost
    libm_s = calls * efficiency(device).libm_call_s / (cores or device.cores)
    return replace(cost, compute_s=cost.compute_s + libm_s)
