"""What every graph op shares: one textual form, and shape rules checked by the verifier.

Textual form (the same for every op, so a reader learns it once):

    %y = graph.conv %x, %w, %b {strides = array<i64: 2, 2>, ...} : (tensor<…>, tensor<…>, tensor<…>) -> tensor<…>

Operands are listed in definition order. An op has at most one optional or variadic operand
group, so the operand count alone says which operands are present; properties are printed
in the attribute dictionary.

Shape rule: every op implements `infer_result_types`, which validates its operands (raising
`VerifyException` with the operand names and values involved) and returns the result types it
implies. The verifier requires the declared results to be compatible with them (a `?` dim
matches any size); `graph-shape-inference` uses the same rule to refine `?` dims.

Symbolic dims: a `?` dim may carry a name, in the tensor type's encoding:
`tensor<?x3x224x224xf32, #graph.dims<["N", "", "", ""]>>` (one entry per dim, "" for none).
`shape_of` hands a named `?` to the rules as a `SymbolicDim`, an int equal to `?` that keeps its
name, so every rule that passes a dim through (batch dims, broadcasting, permutations) carries
the name to `tensor_of`, which writes it back into the result type. Arithmetic on a `?` gives an
unnamed `?`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeVar, cast

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.irdl import IRDLOperation, OperandOrResultDef, VariadicDef, irdl_attr_definition
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

Shape = tuple[int, ...]
TensorT = TensorType[Attribute]
DYN = DYNAMIC_INDEX


class GraphOperation(IRDLOperation):
    """Base of all graph ops: the shared assembly format and the shape-rule check."""

    def infer_result_types(self) -> Sequence[TensorT]:
        """The result types implied by the operands and properties; raises VerifyException on bad operands."""
        raise NotImplementedError(f"{self.name} has no shape rule")

    def verify_(self) -> None:
        inferred = self.infer_result_types()
        if len(inferred) != len(self.results):
            raise VerifyException(f"{self.name}: expected {len(inferred)} results, got {len(self.results)}")
        for index, (result, expected) in enumerate(zip(self.results, inferred, strict=True)):
            if not types_compatible(result.type, expected):
                name = "result" if len(self.results) == 1 else f"result #{index}"
                raise VerifyException(f"{self.name}: {name} type {result.type} does not match inferred type {expected}")

    # ---- textual form ----

    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        attrs = {name: value for name, value in self.properties.items() if name != "operandSegmentSizes"}
        attrs |= self.attributes
        printer.print_op_attributes(attrs)
        printer.print_string(" : ")
        printer.print_function_type((o.type for o in self.operands), (r.type for r in self.results))

    @classmethod
    def parse(cls, parser: Parser) -> GraphOperation:
        position = parser.pos
        unresolved = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        )
        unresolved = unresolved or []
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        function_type = parser.parse_function_type()
        operands = parser.resolve_operands(unresolved, function_type.inputs.data, position)
        op_def = cls.get_irdl_definition()
        properties = {name: value for name, value in attrs.items() if name in op_def.properties}
        attributes = {name: value for name, value in attrs.items() if name not in op_def.properties}
        return cls.build(
            operands=_group(cls.name, "operands", op_def.operands, operands),
            result_types=_group(cls.name, "results", op_def.results, function_type.outputs.data),
            properties=properties,
            attributes=attributes,
        )


T = TypeVar("T")


def _group(
    op_name: str, what: str, defs: Sequence[tuple[str, OperandOrResultDef]], values: Sequence[T]
) -> list[T | list[T]]:
    """Split a flat operand (or result) list over the op's definitions; only one group may be optional or variadic."""
    fixed = sum(1 for _, d in defs if not isinstance(d, VariadicDef))
    spare = len(values) - fixed
    if spare < 0:
        raise VerifyException(f"{op_name}: expected at least {fixed} {what}, got {len(values)}")
    grouped: list[T | list[T]] = []
    index = 0
    for _, value_def in defs:
        if isinstance(value_def, VariadicDef):
            grouped.append(list(values[index : index + spare]))
            index += spare
            continue
        grouped.append(values[index])
        index += 1
    if index != len(values):
        raise VerifyException(f"{op_name}: expected {fixed} {what}, got {len(values)}")
    return grouped


# ---- types and shapes ----


@irdl_attr_definition
class SymbolicDimsAttr(ParametrizedAttribute):
    """Names of a tensor's dynamic dims, as its encoding: `#graph.dims<["N", "", "", ""]>`.

    One entry per dim; "" for a static or unnamed dim. A name says which `?` dims are equal.
    """

    name = "graph.dims"

    names: ArrayAttr[StringAttr]

    def verify(self) -> None:
        if all(not n.data for n in self.names.data):
            raise VerifyException("#graph.dims names no dim: drop the encoding instead")


class SymbolicDim(int):
    """A `?` dim with a name: equal to DYNAMIC_INDEX, so shape rules treat it as any other `?`."""

    symbol: str

    def __new__(cls, symbol: str) -> SymbolicDim:
        dim = super().__new__(cls, DYN)
        dim.symbol = symbol
        return dim

    def __repr__(self) -> str:
        return self.symbol


def dim_symbols(name: str) -> list[str]:
    """The symbols in a dim's name: `seq` -> [seq], `2*batch*seq` -> [batch, seq], `past+1` -> [past] (integers are
    sizes, not symbols). A name is a symbol, a product of symbols and an integer, or a sum of those."""
    return [part for term in name.split("+") for part in term.split("*") if part and not part.isdigit()]


def dim_value(name: str, sizes: Mapping[str, int]) -> int:
    """The size a dim's name stands for when each symbol has its size in `sizes`."""
    return sum(math.prod(int(p) if p.isdigit() else sizes[p] for p in term.split("*")) for term in name.split("+"))


def product_name(factor: int, names: Sequence[str]) -> str:
    """The canonical name of a dim of `factor` times the dims named `names`: `2*batch*seq` (integer first, then the
    symbols sorted, so that equal products have equal names). A sum among `names` is kept whole only alone
    (a product of sums has no name: the caller leaves the dim unnamed)."""
    if any("+" in name for name in names):
        return names[0] if factor == 1 and len(names) == 1 else ""
    symbols: list[str] = []
    for name in names:
        for part in name.split("*"):
            if part.isdigit():
                factor *= int(part)
            elif part:
                symbols.append(part)
    return "*".join(([str(factor)] if factor != 1 else []) + sorted(symbols))


def sum_name(constant: int, names: Sequence[str]) -> str:
    """The canonical name of a dim of `constant` plus the dims named `names`: `past+1` (terms sorted, the integer
    last)."""
    terms = sorted(term for name in names for term in name.split("+") if not term.isdigit())
    constant += sum(int(term) for name in names for term in name.split("+") if term.isdigit())
    return "+".join(terms + ([str(constant)] if constant else []))


def dim_names(tensor: TensorT) -> tuple[str, ...]:
    """The name of each dim of `tensor` ("" where it has none)."""
    encoding = tensor.encoding
    if isinstance(encoding, SymbolicDimsAttr) and len(encoding.names) == tensor.get_num_dims():
        return tuple(n.data for n in encoding.names.data)
    return ("",) * tensor.get_num_dims()


def tensor_of(element_type: Attribute, shape: Sequence[int]) -> TensorT:
    """The tensor type of a rule's result: `?` dims that are `SymbolicDim`s keep their names."""
    names = [d.symbol if isinstance(d, SymbolicDim) else "" for d in shape]
    if not any(names):
        return TensorType(element_type, [int(d) for d in shape])
    return TensorType(element_type, [int(d) for d in shape], SymbolicDimsAttr(ArrayAttr(StringAttr(n) for n in names)))


def tensor_type(value: SSAValue | Attribute, what: str) -> TensorT:
    """The value's tensor type, or a VerifyException naming it."""
    attr = value.type if isinstance(value, SSAValue) else value
    if not isinstance(attr, TensorType):
        raise VerifyException(f"{what} must be a ranked tensor, got {attr}")
    return attr


def shape_of(value: SSAValue, what: str) -> Shape:
    """The value's dims; named `?` dims come as `SymbolicDim`s."""
    tensor = tensor_type(value, what)
    shape = tensor.get_shape()
    names = dim_names(tensor)
    if not any(names):
        return shape
    return tuple(SymbolicDim(n) if d == DYN and n else d for d, n in zip(shape, names, strict=True))


def dtype_of(value: SSAValue, what: str) -> Attribute:
    return tensor_type(value, what).get_element_type()


def types_compatible(actual: Attribute, expected: Attribute) -> bool:
    """Same element type and rank; each dim equal, or `?` on either side."""
    if not isinstance(actual, TensorType) or not isinstance(expected, TensorType):
        return actual == expected
    if actual.get_element_type() != expected.get_element_type():
        return False
    a, e = actual.get_shape(), expected.get_shape()
    return len(a) == len(e) and all(x == y or DYN in (x, y) for x, y in zip(a, e, strict=True))


def dim_str(d: int) -> str:
    """A dim as messages show it: its size, its name, or `?`."""
    if isinstance(d, SymbolicDim):
        return d.symbol
    return "?" if d == DYN else str(d)


def shape_str(shape: Sequence[int]) -> str:
    """A shape as messages show it: `[2, ?, 8]`."""
    return "[" + ", ".join(dim_str(d) for d in shape) + "]"


def dims_compatible(a: int, b: int) -> bool:
    return a == b or DYN in (a, b)


def broadcast_shapes(shapes: Sequence[Shape], what: str) -> Shape:
    """NumPy broadcasting; a `?` dim broadcast against n stays n (we assume it is n or 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        known = {d for d in dims if d not in (1, DYN)}
        if len(known) > 1:
            shown = ", ".join(shape_str(s) for s in shapes)
            raise VerifyException(f"{what}: shapes {shown} do not broadcast")
        if known:
            out.append(known.pop())
        elif DYN in dims:
            out.append(next((d for d in dims if isinstance(d, SymbolicDim)), DYN))
        else:
            out.append(1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < max(rank, 1):
        raise VerifyException(f"{what}: axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def multiply_dims(dims: Sequence[int]) -> int:
    """The product of dims, or `?` if any is dynamic."""
    total = 1
    for d in dims:
        if d == DYN:
            return DYN
        total *= d
    return total


DIM_BOUNDS_ATTR = "gnomon.dim_bounds"
"""Module attribute: each named dynamic dim's largest size, `{seq = 128 : i64}` (from torch.export's `Dim(max=)` or
`--input-shape seq=1..128`): the memory plan is made at these sizes."""
DIM_LOWER_BOUNDS_ATTR = "gnomon.dim_lower_bounds"
"""Module attribute: each named dynamic dim's smallest size, as `DIM_BOUNDS_ATTR` (absent: 1)."""


def dim_bounds(module: Operation) -> dict[str, tuple[int, int]]:
    """The declared range of each named dynamic dim of `module`: name -> (smallest, largest) size."""
    upper, lower = module.attributes.get(DIM_BOUNDS_ATTR), module.attributes.get(DIM_LOWER_BOUNDS_ATTR)
    lows = (
        {k: v.value.data for k, v in lower.data.items() if isinstance(v, IntegerAttr)}
        if isinstance(lower, DictionaryAttr)
        else {}
    )
    if not isinstance(upper, DictionaryAttr):
        return {}
    return {k: (lows.get(k, 1), v.value.data) for k, v in upper.data.items() if isinstance(v, IntegerAttr)}


def bounds_attrs(bounds: dict[str, tuple[int, int]]) -> dict[str, DictionaryAttr]:
    """The module attributes that declare `bounds` (name -> (smallest, largest) size)."""
    return {
        DIM_BOUNDS_ATTR: DictionaryAttr({name: IntegerAttr(high, i64) for name, (_, high) in bounds.items()}),
        DIM_LOWER_BOUNDS_ATTR: DictionaryAttr({name: IntegerAttr(low, i64) for name, (low, _) in bounds.items()}),
    }


# ---- property builders and readers, used by the op definitions and by converters ----


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def ints(attr: DenseArrayBase) -> tuple[int, ...]:
    # `get_values` is overloaded per element kind; pyright binds it on a union of arrays, not on
    # an array of a union of element types.
    values = cast("DenseArrayBase[IntegerType] | DenseArrayBase[AnyFloat]", attr).get_values()
    return tuple(int(v) for v in values)


def i64_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def f64_attr(value: float) -> FloatAttr:
    return FloatAttr(value, f64)


def bool_attr(value: bool) -> BoolAttr:
    return IntegerAttr(int(value), i1)


def str_attr(value: str) -> StringAttr:
    return StringAttr(value)
