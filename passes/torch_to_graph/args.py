"""Typed access to a torch op's arguments by name, for the converters of `torch-to-graph`.

torch ops take scalars and lists as SSA values produced by `torch.constant.*` and
`torch.prim.ListConstruct`; converters need them as Python values. An argument that is not a
compile-time constant raises `NotConvertible`, which the pass reports as an unsupported op.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    TensorType,
    UnrealizedConversionCastOp,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from gnomon.dialects.graph.base import TensorT
from gnomon.dialects.graph.constant_values import dense_to_numpy
from gnomon.dialects.graph.elementwise import CastOp
from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.dialects.torch import (
    ConstantBoolOp,
    ConstantFloatOp,
    ConstantIntOp,
    ConstantNoneOp,
    ConstantStrOp,
    NoneType,
    PrimListConstructOp,
    ValueTensorLiteralOp,
    ValueTensorType,
)


class NotConvertible(Exception):
    """The op cannot be expressed in the graph dialect (its message says why)."""


class AtenArgs:
    """The operands of one torch op, named by its signature, plus a place to emit graph ops."""

    def __init__(self, op: Operation, names: Sequence[str], rewriter: PatternRewriter) -> None:
        if len(op.operands) != len(names):
            raise NotConvertible(f"expected {len(names)} operands ({' '.join(names)}), got {len(op.operands)}")
        self.op = op
        self.values = dict(zip(names, op.operands, strict=True))
        self.rewriter = rewriter

    # ---- emitting ----

    def emit(self, op: Operation) -> Operation:
        """Insert a new op before the converted one, at its location."""
        op.location = self.op.location
        self.rewriter.insert(op, InsertPoint.before(self.op))
        return op

    def value(self, op: Operation) -> SSAValue:
        """Emit a single-result op and return its result."""
        return self.emit(op).results[0]

    # ---- tensors ----

    def tensor(self, name: str) -> SSAValue:
        """The named tensor operand as a builtin-tensor value."""
        value = self.values[name]
        if isinstance(value.type, TensorType):
            return value
        if not isinstance(value.type, ValueTensorType):
            raise NotConvertible(f"operand '{name}' is not a tensor ({value.type})")
        builtin = value.type.to_builtin()
        if builtin is None:
            raise NotConvertible(f"operand '{name}' has no static rank and dtype ({value.type})")
        # Produced by an op that failed to convert: bridge it so that conversion (and error
        # reporting) can go on; the pass fails before the bridge could survive.
        cast = UnrealizedConversionCastOp.get([value], [builtin])
        return self.value(cast)

    def optional_tensor(self, name: str) -> SSAValue | None:
        return None if self.is_none(name) else self.tensor(name)

    def constant_scalar(self, name: str) -> float | None:
        """The value of a one-element constant tensor operand (ONNX passes scalars so), else None."""
        owner = self.values[name].owner
        if isinstance(owner, ConstantOp | ValueTensorLiteralOp) and isinstance(owner.value, DenseIntOrFPElementsAttr):
            array = dense_to_numpy(owner.value)
            if array is not None and array.size == 1:
                return float(array.reshape(-1)[0])
        return None

    def tensor_as(self, name: str, element_type: Attribute) -> SSAValue:
        """The tensor operand converted to `element_type` (torch promotes mixed dtypes implicitly)."""
        return self.cast(self.tensor(name), element_type)

    def cast(self, value: SSAValue, element_type: Attribute) -> SSAValue:
        value_type = tensor_type(value)
        if value_type.get_element_type() == element_type:
            return value
        return self.value(
            CastOp.build(operands=[value], result_types=[TensorType(element_type, value_type.get_shape())])
        )

    def scalar_tensor(self, value: float | int, element_type: Attribute) -> SSAValue:
        """A 0-d constant, for torch's tensor-scalar op forms."""
        if isinstance(element_type, IntegerType):
            value = int(value)
        attr = DenseIntOrFPElementsAttr.from_list(TensorType(element_type, []), [value])
        return self.value(ConstantOp.build(properties={"value": attr}, result_types=[attr.get_type()]))

    def splat_tensor(self, value: float, element_type: Attribute, shape: Sequence[int]) -> SSAValue:
        """A constant filled with one value, for defaults torch leaves implicit (a missing bias)."""
        attr = DenseIntOrFPElementsAttr.from_list(TensorType(element_type, shape), [value])
        return self.value(ConstantOp.build(properties={"value": attr}, result_types=[attr.get_type()]))

    def result_type(self, index: int = 0) -> TensorT:
        torch_type = self.op.results[index].type
        builtin = torch_type.to_builtin() if isinstance(torch_type, ValueTensorType) else None
        if builtin is None:
            raise NotConvertible(f"result #{index} has no static rank and dtype ({torch_type})")
        return builtin

    def result_dtype(self, index: int = 0) -> Attribute:
        return self.result_type(index).get_element_type()

    # ---- scalars and lists ----

    def is_none(self, name: str) -> bool:
        return isinstance(self.values[name].type, NoneType)

    def int(self, name: str) -> int:
        return _const_int(self.values[name], name)

    def optional_int(self, name: str) -> int | None:
        return None if self.is_none(name) else self.int(name)

    def float(self, name: str) -> float:
        """A float argument; torch passes ints where floats are allowed."""
        owner = self.values[name].owner
        if isinstance(owner, ConstantFloatOp):
            return owner.value.value.data
        if isinstance(owner, ConstantIntOp):
            return float(owner.value.value.data)
        raise NotConvertible(f"argument '{name}' is not a constant number")

    def optional_float(self, name: str) -> float | None:
        return None if self.is_none(name) else self.float(name)

    def bool(self, name: str) -> bool:
        owner = self.values[name].owner
        if isinstance(owner, ConstantBoolOp):
            return bool(owner.value.value.data)
        if isinstance(owner, ConstantIntOp):
            return bool(owner.value.value.data)
        raise NotConvertible(f"argument '{name}' is not a constant bool")

    def str(self, name: str) -> str:
        owner = self.values[name].owner
        if isinstance(owner, ConstantStrOp):
            return owner.value.data
        raise NotConvertible(f"argument '{name}' is not a constant string")

    def ints(self, name: str) -> list[int]:
        return [_const_int(v, name) for v in self.list(name)]

    def optional_ints(self, name: str) -> list[int] | None:
        return None if self.is_none(name) else self.ints(name)

    def list(self, name: str) -> Sequence[SSAValue]:
        owner = self.values[name].owner
        if not isinstance(owner, PrimListConstructOp):
            raise NotConvertible(f"argument '{name}' is not a constant list")
        return owner.elements

    def tensors(self, name: str) -> list[SSAValue]:
        """A list-of-tensors argument (concat's inputs), each as a builtin-tensor value."""
        values = self.list(name)
        converted: list[SSAValue] = []
        for i, value in enumerate(values):
            self.values[f"{name}#{i}"] = value
            converted.append(self.tensor(f"{name}#{i}"))
        return converted


def tensor_type(value: SSAValue) -> TensorT:
    if not isinstance(value.type, TensorType):
        raise NotConvertible(f"value of type {value.type} is not a ranked tensor")
    return value.type


def _const_int(value: SSAValue, name: str) -> int:
    owner = value.owner
    if isinstance(owner, ConstantIntOp):
        return owner.value.value.data
    if isinstance(owner, ConstantBoolOp):
        return int(owner.value.value.data)
    if isinstance(owner, ConstantNoneOp):
        raise NotConvertible(f"argument '{name}' is None where an int is needed")
    raise NotConvertible(f"argument '{name}' is not a constant int (dynamic shapes are not supported yet)")
