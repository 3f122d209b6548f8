"""The kernel dialect: the units gnomon's runtime launches.

A kernel is a region of graph ops executed as one launch, in one of two ways:

- `kernel.generated`: a loop nest gnomon generates (through upstream linalg/scf/arith/math
  on memrefs, then MLIR's JIT) for the ops of its region, fused; its `#kernel.schedule`
  (tile sizes, vector width, loop order, threads) says how the loops are laid out.
- `kernel.library`: a call into a tuned library (oneDNN or BLAS through torch's ATen ops,
  or NumPy for the rare op gnomon has no faster path for); `callee` names the call.

Both are isolated from above: their region's arguments are the kernel's operands and its
`kernel.yield` gives the kernel's results, so a kernel can be outlined (`kernel.func`,
launched by `rt.launch`), costed and compiled on its own.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, FunctionType, IntAttr, StringAttr, i64
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import ints

__all__ = ["FuncOp", "GeneratedOp", "Kernel", "LibraryOp", "ScheduleAttr", "YieldOp"]


@irdl_attr_definition
class ScheduleAttr(ParametrizedAttribute):
    """How a generated kernel's loops are laid out.

    `#kernel.schedule<tile = [1, 32], vector = 8, order = [0, 1], threads = 2>`: tile sizes per
    loop (0 leaves a loop untiled), the vector width of the innermost loop, the loop order
    (outermost first) and how many threads split the outermost parallel loop.
    """

    name = "kernel.schedule"
    tile: DenseArrayBase
    vector: IntAttr
    order: DenseArrayBase
    threads: IntAttr

    @staticmethod
    def get(tile: Sequence[int], vector: int, order: Sequence[int], threads: int) -> ScheduleAttr:
        return ScheduleAttr(
            DenseArrayBase.from_list(i64, tile), IntAttr(vector), DenseArrayBase.from_list(i64, order), IntAttr(threads)
        )

    def verify(self) -> None:
        tile, order = ints(self.tile), ints(self.order)
        if sorted(order) != list(range(len(order))):
            raise VerifyException(f"kernel.schedule: order {list(order)} is not a permutation of its loops")
        if tile and len(tile) != len(order):
            raise VerifyException(f"kernel.schedule: {len(tile)} tile sizes for {len(order)} loops")
        if any(t < 0 for t in tile) or self.vector.data < 1 or self.threads.data < 1:
            raise VerifyException("kernel.schedule: tile sizes must be >= 0, vector width and threads >= 1")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def integers() -> list[int]:
            return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)

        with parser.in_angle_brackets():
            parser.parse_keyword("tile")
            parser.parse_punctuation("=")
            tile = integers()
            parser.parse_punctuation(",")
            parser.parse_keyword("vector")
            parser.parse_punctuation("=")
            vector = parser.parse_integer()
            parser.parse_punctuation(",")
            parser.parse_keyword("order")
            parser.parse_punctuation("=")
            order = integers()
            parser.parse_punctuation(",")
            parser.parse_keyword("threads")
            parser.parse_punctuation("=")
            threads = parser.parse_integer()
        return ScheduleAttr.get(tile, vector, order, threads).parameters

    def print_parameters(self, printer: Printer) -> None:
        tile = ", ".join(map(str, ints(self.tile)))
        order = ", ".join(map(str, ints(self.order)))
        printer.print_string(
            f"<tile = [{tile}], vector = {self.vector.data}, order = [{order}], threads = {self.threads.data}>"
        )


def _types(types: Sequence[Attribute]) -> str:
    """Types as MLIR prints them, for messages."""
    stream = io.StringIO()
    printer = Printer(stream=stream)
    printer.print_string("(")
    printer.print_list(types, printer.print_attribute)
    printer.print_string(")")
    return stream.getvalue()


def _verify_body(op: IRDLOperation, body: Region) -> None:
    """The body's arguments match the operands and its `kernel.yield` matches the results."""
    block = body.block
    arg_types = [arg.type for arg in block.args]
    operand_types = [operand.type for operand in op.operands]
    if arg_types != operand_types:
        raise VerifyException(
            f"{op.name}: body arguments {_types(arg_types)} differ from operand types {_types(operand_types)}"
        )
    terminator = block.last_op
    if not isinstance(terminator, YieldOp):
        raise VerifyException(f"{op.name}: body must end in kernel.yield")
    yielded = [value.type for value in terminator.values]
    result_types = [result.type for result in op.results]
    if yielded != result_types:
        raise VerifyException(
            f"{op.name}: kernel.yield gives {_types(yielded)}, the kernel returns {_types(result_types)}"
        )
    for inner in block.ops:
        if inner is not terminator and not inner.name.startswith("graph."):
            raise VerifyException(f"{op.name}: body op {inner.name} is not a graph op")


@irdl_op_definition
class GeneratedOp(IRDLOperation):
    """A kernel whose loop nest gnomon generates for the graph ops of its body, fused.

    `%y = kernel.generated "add_relu_3" (%a, %b) schedule <tile = [0, 0], vector = 8,
         order = [0, 1], threads = 2> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
       ^bb0(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>):
         %s = graph.add %x, %z : ...
         %r = graph.relu %s : ...
         kernel.yield %r : tensor<4x8xf32>
       }`
    """

    name = "kernel.generated"
    kernel_name = prop_def(StringAttr)
    """A readable name (the ops it fuses and an index), shown in profiles."""
    schedule = prop_def(ScheduleAttr)
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())

    assembly_format = (
        "$kernel_name `(` $inputs `)` `schedule` $schedule attr-dict `:` functional-type($inputs, $outputs) $body"
    )

    def __init__(
        self,
        kernel_name: str,
        schedule: ScheduleAttr,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
    ):
        super().__init__(
            operands=[inputs],
            result_types=[result_types],
            properties={"kernel_name": StringAttr(kernel_name), "schedule": schedule},
            regions=[body],
        )

    def verify_(self) -> None:
        _verify_body(self, self.body)


@irdl_op_definition
class LibraryOp(IRDLOperation):
    """A kernel that calls a tuned library for the graph ops of its body.

    `%y = kernel.library "aten.convolution+relu" (%x, %w, %b)
         : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32> {
       ^bb0(...): %c = graph.conv ...  %r = graph.relu %c ...  kernel.yield %r : ...
       }`
    """

    name = "kernel.library"
    callee = prop_def(StringAttr)
    """The library call, e.g. `aten.convolution+relu` or `numpy.gather_elements`."""
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())

    assembly_format = "$callee `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"

    def __init__(self, callee: str, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(
            operands=[inputs], result_types=[result_types], properties={"callee": StringAttr(callee)}, regions=[body]
        )

    def verify_(self) -> None:
        _verify_body(self, self.body)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The results of a kernel's body: `kernel.yield %r : tensor<4x8xf32>`."""

    name = "kernel.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[values])


@irdl_op_definition
class FuncOp(IRDLOperation):
    """An outlined kernel, launched by `rt.launch`: a generated or library kernel's body as a symbol.

    `kernel.func @add_relu_3(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32>
         attributes {kind = "generated", schedule = #kernel.schedule<...>} { ... kernel.yield %r : ... }`

    One `kernel.func` serves every launch of an identical kernel, so it is compiled once.
    """

    name = "kernel.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    kind = prop_def(StringAttr)
    """`generated` or `library`."""
    callee = opt_prop_def(StringAttr)
    """The library call, for library kernels."""
    schedule = opt_prop_def(ScheduleAttr)
    """The loop schedule, for generated kernels."""
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(
        self,
        sym_name: str,
        function_type: FunctionType,
        body: Region,
        *,
        callee: str | None = None,
        schedule: ScheduleAttr | None = None,
    ):
        properties: dict[str, Attribute | None] = {
            "sym_name": StringAttr(sym_name),
            "function_type": function_type,
            "kind": StringAttr("library" if callee is not None else "generated"),
            "callee": StringAttr(callee) if callee is not None else None,
            "schedule": schedule,
        }
        super().__init__(properties=properties, regions=[body])

    @property
    def is_generated(self) -> bool:
        return self.kind.data == "generated"

    def verify_(self) -> None:
        if self.kind.data not in ("generated", "library"):
            raise VerifyException(
                f"kernel.func @{self.sym_name.data}: kind must be generated or library, got {self.kind.data}"
            )
        if self.kind.data == "library" and self.callee is None:
            raise VerifyException(f"kernel.func @{self.sym_name.data}: a library kernel needs a callee")
        if self.kind.data == "generated" and self.schedule is None:
            raise VerifyException(f"kernel.func @{self.sym_name.data}: a generated kernel needs a schedule")
        block = self.body.block
        if [arg.type for arg in block.args] != list(self.function_type.inputs.data):
            raise VerifyException(f"kernel.func @{self.sym_name.data}: arguments differ from its function type")
        terminator = block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException(f"kernel.func @{self.sym_name.data}: body must end in kernel.yield")
        if [value.type for value in terminator.values] != list(self.function_type.outputs.data):
            raise VerifyException(f"kernel.func @{self.sym_name.data}: kernel.yield differs from its function type")

    def print(self, printer: Printer) -> None:
        attributes: dict[str, Attribute] = {"kind": self.kind}
        if self.callee is not None:
            attributes["callee"] = self.callee
        if self.schedule is not None:
            attributes["schedule"] = self.schedule
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            attributes | self.attributes,
            reserved_attr_names=("sym_name", "function_type"),
        )

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name, input_types, return_types, region, extra_attrs, _, _ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type")
        )
        attrs = dict(extra_attrs.data) if extra_attrs is not None else {}
        callee, schedule = attrs.pop("callee", None), attrs.pop("schedule", None)
        kind = attrs.pop("kind", None)
        if not isinstance(kind, StringAttr) or (callee is not None and not isinstance(callee, StringAttr)):
            parser.raise_error('kernel.func needs kind = "generated" or "library" and a string callee')
        if schedule is not None and not isinstance(schedule, ScheduleAttr):
            parser.raise_error("kernel.func: schedule must be a #kernel.schedule")
        op = FuncOp(name, FunctionType.from_lists(input_types, return_types), region, callee=None, schedule=schedule)
        op.kind = kind
        op.callee = callee
        op.attributes |= attrs
        return op


Kernel = Dialect("kernel", [FuncOp, GeneratedOp, LibraryOp, YieldOp], [ScheduleAttr])
