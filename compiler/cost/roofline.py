"""Roofline figures of graph ops: exact FLOPs, minimum bytes, and the attainable time on a device.

FLOPs (one FLOP is one scalar arithmetic operation), by op family:
- matrix products (matmul, linear, conv, conv_transpose, attention; attention's backward pass is five): a
  multiply-add is 2 FLOPs; bias additions and attention's softmax are not counted. These are
  `torch.utils.flop_counter.FlopCounterMode`'s formulas for mm/addmm/bmm/convolution/scaled_dot_product_attention
  (and its backward), so a model's totals compare with it exactly.
- recurrent layers (lstm, gru, rnn): their gate matrix products, each step's input and recurrent product, times
  the steps (FlopCounterMode's count of the addmms ATen's GRU and RNN run); the gate arithmetic is not counted.
- determinants: an LU factorization per n x n matrix, 2n^3/3 FLOPs, and n for the product of its diagonal.
- elementwise: `ELEMENTWISE_FLOPS[op class]` per result element, the operations of the op's formula, where every
  arithmetic or transcendental function counts 1 (sigmoid 1 / (1 + e^-x) is neg, exp, add, div: 4); cast 0.
- reductions of n values: n - 1 per result (a mean adds its division: n); arg-reductions n - 1 compares.
- pooling: each window's reduction; softmax and the normalizations: the operations of their formulas, as each
  function counts them.
- data movement (transpose, concat, split, slice, gather, scatter, pad, expand, tile), views and embedding lookups:
  0; an embedding bag counts its pooling, a scatter with a reduction one operation per update.

Bytes are the least a kernel must move: each operand read once and each result written once, at the element
type's size. Ops that touch only part of an operand count that part: a slice or gather reads what it returns, an
embedding reads the distinct rows it looks up (known when the indices are constants; otherwise all lookups are
assumed distinct). Views move nothing: a reshape reinterprets its input, a constant is resident, and dropout is the
identity at inference; their readers are charged for reading the viewed storage.

The attainable time is max(flops / peak, bytes / DRAM bandwidth). Matrix products run at their dtype's peak
(tensor cores where the dtype has them); every other op runs at the fp32 rate (fp64 for f64), the rate of the
CUDA cores and SIMD units that execute elementwise code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    TensorType,
)
from xdsl.ir import SSAValue

from gnomon.cost.devices import Device
from gnomon.cost.flops import (
    ELEMENTWISE_FLOPS,
    GELU_FLOPS,
    grid_sample_flops,
    norm_flops,
    pool_flops,
    reduction_flops,
    softmax_flops,
)
from gnomon.cost.values import (
    CostModelError,
    describe,
    element_bytes,
    element_type,
    elements,
    nbytes,
    peak_key,
    static_shape,
    storage,
    vector_key,
)
from gnomon.dialects.graph.attention_train import AttentionGradOp, AttentionTrainOp
from gnomon.dialects.graph.base import DYN, GraphOperation, broadcast_shapes, ints, shape_str
from gnomon.dialects.graph.constant_values import dense_to_numpy, resource_to_numpy
from gnomon.dialects.graph.elementwise import (
    BinaryOp,
    BitcastOp,
    CastOp,
    DropoutOp,
    DropoutTrainOp,
    GeluOp,
    UnaryOp,
    WhereOp,
)  # fmt: skip
from gnomon.dialects.graph.embedding import EmbeddingBagOp, EmbeddingOp
from gnomon.dialects.graph.grad import (
    AvgPoolGradOp,
    ConvWeightGradOp,
    EmbeddingBagAdamUpdateOp,
    EmbeddingBagGradOp,
    EmbeddingBagUpdateOp,
    MaxPoolGradOp,
)
from gnomon.dialects.graph.linalg import DetOp, LinearOp, MatmulOp
from gnomon.dialects.graph.nn import (
    AdaptivePoolOp,
    AffineNormOp,
    AttentionOp,
    AvgPoolOp,
    BatchNormOp,
    BatchNormTrainOp,
    ConvOp,
    ConvTransposeOp,
    GlobalPoolOp,
    LogSoftmaxOp,
    LrnOp,
    MaxPoolOp,
    SoftmaxOp,
)  # fmt: skip
from gnomon.dialects.graph.recurrent import GruOp, LstmOp, RnnOp
from gnomon.dialects.graph.recurrent_train import LstmGradOp, LstmTrainOp
from gnomon.dialects.graph.reduce import ArgReduceOp, ReduceOp, ScanOp, TopKOp
from gnomon.dialects.graph.sampling import GridSampleOp
from gnomon.dialects.graph.tensor import (
    ConcatOp,
    ConstantOp,
    ExpandOp,
    GatherElementsOp,
    GatherOp,
    IotaOp,
    PadOp,
    ReshapeOp,
    ScatterElementsOp,
    SliceOp,
    SliceScatterOp,
    SplitOp,
    TileOp,
    TransposeOp,
)  # fmt: skip

Bound = Literal["compute", "memory"]

VIEW_OPS: tuple[type[GraphOperation], ...] = (ConstantOp, DropoutOp, ReshapeOp)
"""Ops that move no data and launch no kernel."""


@dataclass(frozen=True)
class GemmShape:
    """One matrix product inside an op: `batch` independent (m x k) @ (k x n) products."""

    batch: int
    m: int
    n: int
    k: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


@dataclass(frozen=True)
class OpWork:
    """What an op computes and touches, whatever the device."""

    flops: int
    reads: Mapping[SSAValue, int]
    """Bytes read of each value; a view's result counts as the storage it views (see `storage`)."""
    writes: Mapping[SSAValue, int]
    """Bytes written of each result."""
    peak_key: str
    """The device's peak its FLOPs run at (a `Device.peak_flops` key)."""

    @property
    def bytes(self) -> int:
        return sum(self.reads.values()) + sum(self.writes.values())


@dataclass(frozen=True)
class Roofline:
    """An op's roofline figures on one device."""

    flops: int
    bytes: int
    compute_s: float
    """flops / peak."""
    memory_s: float
    """bytes / DRAM bandwidth."""

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def intensity(self) -> float:
        """FLOPs per byte; 0 for an op that moves nothing."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def bound(self) -> Bound:
        return "compute" if self.compute_s > self.memory_s else "memory"


def roofline(op: GraphOperation, device: Device) -> Roofline:
    """The op's roofline on `device`; a CostModelError if its shapes are not static."""
    return roofline_of(op_work(op), device)


def roofline_of(work: OpWork, device: Device) -> Roofline:
    """The roofline of work already counted (`op_work`)."""
    compute_s = work.flops / device.peak(work.peak_key) if work.flops else 0.0
    return Roofline(work.flops, work.bytes, compute_s, work.bytes / device.dram.bandwidth_bytes_per_s)


# ---- shapes, sizes and dtypes ----


# ---- per-family work ----


def op_work(op: GraphOperation) -> OpWork:
    """FLOPs and bytes of one graph op (see the module docstring for the conventions)."""
    for value in [*op.operands, *op.results]:
        if isinstance(value.type, TensorType) and DYN in value.type.get_shape():
            raise CostModelError(
                f"cost model: {describe(op)} has a dynamic shape {shape_str(value.type.get_shape())};"
                " the cost model needs static shapes (give the batch size, e.g. --batch 1, or static input shapes)"
            )
    match op:
        case ConstantOp() | DropoutOp() | ReshapeOp():
            return OpWork(0, {}, {}, "fp32")
        case (
            MatmulOp() | LinearOp() | ConvOp() | ConvTransposeOp() | ConvWeightGradOp() | AttentionOp() | LstmOp()
            | GruOp() | RnnOp() | LstmTrainOp() | LstmGradOp() | AttentionTrainOp() | AttentionGradOp()
        ):  # fmt: skip
            flops = sum(shape.flops for shape in gemm_shapes(op))
            return _whole(op, flops, peak_key(element_type(op.operands[0])))
        case DropoutTrainOp():  # a draw and a compare per element, and the kept ones' scaling
            return _whole(op, 3 * elements(op.result), vector_key(op))
        case UnaryOp() | BinaryOp() | WhereOp() | CastOp():
            per_element = GELU_FLOPS[op.approximate.data] if isinstance(op, GeluOp) else ELEMENTWISE_FLOPS[type(op)]
            return _whole(op, per_element * elements(op.results[0]), vector_key(op))
        case ReduceOp() | ArgReduceOp():
            return _whole(op, reduction_flops(op), vector_key(op))
        case ScanOp():  # one add or multiply per element
            return _whole(op, elements(op.results[0]), vector_key(op))
        case DetOp():  # an LU factorization per matrix (n^3/3 multiply-adds), then the diagonal's product
            n = static_shape(op.input)[-1]
            return _whole(op, elements(op.result) * (2 * n**3 // 3 + n), vector_key(op))
        case TopKOp():  # a sort along the axis: n log2 n comparisons
            n = static_shape(op.input)[op.topk_axis()]
            return _whole(op, round(elements(op.input) * math.log2(max(n, 2))), vector_key(op))
        case SoftmaxOp() | LogSoftmaxOp():
            return _whole(op, softmax_flops(op), vector_key(op))
        case BatchNormOp() | BatchNormTrainOp() | AffineNormOp() | LrnOp():
            return _whole(op, norm_flops(op), vector_key(op))
        case MaxPoolOp() | AvgPoolOp() | GlobalPoolOp() | AdaptivePoolOp():
            return _whole(op, pool_flops(op), vector_key(op))
        case GridSampleOp():
            return _whole(op, grid_sample_flops(op), vector_key(op))
        case MaxPoolGradOp() | AvgPoolGradOp():  # (the window maxima found again, then) an add per window cell
            taps = math.prod(ints(op.kernel))
            return _whole(op, elements(op.grad_output) * taps, vector_key(op))
        case EmbeddingBagGradOp():  # one add per looked-up element, into a zeroed table
            return _whole(op, elements(op.indices) * static_shape(op.grad_output)[1], vector_key(op))
        case EmbeddingBagUpdateOp():
            return _bag_update_work(op)
        case EmbeddingBagAdamUpdateOp():
            return _bag_adam_work(op)
        case EmbeddingOp() | EmbeddingBagOp():
            return _embedding_work(op)
        case SliceOp() | GatherOp() | GatherElementsOp():
            return _partial_read(op)
        case IotaOp():  # only its operand's shape is read
            return OpWork(0, {}, {op.result: nbytes(op.result)}, "int8")
        case ScatterElementsOp():  # the input copied whole into the result, then one reduction per update
            return _whole(op, 0 if op.reduction.data == "none" else elements(op.updates), vector_key(op))
        case TransposeOp() | ConcatOp() | SplitOp() | PadOp() | ExpandOp() | TileOp() | BitcastOp() | SliceScatterOp():
            return _whole(op, 0, "fp32")
        case _:
            raise CostModelError(f"cost model: no model for {describe(op)}")


def _whole(op: GraphOperation, flops: int, peak: str) -> OpWork:
    """Each operand read whole, each result written whole."""
    reads = {storage(v): nbytes(v) for v in op.operands}
    return OpWork(flops, reads, {r: nbytes(r) for r in op.results}, peak)


def gemm_shapes(
    op: MatmulOp
    | LinearOp
    | ConvOp
    | ConvTransposeOp
    | ConvWeightGradOp
    | AttentionOp
    | LstmOp
    | GruOp
    | RnnOp
    | LstmTrainOp
    | LstmGradOp
    | AttentionTrainOp
    | AttentionGradOp,
) -> tuple[GemmShape, ...]:
    """The matrix products an op performs; their FLOPs are FlopCounterMode's for the matching aten op."""
    match op:
        case MatmulOp():
            a, b = static_shape(op.lhs), static_shape(op.rhs)
            a2 = (1, *a) if len(a) == 1 else a
            b2 = (*b, 1) if len(b) == 1 else b
            batch = math.prod(broadcast_shapes([a2[:-2], b2[:-2]], op.name))
            return (GemmShape(batch, a2[-2], b2[-1], a2[-1]),)
        case LinearOp():
            x, w = static_shape(op.input), static_shape(op.weight)
            return (GemmShape(1, math.prod(x[:-1]), w[0], w[1]),)
        case ConvOp():
            # An implicit GEMM per group: output pixels x output channels, over input channels x kernel taps.
            w, y = static_shape(op.weight), static_shape(op.result)
            groups = op.groups.value.data
            pixels = math.prod(y) // w[0]  # N x spatial, in either layout
            return (GemmShape(groups, pixels, w[0] // groups, w[1] * math.prod(w[2:])),)
        case ConvTransposeOp():
            # Per group, each input pixel scatters (C_out / groups) x kernel taps products over C_in / groups.
            x, w = static_shape(op.input), static_shape(op.weight)
            groups = op.groups.value.data
            return (GemmShape(groups, x[0] * math.prod(x[2:]), w[1] * math.prod(w[2:]), w[0] // groups),)
        case ConvWeightGradOp():
            # Per group, output channels x (input channels x kernel taps), over every output pixel of the batch.
            x, dy = static_shape(op.input), static_shape(op.grad_output)
            groups, taps = op.groups.value.data, math.prod(ints(op.kernel))
            pixels = math.prod(dy) // dy[1]
            return (GemmShape(groups, dy[1] // groups, x[1] // groups * taps, pixels),)
        case AttentionOp() | AttentionTrainOp():
            q, k, v = static_shape(op.query), static_shape(op.key), static_shape(op.value)
            batch, length, source = math.prod(q[:-2]), q[-2], k[-2]
            return (GemmShape(batch, length, source, q[-1]), GemmShape(batch, length, v[-1], source))
        case AttentionGradOp():
            # FlopCounterMode's five: the scores again, the probabilities' gradient (dO vᵀ), the value's (Pᵀ dO),
            # the query's (dS k) and the key's (dSᵀ q).
            q, k = static_shape(op.query), static_shape(op.key)
            batch, length, source, size = math.prod(q[:-2]), q[-2], k[-2], q[-1]
            return (
                GemmShape(batch, length, source, size),
                GemmShape(batch, length, source, size),
                GemmShape(batch, source, size, length),
                GemmShape(batch, length, size, source),
                GemmShape(batch, source, size, length),
            )
        case LstmOp() | GruOp() | RnnOp() | LstmTrainOp():
            # Every step's input projection in one product, then one recurrent product per step (the batch).
            (steps, batch, features), rows = static_shape(op.input), static_shape(op.weight_hh)[0]
            return (GemmShape(1, steps * batch, rows, features), GemmShape(steps, batch, rows, op.hidden_size()))
        case LstmGradOp():
            # The input's gradient from every step's gate gradients, the input weights' gradient, the state's
            # gradient through the recurrent weights step by step (the batch), the recurrent weights' gradient.
            (steps, batch, features), rows, hidden = (
                static_shape(op.input),
                static_shape(op.weight_hh)[0],
                op.hidden_size(),
            )
            return (
                GemmShape(1, steps * batch, features, rows),
                GemmShape(1, rows, features, steps * batch),
                GemmShape(steps, batch, hidden, rows),
                GemmShape(1, rows, hidden, steps * batch),
            )


def constant_indices(value: SSAValue) -> np.ndarray | None:
    """The values of an index tensor that is a constant (possibly reshaped), or None."""
    owner = storage(value).owner
    if not isinstance(owner, ConstantOp):
        return None
    attr = owner.value
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return dense_to_numpy(attr)
    try:
        return resource_to_numpy(attr)
    except KeyError:  # a blob the module's resource section did not provide
        return None


def embedding_rows(op: EmbeddingOp | EmbeddingBagOp | EmbeddingBagAdamUpdateOp) -> tuple[int, int]:
    """(lookups, distinct rows): distinct rows counted when the indices are constants, else all assumed distinct."""
    lookups, rows = elements(op.indices), static_shape(op.table)[0]
    values = constant_indices(op.indices)
    distinct = len(np.unique(values)) if values is not None else lookups
    return lookups, min(distinct, rows)


def _embedding_work(op: EmbeddingOp | EmbeddingBagOp) -> OpWork:
    lookups, distinct = embedding_rows(op)
    dim = static_shape(op.table)[1]
    reads = {storage(v): nbytes(v) for v in op.operands if v is not op.table}
    reads[storage(op.table)] = distinct * dim * element_bytes(op.table)
    writes: dict[SSAValue, int] = {op.result: nbytes(op.result)}
    if isinstance(op, EmbeddingOp):
        return OpWork(0, reads, writes, vector_key(op))
    # Pooling a bag of b rows takes b - 1 adds (or compares) per column; weights add a multiply per lookup,
    # a mean a division per column of each bag.
    bags = static_shape(op.result)[0]
    flops = max(lookups - bags, 0) * dim
    if op.per_sample_weights is not None:
        flops += lookups * dim
    if op.mode.data == "mean":
        flops += bags * dim
    return OpWork(flops, reads, writes, vector_key(op))


def _bag_update_work(op: EmbeddingBagUpdateOp) -> OpWork:
    """A multiply and an add per looked-up element; each looked-up row read and written once (the table written in
    place: the rest of it is not touched), the bags' gradient and the indices read whole."""
    touched = elements(op.indices) * static_shape(op.table)[1] * element_bytes(op.table)
    reads = {storage(v): nbytes(v) for v in op.operands if v is not op.table}
    reads[storage(op.table)] = touched
    flops = 2 * elements(op.indices) * static_shape(op.table)[1]
    return OpWork(flops, reads, {op.result: touched}, vector_key(op))


def _bag_adam_work(op: EmbeddingBagAdamUpdateOp) -> OpWork:
    """A multiply and an add per looked-up element (its share of its bag's gradient, added into its row's), then
    about ten flops per element of each distinct row (both moments' updates, a square, a root, a division, the
    step); those rows of the table and both moments read and written once (in place: the rest of them is not
    touched), the bags' gradient, the indices and offsets read whole."""
    lookups, distinct = embedding_rows(op)
    dim = static_shape(op.table)[1]
    touched = distinct * dim * element_bytes(op.table)
    reads = {storage(v): nbytes(v) for v in op.operands[3:]}  # after the table and its moments
    reads.update({storage(v): touched for v in (op.table, op.exp_avg, op.exp_avg_sq)})
    flops = 2 * lookups * dim + 10 * distinct * dim
    return OpWork(flops, reads, {r: touched for r in op.results}, vector_key(op))


def _partial_read(op: SliceOp | GatherOp | GatherElementsOp) -> OpWork:
    """A slice or gather reads as many elements of its input as it returns (and all its indices)."""
    reads = {storage(v): nbytes(v) for v in op.operands if v is not op.input}
    reads[storage(op.input)] = nbytes(op.result)
    writes: dict[SSAValue, int] = {op.result: nbytes(op.result)}
    return OpWork(0, reads, writes, "fp32")
