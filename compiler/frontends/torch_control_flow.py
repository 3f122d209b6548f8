"""Control flow in the torch frontend: `torch.cond` and `torch.while_loop` into torch-mlir's `torch.prim.If` and
`torch.prim.Loop`, and TorchScript's data-dependent loops into `torch.while_loop`.

torch.export keeps both higher-order ops whole. Their branches, loop conditions and bodies are child GraphModules
that FxImporter imports first as private funcs; their parameters stay function arguments (only the main graph's
are frozen), so each call passes the op's operands in order: the frozen weights arrive as literals made outside
the region. gnomon's torch-to-graph inlines those calls.
"""

# torch-mlir's MLIR bindings are a C extension without type stubs: pyright cannot see their names.
# pyright: reportAttributeAccessIssue=false, reportUnknownParameterType=false, reportUnknownMemberType=false
# pyright: reportUnknownVariableType=false, reportUnknownArgumentType=false
# The TorchScript converter and FxImporter are extended through their underscored helpers, as torch-mlir's own
# higher-order op importers do.
# pyright: reportPrivateUsage=false

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.fx
from torch._export import converter
from torch._ops import HigherOrderOperator
from torch_mlir.extras.fx_importer import GraphNodeImporter
from torch_mlir.ir import Block, FlatSymbolRefAttr, FunctionType, InsertionPoint, Location, Operation, Value

MAX_TRIPS = sys.maxsize
"""The trip count of a loop bounded by its condition only (TorchScript's `while`, and `torch.while_loop`)."""


class ControlFlowNodeImporter(GraphNodeImporter):
    """FxImporter's node importer, with `torch.cond` and a `torch.while_loop` that passes its captured values."""

    def _import_hop(self, loc: Location, node: torch.fx.Node, hop: HigherOrderOperator) -> None:
        if getattr(self, f"_import_hop_{hop.name()}", None) is None:
            raise NotImplementedError(
                f"higher-order op torch.ops.higher_order.{hop.name()} (node '{node.name}') has no importer"
            )
        super()._import_hop(loc, node, hop)

    def _import_hop_cond(self, loc: Location, node: torch.fx.Node, hop: HigherOrderOperator) -> None:
        """`cond(pred, true_gm, false_gm, operands)` as `torch.prim.If` on `aten.Bool.Tensor(pred)`, each
        branch a call of its child func."""
        pred, true_fn, false_fn, operands = node.args[:4]
        values = self._operands(loc, operands)
        branches = [self._callee(fn) for fn in (true_fn, false_fn)]
        results = self._results(branches[0])
        if self._results(branches[1]) != results:
            raise NotImplementedError(
                f"torch.cond (node '{node.name}') whose branches return different types: "
                f"{_types(results)} and {_types(self._results(branches[1]))}"
            )
        condition = self._bool(loc, self._import_argument(loc, pred))
        op = Operation.create("torch.prim.If", results=results, operands=[condition], regions=2, loc=loc)
        for region, callee in zip(op.regions, branches, strict=True):
            with loc, InsertionPoint(Block.create_at_start(region, [])):
                call = _call(loc, callee, results, values)
                Operation.create("torch.prim.If.yield", operands=list(call.results), loc=loc)
        self._bind_results(node, op)

    def _import_hop_while_loop(self, loc: Location, node: torch.fx.Node, hop: HigherOrderOperator) -> None:
        """`while_loop(cond_gm, body_gm, carries, additional_inputs)` as an unbounded `torch.prim.Loop` over the
        carries. Unlike torch-mlir's own import, the additional inputs (captured weights and tensors) are not
        carried: every call of the condition and the body reads them from outside the loop."""
        cond_fn, body_fn, carries, captured = node.args[:4]
        if any(node.args[4:]) or any(node.kwargs.values()):
            raise NotImplementedError(f"torch.while_loop (node '{node.name}') with stacked outputs or mutations")
        inits, invariants = self._operands(loc, carries), self._operands(loc, captured)
        cond, body = self._callee(cond_fn), self._callee(body_fn)
        types = self._results(body)
        with loc:
            trips = Operation.create(
                "torch.constant.int",
                results=[self._cc.torch_int_type],
                attributes={"value": self._cc.integer_attr(MAX_TRIPS, 64)},
            ).result
        first = _call(loc, cond, self._results(cond), [*inits, *invariants]).results[0]
        op = Operation.create(
            "torch.prim.Loop", results=types, operands=[trips, self._bool(loc, first), *inits], regions=1, loc=loc
        )
        with loc:
            block = Block.create_at_start(op.regions[0], [self._cc.torch_int_type, *types])
        with InsertionPoint(block):
            step = _call(loc, body, types, [*list(block.arguments)[1:], *invariants]).results
            again = _call(loc, cond, self._results(cond), [*step, *invariants]).results[0]
            Operation.create("torch.prim.Loop.condition", operands=[self._bool(loc, again), *step], loc=loc)
        self._bind_results(node, op)

    def _operands(self, loc: Location, operands: Any) -> list[Value]:
        if not isinstance(operands, tuple | list):
            raise NotImplementedError(f"a higher-order op's operands are {type(operands).__name__}, not a tuple")
        return [self._import_argument(loc, operand) for operand in operands]

    def _callee(self, fn: Any) -> str:
        """The private func torch-mlir imported a `get_attr` node's child GraphModule as."""
        assert isinstance(fn, torch.fx.Node), f"a subgraph operand is {fn}, not a node"
        assert fn.op == "get_attr", f"a subgraph operand is a {fn.op} node, not a get_attr"
        module = getattr(fn.graph.owning_module, str(fn.target))
        return self.fx_importer._graph_module_to_func_name[id(module)]

    def _results(self, callee: str) -> list[Any]:
        function_type = FunctionType(self.fx_importer.symbol_table[callee].attributes["function_type"].value)
        return list(function_type.results)

    def _bool(self, loc: Location, value: Value) -> Value:
        """A condition as `!torch.bool`: a 0-d tensor through `aten.Bool.Tensor`, a `!torch.bool` as it is."""
        if value.type == self._cc.torch_bool_type:
            return value
        return Operation.create(
            "torch.aten.Bool.Tensor", results=[self._cc.torch_bool_type], operands=[value], loc=loc
        ).result

    def _bind_results(self, node: torch.fx.Node, op: Operation) -> None:
        """Each result is read through `getitem`, also where there is one."""
        self._multi_result_nodes.add(node)
        for index, value in enumerate(op.results):
            self.bind_node_value(node, value, index)


def _call(loc: Location, callee: str, results: Sequence[Any], operands: Sequence[Value]) -> Operation:
    return Operation.create(
        "func.call",
        results=list(results),
        operands=list(operands),
        attributes={"callee": FlatSymbolRefAttr.get(callee)},
        loc=loc,
    )


def _types(types: Sequence[Any]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


@contextmanager
def torchscript_loops() -> Generator[None]:
    """Within it, torch's TorchScript converter turns a `prim::Loop` it would refuse (a trip count that is not a
    constant, such as `range(x.size(0))`, or a condition the body computes, as a `while` has) into
    `torch.while_loop`; loops of a constant trip count it still unrolls."""
    graph_converter = converter.TS2FXGraphConverter
    unroll = graph_converter.convert_prim_Loop

    def convert_prim_loop(self: converter.TS2FXGraphConverter, node: torch._C.Node) -> None:
        try:
            self._check_prim_loop_support(node)
        except RuntimeError:
            _convert_while(self, node)
            return
        unroll(self, node)

    graph_converter.convert_prim_Loop = convert_prim_loop
    try:
        yield
    finally:
        graph_converter.convert_prim_Loop = unroll


def _convert_while(self: converter.TS2FXGraphConverter, node: torch._C.Node) -> None:
    """`%outs = prim::Loop(%trips, %cond, %inits...)`, whose block maps (iteration, values...) to (cond, values...),
    as a call of `_while_loop` on the block's subgraph; the values the block reads from outside, weights
    included, are the subgraph's first arguments, as in the converter's unrolled loops."""
    trips, cond, *inits = node.inputs()
    (block,) = node.blocks()
    captured = list(self._identify_inputs_as_arguments(node).union(self.blocks_to_lifted_attrs[block]))
    (subgraph,), (block_converter,) = self._convert_block_to_subgraph(node, captured)
    if block_converter.name_update_from_subblock_to_parent:
        # The converter's only such update: `list.append` to a list made outside the loop.
        raise RuntimeError("prim::Loop appends to a list made outside it, which torch.while_loop cannot carry")
    if node.outputsSize() == 0:
        raise RuntimeError("prim::Loop carries no values: it computes nothing torch.while_loop could return")
    constants = self.name_to_constant
    limit = self.get_fx_value_by_ir_value(trips) if constants.get(trips.debugName()) != MAX_TRIPS else None
    # `int(tensor)` converts to `_local_scalar_dense(tensor)`: the counter is compared with the tensor instead,
    # so that the loop needs no scalar read from a tensor.
    if isinstance(limit, torch.fx.Node) and limit.target is torch.ops.aten._local_scalar_dense.default:
        limit = limit.args[0]
    # TorchScript's bool constants are ints.
    conditioned = not all(bool(constants.get(v.debugName(), False)) for v in (cond, next(block.outputs())))
    loop = self.fx_graph.call_function(
        _while_loop,
        (
            subgraph,
            limit,
            self.get_fx_value_by_ir_value(cond) if conditioned else None,
            bool(next(block.inputs()).uses()),
            len(inits),
            *(self.get_fx_value_by_fqn(v.debugName()) for v in inits),
            *(self.get_fx_value_by_fqn(name) for name in captured),
        ),
    )
    for index, output in enumerate(node.outputs()):
        self.name_to_node[output.debugName()] = self.fx_graph.call_function(operator.getitem, (loop, index))


def _while_loop(
    body: Callable[..., Any], trips: Any, cond: Any, indexed: bool, count: int, *values: Any
) -> tuple[Any, ...]:
    """Runs while tracing the converted graph: a TorchScript loop's block as `torch.while_loop`. It carries an
    iteration counter (a 0-d int64 tensor) where the trip count (an int, or a one-element tensor) bounds the loop
    or the block reads it (`indexed`), and the condition where it is not constantly true (`trips` and `cond` are
    None where they need no check)."""
    inits, captured = values[:count], values[count:]
    counted = trips is not None or indexed
    # A trip count of the inputs' sizes is a SymInt: as a tensor, no later export has to keep a symbol for it.
    limit: torch.Tensor | None = None
    if isinstance(trips, torch.Tensor):
        limit = trips.reshape(()).to(torch.int64)
    elif trips is not None:
        limit = torch.scalar_tensor(trips, dtype=torch.int64)
    state = [torch.zeros((), dtype=torch.int64)] if counted else []
    if cond is not None:
        state.append(_flag(cond))

    def cond_fn(*args: torch.Tensor) -> torch.Tensor:
        checks = [args[0] < limit] if limit is not None else []
        if cond is not None:
            checks.append(args[int(counted)])
        if len(checks) == 2:
            return torch.logical_and(*checks)
        return checks[0] if limit is not None else checks[0].clone()  # not the carried flag itself: no aliasing

    def body_fn(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        iteration = args[0].item() if indexed else 0
        out = body(*captured, iteration, *args[len(state) :])
        out = tuple(out) if isinstance(out, tuple | list) else (out,)
        step = [args[0] + 1] if counted else []
        if cond is not None:
            step.append(_flag(out[0]))
        return (*step, *out[1:])

    return tuple(torch.while_loop(cond_fn, body_fn, (*state, *inits))[len(state) :])


def _flag(value: Any) -> torch.Tensor:
    """A TorchScript loop condition (`aten::Bool` of a tensor converts to the tensor itself) as a 0-d bool."""
    if isinstance(value, torch.Tensor):
        return value if value.shape == () and value.dtype == torch.bool else value.reshape(()).bool()
    return torch.as_tensor(value, dtype=torch.bool)
