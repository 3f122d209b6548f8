"""What a call costs beyond its kernel: a library call's fixed cost, by how much traffic passed since the same
function last ran; libm calls inside a CPU kernel. Which library function a kernel calls is read from its structured
`call` (`gnomon.dialects.kernel.LibraryCall`), never from a string.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.dialects.builtin import TensorType, f32

from gnomon.cost.analytical import OpCost, boundary_bytes, efficiency
from gnomon.cost.devices import Device
from gnomon.cost.roofline import op_work
from gnomon.cost.values import nbytes
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.elementwise import AcoshOp, AcosOp, AsinhOp, AsinOp, AtanhOp, AtanOp, PowOp, SinhOp
from gnomon.dialects.graph.tensor import SplitOp


def call_distances(launches: Sequence[tuple[str | None, int]]) -> list[int | None]:
    """For each of a program's launches, in order, (the library function it calls, or None; the bytes it moves):
    the bytes moved by everything launched since that function's last call, or None for a launch that calls none.
    The call's own traffic does not count: caches replace lines that a stream touches once before the code that runs
    on every call (an LSTM step's 1.5 MB of weights left its linear's next call warm). A program runs again and
    again (a serving loop), so the count wraps around from the end of one run to its start: a function called once
    a run sees every other launch's bytes."""
    last: dict[str, int] = {}
    for index, (function, _) in enumerate(launches):
        if function is not None:
            last[function] = index  # the last call of a run precedes each function's first call of the next run
    total = sum(moved for _, moved in launches)
    prefix = [0]
    for _, moved in launches:
        prefix.append(prefix[-1] + moved)
    distances: list[int | None] = []
    for index, (function, _) in enumerate(launches):
        if function is None:
            distances.append(None)
            continue
        before = last[function]
        if before < index:
            distances.append(prefix[index] - prefix[before + 1])
        else:  # the previous call was in the previous run: from it to the run's end, then to this launch
            distances.append(total - prefix[before + 1] + prefix[index])
        last[function] = index
    return distances


def library_call_s(distance: int | None, device: Device, *, copy: bool = False, function: str | None = None) -> float:
    """What a library call takes beyond the runtime's launch: its dispatch, argument checks, output handling and, on
    a CPU, the misses on the code and bookkeeping those run through. `distance` is the bytes moved since the same
    function's last call (`call_distances`; None: unknown, a call alone). That traffic evicts the call's code and
    data from the cache levels it outgrows: within the innermost level the call is warm (`library_call_warm_s`);
    beyond the last cache level it comes from DRAM (`library_call_s`, what a call alone is priced at); in between
    it costs in proportion to how many of the levels' capacity decades the traffic spans (log-linear), as the misses
    move outwards level by level. A `copy` (`Call.copy`) is a thin call: warm, it costs the dispatch of a tiny
    eager op; cold, it misses as a thin path does (`thin_call_cold_s`). Where the device measured the `function`'s
    own warm call (`Device.call_warm_s`: ATen's differ tenfold, a slice's 3 us against an embedding bag's 30 us),
    that is its warm cost; another function's is a typical one's (`typical_call_warm_s`)."""
    eff = efficiency(device)
    if device.kind != "cpu":
        return eff.library_call_s
    if copy:
        warm = device.call_warm_s.get(function or "", device.dispatch_overhead_s)
        return warm + cold_call_s(distance, device, thin=True)
    return device.call_warm_s.get(function or "", typical_call_warm_s(device)) + cold_call_s(distance, device)


def typical_call_warm_s(device: Device) -> float:
    """A library call's warm cost where the device did not measure its function, or eager calls it (functionally,
    not as the runtime does): the median of the functions it measured (`Device.call_warm_s`), or
    `library_call_warm_s`."""
    measured = sorted(device.call_warm_s.values())
    if not measured:
        return efficiency(device).library_call_warm_s
    return measured[len(measured) // 2]


def cold_call_s(distance: int | None, device: Device, *, thin: bool = False) -> float:
    """What a call's misses add to its warm cost, after `distance` bytes of traffic (see `library_call_s`): at most
    `library_call_s` less a typical warm call for a library call, `thin_call_cold_s` for a `thin` one (a generated
    kernel's launch, a copy); 0 on a GPU, whose host code is not what the device's traffic evicts."""
    if device.kind != "cpu":
        return 0.0
    eff = efficiency(device)
    reach = 1.0
    innermost = device.memory[0].capacity_bytes
    outermost = device.capacity(device.last_cache)
    if distance is not None and outermost > innermost:
        reach = min(max(math.log(max(distance, 1) / innermost) / math.log(outermost / innermost), 0.0), 1.0)
    most = eff.thin_call_cold_s if thin else max(eff.library_call_s - typical_call_warm_s(device), 0.0)
    return most * reach


GENERATED = "<generated>"
"""The function every generated kernel's launch calls through, for `call_distances`: the runtime's loop and ctypes'
call path are the code a launch finds cold after library calls (a tiny generated kernel took 2 us back to back and
4-6 us after a linear, in an encoder), not the kernel's own few instructions."""


@dataclass(frozen=True)
class Call:
    """One library call a kernel's launch makes."""

    function: str
    moved: int
    """The bytes it moves."""
    copy: bool = False
    """Whether it only copies data (slice, concat, a split's pieces): a thin call into ATen's copy kernel, with no
    parallel region, temporaries or library setup."""


FUSED_EPILOGUE_CALLEES = frozenset({"mkldnn._convolution_pointwise"})
"""Library functions that run their kernel's epilogue as post-ops of the same call (`graph_to_kernel.library`'s
`ONEDNN_CONV`); after any other callee the runtime calls each epilogue op's own out= kernel on the output."""


def post_ops_s(kernel_func: kernel.FuncOp, device: Device) -> float:
    """What a library kernel's call adds for fusing its epilogue as post-ops (`FUSED_EPILOGUE_CALLEES`):
    `Efficiency.post_op_s` once a call; 0 for any other kernel."""
    call = kernel_func.call
    if kernel_func.is_generated or call is None or call.callee not in FUSED_EPILOGUE_CALLEES or not call.epilogue:
        return 0.0
    return efficiency(device).post_op_s


PER_IMAGE_CALLEES = frozenset({"aten.mm"})
"""Library functions the runtime calls once per image of a convolution run as BLAS products."""


def library_calls(kernel_func: kernel.FuncOp) -> list[Call]:
    """The library calls one launch of a library kernel makes, in order: the anchor (once per image for
    `PER_IMAGE_CALLEES`, once per piece for a split), then each epilogue op unless the anchor fuses them. Empty
    for a generated kernel."""
    call = kernel_func.call
    if kernel_func.is_generated or call is None:
        return []
    ops = [op for op in kernel_func.body.block.ops if isinstance(op, GraphOperation)]
    epilogue = [] if call.callee in FUSED_EPILOGUE_CALLEES else ops[len(ops) - len(call.epilogue) :]
    anchors = ops[: len(ops) - len(epilogue)]
    anchor_bytes = boundary_bytes(anchors)
    copy = all(op_work(op).flops == 0 for op in anchors)
    times = 1
    if isinstance(anchors[0], SplitOp):
        times = len(anchors[0].results)
    elif call.callee in PER_IMAGE_CALLEES and isinstance(anchors[0].operands[0].type, TensorType):
        times = max(anchors[0].operands[0].type.get_shape()[0], 1)
    calls = [Call(call.callee, anchor_bytes // times, copy)] * times
    for op in epilogue:
        calls.append(Call(op.name, 2 * nbytes(op.results[0])))  # in place on the output: read and written
    return calls


LIBRARY_MODELS = frozenset({"conv", "depthwise-conv", "gemm", "pool", "embedding", "attention", "recurrent"})
"""The cost models of the ops whose eager ATen call is a library call, as gnomon's runtime makes it (oneDNN's and
BLAS's primitives, ATen's pooling, embedding-bag and recurrent kernels), so it pays `library_call_s()`; eager's
elementwise ops, copies and norms are thin wrappers around their loops: warm, they pay the dispatch that the
calibration measures on tiny ops, cold, also the misses of any call (`cold_call_s`)."""


GENERATED_LIBM_OPS = (AcosOp, AcoshOp, AsinOp, AsinhOp, AtanOp, AtanhOp, SinhOp)
"""Ops whose generated code calls libm per element, in f32 and f64 alike (MLIR's math-to-libm); ATen's CPU kernels
compute them with SLEEF's vector functions instead."""


def libm_calls(ops: Sequence[GraphOperation], *, generated: bool) -> int:
    """The libm calls a CPU kernel of `ops` makes per call: one per result element of an f32 pow, and in a
    `generated` kernel of each of `GENERATED_LIBM_OPS`. gnomon's code generator leaves pow to libm's `powf` (its
    own exp, log, tanh and erf are vectorizable arith ops), and ATen's CPU pow calls it per element too, each call
    costing tens of multiplies."""
    calls = 0
    for op in ops:
        result = op.results[0].type
        if not isinstance(result, TensorType):
            continue
        if (isinstance(op, PowOp) and result.element_type == f32) or (generated and isinstance(op, GENERATED_LIBM_OPS)):
            calls += math.prod(result.get_shape())
    return calls


def with_libm_calls(
    cost: OpCost, ops: Sequence[GraphOperation], device: Device, cores: int | None, *, generated: bool
) -> OpCost:
    """`cost` with the libm calls of `ops` on a CPU, split over `cores` (default: all); `generated` says whether
    gnomon generated the kernel (else it is ATen's)."""
    calls = libm_calls(ops, generated=generated) if device.kind == "cpu" else 0
    if calls == 0:
        return cost
    libm_s = calls * efficiency(device).libm_call_s / (cores or device.cores)
    return replace(cost, compute_s=cost.compute_s + libm_s)
