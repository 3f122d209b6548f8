"""Control flow in the graph dialect: a data-dependent branch (`graph.if`) and loop (`graph.while`).

Both are region ops over tensors, as torch's `cond` / `while_loop` and ONNX's `If` / `Loop` are. Their regions
are single blocks that end in `graph.yield`; they read values of the enclosing function directly (they are not
isolated from above), so a branch or a loop body names the weights it uses as any other op does.

    %y = graph.if %pred : tensor<i1> -> (tensor<2x4xf32>) {
      ...
      graph.yield %a : tensor<2x4xf32>
    } else {
      graph.yield %b : tensor<2x4xf32>
    }

    %n, %h = graph.while (%n0, %h0) : (tensor<i64>, tensor<2x8xf32>) -> (tensor<i64>, tensor<2x8xf32>) cond {
    ^bb0(%i: tensor<i64>, %x: tensor<2x8xf32>):
      graph.yield %go : tensor<i1>
    } do {
    ^bb0(%i: tensor<i64>, %x: tensor<2x8xf32>):
      graph.yield %i1, %x1 : tensor<i64>, tensor<2x8xf32>
    }

`graph.while` runs `cond` on the carried values, and while it yields true runs `do` on them, whose yields are
the next carried values; the results are the carried values when `cond` yields false. Its optional `max_trips`
is a bound the program guarantees (a counted loop's trip count): the body runs at most that many times.
Canonicalization reads it from a condition `counter < n` on a counter that steps by one from a constant.

A predicate is a tensor of one i1 element (torch's 0-d bool, ONNX's one-element cond). Where the two branches
(or a loop's initial and carried values) have different sizes in a dim, the result's dim is `?`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursivelySpeculatable, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    SymbolicDim,
    TensorT,
    dim_names,
    i64_attr,
    shape_str,
    tensor_of,
    tensor_type,
    types_compatible,
)
from gnomon.dialects.graph.traits import WhileCanonicalization

__all__ = ["CONTROL_FLOW_OPS", "IfOp", "WhileOp", "YieldOp", "joined_type"]


def joined_type(a: Attribute, b: Attribute, what: str) -> TensorT:
    """The type that holds a value of either type: equal dims stay, differing ones become `?`."""
    ta, tb = tensor_type(a, what), tensor_type(b, what)
    if ta.get_element_type() != tb.get_element_type() or ta.get_num_dims() != tb.get_num_dims():
        raise VerifyException(f"{what}: {ta} and {tb} differ in element type or rank")
    shape: list[int] = []
    for x, y, name_x, name_y in zip(ta.get_shape(), tb.get_shape(), dim_names(ta), dim_names(tb), strict=True):
        shape.append(x if x == y and name_x == name_y else DYNAMIC_INDEX)
    names = [n if d == DYNAMIC_INDEX and n == m else "" for d, n, m in zip(shape, dim_names(ta), dim_names(tb))]
    return tensor_of(ta.get_element_type(), [SymbolicDim(n) if n else d for d, n in zip(shape, names, strict=True)])


def _check_predicate(value: SSAValue, what: str) -> None:
    tensor = tensor_type(value, what)
    element = tensor.get_element_type()
    if not (isinstance(element, IntegerType) and element.width.data == 1):
        raise VerifyException(f"{what} must be a tensor of i1, got {tensor}")
    if any(d != 1 for d in tensor.get_shape()):
        raise VerifyException(f"{what} must hold one element, got shape {shape_str(tensor.get_shape())}")


def _yielded(region: Region, what: str) -> YieldOp:
    last = region.block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f"{what} must end in graph.yield")
    return last


@irdl_op_definition
class IfOp(IRDLOperation):
    """Run one of two regions, as a one-element i1 tensor says; the results are what the region run yields."""

    name = "graph.if"
    pred = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    then_region = region_def("single_block")
    else_region = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect(), RecursivelySpeculatable())

    def __init__(self, pred: SSAValue, result_types: Sequence[Attribute], then_region: Region, else_region: Region):
        super().__init__(operands=[pred], result_types=[list(result_types)], regions=[then_region, else_region])

    def infer_result_types(self) -> list[TensorT]:
        _check_predicate(self.pred, "graph.if predicate")
        then_values, else_values = (
            _yielded(self.then_region, "graph.if then region").values,
            _yielded(self.else_region, "graph.if else region").values,
        )
        if len(then_values) != len(else_values):
            raise VerifyException(
                f"graph.if: the then branch yields {len(then_values)} values, the else branch {len(else_values)}"
            )
        return [
            joined_type(a.type, b.type, f"graph.if result #{index}")
            for index, (a, b) in enumerate(zip(then_values, else_values, strict=True))
        ]

    def verify_(self) -> None:
        self.infer_result_types()
        then_values = _yielded(self.then_region, "graph.if then region").values
        _check_results(self, then_values, _yielded(self.else_region, "graph.if else region").values)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.pred)
        printer.print_string(" : ")
        printer.print_attribute(self.pred.type)
        printer.print_string(" -> (")
        printer.print_list(self.outputs.types, printer.print_attribute)
        printer.print_string(") ")
        printer.print_region(self.then_region, print_entry_block_args=False)
        printer.print_string(" else ")
        printer.print_region(self.else_region, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        pred = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        pred_value = parser.resolve_operand(pred, parser.parse_type())
        parser.parse_punctuation("->")
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        then_region = parser.parse_region()
        parser.parse_keyword("else")
        else_region = parser.parse_region()
        op = cls(pred_value, types, then_region, else_region)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


class SpeculatableWhenBounded(RecursivelySpeculatable):
    """A loop is safe to run on data whose result may be thrown away when it has a bound on its trips (without one,
    data a branch guards could keep it running) and its regions are."""

    @classmethod
    def is_speculatable(cls, op: Operation) -> bool:
        return isinstance(op, WhileOp) and op.trip_bound is not None and super().is_speculatable(op)


@irdl_op_definition
class WhileOp(IRDLOperation):
    """While `cond` yields true on the carried values, run `do` on them; the results are the last carried values."""

    name = "graph.while"
    inits = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    max_trips = opt_prop_def(IntegerAttr)
    cond_region = region_def("single_block")
    body_region = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect(), SpeculatableWhenBounded(), WhileCanonicalization())

    def __init__(
        self,
        inits: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        cond_region: Region,
        body_region: Region,
        max_trips: int | None = None,
    ):
        properties = {} if max_trips is None else {"max_trips": i64_attr(max_trips)}
        super().__init__(
            operands=[list(inits)],
            result_types=[list(result_types)],
            regions=[cond_region, body_region],
            properties=properties,
        )

    @property
    def trip_bound(self) -> int | None:
        return None if self.max_trips is None else self.max_trips.value.data

    def infer_result_types(self) -> list[TensorT]:
        count = len(self.inits)
        for region, what in ((self.cond_region, "cond"), (self.body_region, "do")):
            args = region.block.args
            if len(args) != count:
                raise VerifyException(f"graph.while: the {what} region takes {len(args)} values, {count} are carried")
            for index, (arg, result) in enumerate(zip(args, self.outputs, strict=True)):
                if arg.type != result.type:
                    raise VerifyException(
                        f"graph.while: the {what} region's argument #{index} is {arg.type}, the carried value's"
                        f" type is {result.type}"
                    )
        cond = _yielded(self.cond_region, "graph.while cond region").values
        if len(cond) != 1:
            raise VerifyException(f"graph.while: the cond region must yield one predicate, it yields {len(cond)}")
        _check_predicate(cond[0], "graph.while condition")
        body = _yielded(self.body_region, "graph.while do region").values
        if len(body) != count:
            raise VerifyException(f"graph.while: the do region yields {len(body)} values, {count} are carried")
        if self.trip_bound is not None and self.trip_bound < 0:
            raise VerifyException(f"graph.while: max_trips {self.trip_bound} is negative")
        return [
            joined_type(init.type, new.type, f"graph.while carried value #{index}")
            for index, (init, new) in enumerate(zip(self.inits, body, strict=True))
        ]

    def verify_(self) -> None:
        self.infer_result_types()
        _check_results(self, self.inits, _yielded(self.body_region, "graph.while do region").values)

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.inits, printer.print_operand)
        printer.print_string(") : (")
        printer.print_list(self.inits.types, printer.print_attribute)
        printer.print_string(") -> (")
        printer.print_list(self.outputs.types, printer.print_attribute)
        printer.print_string(")")
        printer.print_op_attributes(dict(self.properties) | self.attributes)
        printer.print_string(" cond ")
        printer.print_region(self.cond_region)
        printer.print_string(" do ")
        printer.print_region(self.body_region)

    @classmethod
    def parse(cls, parser: Parser) -> WhileOp:
        unresolved = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        parser.parse_punctuation(":")
        init_types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        inits = parser.resolve_operands(unresolved, init_types, parser.pos)
        parser.parse_punctuation("->")
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_keyword("cond")
        cond_region = parser.parse_region()
        parser.parse_keyword("do")
        body_region = parser.parse_region()
        bound = attrs.pop("max_trips", None)
        op = cls(inits, types, cond_region, body_region)
        if isinstance(bound, IntegerAttr):
            op.properties["max_trips"] = bound
        op.attributes |= attrs
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The values a region of `graph.if` or `graph.while` gives back: `graph.yield %a, %b : tensor<…>, tensor<…>`."""

    name = "graph.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(IfOp, WhileOp), Pure())

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])

    def print(self, printer: Printer) -> None:
        if self.values:
            printer.print_string(" ")
            printer.print_list(self.values, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list(self.values.types, printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> YieldOp:
        unresolved = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        )
        if not unresolved:
            return cls()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        return cls(*parser.resolve_operands(unresolved, types, parser.pos))


def _check_results(op: IfOp | WhileOp, *sources: Sequence[SSAValue]) -> None:
    """Each result's type holds every value it may take: each of `sources` (a branch's yields, a loop's initial
    and next values) is compatible with it (a `?` on either side matches any size)."""
    for values in sources:
        if len(values) != len(op.outputs):
            raise VerifyException(f"{op.name}: expected {len(values)} results, got {len(op.outputs)}")
        for index, (result, value) in enumerate(zip(op.outputs, values, strict=True)):
            if not types_compatible(result.type, value.type):
                raise VerifyException(f"{op.name}: result #{index} type {result.type} does not hold {value.type}")


CONTROL_FLOW_OPS = [IfOp, WhileOp, YieldOp]
