"""The `torch-eager` target: the imported graph, before any rewrite, op by op, as PyTorch eager runs it.

Each op pays PyTorch's dispatch overhead on the host and runs alone (`op_cost`, no fusion), on the ATen kernel
gnomon's runtime would call for it, on as many threads; a library op (`LIBRARY_MODELS`) also pays a library call
(warm: `typical_call_warm_s`, as eager calls ATen functionally, not as the runtime does), any op the misses of a
cold call (`cold_call_s`) by the traffic since the same op last ran: a library call's, or a thin one's for the
others, whose path is ATen's loop over the elements, as short as the runtime's copies (a chain of 40 eager adds on
64x1024 took 16 us an op, where a library call's misses alone priced them at 26). Views dispatch but run no
kernel. A torch module's `nn.Module` calls (`MODULE_CALLS_ATTR`, counted at import) each cost `module_call_s` on
the host, shared evenly among the ops: an MLP-mixer makes about as many module calls as ops (27 for 30), at
1.7-2.6 us each here. Eager uses one stream on a GPU.

Two things eager does that gnomon's runtime does not: a transpose whose every reader is a matrix product is a view
(the BLAS reads it transposed), and on a CPU each result larger than glibc's mmap threshold is a fresh mapping whose
pages fault in on the kernel's first touch, every run (`fresh_pages_s`; a training step with four 64 MiB embedding
gradients took 62,500 faults a step here, about 59 ms of its 110-127 at 0.9-1 us a fault). gnomon's arena is
mapped once.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from gnomon.cost.analytical import OpCost, op_cost
from gnomon.cost.calls import (
    LIBRARY_MODELS,
    call_distances,
    cold_call_s,
    library_call_s,
    typical_call_warm_s,
    with_libm_calls,
)
from gnomon.cost.critical_path import Task
from gnomon.cost.devices import Device
from gnomon.cost.efficiency import efficiency
from gnomon.cost.report import Report
from gnomon.cost.roofline import VIEW_OPS
from gnomon.cost.steps import Step, build_report, count_parameters, program_function, weights_in_dram
from gnomon.cost.threads import library_threads
from gnomon.cost.values import nbytes, storage
from gnomon.dialects.graph.base import GraphOperation, ints
from gnomon.dialects.graph.linalg import LinearOp, MatmulOp
from gnomon.dialects.graph.tensor import ConstantOp, TransposeOp
from gnomon.locations import location_name

MODULE_CALLS_ATTR = "gnomon.module_calls"
"""The module attribute that holds how many `nn.Module` calls one eager run of the model makes (absent: none)."""


def module_calls(module: ModuleOp) -> int:
    """The `nn.Module` calls of one eager run of the module's model: 0 for a model that is not a torch module."""
    count = module.attributes.get(MODULE_CALLS_ATTR)
    return count.value.data if isinstance(count, IntegerAttr) else 0


def eager_report(module: ModuleOp, device: Device, name: str = "the program") -> Report:
    """The `torch-eager` target of an imported graph (`gnomon.load`'s module): its ops one by one, as eager runs
    them."""
    steps = eager_steps(module, device)
    return build_report(name, "torch-eager", device, steps, 1, count_parameters(module), _peak_live_bytes(module))


MMAP_THRESHOLD = 32 << 20
"""glibc's largest mmap threshold on 64-bit hosts, where gnomon's process fixes it (`gnomon.runtime.malloc`) and
where glibc's own adjustment ends: a larger allocation is a fresh mapping, returned to the OS when freed; a smaller
one reuses freed heap memory."""
PAGE_BYTES = 4096


def fresh_pages_s(allocated: int, device: Device) -> float:
    """Seconds of page faults a CPU kernel takes on first touching a result of `allocated` bytes that PyTorch
    allocated for it; 0 on a GPU (its caching allocator reuses blocks)."""
    if device.kind != "cpu" or allocated <= MMAP_THRESHOLD:
        return 0.0
    return math.ceil(allocated / PAGE_BYTES) * efficiency(device).page_fault_s


def eager_op_cost(op: GraphOperation, device: Device, *, weights_in_dram: bool = False) -> OpCost:
    """The kernel of one op as eager runs it, without its dispatch and call: the ATen kernel gnomon's runtime calls
    for it, on as many threads, its results in fresh memory."""
    if _read_transposed(op):
        return OpCost(flops=0, bytes=0, roofline_s=0.0, roofline_bound="memory", compute_s=0.0, memory_s=0.0,
                      launch_s=0.0, model="view")  # fmt: skip
    cores = library_threads([op], device) if device.kind == "cpu" else None
    cost = op_cost(op, device, weights_in_dram=weights_in_dram, cores=cores)
    cost = with_libm_calls(cost, [op], device, cores, generated=False)
    if cost.model == "view":
        return cost
    return replace(cost, first_touch_s=sum(fresh_pages_s(nbytes(result), device) for result in op.results))


def eager_steps(module: ModuleOp, device: Device, skip: Collection[Operation] = ()) -> list[Step]:
    """An imported graph's schedule as PyTorch eager runs it: every op but constants (and `skip`), dispatched and
    run alone."""
    block = program_function(module).body.block
    cold_weights = weights_in_dram(module, device)
    ops = [
        op for op in block.ops if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp) and op not in skip
    ]
    costs = [eager_op_cost(op, device, weights_in_dram=cold_weights) for op in ops]
    functions = [None if cost.model == "view" else op.name for op, cost in zip(ops, costs, strict=True)]
    moved = [0 if cost.model == "view" else cost.bytes for cost in costs]
    distances = call_distances(list(zip(functions, moved, strict=True)))
    module_call_s = module_calls(module) * device.module_call_s / max(len(ops), 1)
    steps: list[Step] = []
    producer: dict[Operation, int] = {}
    for op, cost, distance in zip(ops, costs, distances, strict=True):
        call_s = 0.0  # a view's, beyond its dispatch
        if distance is not None:  # a thin op's warm call is its dispatch alone, which every op pays below
            library = cost.model in LIBRARY_MODELS
            call_s = cold_call_s(distance, device, thin=not library)
            if library:  # a GPU's call is its fixed `library_call_s`
                call_s = call_s + typical_call_warm_s(device) if device.kind == "cpu" else library_call_s(None, device)
        owners = (storage(v).owner for v in op.operands)
        depends = tuple(sorted({producer[o] for o in owners if isinstance(o, Operation) and o in producer}))
        producer[op] = len(steps)
        task = Task(op.name, device.dispatch_overhead_s + module_call_s + call_s, cost.kernel_s, depends)
        shapes = tuple(tuple(r.type.get_shape()) if isinstance(r.type, TensorType) else () for r in op.results)
        steps.append(Step(task, op.name.removeprefix("graph."), "torch", location_name(op.location), shapes, cost))
    return steps


def _read_transposed(op: GraphOperation) -> bool:
    """Whether `op` swaps the last two dims of a tensor that only matrix products read (a linear layer's 2-D
    operands among them): eager's transpose is then a strided view the BLAS reads as it is (`mm(grad.t(), x)`)."""
    if not isinstance(op, TransposeOp) or not op.result.uses:
        return False
    permutation = list(ints(op.permutation))
    rank = len(permutation)
    if rank < 2 or permutation != [*range(rank - 2), rank - 1, rank - 2]:
        return False
    return all(
        isinstance(use.operation, MatmulOp) or (isinstance(use.operation, LinearOp) and rank == 2)
        for use in op.result.uses
    )


def _peak_live_bytes(module: ModuleOp) -> int:
    """The most bytes of op results live at once in program order; a view keeps its storage alive."""
    block = program_function(module).body.block
    ops = [op for op in block.ops if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp)]
    last_use: dict[SSAValue, int] = {}
    for step, op in enumerate(ops):
        for operand in op.operands:
            last_use[storage(operand)] = step
    returned = block.last_op
    for operand in returned.operands if isinstance(returned, func.ReturnOp) else ():
        last_use[storage(operand)] = len(ops)
    live, peak = 0, 0
    dying: dict[int, int] = {}
    for step, op in enumerate(ops):
        if not isinstance(op, VIEW_OPS):
            for result in op.results:
                live += nbytes(result)
                end = last_use.get(result, step)
                dying[end] = dying.get(end, 0) + nbytes(result)
        peak = max(peak, live)
        live -= dying.pop(step, 0)
    return peak
