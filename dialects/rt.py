"""The rt dialect: a flat schedule of kernel launches over buffers in one arena.

`kernel-to-rt` turns a function of kernels on tensors into a function on memrefs: every
intermediate is an `rt.buffer` at a fixed offset of the function's arena (the static memory
plan, sized by the function's `rt.arena_size` attribute), weights are `rt.constant`s,
reshapes (and a concat's inputs, written into its buffer) are `rt.view`s that share their
source's memory, and each kernel is an
`rt.launch` of an outlined `kernel.func`. The runtime executes the launches in order.

Dynamic dims: a memref may have `?` dims, each named (memrefs have no encoding, so the names of the tensor's
`#graph.dims` travel beside the type): a buffer's or view's `dims` property, a function argument's `rt.dims`
argument attribute. A name is a dim's symbol (`seq`) or a product of symbols (`batch*seq`). The function's
`rt.dim_ranges` gives each symbol's range, `{seq = array<i64: 1, 128>}`; the memory plan holds every buffer at
the largest sizes, and the runtime binds views of the actual sizes at the planned offsets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure, SymbolTable, SymbolUserOpInterface
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import SymbolicDimsAttr, dim_names, dim_value, ints

__all__ = [
    "ARENA_LOWER_BOUND",
    "ARENA_SIZE",
    "DIMS",
    "DIM_RANGES",
    "UPDATES",
    "BufferOp",
    "ConstantOp",
    "LaunchOp",
    "Rt",
    "ViewOp",
    "dim_ranges",
    "dim_size",
    "dims_attr",
    "dims_of",
    "shape_at",
]

ARENA_SIZE = "rt.arena_size"
"""The attribute of an rt function that gives its arena's size in bytes."""
ARENA_LOWER_BOUND = "rt.arena_lower_bound"
"""The most bytes live at one launch: no plan of these buffers fits in a smaller arena."""
UPDATES = "rt.updates"
"""The attribute of a function (graph, kernel or rt form) whose results update its arguments, as a training step's
new parameters do: one entry per result, the index of the argument it is the new value of, or -1. `kernel-to-rt`
then lets the launch that computes such a result write it into the argument's own memory, where that is safe (the
argument is not read after it, or only by that launch, pointwise), and `verify_program` lets launches write into
those arguments only."""
DIMS = "rt.dims"
"""The argument attribute that names an rt function argument's `?` dims: `{rt.dims = #graph.dims<["seq", ""]>}`."""
DIM_RANGES = "rt.dim_ranges"
"""The attribute of an rt function with `?` dims: each symbol's smallest and largest size, `{seq = array<i64: 1,
128>}`. Its memory plan (`rt.arena_size`, every buffer's offset) holds at the largest."""


def dim_size(name: str, sizes: Mapping[str, int]) -> int:
    """The size of a named dim when each symbol has its size in `sizes`: a symbol, or a product `batch*seq`."""
    return dim_value(name, sizes)


def shape_at(memref: MemRefType, names: Sequence[str], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """The shape of `memref`, its `?` dims named `names`, when each symbol has its size in `sizes`."""
    return tuple(
        dim_size(name, sizes) if d == DYNAMIC_INDEX else d for d, name in zip(memref.get_shape(), names, strict=True)
    )


def dims_attr(tensor_type: Attribute) -> SymbolicDimsAttr | None:
    """The names of a tensor type's `?` dims (its `#graph.dims` encoding), as an rt value carries them."""
    assert isinstance(tensor_type, TensorType)
    names = [n if d == DYNAMIC_INDEX else "" for d, n in zip(tensor_type.get_shape(), dim_names(tensor_type))]
    return SymbolicDimsAttr(ArrayAttr(StringAttr(n) for n in names)) if any(names) else None


def _names(dims: SymbolicDimsAttr | None, rank: int) -> tuple[str, ...]:
    return tuple(n.data for n in dims.names.data) if dims is not None else ("",) * rank


def dims_of(value: SSAValue) -> tuple[str, ...]:
    """The name of each dim of an rt value ("" for a static dim): a buffer's or view's `dims`, a function
    argument's `rt.dims`; a constant is static."""
    memref = value.type
    assert isinstance(memref, MemRefType)
    rank = memref.get_num_dims()
    owner = value.owner
    if isinstance(owner, BufferOp | ViewOp):
        return _names(owner.dims, rank)
    if not isinstance(value, BlockArgument) or not isinstance(owner, Block):
        return ("",) * rank
    function = owner.parent_op()
    if not isinstance(function, func.FuncOp) or function.arg_attrs is None:
        return ("",) * rank
    dims = function.arg_attrs.data[value.index].data.get(DIMS)
    return _names(dims if isinstance(dims, SymbolicDimsAttr) else None, rank)


def dim_ranges(function: Operation) -> dict[str, tuple[int, int]]:
    """An rt function's `rt.dim_ranges`: symbol -> (smallest, largest) size; empty when it has no `?` dims."""
    ranges = function.attributes.get(DIM_RANGES)
    if not isinstance(ranges, DictionaryAttr):
        return {}
    found: dict[str, tuple[int, int]] = {}
    for symbol, value in ranges.data.items():
        if isinstance(value, DenseArrayBase):
            low, high = ints(value)
            found[symbol] = (low, high)
    return found


def _verify_dims(op: str, memref: MemRefType, dims: SymbolicDimsAttr | None) -> None:
    """Every `?` dim of `memref` is named by `dims`, and only those."""
    shape = memref.get_shape()
    names = _names(dims, len(shape))
    if len(names) != len(shape):
        raise VerifyException(f"{op}: dims {list(names)} do not name the {len(shape)} dims of {memref}")
    for axis, (d, name) in enumerate(zip(shape, names, strict=True)):
        if (d == DYNAMIC_INDEX) != bool(name):
            what = "is `?` without a name" if name == "" else f"is static, named {name!r}"
            raise VerifyException(f"{op}: dim {axis} of {memref} {what}")


def _count(memref: MemRefType, names: Sequence[str]) -> tuple[int, list[str]]:
    """A memref's element count: the product of its static dims, and the symbols its `?` dims multiply by."""
    static = prod(d for d in memref.get_shape() if d != DYNAMIC_INDEX)
    factors: list[str] = []
    for name in names:
        if "+" in name:  # a sum is one factor
            factors.append(name)
            continue
        static *= prod(int(part) for part in name.split("*") if part.isdigit())
        factors += [part for part in name.split("*") if part and not part.isdigit()]
    return static, sorted(factors)


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A buffer at a byte offset of the enclosing function's arena; `dims` names its `?` dims.

    `%b = rt.buffer 4096 : memref<1x64x56x56xf32>`
    `%s = rt.buffer 0 dims #graph.dims<["", "seq", ""]> : memref<2x?x32xf32>`
    """

    name = "rt.buffer"
    offset = prop_def(IntegerAttr)
    dims = opt_prop_def(SymbolicDimsAttr)
    """The name of each dim ("" for a static one); required where the type has `?` dims."""
    result = result_def(MemRefType)
    traits = traits_def(Pure())

    def __init__(self, offset: int, memref_type: MemRefType, dims: SymbolicDimsAttr | None = None):
        properties: dict[str, Attribute] = {"offset": IntegerAttr(offset, i64)}
        if dims is not None:
            properties["dims"] = dims
        super().__init__(properties=properties, result_types=[memref_type])

    def verify_(self) -> None:
        if self.offset.value.data < 0:
            raise VerifyException(f"rt.buffer: offset {self.offset.value.data} is negative")
        memref = self.result.type
        assert isinstance(memref, MemRefType)
        _verify_dims("rt.buffer", memref, self.dims)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.offset.value.data}")
        if self.dims is not None:
            printer.print_string(" dims ")
            printer.print_attribute(self.dims)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> BufferOp:
        offset = parser.parse_integer(allow_negative=False, allow_boolean=False)
        dims = _parse_dims(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error(f"rt.buffer: expected a memref type, got {memref_type}")
        op = BufferOp(offset, memref_type, dims)
        op.attributes |= attributes
        return op


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A read-only buffer holding constant data (weights), outside the arena.

    `%w = rt.constant dense_resource<w0> : tensor<64x3x7x7xf32> -> memref<64x3x7x7xf32>`
    """

    name = "rt.constant"
    value = prop_def(DenseResourceAttr | DenseIntOrFPElementsAttr)
    result = result_def(MemRefType)
    traits = traits_def(Pure())

    assembly_format = "$value attr-dict `->` type($result)"

    def __init__(self, value: DenseResourceAttr | DenseIntOrFPElementsAttr, memref_type: MemRefType):
        super().__init__(properties={"value": value}, result_types=[memref_type])

    def verify_(self) -> None:
        value_type = self.value.type
        memref_type = self.result.type
        assert isinstance(memref_type, MemRefType)
        if not isinstance(value_type, TensorType) or (
            value_type.get_shape() != memref_type.get_shape() or value_type.element_type != memref_type.element_type
        ):
            raise VerifyException(f"rt.constant: value of type {value_type} does not fill {memref_type}")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """The same memory seen with another shape: a reshape of its source (a contiguous reinterpretation
    costs nothing), or, with an element offset, a contiguous window of it (a concat's input written
    straight into its slot of the concat's buffer). A window is static; a reshape may have `?` dims, named by
    `dims` as a buffer's are, multiplying to its source's.

    `%v = rt.view %b : memref<1x512x1x1xf32> -> memref<1x512xf32>`
    `%w = rt.view %b [3136] : memref<1x96x56x56xf32> -> memref<1x32x56x56xf32>`
    `%h = rt.view %s dims #graph.dims<["", "seq", "", ""]> : memref<2x?x32xf32> -> memref<2x?x4x8xf32>`
    """

    name = "rt.view"
    source = operand_def(MemRefType)
    offset = opt_prop_def(IntegerAttr)
    """Elements of the source before the window; absent for a reshape of the whole source."""
    dims = opt_prop_def(SymbolicDimsAttr)
    """The name of each dim of the result ("" for a static one); required where it has `?` dims."""
    result = result_def(MemRefType)
    traits = traits_def(Pure())

    def __init__(
        self,
        source: SSAValue,
        memref_type: MemRefType,
        offset: int | None = None,
        dims: SymbolicDimsAttr | None = None,
    ):
        properties: dict[str, Attribute] = {} if offset is None else {"offset": IntegerAttr(offset, i64)}
        if dims is not None:
            properties["dims"] = dims
        super().__init__(operands=[source], properties=properties, result_types=[memref_type])

    @property
    def element_offset(self) -> int:
        return 0 if self.offset is None else self.offset.value.data

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType)
        assert isinstance(result, MemRefType)
        if source.element_type != result.element_type:
            raise VerifyException(f"rt.view: {source} and {result} differ in element type")
        _verify_dims("rt.view", result, self.dims)
        if not source.has_static_shape() or not result.has_static_shape():
            if self.offset is not None:
                raise VerifyException(f"rt.view: a window of {source} as {result} has `?` dims; windows are static")
            if _count(source, dims_of(self.source)) != _count(result, _names(self.dims, result.get_num_dims())):
                raise VerifyException(f"rt.view: {source} and {result} differ in element count")
            return
        if self.offset is None and prod(source.get_shape()) != prod(result.get_shape()):
            raise VerifyException(f"rt.view: {source} and {result} differ in element count")
        end = self.element_offset + prod(result.get_shape())
        if self.element_offset < 0 or end > prod(source.get_shape()):
            raise VerifyException(
                f"rt.view: elements {self.element_offset}..{end} of {result} do not lie within {source}"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        if self.offset is not None:
            printer.print_string(f" [{self.offset.value.data}]")
        if self.dims is not None:
            printer.print_string(" dims ")
            printer.print_attribute(self.dims)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ViewOp:
        unresolved = parser.parse_unresolved_operand()
        offset = None
        if parser.parse_optional_punctuation("[") is not None:
            offset = parser.parse_integer(allow_negative=False, allow_boolean=False)
            parser.parse_punctuation("]")
        dims = _parse_dims(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        if not isinstance(source_type, MemRefType) or not isinstance(result_type, MemRefType):
            parser.raise_error(f"rt.view: expected memref types, got {source_type} -> {result_type}")
        op = ViewOp(parser.resolve_operand(unresolved, source_type), result_type, offset, dims)
        op.attributes |= attributes
        return op


def _parse_dims(parser: Parser) -> SymbolicDimsAttr | None:
    """An optional `dims #graph.dims<[...]>`."""
    if parser.parse_optional_keyword("dims") is None:
        return None
    dims = parser.parse_attribute()
    if not isinstance(dims, SymbolicDimsAttr):
        parser.raise_error(f"expected #graph.dims after `dims`, got {dims}")
    return dims


class _LaunchCalleeMatches(SymbolUserOpInterface):
    """`rt.launch`'s buffers have the shapes, element types and dim names of its kernel's tensors."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, LaunchOp)
        from gnomon.dialects.kernel import FuncOp

        kernel = SymbolTable.lookup_symbol(op, op.callee)
        if not isinstance(kernel, FuncOp):
            raise VerifyException(f"rt.launch: @{op.callee.string_value()} is not a kernel.func")
        given = [*op.ins, *op.outs]
        expected = [*kernel.function_type.inputs.data, *kernel.function_type.outputs.data]
        if len(given) != len(expected):
            raise VerifyException(
                f"rt.launch: @{op.callee.string_value()} takes {len(kernel.function_type.inputs)} inputs and "
                f"{len(kernel.function_type.outputs)} outputs, got {len(op.ins)} and {len(op.outs)}"
            )
        for index, (value, tensor) in enumerate(zip(given, expected, strict=True)):
            memref = value.type
            assert isinstance(memref, MemRefType)
            assert isinstance(tensor, TensorType)
            if memref.get_shape() != tensor.get_shape() or memref.element_type != tensor.element_type:
                raise VerifyException(
                    f"rt.launch: buffer {index} of @{op.callee.string_value()} is {memref}, the kernel expects {tensor}"
                )
            if not memref.has_static_shape() and dims_of(value) != _names(dims_attr(tensor), memref.get_num_dims()):
                raise VerifyException(
                    f"rt.launch: buffer {index} of @{op.callee.string_value()} has dims {list(dims_of(value))}, the "
                    f"kernel expects {tensor}"
                )


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a `kernel.func` on input buffers, writing its results into output buffers.

    `rt.launch @conv_relu_0(%x, %w, %b) outs(%y) : (memref<...>, memref<...>, memref<...>) -> (memref<...>)`
    """

    name = "rt.launch"
    callee = prop_def(SymbolRefAttr)
    ins = var_operand_def(MemRefType)
    outs = var_operand_def(MemRefType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(_LaunchCalleeMatches())

    assembly_format = (
        "$callee `(` $ins `)` `outs` `(` $outs `)` attr-dict `:` `(` type($ins) `)` `->` `(` type($outs) `)`"
    )

    def __init__(self, callee: str, ins: Sequence[SSAValue], outs: Sequence[SSAValue]):
        super().__init__(operands=[ins, outs], properties={"callee": SymbolRefAttr(callee)})


def memref_of(tensor_type: Attribute) -> MemRefType:
    """The memref type of a tensor type (the runtime's buffers are row-major and dense); its `?` dims' names are
    `dims_attr(tensor_type)`."""
    assert isinstance(tensor_type, TensorType)
    return MemRefType(tensor_type.element_type, tensor_type.get_shape())


Rt = Dialect("rt", [BufferOp, ConstantOp, LaunchOp, ViewOp])
