"""`graph-fuse{device=...}`: which ops share a kernel, decided by the cost model.

`graph-to-kernel` knows which joins are legal (an op joins the kernel before it when it consumes that kernel's
result, as its only user, and the kernel can take it: a library call's epilogue, a generated loop nest's elementwise
op or reduction). This pass decides which legal joins are worth taking, and which kind of kernel an op starts
where gnomon can both generate it and call the library for it (`CHOICE_OPS`: reductions). Each choice is priced by
`gnomon.cost.kernel_cost`, the model `program_report` predicts the compiled program with, on the kernel ops
`graph-to-kernel` would build, their calls priced as a serving loop finds them (each function last called about
one kernel's traffic before):

- a join: the open kernel and the candidate as two launches (`separate_s`) against one kernel holding both
  (`fused_s`); the candidate joins when the fused kernel is predicted no slower;
- a kind: the op's generated kernel with the ops it would then take, against its library call with its epilogue
  and the rest as their own kernels (`generated_s`, `library_s`), over the same ops.

Before grouping, each attention written out as matmul, softmax and matmul is priced against one `graph.attention`
and replaced where that is predicted no slower (`gnomon.passes.graph_fuse_attention`; option `attention=false`
skips it).

Every grouped op gets `gnomon.fusion = {group = N, ...}`; the op that starts a group also names its `kind`, and an
op whose join was priced carries the `decision` ("fuse" or "split") and both figures in seconds; a join that a
generated convolution's kind took with it, up to the depthwise convolution its price included, is "fuse" and
`required` whatever its own figures say.
`graph-to-kernel` lowers exactly these groups. An op the cost model cannot price (a dynamic shape) takes every
legal join, as `graph-to-kernel` does by itself, and says so (`decision = "fuse", unpriced`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.rewriter import Rewriter

from gnomon.cost.analytical import CostModelError, boundary_bytes
from gnomon.cost.calls import library_calls
from gnomon.cost.devices import LOCAL, Device, load_device, local_device_path
from gnomon.cost.program import kernel_cost
from gnomon.dialects.graph.base import GraphOperation, dim_bounds, dim_names, dim_symbols, dim_value, tensor_of
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.nn import ConvOp
from gnomon.dialects.graph.reduce import ReduceOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
from gnomon.locations import location_name
from gnomon.passes.graph_fuse_attention import FuseWrittenAttention
from gnomon.passes.graph_to_kernel import (
    ATTENTION_ATTR,
    FUSION_ATTR,
    Group,
    Kind,
    build_kernel,
    default_kind,
    kernel_ops,
    legal_join,
    library_kind,
)
from gnomon.passes.graph_to_kernel.library import callee_of, gemm_conv, reads_transposed
from gnomon.passes.kernel_to_linalg import generatable
from gnomon.passes.kernel_to_rt import outline_kernel

AUTO_DEVICE = "auto"
"""The device option's default: this machine's calibration (`local`) when there is one, else `generic-cpu`."""

CHOICE_OPS = (ReduceOp, ConvOp)
"""Ops that gnomon generates as the anchor of a loop nest and the library also computes: their kind is priced (a
convolution where its generated kernel can take the depthwise convolution after it, or where it is a matrix product,
1x1 and stride 1 (`pointwise_choice`), or where it is channels-last (`channels_last_choice`)).
Not yet softmax and matmul, which `graph-to-kernel` still sends to the library: on attention's softmaxes the cost
model predicted the generated kernel within 3% of oneDNN's, and on all four of them it measured 1.2-1.7x slower (it
computes each exponential twice, which the model does not price; bench/fusion_decisions.py), and generated matmuls
were never measured against BLAS on these shapes."""


def fusion_device(name: str) -> Device:
    """The device `graph-fuse` prices on: a shipped device, `local`, a .toml file, or `auto`."""
    if name == AUTO_DEVICE:
        return load_device(LOCAL if local_device_path().is_file() else "generic-cpu")
    return load_device(name)


@dataclass
class _Choice:
    """What was decided for one op, written with its group to its `gnomon.fusion` attribute."""

    kind: Kind | None = None
    decision: str | None = None
    figures: dict[str, float] = field(default_factory=dict)
    unpriced: bool = False
    required: bool = False
    """A join that a generated convolution's kind took with it (through its depthwise convolution)."""

    def attribute(self, group: int) -> DictionaryAttr:
        entries: dict[str, Attribute] = {"group": IntegerAttr(group, i64)}
        if self.kind is not None:
            entries["kind"] = StringAttr(self.kind)
        if self.decision is not None:
            entries["decision"] = StringAttr(self.decision)
        for name, seconds in self.figures.items():
            entries[name] = FloatAttr(seconds, f64)
        if self.unpriced:
            entries["unpriced"] = UnitAttr()
        if self.required:
            entries["required"] = UnitAttr()
        return DictionaryAttr(entries)


def _through_depthwise(group: Group, ops: Sequence[Operation], start: int) -> int:
    """Take the legal joins of `ops[start:]` into a generated convolution's `group` up to and including the
    depthwise convolution they reach, if any; the index of the first op not taken."""
    index = start
    while index < len(ops) and legal_join(group, ops[index]):
        group.ops.append(ops[index])
        index += 1
        if isinstance(group.ops[-1], ConvOp):
            break
    return index


def depthwise_pair(ops: Sequence[Operation], index: int) -> Group | None:
    """The generated kernel of the convolution `ops[index]` (kernel ops in program order) with the ops after it
    through the depthwise convolution they reach (`kernel_to_linalg.conv`); None if the legal joins reach none."""
    group = Group([ops[index]], "generated", [])
    _through_depthwise(group, ops, index + 1)
    return group if len(group.ops) > 1 and isinstance(group.ops[-1], ConvOp) else None


def pointwise_choice(op: ConvOp) -> bool:
    """Whether a convolution's kind is priced alone, without a depthwise convolution after it: a 1x1, stride-1 dense
    one (`gemm_conv`), which the library runs as a BLAS product. gnomon's loops measured faster than that product on
    42-44 of the 44 such layers of MobileNet-V2, SqueezeNet and ResNet-50 in two runs (0.42-0.98x its time), but
    slower than oneDNN's on 12-14 of their 17 others (3x3 and strided layers: up to 2.2x its time; the 3-channel
    stems were faster), which the flat efficiency the model prices gnomon's convolution at
    (`Efficiency.generated_conv`) does not foresee: those stay with oneDNN (bench/conv_kinds.py)."""
    return op.groups.value.data == 1 and gemm_conv(op)


def channels_last_choice(op: ConvOp) -> bool:
    """Whether a channels-last convolution's kind is priced: one gnomon generates (`conv_nhwc`: any 2-D one). On the
    42 distinct depthwise and 1x1 layers of ShuffleNet and MobileNet-V2, channels-last, gnomon's loops took
    0.12-0.48x the time of oneDNN's 16 depthwise calls and 0.43-1.06x the BLAS products of the 26 1x1 ones (two
    slower: 384>96 and 576>96 at 14x14); the prices' signs agreed on 40 of the 42 (`bench/conv_kinds.py --layout
    nhwc`). Its dense kernel of other windows (`conv_nhwc_dense`) took 0.52-0.97x oneDNN's time on nine 3x3 and 5x5
    layers in none of the benchmarks' models, signs agreeing on all nine."""
    return channels_last(op) and generatable(op)


def _at_sizes(kernel: Operation, sizes: Mapping[str, int]) -> None:
    """Give the named `?` dims of an outlined candidate (a scratch copy) the sizes of their symbols, so that the cost
    model prices it as it runs there."""
    for value in [
        *(a for block in kernel.walk_blocks() for a in block.args),
        *(r for o in kernel.walk() for r in o.results),
    ]:
        tensor = value.type
        if not isinstance(tensor, TensorType) or DYNAMIC_INDEX not in tensor.get_shape():
            continue
        shape = [
            dim_value(name, sizes) if d == DYNAMIC_INDEX and name and all(s in sizes for s in dim_symbols(name)) else d
            for d, name in zip(tensor.get_shape(), dim_names(tensor), strict=True)
        ]
        Rewriter.replace_value_with_new_type(value, tensor_of(tensor.get_element_type(), shape))


class Fuser:
    """Forms one function's kernel groups in program order, pricing each choice."""

    def __init__(
        self, device: Device, threads: int, sizes: Mapping[str, int] | None = None, attention: bool = True
    ) -> None:
        self.device = device
        self.attention = attention
        """Whether written-out attentions are priced for fusion into `graph.attention`."""
        self.threads = threads
        self.sizes = dict(sizes or {})
        """The size each dynamic dim's symbol is priced at: the top of its declared range, where the memory plan is
        made and where the time is (a `?` the model cannot size stays unpriced)."""
        self._prices: dict[tuple[Kind, tuple[int, ...]], float] = {}

    def price(self, group: Group) -> float:
        """The predicted time of one launch of `group`'s kernel: launch, library calls and kernel."""
        key = (group.kind, tuple(id(op) for op in group.all_ops()))
        if key not in self._prices:
            built = build_kernel(group, 0, self.threads)
            try:
                kernel = outline_kernel(built, "candidate")
                if self.sizes:
                    _at_sizes(kernel, self.sizes)
                calls = library_calls(kernel)
                # As a serving loop runs it: each function it calls last ran about one kernel's traffic ago.
                moved = boundary_bytes([op for op in kernel.body.block.ops if isinstance(op, GraphOperation)])
                distances = [moved] * (len(calls) if calls else 1)
                cost = kernel_cost(kernel, self.device, call_distances=distances, calls=calls)
                self._prices[key] = cost.predicted_s
            finally:
                built.drop_all_references()  # the candidate's operands are the graph's values: release their uses
        return self._prices[key]

    def join_prices(self, group: Group, candidate: Operation) -> tuple[float, float]:
        """(separate, fused): the open kernel and `candidate`'s own, against one kernel holding both."""
        alone = Group([candidate], default_kind(candidate), [])
        fused = Group([*group.ops, candidate], group.kind, group.prologue)
        return self.price(group) + self.price(alone), self.price(fused)

    def grow(self, group: Group, ops: Sequence[Operation], start: int) -> int:
        """Take the priced-profitable legal joins of `ops[start:]` into `group`; the index of the first not taken."""
        index = start
        while index < len(ops) and legal_join(group, ops[index]):
            separate, fused = self.join_prices(group, ops[index])
            if fused > separate:
                break
            group.ops.append(ops[index])
            index += 1
        return index

    def span_price(self, ops: Sequence[Operation], start: int, end: int, first: Group) -> float:
        """The price of `ops[start:end]` grouped greedily, its first group `first` (already grown)."""
        total, index = self.price(first), start + len(first.ops)
        while index < end:
            group = Group([ops[index]], default_kind(ops[index]), [])
            index = self.grow(group, ops[:end], index + 1)
            total += self.price(group)
        return total

    def price_ops(self, ops: Sequence[Operation]) -> float:
        """The predicted time of `ops` (in program order) grouped as this pass groups them when no kind is chosen:
        greedily, each legal join taken when priced no slower; a transpose its matmul reads as a view goes into the
        matmul's kernel."""
        views = {next(iter(op.results[0].uses)).operation: op for op in ops if reads_transposed(op)}
        computing = [op for op in ops if op not in views.values() and not isinstance(op, ConstantOp | ReshapeOp)]
        total, index = 0.0, 0
        while index < len(computing):
            op = computing[index]
            group = Group([op], default_kind(op), [views[op]] if op in views else [])
            index = self.grow(group, computing, index + 1)
            total += self.price(group)
        return total

    def kind_choice(
        self, ops: Sequence[Operation], start: int, prologue: list[Operation]
    ) -> tuple[Group, dict[str, float]]:
        """The cheaper of the op's generated kernel and its library call, each with what it would take, priced over
        the same ops; the chosen group (grown) and both prices."""
        op = ops[start]
        generated = Group([op], "generated", list(prologue))
        library = Group([op], library_kind(op), list(prologue))
        # A convolution's generated kernel takes the depthwise convolution after it, when there is one, with the
        # joins up to it: the fusion its kind is chosen for.
        toward_depthwise = isinstance(op, ConvOp) and depthwise_pair(ops, start) is not None
        taken = _through_depthwise(generated, ops, start + 1) if toward_depthwise else start + 1
        end = max(self.grow(generated, ops, taken), self.grow(library, ops, start + 1))
        prices = {
            "generated_s": self.span_price(ops, start, end, generated),
            "library_s": self.span_price(ops, start, end, library),
        }
        return (generated if prices["generated_s"] < prices["library_s"] else library), prices

    def fuse(self, function: func.FuncOp) -> None:
        """Fuse its written-out attentions where priced faster, then group `function`'s kernel ops, greedily in
        program order, and record every choice on its op."""
        if self.attention:
            fuse_attention = GreedyRewritePatternApplier([FuseWrittenAttention(self.price_ops)], dce_enabled=False)
            PatternRewriteWalker(fuse_attention, apply_recursively=False).rewrite_region(function.body)
        ops, prologues = kernel_ops(function)
        choices: dict[Operation, _Choice] = {}
        groups: list[Group] = []
        index = 0
        while index < len(ops):
            op = ops[index]
            if groups and legal_join(groups[-1], op):
                choice = self._join(groups[-1], op)
                if self._before_depthwise(groups[-1], ops):
                    choice.decision, choice.required = "fuse", True
                choices[op] = choice
                if choice.decision == "fuse":
                    groups[-1].ops.append(op)
                    index += 1
                    continue
            choice = choices.setdefault(op, _Choice())
            group = Group([op], default_kind(op), prologues.get(op, []))
            if self._has_choice(ops, index):
                try:
                    chosen, prices = self.kind_choice(ops, index, group.prologue)
                    # Only the op's own kernel is committed: the ops it took are decided again, one by one, as joins.
                    group = Group([op], chosen.kind, group.prologue)
                    choice.figures.update(prices)
                except CostModelError:
                    choice.unpriced = True
            choice.kind = group.kind
            groups.append(group)
            index += 1
        for group_index, group in enumerate(groups):
            for op in group.all_ops():
                op.attributes[FUSION_ATTR] = choices.get(op, _Choice()).attribute(group_index)

    @staticmethod
    def _before_depthwise(group: Group, ops: Sequence[Operation]) -> bool:
        """Whether `group` is a generated convolution that has not yet taken the depthwise convolution its kind was
        priced with: the joins up to it are part of that choice, not their own."""
        return (
            group.kind == "generated"
            and isinstance(group.ops[0], ConvOp)
            and not any(isinstance(op, ConvOp) for op in group.ops[1:])
            and depthwise_pair(ops, ops.index(group.ops[0])) is not None
        )

    @staticmethod
    def _has_choice(ops: Sequence[Operation], index: int) -> bool:
        """Whether the kind of the kernel `ops[index]` starts is a choice: gnomon can generate it, the library has
        it, and a convolution's generated kernel would reach a depthwise convolution, is a `pointwise_choice` or a
        `channels_last_choice`."""
        op = ops[index]
        if not (isinstance(op, CHOICE_OPS) and generatable(op) and callee_of(op) is not None):
            return False
        if not isinstance(op, ConvOp):
            return True
        return pointwise_choice(op) or channels_last_choice(op) or depthwise_pair(ops, index) is not None

    def _join(self, group: Group, candidate: Operation) -> _Choice:
        try:
            separate, fused = self.join_prices(group, candidate)
        except CostModelError:
            return _Choice(decision="fuse", unpriced=True)
        decision = "fuse" if fused <= separate else "split"
        return _Choice(decision=decision, figures={"separate_s": separate, "fused_s": fused})


@dataclass(frozen=True)
class GraphFusePass(ModulePass):
    """Decide, by predicted time, which legal joins `graph-to-kernel` takes and which kind of kernel ops start."""

    name = "graph-fuse"

    device: str = AUTO_DEVICE
    """A shipped device, `local`, a device file (.toml), or `auto` (local when calibrated, else generic-cpu)."""

    threads: int = 0
    """Threads per generated kernel, as `graph-to-kernel`'s option; 0 means all of this machine's cores."""

    attention: bool = True
    """Whether written-out attentions (matmul, softmax, matmul) are priced for fusion into `graph.attention`."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        sizes = {symbol: high for symbol, (_, high) in dim_bounds(op).items()}
        fuser = Fuser(fusion_device(self.device), self.threads or os.cpu_count() or 1, sizes, self.attention)
        for function in op.ops:
            if isinstance(function, func.FuncOp) and function.body.blocks:
                fuser.fuse(function)


@dataclass(frozen=True)
class FusionDecision:
    """One priced choice `graph-fuse` made, as `--explain` prints it."""

    group: int
    op: str
    location: str
    question: str
    """`join`: whether the op joins the kernel before it; `kind`: a generated kernel or a library call;
    `attention`: whether a written-out attention becomes one `graph.attention`."""
    options: tuple[tuple[str, float], ...]
    """Each option and its predicted seconds: (separate, fused) for a join or an attention, (generated, library)
    for a kind."""
    decision: str
    """`fuse` or `split` (a join), `generated` or `library` (a kind); `required` for a join taken as part of a
    generated convolution's kind, through the depthwise convolution its price included."""


def fusion_decisions(module: ModuleOp) -> list[FusionDecision]:
    """The priced choices recorded on `module`'s graph ops by `graph-fuse`, in program order."""
    decisions: list[FusionDecision] = []
    for op in module.walk():
        fusion = op.attributes.get(FUSION_ATTR)
        if not isinstance(fusion, DictionaryAttr):
            continue
        entries = fusion.data
        group = entries["group"]
        assert isinstance(group, IntegerAttr)
        name, where = op.name.removeprefix("graph."), location_name(op.location)

        def seconds(key: str, figures: Mapping[str, Attribute] = entries) -> float:
            value = figures[key]
            assert isinstance(value, FloatAttr)
            return value.value.data

        if "fused_s" in entries:
            decision = entries["decision"]
            assert isinstance(decision, StringAttr)
            options = (("separate", seconds("separate_s")), ("fused", seconds("fused_s")))
            taken = "required" if "required" in entries else decision.data
            decisions.append(FusionDecision(group.value.data, name, where, "join", options, taken))
        attention = op.attributes.get(ATTENTION_ATTR)
        if isinstance(attention, DictionaryAttr) and "fused_s" in attention.data:
            decision = attention.data["decision"]
            assert isinstance(decision, StringAttr)
            options = (
                ("separate", seconds("separate_s", attention.data)),
                ("fused", seconds("fused_s", attention.data)),
            )
            decisions.append(FusionDecision(group.value.data, name, where, "attention", options, decision.data))
        if "library_s" in entries:
            kind = entries["kind"]
            assert isinstance(kind, StringAttr)
            chosen = "generated" if kind.data == "generated" else "library"
            options = (("generated", seconds("generated_s")), ("library", seconds("library_s")))
            decisions.append(FusionDecision(group.value.data, name, where, "kind", options, chosen))
    return decisions


def explain(decisions: Sequence[FusionDecision], device: str) -> str:
    """`--explain`'s table: every priced choice, both predictions and what was taken."""
    lines = [f"fusion decisions ({len(decisions)}), predicted on {device}:"]
    lines.append(f"  {'group':>5}  {'op':<24} {'question':<9} {'option A':>18} {'option B':>18}  decision  location")
    for d in decisions:
        (name_a, a), (name_b, b) = d.options
        lines.append(
            f"  {d.group:>5}  {d.op:<24} {d.question:<9} {name_a:>9} {a * 1e6:>7.2f} us {name_b:>9} {b * 1e6:>7.2f} us"
            f"  {d.decision:<8}  {d.location}"
        )
    return "\n".join(lines)
