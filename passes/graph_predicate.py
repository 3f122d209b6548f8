"""`graph-predicate{device=... taken=... max-unroll=...}`: data-dependent control flow made straight-line where the cost
model predicts it faster.

A `graph.if` becomes both of its sides, computed one after the other, and a `graph.where` per result that selects by the
predicate. A `graph.while` with a bound on its trips (`max_trips`, at most `max-unroll`) becomes that many copies of its
condition and body: each copy's condition is and-ed into an `active` flag, and each carried value becomes the body's new
value where the flag holds, else stays. Where a condition folds (a counted loop's counter against its trip count),
`graph-fold-constants` and `graph-canonicalize` then remove the selects: the loop is unrolled. Either way the program is
one static schedule, with no decision on the host: on a GPU that is what a captured graph needs; on a CPU it saves the
host runtime's round trips and copies.

Each candidate is priced both ways by `gnomon.cost.control_flow`: kept, as the host runs it (a decision costs
`Device.host_branch_s` plus the copies across sub-schedules; a branch's sides weighed by `taken`, the share of runs that
take the then side; a loop at its expected trips: its bound if counted, else half way), and predicated, as the
straight-line ops it becomes once their constants fold (built, folded and priced before the choice). It is predicated
when that is predicted faster. The decision and both figures are recorded in the IR: `gnomon.predicate = {decision =
"host", host_s, predicated_s}` on a control op kept, and on the ops that compute a predicated op's results
`gnomon.predicated = {op, index, at, host_s, predicated_s}` (`index` numbers the predicated ops, `at` is the op's
location). Innermost ops are decided first, so an outer op is priced with its inner ones as decided.

Not predicated: a loop without a bound, or one whose body changes a carried value's shape (a select needs one shape),
a branch whose sides yield different shapes, and code that is not safe to compute where its result is thrown away
(xDSL's `is_speculatable`): a gather or an embedding at indices from data, which the branch may guard (`if i < n:
x[i]`), or an inner loop without a bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import is_speculatable

from gnomon.cost.control_flow import (
    Price,
    Priced,
    crossing,
    expected_trips,
    host_if_s,
    host_while_s,
    region_s,
)
from gnomon.cost.critical_path import schedule
from gnomon.cost.devices import Device
from gnomon.cost.program import GPU_STREAMS, gnomon_steps
from gnomon.dialects.graph.base import DIM_BOUNDS_ATTR, DIM_LOWER_BOUNDS_ATTR
from gnomon.dialects.graph.control_flow import IfOp, WhileOp
from gnomon.dialects.graph.elementwise import AndOp, WhereOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
from gnomon.dialects.graph.traits import ReadsAtDataIndices
from gnomon.errors import GnomonError
from gnomon.locations import location_name
from gnomon.passes.graph_fuse import GraphFusePass, fusion_device
from gnomon.passes.graph_to_kernel import GraphToKernelPass
from gnomon.passes.kernel_to_rt import KernelToRtPass

__all__ = ["HOST_ATTR", "PREDICATED_ATTR", "GraphPredicatePass", "PredicateDecision", "explain", "predicate_decisions"]

HOST_ATTR = "gnomon.predicate"
"""On a control op kept for the host: the decision and both predictions."""
PREDICATED_ATTR = "gnomon.predicated"
"""On the ops that compute a predicated control op's results: which op, and both predictions."""


@dataclass(frozen=True)
class PredicateDecision:
    """One control op `graph-predicate` priced, as `--explain` prints it."""

    op: str
    location: str
    host_s: float | None
    """Predicted seconds run on the host (None: the model could not price it)."""
    predicated_s: float | None
    """Predicted seconds as straight-line code (None: not predicable, or not priced)."""
    decision: str
    """`predicated` or `host`."""
    reason: str = ""
    """Why it was not predicated, where it could not be."""


class _NotPredicable(Exception):
    """The op cannot become straight-line code (the message says why)."""


def _reshape_to_scalar(block: Block, pred: SSAValue) -> SSAValue:
    """A one-element predicate as a 0-d tensor: a where then broadcasts it without changing any rank."""
    assert isinstance(pred.type, TensorType)
    if pred.type.get_shape() == ():
        return pred
    reshape = ReshapeOp.build(operands=[pred], result_types=[TensorType(i1, [])])
    block.add_op(reshape)
    return reshape.results[0]


def _inline(region: Region, arguments: Sequence[SSAValue], block: Block) -> list[SSAValue]:
    """Clone `region`'s ops into `block` with `arguments` for its block arguments; the values it yields."""
    values: dict[SSAValue, SSAValue] = dict(zip(region.block.args, arguments, strict=True))
    for op in region.block.ops:
        if op is region.block.last_op:
            return [values.get(v, v) for v in op.operands]
        clone = op.clone(values)
        values.update(zip(op.results, clone.results, strict=True))
        block.add_op(clone)
    raise _NotPredicable("a region without a terminator")


def _select(block: Block, pred: SSAValue, on_true: SSAValue, on_false: SSAValue) -> SSAValue:
    if on_true is on_false:
        return on_true
    if on_true.type != on_false.type:
        raise _NotPredicable(f"its values change type ({on_false.type} and {on_true.type})")
    where = WhereOp.build(operands=[pred, on_true, on_false], result_types=[on_true.type])
    block.add_op(where)
    return where.results[0]


def _predicated_if(op: IfOp) -> tuple[Block, list[SSAValue]]:
    block = Block()
    pred = _reshape_to_scalar(block, op.pred)
    then_values = _inline(op.then_region, (), block)
    else_values = _inline(op.else_region, (), block)
    return block, [_select(block, pred, a, b) for a, b in zip(then_values, else_values, strict=True)]


def _predicated_while(op: WhileOp, max_unroll: int) -> tuple[Block, list[SSAValue]]:
    trips = op.trip_bound
    if trips is None:
        raise _NotPredicable("no bound on its trips")
    if trips > max_unroll:
        raise _NotPredicable(f"its bound of {trips} trips is above max-unroll={max_unroll}")
    for init, result in zip(op.inits, op.outputs, strict=True):
        if init.type != result.type:
            raise _NotPredicable(f"its body changes a carried value's type ({init.type} to {result.type})")
    block = Block()
    carried: list[SSAValue] = list(op.inits)
    active: SSAValue | None = None
    for _ in range(trips):
        (go,) = _inline(op.cond_region, carried, block)
        go = _reshape_to_scalar(block, go)
        if active is not None:
            conjunction = AndOp.build(operands=[active, go], result_types=[go.type])
            block.add_op(conjunction)
            go = conjunction.results[0]
        active = go
        new = _inline(op.body_region, carried, block)
        carried = [_select(block, active, n, o) for n, o in zip(new, carried, strict=True)]
    return block, carried


def _not_speculatable(op: Operation) -> str:
    """Why `op` may not be computed where its result could be thrown away (on the side of a branch not taken)."""
    where = location_name(op.location)
    at = f" ({where})" if where not in ("", "?") else ""
    if op.has_trait(ReadsAtDataIndices):
        return f"{op.name}{at} reads at indices from data: where the branch is not taken they may be out of range"
    if isinstance(op, WhileOp):
        return f"the inner graph.while{at} has no bound on its trips"
    return f"{op.name}{at} is not safe to compute where its result is not used"


def _folded(block: Block, results: Sequence[SSAValue], ctx: Context) -> tuple[Block, list[SSAValue]]:
    """The block with its constants folded and dead ops dropped (in a scratch function that returns `results`)."""
    from gnomon.passes.graph_canonicalize import GraphCanonicalizePass
    from gnomon.passes.graph_fold_constants import GraphFoldConstantsPass

    block.add_op(func.ReturnOp(*results))
    scratch = ModuleOp([func.FuncOp("predicated", FunctionType.from_lists([], []), Region(block))])
    GraphFoldConstantsPass().apply(ctx, scratch)
    GraphCanonicalizePass().apply(ctx, scratch)
    terminator = block.last_op
    assert isinstance(terminator, func.ReturnOp)
    values = list(terminator.operands)
    terminator.detach()
    terminator.erase()
    function = scratch.ops.first
    assert isinstance(function, func.FuncOp)
    function.body.detach_block(block)
    return block, values


def _record(values: Sequence[SSAValue], block: Block, entry: dict[str, Attribute]) -> None:
    """Mark the ops of `block` that compute `values` (or the block's last op, where none does)."""
    owners = [v.owner for v in values if isinstance(v.owner, Operation) and v.owner.parent_block() is block]
    for owner in owners or ([block.last_op] if block.last_op else []):
        owner.attributes[PREDICATED_ATTR] = DictionaryAttr(entry)


def _compiled(device_name: str, device: Device, ctx: Context, attributes: Mapping[str, Attribute]) -> Price:
    """Straight-line ops priced as gnomon compiles them: outlined into a program of their own (the values they read
    from outside as its inputs, constants cloned in, the values read after them as its results), fused and lowered
    as the lowering pipeline does, each launch and copy priced by `gnomon_steps`."""

    def price(ops: Sequence[Operation]) -> Priced:
        module = _outlined(ops)
        module.attributes.update(attributes)  # the declared ranges of dynamic dims: the plan is made at their tops
        GraphFusePass(device=device_name).apply(ctx, module)
        GraphToKernelPass().apply(ctx, module)
        KernelToRtPass().apply(ctx, module)
        steps = gnomon_steps(module, device)
        tasks = [step.task for step in steps]
        e2e = schedule(tasks, 1 if device.kind == "cpu" else GPU_STREAMS, synchronous=device.kind == "cpu").e2e_s
        copies = sum(step.task.host_s for step in steps if step.cost is None)  # a CPU's copies, one after another
        return Priced(e2e - copies, copies)

    return price


def _predicated_s(block: Block, device: Device, price: Price, taken: float) -> float:
    """The predicted seconds of predicated code: inside the program around it, straight-line code pays its kernels,
    not the copies of a sub-schedule; control flow kept for the host in it (an inner op not predicated) splits it."""
    if any(isinstance(op, IfOp | WhileOp) for op in block.ops):
        return region_s(block, device, price, taken)
    ops = list(block.ops)
    return price(ops).run_s if any(not isinstance(op, ConstantOp) for op in ops) else 0.0


def _outlined(ops: Sequence[Operation]) -> ModuleOp:
    """`ops` cloned into a function of their own: a scratch program to price."""
    inputs, outputs = crossing(ops)
    block = Block(arg_types=[v.type for v in inputs])
    values: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args, strict=True))
    for op in ops:
        for operand in op.operands:  # constants from outside: cloned, as weights are into every segment
            if operand not in values and isinstance(operand.owner, ConstantOp):
                constant = operand.owner.clone()
                block.add_op(constant)
                values[operand] = constant.results[0]
        clone = op.clone(values)
        values.update(zip(op.results, clone.results, strict=True))
        block.add_op(clone)
    block.add_op(func.ReturnOp(*(values[v] for v in outputs)))
    signature = FunctionType.from_lists([v.type for v in inputs], [v.type for v in outputs])
    return ModuleOp([func.FuncOp("priced", signature, Region(block))])


def _seconds(value: float) -> FloatAttr:
    return FloatAttr(value, f64)


@dataclass(frozen=True)
class GraphPredicatePass(ModulePass):
    """Turn data-dependent branches and bounded loops into straight-line code where that is predicted faster."""

    name = "graph-predicate"

    device: str = "auto"
    """The device whose predicted times decide (as `graph-fuse`'s option)."""
    taken: float = 0.5
    """The share of runs that take a branch's then side, which weighs its two sides on the host."""
    max_unroll: int = 64
    """The most trips a loop is unrolled for."""
    mode: str = "auto"
    """`auto` (by predicted time), `always` (every op that can be), `never` (record the predictions only)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mode not in ("auto", "always", "never"):
            raise ValueError(f"graph-predicate: mode must be auto, always or never, got {self.mode!r}")
        if not 0.0 <= self.taken <= 1.0:
            raise ValueError(f"graph-predicate: taken must be in [0, 1], got {self.taken}")
        device = fusion_device(self.device)
        ranges = {k: v for k, v in op.attributes.items() if k in (DIM_BOUNDS_ATTR, DIM_LOWER_BOUNDS_ATTR)}
        price = _compiled(self.device, device, ctx, ranges)
        predicated = 0  # numbers the predicated ops: several ops may carry each one's entry
        for control in [o for o in op.walk(region_first=True) if isinstance(o, IfOp | WhileOp)]:
            predicated += self._decide(control, price, device, ctx, predicated + 1)

    def _decide(self, op: IfOp | WhileOp, price: Price, device: Device, ctx: Context, number: int) -> bool:
        """Predicate `op` (the `number`-th so far) or keep it; whether it was predicated."""
        host_s: float | None = None
        try:
            if isinstance(op, IfOp):
                host_s = host_if_s(op, device, price, self.taken)
            elif op.trip_bound is not None:
                host_s = host_while_s(op, device, expected_trips(op), price, self.taken)
        except GnomonError:  # a shape the cost model or the lowering cannot take
            pass
        try:
            block, values = _predicated_if(op) if isinstance(op, IfOp) else _predicated_while(op, self.max_unroll)
        except _NotPredicable as reason:
            self._keep(op, host_s, None, str(reason))
            return False
        block, values = _folded(block, values, ctx)
        unsafe = next((inner for inner in block.ops if not is_speculatable(inner)), None)
        if unsafe is not None:
            self._keep(op, host_s, None, _not_speculatable(unsafe))
            return False
        try:
            predicated_s: float | None = _predicated_s(block, device, price, self.taken)
        except GnomonError:
            predicated_s = None
        faster = host_s is not None and predicated_s is not None and predicated_s < host_s
        if self.mode == "never" or (self.mode == "auto" and not faster):
            reason = "" if host_s is not None and predicated_s is not None else "the cost model cannot price it"
            self._keep(op, host_s, predicated_s, reason)
            return False
        entry: dict[str, Attribute] = {
            "op": StringAttr(op.name),
            "index": IntegerAttr(number, i64),
            "at": StringAttr(location_name(op.location)),
        }
        if host_s is not None:
            entry["host_s"] = _seconds(host_s)
        if predicated_s is not None:
            entry["predicated_s"] = _seconds(predicated_s)
        if isinstance(op, WhileOp) and op.trip_bound is not None:
            entry["trips"] = IntegerAttr(op.trip_bound, i64)
        _record(values, block, entry)
        parent = op.parent_block()
        assert parent is not None
        for inner in list(block.ops):
            inner.detach()
            parent.insert_op_before(inner, op)
        Rewriter.replace_op(op, [], values)
        return True

    @staticmethod
    def _keep(op: IfOp | WhileOp, host_s: float | None, predicated_s: float | None, reason: str) -> None:
        entry: dict[str, Attribute] = {"decision": StringAttr("host")}
        if host_s is not None:
            entry["host_s"] = _seconds(host_s)
        if predicated_s is not None:
            entry["predicated_s"] = _seconds(predicated_s)
        if reason:
            entry["reason"] = StringAttr(reason)
        op.attributes[HOST_ATTR] = DictionaryAttr(entry)


def _optional_seconds(entries: Mapping[str, Attribute], key: str) -> float | None:
    value = entries.get(key)
    return value.value.data if isinstance(value, FloatAttr) else None


def predicate_decisions(module: ModuleOp) -> list[PredicateDecision]:
    """The decisions `graph-predicate` recorded on `module`, in program order (one per predicated op)."""
    decisions: list[PredicateDecision] = []
    seen: set[int] = set()
    for op in module.walk():
        host = op.attributes.get(HOST_ATTR)
        if isinstance(host, DictionaryAttr):
            reason = host.data.get("reason")
            decisions.append(
                PredicateDecision(
                    op.name,
                    location_name(op.location),
                    _optional_seconds(host.data, "host_s"),
                    _optional_seconds(host.data, "predicated_s"),
                    "host",
                    reason.data if isinstance(reason, StringAttr) else "",
                )
            )
        predicated = op.attributes.get(PREDICATED_ATTR)
        if isinstance(predicated, DictionaryAttr):
            entries = predicated.data
            name, at, index = entries["op"], entries["at"], entries["index"]
            assert isinstance(name, StringAttr)
            assert isinstance(at, StringAttr)
            assert isinstance(index, IntegerAttr)
            if index.value.data not in seen:  # several ops may carry one predicated op's entry
                seen.add(index.value.data)
                decisions.append(
                    PredicateDecision(
                        name.data, at.data, _optional_seconds(entries, "host_s"),
                        _optional_seconds(entries, "predicated_s"), "predicated",
                    )
                )  # fmt: skip
    return decisions


def explain(decisions: Sequence[PredicateDecision], device: str) -> str:
    """`--explain`'s table: every control op, both predictions and what was taken."""
    lines = [f"predication decisions ({len(decisions)}), predicted on {device}:"]
    lines.append(f"  {'op':<12} {'host':>12} {'predicated':>12}  decision    location")

    def shown(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds * 1e6:.2f} us"

    for d in decisions:
        why = f"  ({d.reason})" if d.reason else ""
        lines.append(
            f"  {d.op:<12} {shown(d.host_s):>12} {shown(d.predicated_s):>12}  {d.decision:<10}  {d.location}{why}"
        )
    return "\n".join(lines)
