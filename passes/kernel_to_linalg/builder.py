"""The builder every emitter of `kernel-to-linalg` appends its arith, math, scf and vector ops to."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import BaseAttr, IRDLOperation, VarConstraint, irdl_op_definition, operand_def, result_def


@irdl_op_definition
class LaneSelectOp(IRDLOperation):
    """Upstream `arith.select` with a vector of conditions, one per lane, which xDSL's `SelectOp` (a scalar
    condition) cannot hold; gnomon only prints it for MLIR."""

    name = "arith.select"
    _T: ClassVar = VarConstraint("_T", BaseAttr(VectorType))
    cond = operand_def(VectorType)
    lhs = operand_def(_T)
    rhs = operand_def(_T)
    result = result_def(_T)
    assembly_format = "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($result)"


class ScalarBuilder:
    """Appends arith/math ops to a list (the ops of a block being built), with readable helpers."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self._constants: dict[tuple[str, str], SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` and return its result."""
        self.ops.append(op)
        return op.results[0]

    def insert(self, op: Operation) -> None:
        """Append an op without results."""
        self.ops.append(op)

    def const(self, value: float | int | bool, type: Attribute) -> SSAValue:
        """A scalar constant, or a vector of it (a splat) for a vector type, emitted once per builder (repr tells
        -0.0 from 0.0)."""
        element = type.element_type if isinstance(type, VectorType) else type
        key = (str(type), repr(float(value) if isinstance(element, AnyFloat) else int(value)))
        if key not in self._constants:
            if isinstance(type, VectorType):
                splat = DenseIntOrFPElementsAttr.from_list(type, [value] * prod(type.get_shape()))
                self._constants[key] = self.emit(arith.ConstantOp(splat))
            elif isinstance(type, AnyFloat):
                self._constants[key] = self.emit(arith.ConstantOp(FloatAttr(float(value), type)))
            else:
                assert isinstance(type, IntegerType | IndexType)
                self._constants[key] = self.emit(arith.ConstantOp(IntegerAttr(int(value), type)))
        return self._constants[key]

    def like(self, value: float, x: SSAValue) -> SSAValue:
        """The float constant `value` in `x`'s type."""
        return self.const(value, x.type)

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.DivfOp(a, b))

    def cmpf(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._compare(arith.CmpfOp(a, b, predicate))

    def cmpi(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._compare(arith.CmpiOp(a, b, predicate))

    def _compare(self, op: arith.CmpfOp | arith.CmpiOp) -> SSAValue:
        """A comparison, of vectors lane by lane: xDSL's builders type every comparison's result a scalar i1."""
        shaped = op.operands[0].type
        if not isinstance(shaped, VectorType):
            return self.emit(op)
        lanes = type(op).create(
            operands=list(op.operands),
            result_types=[VectorType(IntegerType(1), shaped.get_shape())],
            properties=dict(op.properties),
        )
        op.erase()
        return self.emit(lanes)

    def select(self, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        if isinstance(condition.type, VectorType):
            return self.emit(LaneSelectOp(operands=[condition, a, b], result_types=[a.type]))
        return self.emit(arith.SelectOp(condition, a, b))

    def maximum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """NaN-propagating, as NumPy's maximum."""
        return self.emit(arith.MaximumfOp(a, b))

    def minimum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.MinimumfOp(a, b))

    def clamp(self, x: SSAValue, low: float, high: float) -> SSAValue:
        """x clamped to [low, high]; NaN comes out as `low` (maxnum ignores NaN), for range reductions."""
        return self.emit(arith.MinnumfOp(self.emit(arith.MaxnumfOp(x, self.like(low, x))), self.like(high, x)))

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        """a * b + c, rounded once: one instruction (LLVM fuses a multiply and an add only under fast-math)."""
        return self.emit(math.FmaOp(a, b, c))

    def polynomial(self, x: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """Horner's rule, one FMA a step: coefficients from the highest power down."""
        result = self.like(coefficients[0], x)
        for c in coefficients[1:]:
            result = self.fma(result, x, self.like(c, x))
        return result

    def is_nan(self, x: SSAValue) -> SSAValue:
        return self.cmpf("uno", x, x)
