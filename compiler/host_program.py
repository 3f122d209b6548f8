"""Compile a graph function with control flow: straight-line segments lowered to rt, `graph.if` / `graph.while` left
to the host (`gnomon.runtime.host`).

The inference rewrites (`gnomon.executable.rewrite`) run before, once, on the whole module: they are patterns that the
walker applies inside regions as anywhere else (a dropout or a batch norm in a loop body goes as it does at the top
level), and a whole module folds a constant that a region reads from outside it as well as one of its own. Then `split`
cuts the function's body at its top-level control ops into segments, and each region of those ops the same way,
recursively. A segment becomes a graph module of its own: one function whose arguments are the values it reads from
earlier code (arguments, other segments' and control ops' results, values of enclosing regions) and whose results are
those that later code reads. `graph.constant`s are cloned into each segment that reads them, so that weights never
travel between segments; the few a control op or a yield reads directly are the plan's host constants. `lower_host` then
lowers each segment with `lower`, without its inference rewrites.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue

from gnomon.dialects.graph.base import dim_names
from gnomon.dialects.graph.constant_values import constant_to_numpy
from gnomon.dialects.graph.control_flow import IfOp, WhileOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.executable import lower
from gnomon.locations import location_name
from gnomon.passes.kernel_to_rt import LoweringError
from gnomon.passes.torch_to_graph import INPUT_DIM_NAMES_ATTR
from gnomon.pipeline import INPUT_NAMES_ATTR, OUTPUT_NAMES_ATTR
from gnomon.runtime.host import Branch, HostPlan, HostRegion, Loop, Segment, Step, segments

__all__ = ["has_control_flow", "lower_host", "split"]

_SIGNATURE_ATTRS = (INPUT_NAMES_ATTR, OUTPUT_NAMES_ATTR, INPUT_DIM_NAMES_ATTR)
"""Module attributes about the whole function's signature, which a segment's does not share."""


def has_control_flow(module: ModuleOp) -> bool:
    """Whether `module` holds a `graph.if` or a `graph.while`: the native backend then builds a host plan."""
    return any(isinstance(op, IfOp | WhileOp) for op in module.walk())


def _function(module: ModuleOp) -> func.FuncOp:
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise LoweringError(f"expected one function in the module, found {len(functions)}")
    return functions[0]


class _Splitter:
    def __init__(self, module: ModuleOp, function: func.FuncOp, source: str):
        self.attributes = {k: v for k, v in module.attributes.items() if k not in _SIGNATURE_ATTRS}
        self.name = function.sym_name.data
        self.source = source
        self.slots: dict[SSAValue, int] = {}
        self.constants: dict[int, np.ndarray] = {}
        self.count = 0

    def slot(self, value: SSAValue) -> int:
        if value not in self.slots:
            self.slots[value] = len(self.slots)
            if isinstance(value.owner, ConstantOp):
                self.constants[self.slots[value]] = constant_to_numpy(value.owner.value)
        return self.slots[value]

    def static_slots(self, values: Sequence[SSAValue], op: IfOp | WhileOp) -> tuple[int, ...]:
        """The slots of a control op's results or of its regions' arguments, whose dynamic dims must be named (the
        model's own, whose sizes the inputs give): an unnamed `?` is a size that changes at run time (branches or
        trips that make different shapes), which no segment's memory plan can hold."""
        for value in values:
            unnamed = isinstance(value.type, TensorType) and any(
                d < 0 and not name for d, name in zip(value.type.get_shape(), dim_names(value.type), strict=True)
            )
            if unnamed:
                raise LoweringError(
                    f"{self.source}: {op.name} at {location_name(op.location)} carries {value.type}, whose size "
                    "changes at run time; the native backend needs static shapes (use backend='reference')"
                )
        return tuple(self.slot(v) for v in values)

    def region(self, block: Block, owner: IfOp | WhileOp | None) -> HostRegion:
        """The plan of a block: the function's body (no `owner`: `lower` checks its arguments' shapes) or a region
        of a control op."""
        args = tuple(map(self.slot, block.args)) if owner is None else self.static_slots(block.args, owner)
        steps: list[Step] = []
        pending: list[Operation] = []
        for op in block.ops:
            if isinstance(op, IfOp | WhileOp):
                steps += self.segment(block, pending)
                pending = []
                steps.append(self.control(op))
            elif op is block.last_op:  # func.return or graph.yield
                steps += self.segment(block, pending)
            elif not isinstance(op, ConstantOp):
                pending.append(op)
        terminator = block.last_op
        assert terminator is not None
        return HostRegion(args, tuple(steps), tuple(self.slot(v) for v in terminator.operands))

    def control(self, op: IfOp | WhileOp) -> Branch | Loop:
        results = self.static_slots(op.outputs, op)
        if isinstance(op, IfOp):
            then, otherwise = self.region(op.then_region.block, op), self.region(op.else_region.block, op)
            return Branch(self.slot(op.pred), then, otherwise, results)
        inits = tuple(self.slot(v) for v in op.inits)
        return Loop(inits, self.region(op.cond_region.block, op), self.region(op.body_region.block, op), results)

    def segment(self, block: Block, ops: list[Operation]) -> list[Segment]:
        """The segment of `ops` (consecutive ops of `block`), or none when later code reads none of its values."""
        inside = set(ops)
        outputs = [
            result
            for op in ops
            for result in op.results
            if any(block.find_ancestor_op_in_block(use.operation) not in inside for use in result.uses)
        ]
        if not outputs:
            return []
        inputs: dict[SSAValue, None] = {}
        constants: dict[ConstantOp, None] = {}
        for op in ops:
            for operand in op.operands:
                if isinstance(operand.owner, ConstantOp):
                    constants[operand.owner] = None
                elif operand.owner not in inside:
                    inputs[operand] = None
        body = Block(arg_types=[v.type for v in inputs])
        mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args, strict=True))
        for constant in constants:
            body.add_op(constant.clone(mapping))
        for op in ops:
            body.add_op(op.clone(mapping))
        body.add_op(func.ReturnOp(*(mapping[v] for v in outputs)))
        name = f"{self.name}_{self.count}"
        self.count += 1
        function_type = FunctionType.from_lists(list(body.arg_types), [v.type for v in outputs])
        module = ModuleOp([func.FuncOp(name, function_type, Region(body))])
        module.attributes |= self.attributes
        return [Segment(module, tuple(self.slot(v) for v in inputs), tuple(self.slot(v) for v in outputs))]


def split(module: ModuleOp, source: str = "the model") -> HostPlan:
    """The host plan of `module`'s one function; its segments are graph modules, not yet lowered. `source` names
    the model in errors."""
    function = _function(module)
    splitter = _Splitter(module, function, source)
    body = splitter.region(function.body.block, None)
    return HostPlan(body, splitter.constants, len(splitter.slots))


def lower_host(
    module: ModuleOp,
    source: str = "the model",
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    **options: Any,
) -> HostPlan:
    """Split `module`, rewritten already (`gnomon.executable.rewrite`), and lower each segment (`lower`'s
    `options`: device, decisions, layouts, tuned, layout). With `dump_ir`, each segment's lowering goes into a
    subdirectory named after its function."""
    plan = split(module, source)
    for segment in segments(plan.body):
        name = _function(segment.module).sym_name.data
        where = None if dump_ir is None else Path(dump_ir) / name
        lower(segment.module, f"{source} (@{name})", verify_each=verify_each, dump_ir=where, rewrites=False, **options)
    return plan
