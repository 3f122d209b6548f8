"""The figures of every graph op of a module, in program order: each op's roofline (what `graph-roofline`
annotates) or its analytical cost run alone (what `graph-cost` annotates)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from xdsl.dialects.builtin import ModuleOp, TensorType

from gnomon.cost.analytical import OpCost, op_cost
from gnomon.cost.devices import Device
from gnomon.cost.roofline import Roofline, roofline
from gnomon.dialects.graph.base import GraphOperation
from gnomon.locations import location_name

Figures = TypeVar("Figures", Roofline, OpCost)


@dataclass(frozen=True)
class OpFigures(Generic[Figures]):
    """One op's figures, and which op they belong to."""

    op: GraphOperation
    figures: Figures

    @property
    def location(self) -> str:
        return location_name(self.op.location)

    @property
    def result_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(r.type.get_shape() if isinstance(r.type, TensorType) else () for r in self.op.results)


@dataclass(frozen=True)
class GraphFigures(Generic[Figures]):
    """The figures of every graph op of a module on one device, in program order."""

    device: Device
    records: tuple[OpFigures[Figures], ...]

    @property
    def total_flops(self) -> int:
        return sum(r.figures.flops for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.figures.bytes for r in self.records)


class RooflineReport(GraphFigures[Roofline]):
    @property
    def total_time_s(self) -> float:
        """The ops' roofline times one after another."""
        return sum(r.figures.time_s for r in self.records)


class CostReport(GraphFigures[OpCost]):
    @property
    def total_roofline_s(self) -> float:
        return sum(r.figures.roofline_s for r in self.records)

    @property
    def total_predicted_s(self) -> float:
        """The ops' predicted times one after another: launches do not overlap kernels here."""
        return sum(r.figures.predicted_s for r in self.records)


def roofline_report(module: ModuleOp, device: Device) -> RooflineReport:
    """Every graph op's roofline; a CostModelError on dynamic shapes."""
    return RooflineReport(device, _each_op(module, lambda op: roofline(op, device)))


def cost_report(module: ModuleOp, device: Device) -> CostReport:
    """Every graph op's analytical cost, each run alone as one kernel; a CostModelError on dynamic shapes."""
    return CostReport(device, _each_op(module, lambda op: op_cost(op, device)))


def graph_ops(module: ModuleOp) -> list[GraphOperation]:
    """The module's graph ops, in program order."""
    return [op for op in module.walk() if isinstance(op, GraphOperation)]


def _each_op(module: ModuleOp, price: Callable[[GraphOperation], Figures]) -> tuple[OpFigures[Figures], ...]:
    return tuple(OpFigures(op, price(op)) for op in graph_ops(module))
