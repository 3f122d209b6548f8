"""`graph-layout{device=...}`: channels-last regions, where the cost model predicts them faster.

A CPU convolution library (oneDNN) computes with channels innermost. Given channels-first (NCHW) activations it
reorders each convolution's input into its blocked layout and the result back, on every call; given channels-last
(NHWC) ones it takes them as they are, and ATen's pools vectorize channels-last windows over channels. This pass
finds the regions of a function where 2-D activations flow between ops that can take either layout, and puts a
region in channels-last form when `gnomon.cost` predicts its convolutions and pools, with the transposes that
bring activations into and out of it, faster so.

A region is a connected set of these ops, joined by the rank-4 values one produces and another consumes:

- 2-D float32 convolutions and max and average pools, which take `layout = "nhwc"`;
- global pools, and reductions that keep their dims, which reduce the channels-last dims instead;
- concatenations of rank-4 values, along the channels-last position of their axis;
- channel shuffles (ShuffleNet's reshape, transpose and reshape), on the channels-last dim;
- elementwise ops with a rank-4 result, whose every operand is permuted alike: a constant here, once; a value
  from outside the region through a transpose; a scalar not at all.

An activation entering a region is transposed to channels-last once; a region value used outside it is transposed
back (a reshape where only unit dims move, which the runtime makes a view). A region turns when its convolutions
and pools, priced channels-last with those transposes, are predicted faster than channels-first (with the
concatenations, which the runtime makes free along channels-first channels of one image, and copies otherwise), where
each side's generated convolutions are priced as `graph-fuse` would choose them, if faster: channels-first a
convolution with the depthwise one after it and a 1x1 one, channels-last any one (`conv_nhwc`);
elementwise ops, reductions and concatenations are priced alike both ways. Each
convolution and pool of a region records the decision: `gnomon.layout = {region = N, layout = "nhwc" | "nchw",
entries = .., exits = .., nchw_s = .., nhwc_s = ..}`.

Why channels-last and not oneDNN's own blocked layout (NCHW16c, which ONNX Runtime keeps): the runtime calls oneDNN
through ATen, which hands it strided tensors only; a blocked activation would be an opaque oneDNN tensor that the
runtime's arena and generated kernels cannot address. oneDNN's AVX-512 convolutions take channels-last activations
as they are: here 0.2-0.4x the channels-first time on MobileNet's depthwise layers, 0.5-1x on ResNet's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, FloatAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, f32, f64
from xdsl.dialects.builtin import i64 as i64_type
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from gnomon.cost.analytical import CostModelError, op_cost
from gnomon.cost.convs import gemm_conv
from gnomon.cost.devices import Device
from gnomon.dialects.graph import nn
from gnomon.dialects.graph import reduce as red
from gnomon.dialects.graph.base import GraphOperation, bool_attr, i64_array, ints
from gnomon.dialects.graph.constant_values import constant_to_numpy, numpy_to_dense
from gnomon.dialects.graph.elementwise import POINTWISE
from gnomon.dialects.graph.layout import CHANNELS_LAST, TO_CHANNELS_FIRST, TO_CHANNELS_LAST, channels_last, permuted
from gnomon.dialects.graph.tensor import ConcatOp, ConstantOp, ReshapeOp, TransposeOp
from gnomon.errors import GnomonError
from gnomon.passes.graph_fuse import (
    AUTO_DEVICE,
    Fuser,
    channels_last_choice,
    depthwise_pair,
    fusion_device,
    pointwise_choice,
)
from gnomon.passes.graph_to_kernel import LAYOUT_ATTR, Group, kernel_ops
from gnomon.passes.kernel_to_linalg import generatable

_REDUCTIONS = (red.ReduceSumOp, red.ReduceMeanOp, red.ReduceMaxOp, red.ReduceMinOp)
_GLOBAL_POOLS = {nn.GlobalAvgPoolOp: red.ReduceMeanOp, nn.GlobalMaxPoolOp: red.ReduceMaxOp}


def _shape(value: SSAValue) -> tuple[int, ...] | None:
    """The value's static shape, or None."""
    shaped = value.type
    if not isinstance(shaped, TensorType) or any(d < 0 for d in shaped.get_shape()):
        return None
    return tuple(shaped.get_shape())


def _rank4(value: SSAValue) -> bool:
    shape = _shape(value)
    return shape is not None and len(shape) == 4


def _retyped(value: SSAValue, shape: Sequence[int]) -> TensorType[Attribute]:
    shaped = value.type
    assert isinstance(shaped, TensorType)
    return TensorType(shaped.get_element_type(), list(shape))


def _anchor(op: Operation) -> bool:
    """A convolution or pool: what a region's layout changes the cost of."""
    if isinstance(op, nn.ConvOp):
        return _rank4(op.input) and _rank4(op.result) and _element(op.input) == f32 and not channels_last(op)
    if isinstance(op, nn.MaxPoolOp | nn.AvgPoolOp):
        return _rank4(op.input) and _rank4(op.result) and not channels_last(op)
    return False


def _element(value: SSAValue) -> Attribute | None:
    return value.type.get_element_type() if isinstance(value.type, TensorType) else None


def _flexible(op: Operation) -> bool:
    """Whether `op` can take either layout (see the module docstring)."""
    if _anchor(op):
        return True
    if type(op) in _GLOBAL_POOLS:
        return _rank4(op.operands[0])
    if isinstance(op, _REDUCTIONS):
        return _rank4(op.input) and bool(op.keepdims.value.data)
    if isinstance(op, ConcatOp):
        return _rank4(op.result) and all(_rank4(v) for v in op.inputs)
    if isinstance(op, ReshapeOp):
        return _channel_shuffle(op) is not None
    if isinstance(op, POINTWISE):
        return (
            len(op.results) == 1
            and _rank4(op.results[0])
            and all(_shape(v) is not None and len(_shape(v) or ()) <= 4 for v in op.operands)
        )
    return False


def _channel_shuffle(op: ReshapeOp) -> tuple[ReshapeOp, TransposeOp] | None:
    """The reshape and transpose before `op` if the three are a channel shuffle (ShuffleNet's): the channels of a
    rank-4 value split into (groups, channels per group), those two dims swapped, and merged back."""
    transpose = op.input.owner
    if not isinstance(transpose, TransposeOp) or tuple(ints(transpose.permutation)) != (0, 2, 1, 3, 4):
        return None
    split = transpose.input.owner
    if not isinstance(split, ReshapeOp) or not (split.result.has_one_use() and transpose.result.has_one_use()):
        return None
    before, groups, after = _shape(split.input), _shape(split.result), _shape(op.result)
    if before is None or groups is None or len(before) != 4 or after != before:
        return None
    n, channels, h, w = before
    return (split, transpose) if groups == (n, groups[1], channels // groups[1], h, w) else None


def _activations(op: Operation) -> list[SSAValue]:
    """The values a region op reads in the region's layout: a convolution's, pool's or reduction's activation (not
    a weight or bias), a channel shuffle's input, every other op's operands."""
    if _anchor(op) or type(op) in _GLOBAL_POOLS or isinstance(op, _REDUCTIONS):
        return [op.operands[0]]
    if isinstance(op, ReshapeOp):
        shuffle = _channel_shuffle(op)
        assert shuffle is not None
        return [shuffle[0].input]
    return list(op.operands)


def _regions(block: Block) -> list[list[Operation]]:
    """The connected sets of flexible ops (in program order) that hold a convolution or pool."""
    ops = [op for op in block.ops if _flexible(op)]
    parent: dict[Operation, Operation] = {op: op for op in ops}

    def root(op: Operation) -> Operation:
        while parent[op] is not op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op

    for op in ops:
        for operand in _activations(op):
            owner = operand.owner
            if isinstance(owner, Operation) and owner in parent and _rank4(operand):
                parent[root(owner)] = root(op)
    members: dict[Operation, list[Operation]] = {}
    for op in ops:
        members.setdefault(root(op), []).append(op)
    return [region for region in members.values() if any(_anchor(op) for op in region)]


def _moves_units_only(shape: Sequence[int], permutation: Sequence[int]) -> bool:
    """Whether permuting `shape` keeps the order of its non-unit dims: the elements stay where they are."""
    kept = [i for i in permutation if shape[i] != 1]
    return kept == sorted(kept)


def _scalar_like(value: SSAValue) -> bool:
    shape = _shape(value)
    return shape is not None and all(d == 1 for d in shape)


def _conversion(value: SSAValue, permutation: Sequence[int]) -> ReshapeOp | TransposeOp:
    """`value` permuted: a transpose, or a reshape where only unit dims move."""
    shape = _shape(value)
    assert shape is not None
    result = _retyped(value, permuted(shape, permutation))
    if _moves_units_only(shape, permutation):
        return ReshapeOp.create(operands=[value], result_types=[result])
    return TransposeOp.create(
        operands=[value], result_types=[result], properties={"permutation": i64_array(permutation)}
    )


@dataclass
class _Region:
    ops: list[Operation]
    entries: list[SSAValue]
    """Activations from outside the region that its ops read, each transposed in once."""
    exits: list[SSAValue]
    """Region values that ops outside it (or the function's return) read, each transposed back once."""


def _members(ops: Sequence[Operation]) -> set[Operation]:
    """The region's ops and the ops inside its channel shuffles, which its rewrite replaces too."""
    inside = set(ops)
    for op in ops:
        if isinstance(op, ReshapeOp):
            inside.update(_channel_shuffle(op) or ())
    return inside


def _boundaries(ops: list[Operation]) -> _Region:
    inside = _members(ops)
    entries: list[SSAValue] = []
    exits: list[SSAValue] = []
    for op in ops:
        for operand in _activations(op):
            owner = operand.owner
            outside = not (isinstance(owner, Operation) and owner in inside)
            constant = isinstance(owner, ConstantOp)
            if outside and not constant and _rank4(operand) and not _scalar_like(operand) and operand not in entries:
                entries.append(operand)
        for result in op.results:
            if any(use.operation not in inside for use in result.uses) and result not in exits:
                exits.append(result)
    return _Region(ops, entries, exits)


class _Pricer:
    """Predicted times of the ops a layout changes, as the runtime runs them."""

    def __init__(self, device: Device, function: func.FuncOp):
        self.device = device
        self.fuser = Fuser(device, os.cpu_count() or 1)
        self.kernel_ops = kernel_ops(function)[0]

    def op_s(self, op: Operation) -> float:
        assert isinstance(op, GraphOperation)
        conv_as_gemm = isinstance(op, nn.ConvOp) and gemm_conv(op)
        cost = op_cost(op, self.device, conv_as_gemm=conv_as_gemm, library=True, weights_in_dram=True)
        return cost.predicted_s

    def channels_last_s(self, op: Operation) -> float:
        """The anchor's time in channels-last form, priced on a detached copy: a convolution that gnomon generates
        channels-last (`graph_fuse.channels_last_choice`) at the faster of that kernel and the library's call, as
        `graph-fuse` will choose."""
        block = Block(arg_types=[_retyped(op.operands[0], permuted(_shape(op.operands[0]) or (), TO_CHANNELS_LAST))])
        copy = _channels_last_anchor(op, [block.args[0], *op.operands[1:]])
        try:
            library = self.op_s(copy)
            if not (isinstance(copy, nn.ConvOp) and channels_last_choice(copy)):
                return library
            return min(library, self.fuser.price(Group([copy], "generated", [])))
        finally:
            copy.drop_all_references()

    def conversion_s(self, value: SSAValue, permutation: Sequence[int]) -> float:
        conversion = _conversion(value, permutation)
        try:
            return 0.0 if isinstance(conversion, ReshapeOp) else self.op_s(conversion)
        finally:
            conversion.drop_all_references()

    def generated_pair(self, conv: Operation) -> Group | None:
        """The generated kernel `graph-fuse` could make of a channels-first convolution and the depthwise one after
        it, or None."""
        if not isinstance(conv, nn.ConvOp) or not generatable(conv) or conv not in self.kernel_ops:
            return None
        return depthwise_pair(self.kernel_ops, self.kernel_ops.index(conv))

    def channels_first_s(self, anchors: Sequence[Operation]) -> float:
        """The anchors' time channels-first, a convolution and the depthwise one after it as `graph-fuse`'s
        generated kernel where that is predicted faster than the two library calls, and a 1x1 convolution's own
        generated kernel (`graph_fuse.pointwise_choice`) likewise: channels-last form gives both kernels up, and has
        its own (`channels_last_s`). Counting the 1x1 kernels one way only, either way, chose the layout they were
        counted for where the other measured faster (bench/layout.py)."""
        total, priced = 0.0, set[Operation]()
        for op in anchors:
            if op in priced:
                continue
            pair = self.generated_pair(op)
            if pair is not None and pair.ops[-1] in anchors:
                separate = self.op_s(op) + self.op_s(pair.ops[-1])
                total += min(separate, self.fuser.price(pair))
                priced.update((op, pair.ops[-1]))
                continue
            if isinstance(op, nn.ConvOp) and generatable(op) and pointwise_choice(op):
                total += min(self.op_s(op), self.fuser.price(Group([op], "generated", [])))
                continue
            total += self.op_s(op)
        return total

    def concat_s(self, concat: ConcatOp, channels_last: bool) -> float:
        """A concatenation, in either layout: free where the runtime has its inputs written into their slots of its
        result (every dim before the axis is 1: `kernel_to_rt`'s concat slots), else a copy of its bytes."""
        shape, axis = _shape(concat.result) or (), concat.axis.value.data % 4
        if channels_last:
            shape, axis = permuted(shape, TO_CHANNELS_LAST), TO_CHANNELS_LAST.index(axis)
        return 0.0 if math.prod(shape[:axis]) == 1 else self.op_s(concat)

    def region(self, region: _Region) -> tuple[float, float]:
        """(channels-first, channels-last) predicted seconds of the region's anchors and concatenations, with its
        transposes."""
        anchors = [op for op in region.ops if _anchor(op)]
        concats = [op for op in region.ops if isinstance(op, ConcatOp)]
        first = self.channels_first_s(anchors) + sum(self.concat_s(op, channels_last=False) for op in concats)
        last = sum(self.channels_last_s(op) for op in anchors)
        last += sum(self.concat_s(op, channels_last=True) for op in concats)
        last += sum(self.conversion_s(v, TO_CHANNELS_LAST) for v in region.entries)
        last += sum(self.conversion_s(v, TO_CHANNELS_FIRST) for v in region.exits)
        return first, last


def _channels_last_anchor(op: Operation, operands: Sequence[SSAValue]) -> GraphOperation:
    result = op.results[0]
    shape = _shape(result)
    assert shape is not None
    properties = {**op.properties, "layout": StringAttr(CHANNELS_LAST)}
    created = type(op).create(
        operands=list(operands),
        result_types=[_retyped(result, permuted(shape, TO_CHANNELS_LAST))],
        properties=properties,
        attributes=dict(op.attributes),
    )
    assert isinstance(created, GraphOperation)
    return created


class _Rewriter:
    """Puts one region in channels-last form, in program order."""

    def __init__(self, region: _Region):
        self.region = region
        self.twins: dict[SSAValue, SSAValue] = {}
        """Each region value's (and entry's) channels-last form."""
        self.shuffles: dict[Operation, tuple[TransposeOp, ReshapeOp]] = {}
        """Each channel shuffle's last op, and the two before it, which the rewrite also replaces."""

    def operand(self, value: SSAValue, before: Operation) -> SSAValue:
        """`value` in channels-last form, made before `before` the first time it is asked for."""
        if value in self.twins:
            return self.twins[value]
        if _scalar_like(value):
            return value  # broadcast alike in either layout
        owner = value.owner
        if isinstance(owner, ConstantOp):
            twin = self._constant(owner, value)
        else:
            shape = _shape(value)
            assert shape is not None
            source = value
            if len(shape) < 4:  # broadcast from the trailing dims: make it rank 4 first
                aligned = _retyped(value, (1,) * (4 - len(shape)) + shape)
                reshape = ReshapeOp.create(operands=[value], result_types=[aligned])
                Rewriter.insert_op(reshape, InsertPoint.before(before))
                source = reshape.results[0]
            conversion = _conversion(source, TO_CHANNELS_LAST)
            conversion.location = before.location  # profiles name the transpose after the op that needs it
            Rewriter.insert_op(conversion, InsertPoint.before(before))
            twin = conversion.results[0]
        self.twins[value] = twin
        return twin

    @staticmethod
    def _constant(constant: ConstantOp, value: SSAValue) -> SSAValue:
        array = constant_to_numpy(constant.value)
        array = array.reshape((1,) * (4 - array.ndim) + array.shape)
        permuted = np.ascontiguousarray(np.transpose(array, TO_CHANNELS_LAST))
        element = _element(value)
        assert element is not None
        new = ConstantOp.create(
            properties={"value": numpy_to_dense(permuted, element)},
            result_types=[_retyped(value, permuted.shape)],
        )
        Rewriter.insert_op(new, InsertPoint.after(constant))
        return new.results[0]

    def rewrite(self, op: Operation) -> Operation:
        if isinstance(op, ReshapeOp):
            return self._channel_shuffle(op)
        activations = _activations(op)
        operands = [self.operand(v, op) if v in activations else v for v in op.operands]
        new = self._build(op, operands)
        new.location = op.location
        Rewriter.insert_op(new, InsertPoint.before(op))
        self.twins[op.results[0]] = new.results[0]
        return new

    def _channel_shuffle(self, op: ReshapeOp) -> Operation:
        """The shuffle on channels-last values: (N, H, W, C) split into (groups, C / groups), swapped, merged."""
        shuffle = _channel_shuffle(op)
        assert shuffle is not None
        split, transpose = shuffle
        x = self.operand(split.input, op)
        shape, split_shape = _shape(x), _shape(split.result)
        assert shape is not None
        assert split_shape is not None
        n, h, w, channels = shape
        groups = split_shape[1]
        grouped = ReshapeOp.create(operands=[x], result_types=[_retyped(x, (n, h, w, groups, channels // groups))])
        swapped = TransposeOp.create(
            operands=[grouped.results[0]],
            result_types=[_retyped(x, (n, h, w, channels // groups, groups))],
            properties={"permutation": i64_array([0, 1, 2, 4, 3])},
        )
        merged = ReshapeOp.create(operands=[swapped.results[0]], result_types=[_retyped(x, (n, h, w, channels))])
        for created in (grouped, swapped, merged):
            created.location = op.location
        Rewriter.insert_op([grouped, swapped, merged], InsertPoint.before(op))
        self.shuffles[op] = (transpose, split)
        self.twins[op.results[0]] = merged.results[0]
        return merged

    @staticmethod
    def _build(op: Operation, operands: list[SSAValue]) -> Operation:
        result = op.results[0]
        shape = _shape(result)
        assert shape is not None
        result_type = _retyped(result, permuted(shape, TO_CHANNELS_LAST))
        attributes = dict(op.attributes)
        if _anchor(op):
            return _channels_last_anchor(op, operands)
        if isinstance(op, nn.GlobalAvgPoolOp | nn.GlobalMaxPoolOp):
            properties = {"axes": i64_array([1, 2]), "keepdims": bool_attr(True)}
            return _GLOBAL_POOLS[type(op)].create(
                operands=operands, result_types=[result_type], properties=properties, attributes=attributes
            )
        if isinstance(op, _REDUCTIONS):
            axes = sorted(TO_CHANNELS_LAST.index(a) for a in op.reduced_axes())
            properties = {**op.properties, "axes": i64_array(axes)}
            return type(op).create(
                operands=operands, result_types=[result_type], properties=properties, attributes=attributes
            )
        if isinstance(op, ConcatOp):
            axis = TO_CHANNELS_LAST.index(op.axis.value.data % 4)
            properties = {**op.properties, "axis": IntegerAttr(axis, i64_type)}
            return ConcatOp.create(
                operands=operands, result_types=[result_type], properties=properties, attributes=attributes
            )
        return type(op).create(
            operands=operands, result_types=[result_type], properties=dict(op.properties), attributes=attributes
        )

    def run(self) -> None:
        members = _members(self.region.ops)
        for op in self.region.ops:
            new = self.rewrite(op)
            result = op.results[0]
            if result in self.region.exits:
                back = _conversion(new.results[0], TO_CHANNELS_FIRST)
                back.location = op.location
                Rewriter.insert_op(back, InsertPoint.after(new))
                outside = [use for use in result.uses if use.operation not in members]
                for use in outside:
                    use.operation.operands[use.index] = back.results[0]
        for op in reversed(self.region.ops):
            Rewriter.erase_op(op)
            for inner in self.shuffles.get(op, ()):  # after its user, before its operand's definer
                Rewriter.erase_op(inner)
        for value in self.twins:  # the constants permuted here, where nothing else reads them
            if isinstance(value.owner, ConstantOp) and not value.uses:
                Rewriter.erase_op(value.owner)


@dataclass(frozen=True)
class LayoutDecision:
    """One region's choice, as `--explain` prints it."""

    region: int
    entries: int
    """Activations transposed into the region."""
    exits: int
    """Region values transposed back for ops outside it."""
    nchw_s: float
    """Its convolutions and pools, predicted channels-first."""
    nhwc_s: float
    """The same channels-last, with the transposes in and out."""
    layout: str

    def attribute(self) -> DictionaryAttr:
        return DictionaryAttr(
            {
                "region": IntegerAttr(self.region, i64_type),
                "layout": StringAttr(self.layout),
                "entries": IntegerAttr(self.entries, i64_type),
                "exits": IntegerAttr(self.exits, i64_type),
                "nchw_s": FloatAttr(self.nchw_s, f64),
                "nhwc_s": FloatAttr(self.nhwc_s, f64),
            }
        )

    @staticmethod
    def of(op: Operation) -> LayoutDecision | None:
        """The decision recorded on `op`, or None."""
        attr = op.attributes.get(LAYOUT_ATTR)
        if not isinstance(attr, DictionaryAttr):
            return None
        data = attr.data

        def number(key: str) -> float:
            value = data[key]
            assert isinstance(value, IntegerAttr | FloatAttr)
            return value.value.data

        layout = data["layout"]
        assert isinstance(layout, StringAttr)
        return LayoutDecision(
            int(number("region")), int(number("entries")), int(number("exits")), number("nchw_s"),
            number("nhwc_s"), layout.data,
        )  # fmt: skip


LAYOUTS = ("auto", CHANNELS_LAST, "nchw")
"""The pass's `layout` option: each region's by predicted time, or every region's forced (still priced)."""


def layout_function(
    function: func.FuncOp, device: Device, first_index: int = 0, forced: str = "auto"
) -> list[LayoutDecision]:
    """Choose and apply each region's layout in `function` (`forced`, unless "auto"); the decisions, regions numbered
    from `first_index`."""
    pricer = _Pricer(device, function)
    priced: list[tuple[_Region, LayoutDecision]] = []
    # Every region is priced on the graph as imported, before any is rewritten.
    for index, ops in enumerate(_regions(function.body.block), start=first_index):
        region = _boundaries(ops)
        try:
            first, last = pricer.region(region)
        except CostModelError:
            if forced != CHANNELS_LAST:
                continue  # a shape the cost model cannot price: channels-first, as imported
            first, last = math.nan, math.nan
        layout = forced if forced != "auto" else CHANNELS_LAST if last < first else "nchw"
        priced.append((region, LayoutDecision(index, len(region.entries), len(region.exits), first, last, layout)))
    for region, decision in priced:
        ops = region.ops
        if decision.layout == CHANNELS_LAST:
            rewriter = _Rewriter(region)
            rewriter.run()
            ops = [rewriter.twins[op.results[0]].owner for op in ops]  # pyright: ignore[reportAssignmentType]
        for op in ops:
            if isinstance(op, nn.ConvOp | nn.MaxPoolOp | nn.AvgPoolOp):
                op.attributes[LAYOUT_ATTR] = decision.attribute()
    return [decision for _, decision in priced]


@dataclass(frozen=True)
class GraphLayoutPass(ModulePass):
    """Put the regions of 2-D activations that the cost model predicts faster so in channels-last form."""

    name = "graph-layout"

    device: str = AUTO_DEVICE
    """A shipped device, `local`, a device file (.toml), or `auto` (local when calibrated, else generic-cpu)."""

    layout: str = "auto"
    """`auto` (each region by predicted time), or `nhwc` / `nchw` for every region, to compare the two."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.layout not in LAYOUTS:
            raise GnomonError(f"graph-layout: layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        device = fusion_device(self.device)
        count = 0
        for function in op.ops:
            if isinstance(function, func.FuncOp) and function.body.blocks:
                count += len(layout_function(function, device, count, self.layout))


def layout_decisions(module: ModuleOp) -> list[LayoutDecision]:
    """The decisions `graph-layout` recorded on `module`'s ops, one per region, in region order."""
    found: dict[int, LayoutDecision] = {}
    for op in module.walk():
        decision = LayoutDecision.of(op)
        if decision is not None:
            found.setdefault(decision.region, decision)
    return [found[region] for region in sorted(found)]


def explain_layouts(decisions: Sequence[LayoutDecision], device: str) -> str:
    """`--explain`'s layout table: each region's predicted time both ways and the layout taken."""
    lines = [f"layout decisions ({len(decisions)} regions), predicted on {device}:"]
    lines.append(f"  {'region':>6}  {'in':>3} {'out':>3}  {'nchw':>11} {'nhwc':>11}  layout")
    for d in decisions:
        lines.append(
            f"  {d.region:>6}  {d.entries:>3} {d.exits:>3}  {d.nchw_s * 1e6:>8.1f} us {d.nhwc_s * 1e6:>8.1f} us"
            f"  {d.layout}"
        )
    return "\n".join(lines)


__all__ = ["LAYOUT_ATTR", "GraphLayoutPass", "LayoutDecision", "explain_layouts", "layout_decisions", "layout_function"]
