"""Typed access to a torch op's arguments by name, for the converters of `torch-to-graph`.

torch ops take scalars and lists as SSA values produced by `torch.constant.*` and
`torch.prim.ListConstruct`; converters need them as Python values. An argument that is not a
compile-time constant raises `NotConvertible`, which the pass reports as an unsupported op.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnrealizedConversionCastOp,
)
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from gnomon.dialects.graph.base import TensorT
from gnomon.dialects.graph.constant_values import (
    compact_splat,
    dense_to_numpy,
    element_count,
    numpy_dtype,
    numpy_to_dense,
)
from gnomon.dialects.graph.elementwise import CastOp
from gnomon.dialects.graph.integer_folding import fold_integer_op
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
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


def torch_op_name(op: Operation) -> str:
    """`torch.aten.conv2d` for parsed aten ops; `onnx.Foo` for ONNX ops torch-mlir left as `torch.operator`."""
    name = op.attributes.get("op_name__")
    name = name.data if isinstance(name, StringAttr) else op.name
    if name == "torch.operator":
        inner = op.properties.get("name") or op.attributes.get("name")
        if isinstance(inner, StringAttr):
            return inner.data
    return name


class NotConvertible(Exception):
    """The op cannot be expressed in the graph dialect (its message says why)."""


class AtenArgs:
    """The operands of one torch op, named by its signature, plus a place to emit graph ops.

    A name ending in `?` is an optional trailing operand (ONNX ops omit absent inputs at the end);
    an absent one reads as None. A last name starting with `*` takes the remaining operands (`self.rest`).
    """

    def __init__(self, op: Operation, names: Sequence[str], rewriter: PatternRewriter) -> None:
        variadic = bool(names) and names[-1].startswith("*")
        names = names[:-1] if variadic else names
        required = [n for n in names if not n.endswith("?")]
        if not len(required) <= len(op.operands) <= (len(op.operands) if variadic else len(names)):
            raise NotConvertible(f"expected {len(names)} operands ({' '.join(names)}), got {len(op.operands)}")
        self.op = op
        self.values = dict(zip((n.removesuffix("?") for n in names), op.operands, strict=False))
        self.rest: list[SSAValue] = list(op.operands[len(names) :]) if variadic else []
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

    def _function_attributes(self) -> dict[str, Attribute]:
        function = self.op.parent_op()
        while function is not None and not isinstance(function, func.FuncOp):
            function = function.parent_op()
        return {} if function is None else function.attributes

    def from_onnx(self) -> bool:
        """Whether the op comes from torch-mlir's ONNX lowering (its function carries `torch.onnx_meta.*`):
        the few aten ops it uses with ONNX rather than torch semantics need to know."""
        return any(name.startswith("torch.onnx_meta.") for name in self._function_attributes())

    def onnx_opset(self) -> int:
        """The default-domain opset of the op's ONNX model, which decides the defaults of its attributes."""
        opset = self._function_attributes().get("torch.onnx_meta.opset_version")
        if not isinstance(opset, IntegerAttr):
            raise NotConvertible("an ONNX op outside an imported ONNX model (no opset version)")
        return opset.value.data

    def inline(self, region: Region, arguments: Sequence[SSAValue]) -> list[SSAValue]:
        """The values a body of the op yields for `arguments`: its ops cloned before the op. The body is an ONNX
        subgraph attribute (FlexAttention's score_mod), converted before its op: graph ops over builtin tensors."""
        block = region.blocks.first
        if block is None or [arg.type for arg in block.args] != [value.type for value in arguments]:
            expected = "" if block is None else ", ".join(str(arg.type) for arg in block.args)
            given = ", ".join(str(value.type) for value in arguments)
            raise NotConvertible(f"a subgraph over ({expected}) given ({given})")
        values: dict[SSAValue, SSAValue] = dict(zip(block.args, arguments, strict=True))
        for op in block.ops:
            if op is block.last_op:  # the terminator
                return [values.get(value, value) for value in op.operands]
            clone = op.clone(values)
            values.update(zip(op.results, clone.results, strict=True))
            self.rewriter.insert(clone, InsertPoint.before(self.op))
        raise NotConvertible("a subgraph without a terminator")

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

    def reshape(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`value` with `shape` (its own element type): itself where it has that shape already."""
        value_type = tensor_type(value)
        if tuple(value_type.get_shape()) == tuple(shape):
            return value
        return self.value(
            ReshapeOp.build(operands=[value], result_types=[TensorType(value_type.get_element_type(), shape)])
        )

    def cast(self, value: SSAValue, element_type: Attribute) -> SSAValue:
        value_type = tensor_type(value)
        if value_type.get_element_type() == element_type:
            return value
        return self.value(
            CastOp.build(operands=[value], result_types=[TensorType(element_type, value_type.get_shape())])
        )

    def constant(self, array: np.ndarray, element_type: Attribute) -> SSAValue:
        """A graph.constant holding `array`, converted to `element_type`."""
        attr = numpy_to_dense(np.asarray(array), element_type)
        return self.value(ConstantOp.build(properties={"value": attr}, result_types=[attr.get_type()]))

    def splat(self, value: float, tensor: TensorT) -> SSAValue:
        """A constant of type `tensor` filled with `value`, stored as one element."""
        attr = compact_splat(value, tensor)
        return self.value(ConstantOp.build(properties={"value": attr}, result_types=[tensor]))

    def scalar_tensor(self, value: float | int, element_type: Attribute) -> SSAValue:
        """A 0-d constant, for torch's tensor-scalar op forms."""
        return self.constant(np.asarray(value), element_type)

    def splat_tensor(self, value: float, element_type: Attribute, shape: Sequence[int]) -> SSAValue:
        """A constant filled with one value, for defaults torch leaves implicit (a missing bias)."""
        return self.splat(value, TensorType(element_type, shape))

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
        return name not in self.values or isinstance(self.values[name].type, NoneType)

    def onnx_attr(self, name: str) -> Attribute | None:
        """An attribute of an ONNX op that torch-mlir left as `torch.operator` (`torch.onnx.<name>`)."""
        return self.op.attributes.get(f"torch.onnx.{name}")

    def onnx_attributes(self) -> list[str]:
        return [name.removeprefix("torch.onnx.") for name in self.op.attributes if name.startswith("torch.onnx.")]

    def onnx_int(self, name: str, default: int) -> int:
        attr = self.onnx_attr(name)
        if attr is None:
            return default
        if not isinstance(attr, IntegerAttr):
            raise NotConvertible(f"ONNX attribute '{name}' is not an int ({attr})")
        return attr.value.data

    def onnx_float(self, name: str, default: float) -> float:
        attr = self.onnx_attr(name)
        if attr is None:
            return default
        if not isinstance(attr, FloatAttr | IntegerAttr):
            raise NotConvertible(f"ONNX attribute '{name}' is not a number ({attr})")
        return float(attr.value.data)

    def onnx_ints(self, name: str, default: Sequence[int]) -> list[int]:
        attr = self.onnx_attr(name)
        if attr is None:
            return list(default)
        if not isinstance(attr, ArrayAttr) or not all(isinstance(v, IntegerAttr) for v in attr):
            raise NotConvertible(f"ONNX attribute '{name}' is not a list of ints ({attr})")
        return [v.value.data for v in attr if isinstance(v, IntegerAttr)]

    def onnx_str(self, name: str, default: str) -> str:
        attr = self.onnx_attr(name)
        if attr is None:
            return default
        if not isinstance(attr, StringAttr):
            raise NotConvertible(f"ONNX attribute '{name}' is not a string ({attr})")
        return attr.data

    def int(self, name: str) -> int:
        return _const_int(self.values[name], name)

    def optional_int(self, name: str) -> int | None:
        return None if self.is_none(name) else self.int(name)

    def float(self, name: str) -> float:
        """A float argument; torch passes ints where floats are allowed."""
        folded = fold_scalar(self.values[name])
        if folded is None:
            raise NotConvertible(f"argument '{name}' is not a constant number")
        return float(folded)

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

    def bools(self, name: str) -> list[bool]:
        """A constant list of bools (a backward op's `output_mask`)."""
        flags: list[bool] = []
        for i, value in enumerate(self.list(name)):
            self.values[f"{name}#{i}"] = value
            flags.append(self.bool(f"{name}#{i}"))
        return flags

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
    folded = fold_scalar(value)
    if folded is not None:
        return int(folded)
    if isinstance(value.owner, ConstantNoneOp):
        raise NotConvertible(f"argument '{name}' is None where an int is needed")
    raise NotConvertible(f"argument '{name}' is not a constant int (dynamic shapes are not supported yet)")


FOLD_LIMIT = 1024
"""Fold only tensors this small: the shape arithmetic of exported models, not data."""

_SCALAR_ARITHMETIC: dict[str, Callable[[int, int], int]] = {
    "torch.aten.add.int": operator.add, "torch.aten.sub.int": operator.sub, "torch.aten.mul.int": operator.mul,
    "torch.aten.floordiv.int": operator.floordiv, "torch.aten.remainder.int": operator.mod,
}  # fmt: skip


def fold_scalar(value: SSAValue, depth: int = 0) -> int | float | None:
    """The value of a scalar known at compile time: a constant, the `aten.item` of a small constant
    tensor (ONNX shape arithmetic), a static `aten.size.int`, or integer arithmetic on those."""
    owner = value.owner
    if isinstance(owner, ConstantIntOp | ConstantBoolOp):
        return int(owner.value.value.data)
    if isinstance(owner, ConstantFloatOp):
        return owner.value.value.data
    if not isinstance(owner, Operation) or depth > 64:
        return None
    name = torch_op_name(owner)
    if name in ("torch.aten.item", "torch.aten.Int.Tensor", "torch.aten.Float.Tensor"):
        array = fold_tensor(owner.operands[0], depth + 1)
        return array.reshape(-1)[0].item() if array is not None and array.size == 1 else None
    if name == "torch.aten.size.int":
        shape = _shape_of(owner.operands[0])
        dim = fold_scalar(owner.operands[1], depth + 1)
        if shape is None or dim is None or shape[int(dim)] == DYNAMIC_INDEX:
            return None
        return shape[int(dim)]
    if name == "torch.aten.neg.int":
        operand = fold_scalar(owner.operands[0], depth + 1)
        return None if operand is None else -int(operand)
    arithmetic = _SCALAR_ARITHMETIC.get(name)
    if arithmetic is None:
        return None
    lhs, rhs = (fold_scalar(v, depth + 1) for v in owner.operands)
    if lhs is None or rhs is None or (name in ("torch.aten.floordiv.int", "torch.aten.remainder.int") and rhs == 0):
        return None
    return arithmetic(int(lhs), int(rhs))


def _shape_of(value: SSAValue) -> tuple[int, ...] | None:
    if isinstance(value.type, TensorType):
        return value.type.get_shape()
    if isinstance(value.type, ValueTensorType):
        return value.type.shape()
    return None


def fold_tensor(value: SSAValue, depth: int = 0) -> np.ndarray | None:
    """The value of a small integer (or i1) tensor computed from constants, or None."""
    if not isinstance(value.type, TensorType | ValueTensorType):
        return None
    element = value.type.get_element_type() if isinstance(value.type, TensorType) else value.type.dtype
    dtype = numpy_dtype(element) if isinstance(element, IntegerType) else None
    if dtype is None:
        return None
    owner = value.owner
    if isinstance(owner, ConstantOp | ValueTensorLiteralOp):
        attr = owner.value
        if not isinstance(attr, DenseIntOrFPElementsAttr) or element_count(attr) > FOLD_LIMIT:
            return None
        return dense_to_numpy(attr)
    if not isinstance(owner, Operation) or depth > 64:
        return None
    operands = [fold_tensor(v, depth + 1) for v in owner.operands]
    known = [o for o in operands if o is not None]
    if len(known) != len(operands):
        return None
    folded = fold_integer_op(owner, known)
    return None if folded is None else np.asarray(folded).astype(dtype)
