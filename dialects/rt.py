"""The rt dialect: a flat schedule of kernel launches over buffers in one arena.

`kernel-to-rt` turns a function of kernels on tensors into a function on memrefs: every
intermediate is an `rt.buffer` at a fixed offset of the function's arena (the static memory
plan, sized by the function's `rt.arena_size` attribute), weights are `rt.constant`s,
reshapes (and a concat's inputs, written into its buffer) are `rt.view`s that share their
source's memory, and each kernel is an
`rt.launch` of an outlined `kernel.func`. The runtime executes the launches in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    IntegerAttr,
    MemRefType,
    SymbolRefAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
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

__all__ = ["ARENA_LOWER_BOUND", "ARENA_SIZE", "UPDATES", "BufferOp", "ConstantOp", "LaunchOp", "Rt", "ViewOp"]

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


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A buffer at a byte offset of the enclosing function's arena.

    `%b = rt.buffer 4096 : memref<1x64x56x56xf32>`
    """

    name = "rt.buffer"
    offset = prop_def(IntegerAttr)
    result = result_def(MemRefType)
    traits = traits_def(Pure())

    def __init__(self, offset: int, memref_type: MemRefType):
        super().__init__(properties={"offset": IntegerAttr(offset, i64)}, result_types=[memref_type])

    def verify_(self) -> None:
        if self.offset.value.data < 0:
            raise VerifyException(f"rt.buffer: offset {self.offset.value.data} is negative")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.offset.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> BufferOp:
        offset = parser.parse_integer(allow_negative=False, allow_boolean=False)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error(f"rt.buffer: expected a memref type, got {memref_type}")
        op = BufferOp(offset, memref_type)
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
    straight into its slot of the concat's buffer).

    `%v = rt.view %b : memref<1x512x1x1xf32> -> memref<1x512xf32>`
    `%w = rt.view %b [3136] : memref<1x96x56x56xf32> -> memref<1x32x56x56xf32>`
    """

    name = "rt.view"
    source = operand_def(MemRefType)
    offset = opt_prop_def(IntegerAttr)
    """Elements of the source before the window; absent for a reshape of the whole source."""
    result = result_def(MemRefType)
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, memref_type: MemRefType, offset: int | None = None):
        properties = {} if offset is None else {"offset": IntegerAttr(offset, i64)}
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
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        if not isinstance(source_type, MemRefType) or not isinstance(result_type, MemRefType):
            parser.raise_error(f"rt.view: expected memref types, got {source_type} -> {result_type}")
        op = ViewOp(parser.resolve_operand(unresolved, source_type), result_type, offset)
        op.attributes |= attributes
        return op


class _LaunchCalleeMatches(SymbolUserOpInterface):
    """`rt.launch`'s buffers have the shapes and element types of its kernel's tensors."""

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
    """The memref type of a static tensor type (the runtime's buffers are row-major and dense)."""
    assert isinstance(tensor_type, TensorType)
    return MemRefType(tensor_type.element_type, tensor_type.get_shape())


Rt = Dialect("rt", [BufferOp, ConstantOp, LaunchOp, ViewOp])
