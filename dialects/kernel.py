"""The kernel dialect: the units gnomon's runtime launches.

A kernel is a region of graph ops executed as one launch, in one of two ways:

- `kernel.generated`: a loop nest gnomon generates (through upstream linalg/scf/arith/math
  on memrefs, then MLIR's JIT) for the ops of its region, fused; its `#kernel.schedule`
  (tile sizes, vector width, loop order, threads) says how the loops are laid out.
- `kernel.library`: a call into a tuned library (oneDNN or BLAS through torch's ATen ops,
  or NumPy for the rare op gnomon has no faster path for): `callee` names the one library
  function, `epilogue` the graph ops it fuses after its anchor op, `transposed` the anchor's
  operands it reads as transposed views.

Both are isolated from above: their region's arguments are the kernel's operands and its
`kernel.yield` gives the kernel's results, so a kernel can be outlined (`kernel.func`,
launched by `rt.launch`), costed and compiled on its own.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, FunctionType, IntAttr, StringAttr, i64
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
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

__all__ = ["FuncOp", "GeneratedOp", "Kernel", "LibraryCall", "LibraryOp", "ScheduleAttr", "YieldOp", "call_name"]


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


def call_name(callee: str, epilogue: Sequence[str]) -> str:
    """A library kernel's name in profiles: its callee, then `+op` for each op of its epilogue.

    `call_name("mkldnn._convolution_pointwise", ["add", "relu"])` is `"mkldnn._convolution_pointwise+add+relu"`.
    """
    return "".join([callee, *(f"+{op}" for op in epilogue)])


@dataclass(frozen=True)
class LibraryCall:
    """A library kernel's call as Python values: what `kernel.library` and a library `kernel.func` record."""

    callee: str
    """The one library function, e.g. `aten.linear` or `mkldnn._convolution_pointwise`."""
    epilogue: tuple[str, ...] = ()
    """The ops fused after the anchor, in order, as graph op names without `graph.`: `("add", "relu")`."""
    transposed: tuple[int, ...] = ()
    """The anchor's operands (by index) read as transposed views."""

    @property
    def name(self) -> str:
        """The kernel's name in profiles (`call_name`): `aten.linear+gelu`."""
        return call_name(self.callee, self.epilogue)


def _empty_epilogue() -> ArrayAttr[StringAttr]:
    return ArrayAttr[StringAttr](())


def _no_transposed() -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, ())


def _names(names: Sequence[str]) -> str:
    """Op names as MLIR prints an array of strings, for messages: `["add", "relu"]`."""
    return "[" + ", ".join(f'"{name}"' for name in names) + "]"


def _verify_library_call(
    what: str, callee: StringAttr, epilogue: ArrayAttr[StringAttr], transposed: DenseArrayBase, body: Region
) -> None:
    """`callee` names one function, and the body is the call: a transpose per `transposed` operand, the anchor op,
    then the `epilogue` ops in order."""
    if not callee.data or "+" in callee.data:
        raise VerifyException(
            f'{what}: callee "{callee.data}" must name one library function; fused ops go in its epilogue'
        )
    names = [name.data for name in epilogue.data]
    indices = ints(transposed)
    ops = [op for op in body.block.ops if not isinstance(op, YieldOp)]
    if len(ops) != len(indices) + 1 + len(names):
        raise VerifyException(
            f"{what}: the body has {len(ops)} ops, expected {len(indices)} transposes, the anchor and "
            f"epilogue {_names(names)}"
        )
    anchor = ops[len(indices)]
    fused = [op.name.removeprefix("graph.") for op in ops[len(indices) + 1 :]]
    if fused != names:
        raise VerifyException(
            f"{what}: epilogue {_names(names)} differs from the ops after {anchor.name}: {_names(fused)}"
        )
    if list(indices) != sorted(set(indices)) or any(not 0 <= i < len(anchor.operands) for i in indices):
        raise VerifyException(
            f"{what}: transposed {list(indices)} must be increasing indices of {anchor.name}'s "
            f"{len(anchor.operands)} operands"
        )
    for index in indices:
        owner = anchor.operands[index].owner
        if not isinstance(owner, Operation) or owner.name != "graph.transpose":
            raise VerifyException(f"{what}: transposed operand {index} of {anchor.name} is not a graph.transpose")


@irdl_op_definition
class LibraryOp(IRDLOperation):
    """A kernel that calls a tuned library for the graph ops of its body.

    `callee` is one library function; `epilogue` names the ops after the body's anchor op that the call fuses
    (in order); `transposed` lists the anchor's operands read as transposed views of the transposes before it.

    `%y = kernel.library "aten.convolution" epilogue ["relu"] (%x, %w, %b)
         : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32> {
       ^bb0(...): %c = graph.conv ...  %r = graph.relu %c ...  kernel.yield %r : ...
       }`

    `%d = kernel.library "aten.matmul" transposed [1] (%z) : (tensor<4x3x8xf32>) -> tensor<4x3x3xf32> {
       ^bb0(%a: ...): %t = graph.transpose %a ...  %m = graph.matmul %a, %t ...  kernel.yield %m : ...
       }`
    """

    name = "kernel.library"
    callee = prop_def(StringAttr)
    """The one library function called, e.g. `aten.linear`, `mkldnn._convolution_pointwise` or `numpy.gather`."""
    epilogue = prop_def(ArrayAttr[StringAttr], default_value=_empty_epilogue())
    """The ops the call fuses after the anchor, in order, as graph op names without `graph.`: `["add", "relu"]`."""
    transposed = prop_def(DenseArrayBase.constr(i64), default_value=_no_transposed())
    """The anchor's operands (by index) that the call reads as transposed views."""
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())

    assembly_format = (
        "$callee (`epilogue` $epilogue^)? (`transposed` $transposed^)? `(` $inputs `)` attr-dict "
        "`:` functional-type($inputs, $outputs) $body"
    )

    def __init__(
        self,
        callee: str,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
        *,
        epilogue: Sequence[str] = (),
        transposed: Sequence[int] = (),
    ):
        properties: dict[str, Attribute] = {
            "callee": StringAttr(callee),
            "epilogue": ArrayAttr([StringAttr(op) for op in epilogue]),
            "transposed": DenseArrayBase.from_list(i64, transposed),
        }
        super().__init__(operands=[inputs], result_types=[result_types], properties=properties, regions=[body])

    @property
    def epilogue_ops(self) -> tuple[str, ...]:
        """`epilogue` as Python strings."""
        return tuple(op.data for op in self.epilogue.data)

    @property
    def transposed_operands(self) -> tuple[int, ...]:
        """`transposed` as Python ints."""
        return ints(self.transposed)

    @property
    def call(self) -> LibraryCall:
        """The call as Python values."""
        return LibraryCall(self.callee.data, self.epilogue_ops, self.transposed_operands)

    @property
    def profile_name(self) -> str:
        """The kernel's name in profiles: `aten.linear+gelu` (see `call_name`)."""
        return self.call.name

    def verify_(self) -> None:
        _verify_body(self, self.body)
        _verify_library_call(self.name, self.callee, self.epilogue, self.transposed, self.body)


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

    `kernel.func @linear_gelu_4(...) -> tensor<2x5xf32>
         attributes {kind = "library", callee = "aten.linear", epilogue = ["gelu"]} { ... }`

    A library kernel's `callee`, `epilogue` and `transposed` mean what they mean on `kernel.library`; the last
    two are left out when empty. One `kernel.func` serves every launch of an identical kernel, so it is
    compiled once.
    """

    name = "kernel.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    kind = prop_def(StringAttr)
    """`generated` or `library`."""
    callee = opt_prop_def(StringAttr)
    """The library function called, for library kernels."""
    epilogue = opt_prop_def(ArrayAttr[StringAttr])
    """The ops the library call fuses after its anchor, for library kernels that fuse some."""
    transposed = opt_prop_def(DenseArrayBase.constr(i64))
    """The anchor's operands the library call reads as transposed views, for library kernels that read some."""
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
        epilogue: Sequence[str] = (),
        transposed: Sequence[int] = (),
        schedule: ScheduleAttr | None = None,
    ):
        properties: dict[str, Attribute | None] = {
            "sym_name": StringAttr(sym_name),
            "function_type": function_type,
            "kind": StringAttr("library" if callee is not None else "generated"),
            "callee": StringAttr(callee) if callee is not None else None,
            "epilogue": ArrayAttr([StringAttr(op) for op in epilogue]) if epilogue else None,
            "transposed": DenseArrayBase.from_list(i64, transposed) if transposed else None,
            "schedule": schedule,
        }
        super().__init__(properties=properties, regions=[body])

    @property
    def is_generated(self) -> bool:
        return self.kind.data == "generated"

    @property
    def epilogue_ops(self) -> tuple[str, ...]:
        """`epilogue` as Python strings; empty when absent."""
        return () if self.epilogue is None else tuple(op.data for op in self.epilogue.data)

    @property
    def transposed_operands(self) -> tuple[int, ...]:
        """`transposed` as Python ints; empty when absent."""
        return () if self.transposed is None else ints(self.transposed)

    @property
    def call(self) -> LibraryCall | None:
        """A library kernel's call as Python values; None for a generated kernel."""
        if self.callee is None:
            return None
        return LibraryCall(self.callee.data, self.epilogue_ops, self.transposed_operands)

    @property
    def profile_name(self) -> str:
        """What profiles show as the kernel's kind: `generated`, or the library call (`aten.linear+gelu`)."""
        call = self.call
        return "generated" if call is None else call.name

    def verify_(self) -> None:
        where = f"kernel.func @{self.sym_name.data}"
        if self.kind.data not in ("generated", "library"):
            raise VerifyException(f"{where}: kind must be generated or library, got {self.kind.data}")
        if self.kind.data == "library" and self.callee is None:
            raise VerifyException(f"{where}: a library kernel needs a callee")
        if self.kind.data == "generated" and self.schedule is None:
            raise VerifyException(f"{where}: a generated kernel needs a schedule")
        if self.kind.data == "generated" and (self.epilogue is not None or self.transposed is not None):
            raise VerifyException(f"{where}: epilogue and transposed describe library calls, not generated kernels")
        block = self.body.block
        if [arg.type for arg in block.args] != list(self.function_type.inputs.data):
            raise VerifyException(f"{where}: arguments differ from its function type")
        terminator = block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException(f"{where}: body must end in kernel.yield")
        if [value.type for value in terminator.values] != list(self.function_type.outputs.data):
            raise VerifyException(f"{where}: kernel.yield differs from its function type")
        if self.callee is not None:
            epilogue = self.epilogue if self.epilogue is not None else _empty_epilogue()
            transposed = self.transposed if self.transposed is not None else _no_transposed()
            _verify_library_call(where, self.callee, epilogue, transposed, self.body)

    def print(self, printer: Printer) -> None:
        attributes: dict[str, Attribute] = {"kind": self.kind}
        for name in ("callee", "epilogue", "transposed", "schedule"):
            value = self.properties.get(name)
            if value is not None:
                attributes[name] = value
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
        properties = {key: attrs.pop(key, None) for key in ("kind", "callee", "epilogue", "transposed", "schedule")}
        if not isinstance(properties["kind"], StringAttr):
            parser.raise_error('kernel.func needs kind = "generated" or "library"')
        op = FuncOp(name, FunctionType.from_lists(input_types, return_types), region)
        op.properties |= {key: value for key, value in properties.items() if value is not None}
        op.attributes |= attrs
        return op


Kernel = Dialect("kernel", [FuncOp, GeneratedOp, LibraryOp, YieldOp], [ScheduleAttr])
