"""The typed subset of torch-mlir's `torch` dialect that gnomon consumes.

torch-mlir prints its output in generic form; xDSL parses it with these types and the
structural ops below (constants, literals, lists, tuples). Computational ops
(`torch.aten.*`, `torch.operator`) are parsed as unregistered operations: there are
hundreds of them and `torch-to-graph` reads each by its name and a signature of its
own, so defining them here would only duplicate torch-mlir's ODS.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BoolAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    Signedness,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException


@irdl_attr_definition
class ValueTensorType(ParametrizedAttribute, TypeAttribute):
    """A tensor with value semantics: `!torch.vtensor<[2,?,4],f32>`, `!torch.vtensor<*,f32>`, `!torch.vtensor`.

    `?` dims are stored as `DYNAMIC_INDEX`; an unranked tensor has `NoneAttr` sizes, an unknown
    dtype `NoneAttr` dtype.
    """

    name = "torch.vtensor"

    sizes: ArrayAttr[IntAttr] | NoneAttr
    dtype: Attribute

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        if parser.parse_optional_punctuation("<") is None:
            return (NoneAttr(), NoneAttr())
        sizes: Attribute = NoneAttr()
        if parser.parse_optional_punctuation("*") is None:
            dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parser.parse_shape_dimension())
            sizes = ArrayAttr(IntAttr(d) for d in dims)
        parser.parse_punctuation(",")
        dtype: Attribute = NoneAttr() if parser.parse_optional_keyword("unk") else parser.parse_type()
        parser.parse_punctuation(">")
        return (sizes, dtype)

    def print_parameters(self, printer: Printer) -> None:
        if isinstance(self.sizes, NoneAttr) and isinstance(self.dtype, NoneAttr):
            return
        printer.print_string("<")
        if isinstance(self.sizes, NoneAttr):
            printer.print_string("*")
        else:
            dims = ("?" if d.data == DYNAMIC_INDEX else str(d.data) for d in self.sizes.data)
            printer.print_string("[" + ",".join(dims) + "]")
        printer.print_string(",")
        if isinstance(self.dtype, NoneAttr):
            printer.print_string("unk")
        else:
            printer.print_attribute(self.dtype)
        printer.print_string(">")

    def shape(self) -> tuple[int, ...] | None:
        """The dims (`DYNAMIC_INDEX` for `?`), or None when unranked."""
        if isinstance(self.sizes, NoneAttr):
            return None
        return tuple(d.data for d in self.sizes.data)

    def to_builtin(self) -> TensorType[Attribute] | None:
        """The builtin tensor type with the same shape and element type, if ranked with a known dtype."""
        shape = self.shape()
        if shape is None or isinstance(self.dtype, NoneAttr):
            return None
        return TensorType(builtin_element_type(self.dtype), shape)


def builtin_element_type(dtype: Attribute) -> Attribute:
    """Torch spells signed integers `si64`; the graph dialect uses signless `i64`, as MLIR's tensor ops do."""
    if isinstance(dtype, IntegerType) and dtype.signedness.data == Signedness.SIGNED:
        return IntegerType(dtype.width.data)
    return dtype


@irdl_attr_definition
class IntType(ParametrizedAttribute, TypeAttribute):
    """`!torch.int`: a Python int (64-bit)."""

    name = "torch.int"


@irdl_attr_definition
class FloatType(ParametrizedAttribute, TypeAttribute):
    """`!torch.float`: a Python float (64-bit)."""

    name = "torch.float"


@irdl_attr_definition
class BoolType(ParametrizedAttribute, TypeAttribute):
    """`!torch.bool`."""

    name = "torch.bool"


@irdl_attr_definition
class NoneType(ParametrizedAttribute, TypeAttribute):
    """`!torch.none`: an absent optional argument."""

    name = "torch.none"


@irdl_attr_definition
class StringType(ParametrizedAttribute, TypeAttribute):
    """`!torch.str`."""

    name = "torch.str"


@irdl_attr_definition
class NumberType(ParametrizedAttribute, TypeAttribute):
    """`!torch.number`: an int or a float, decided at run time."""

    name = "torch.number"


@irdl_attr_definition
class DeviceType(ParametrizedAttribute, TypeAttribute):
    """`!torch.Device`."""

    name = "torch.Device"


@irdl_attr_definition
class GeneratorType(ParametrizedAttribute, TypeAttribute):
    """`!torch.Generator`: a random number generator argument."""

    name = "torch.Generator"


@irdl_attr_definition
class ListType(ParametrizedAttribute, TypeAttribute):
    """`!torch.list<int>`: a list of one element type (written without the `!torch.` prefix)."""

    name = "torch.list"

    element_type: Attribute

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        element = _parse_torch_type_short(parser)
        parser.parse_punctuation(">")
        return (element,)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        _print_torch_type_short(printer, self.element_type)
        printer.print_string(">")


@irdl_attr_definition
class OptionalType(ParametrizedAttribute, TypeAttribute):
    """`!torch.optional<int>`: a value of the contained type, or none."""

    name = "torch.optional"

    element_type: Attribute

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        element = _parse_torch_type_short(parser)
        parser.parse_punctuation(">")
        return (element,)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        _print_torch_type_short(printer, self.element_type)
        printer.print_string(">")


@irdl_attr_definition
class TupleType(ParametrizedAttribute, TypeAttribute):
    """`!torch.tuple<vtensor<[2],f32>, int>`."""

    name = "torch.tuple"

    element_types: ArrayAttr[Attribute]

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        elements = parser.parse_comma_separated_list(parser.Delimiter.ANGLE, lambda: _parse_torch_type_short(parser))
        return (ArrayAttr(elements),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        for i, element in enumerate(self.element_types.data):
            if i:
                printer.print_string(", ")
            _print_torch_type_short(printer, element)
        printer.print_string(">")


_SHORT_TYPES: dict[str, type[ParametrizedAttribute]] = {
    "Device": DeviceType,
    "Generator": GeneratorType,
    "bool": BoolType,
    "float": FloatType,
    "int": IntType,
    "none": NoneType,
    "number": NumberType,
    "str": StringType,
}


def _parse_torch_type_short(parser: AttrParser) -> Attribute:
    """Inside `list<…>` torch-mlir drops the `!torch.` prefix of nested torch types."""
    if parser.parse_optional_keyword("vtensor") is not None:
        return ValueTensorType.new(ValueTensorType.parse_parameters(parser))
    if parser.parse_optional_keyword("list") is not None:
        return ListType.new(ListType.parse_parameters(parser))
    if parser.parse_optional_keyword("optional") is not None:
        return OptionalType.new(OptionalType.parse_parameters(parser))
    if parser.parse_optional_keyword("tuple") is not None:
        return TupleType.new(TupleType.parse_parameters(parser))
    keyword = parser.parse_optional_keyword_in(_SHORT_TYPES.keys())
    if keyword is not None:
        return _SHORT_TYPES[keyword]()
    return parser.parse_type()


def _print_torch_type_short(printer: Printer, attr: Attribute) -> None:
    name = getattr(attr, "name", "")
    if isinstance(attr, ParametrizedAttribute) and name.startswith("torch."):
        printer.print_string(name.removeprefix("torch."))
        attr.print_parameters(printer)
        return
    printer.print_attribute(attr)


# Structural ops: the constants and aggregates that computational ops take as arguments.


@irdl_op_definition
class ConstantIntOp(IRDLOperation):
    """A Python int: `%0 = "torch.constant.int"() <{value = 3 : i64}> : () -> !torch.int`."""

    name = "torch.constant.int"
    value = prop_def(IntegerAttr)
    result = result_def(IntType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class ConstantFloatOp(IRDLOperation):
    """A Python float: `"torch.constant.float"() <{value = 1.0e-05 : f64}> : () -> !torch.float`."""

    name = "torch.constant.float"
    value = prop_def(FloatAttr)
    result = result_def(FloatType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class ConstantBoolOp(IRDLOperation):
    """A Python bool: `"torch.constant.bool"() <{value = false}> : () -> !torch.bool`."""

    name = "torch.constant.bool"
    value = prop_def(BoolAttr)
    result = result_def(BoolType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class ConstantNoneOp(IRDLOperation):
    """None, for absent optional arguments: `"torch.constant.none"() : () -> !torch.none`."""

    name = "torch.constant.none"
    result = result_def(NoneType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class ConstantStrOp(IRDLOperation):
    """A string argument such as gelu's approximation: `"torch.constant.str"() <{value = "none"}>`."""

    name = "torch.constant.str"
    value = prop_def(StringAttr)
    result = result_def(StringType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class ConstantDeviceOp(IRDLOperation):
    """A device name: `"torch.constant.device"() <{value = "cpu"}> : () -> !torch.Device`."""

    name = "torch.constant.device"
    value = prop_def(StringAttr)
    result = result_def(DeviceType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class ValueTensorLiteralOp(IRDLOperation):
    """A tensor constant (weights come as `dense_resource` blobs).

    `%w = "torch.vtensor.literal"() <{value = dense_resource<w> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>`
    """

    name = "torch.vtensor.literal"
    value = prop_def(DenseIntOrFPElementsAttr | DenseResourceAttr)
    result = result_def(ValueTensorType)
    traits = traits_def(ConstantLike(), Pure())


@irdl_op_definition
class PrimListConstructOp(IRDLOperation):
    """A list built from values: `"torch.prim.ListConstruct"(%a, %b) : (!torch.int, !torch.int) -> !torch.list<int>`."""

    name = "torch.prim.ListConstruct"
    elements = var_operand_def()
    result = result_def(ListType)
    traits = traits_def(Pure())


@irdl_op_definition
class PrimTupleConstructOp(IRDLOperation):
    """A tuple built from values, as returned by multi-output modules."""

    name = "torch.prim.TupleConstruct"
    elements = var_operand_def()
    result = result_def(TupleType)
    traits = traits_def(Pure())


@irdl_op_definition
class PrimListUnpackOp(IRDLOperation):
    """Unpacks a list into its elements, as after `aten.split`."""

    name = "torch.prim.ListUnpack"
    operand = var_operand_def()
    results_ = var_result_def()

    def verify_(self) -> None:
        if len(self.operand) != 1:
            raise VerifyException(f"torch.prim.ListUnpack takes one list operand, got {len(self.operand)}")


TORCH_TYPES: list[type[Attribute]] = [
    BoolType,
    DeviceType,
    FloatType,
    GeneratorType,
    IntType,
    ListType,
    NoneType,
    NumberType,
    OptionalType,
    StringType,
    TupleType,
    ValueTensorType,
]

Torch = Dialect(
    "torch",
    [
        ConstantBoolOp,
        ConstantDeviceOp,
        ConstantFloatOp,
        ConstantIntOp,
        ConstantNoneOp,
        ConstantStrOp,
        PrimListConstructOp,
        PrimListUnpackOp,
        PrimTupleConstructOp,
        ValueTensorLiteralOp,
    ],
    TORCH_TYPES,
)
