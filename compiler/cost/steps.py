"""What the two targets' schedules share: a step (one task of the timeline and what the report shows of it), the
facts of a module they price from (its function, its constants, whether its weights fit the caches), and the
report built from the steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp

from gnomon.cost.analytical import OpCost
from gnomon.cost.critical_path import Task, schedule
from gnomon.cost.devices import Device
from gnomon.cost.report import AnalysisError, OpRecord, Report
from gnomon.cost.values import CostModelError, nbytes
from gnomon.dialects import rt
from gnomon.dialects.graph.constant_values import element_bytes
from gnomon.dialects.graph.tensor import ConstantOp


@dataclass(frozen=True)
class Step:
    """One task of a target's schedule, with what the report shows of it."""

    task: Task
    op: str
    kind: str
    location: str
    shapes: tuple[tuple[int, ...], ...]
    cost: OpCost | None
    """None for the runtime's copies."""
    copied_bytes: int = 0


def build_report(
    name: str,
    target: str,
    device: Device,
    steps: Sequence[Step],
    streams: int,
    parameters: tuple[int, int],
    activation_bytes: int,
) -> Report:
    """The report of `steps` scheduled on `streams` streams (synchronously on a CPU)."""
    timeline = schedule([step.task for step in steps], streams, synchronous=device.kind == "cpu")
    records = tuple(
        OpRecord(
            name=step.task.name,
            op=step.op,
            kind=step.kind,
            location=step.location,
            shapes=step.shapes,
            flops=step.cost.flops if step.cost is not None else 0,
            bytes=step.cost.bytes if step.cost is not None else step.copied_bytes,
            bound=step.cost.bound if step.cost is not None else "memory",
            model=step.cost.model if step.cost is not None else "copy",
            overhead_s=step.task.host_s,
            kernel_s=step.task.device_s,
            start_s=timeline.host[index].start_s,
            end_s=max(span.end_s for span in (timeline.host[index], timeline.kernels[index]) if span is not None),
            critical=timeline.on_critical_path(index),
        )
        for index, step in enumerate(steps)
    )
    return Report(name, target, device, records, timeline, parameters[0], parameters[1], activation_bytes)


def program_function(module: ModuleOp) -> func.FuncOp:
    """The one function of a model's module."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise AnalysisError(f"expected one function in the model's module, found {len(functions)}")
    return functions[0]


def count_parameters(module: ModuleOp) -> tuple[int, int]:
    """Elements and bytes of the module's constants (graph constants, or an rt program's)."""
    count, size = 0, 0
    for op in module.walk():
        if isinstance(op, ConstantOp):
            count += math.prod(op.result.type.get_shape())
            size += nbytes(op.result)
        elif isinstance(op, rt.ConstantOp):
            count += math.prod(memref_shape(op.result.type))
            size += memref_bytes(op.result.type)
    return count, size


def weights_in_dram(module: ModuleOp, device: Device) -> bool:
    """Whether the module's constants (weights, tables) together take more than half the device's last cache level:
    then no kernel finds its weights in cache from the previous run, since the activations, the runtime and (on a
    shared host) other tenants use that cache too."""
    return count_parameters(module)[1] > device.capacity(device.last_cache) / 2


def memref_shape(memref: Any) -> tuple[int, ...]:
    assert isinstance(memref, MemRefType)
    return tuple(memref.get_shape())


def memref_element_bytes(memref: Any) -> int:
    """An rt buffer's element size: as the memory plan lays it out (`element_bytes`)."""
    assert isinstance(memref, MemRefType)
    size = element_bytes(memref.element_type)
    if size is None:
        raise CostModelError(f"no element size for {memref.element_type}")
    return size


def memref_bytes(memref: Any) -> int:
    assert isinstance(memref, MemRefType)
    return math.prod(memref.get_shape()) * memref_element_bytes(memref)
