"""Analytical kernel models: the roofline, refined where it is known to be wrong.

Each graph op is priced as one kernel: `compute_s` (its FLOPs at the rate its kernel attains), `memory_s` (its
traffic at the bandwidth of the memory level the data comes from) and the device's per-kernel `launch_s`; the kernel
runs max(compute_s, memory_s) after its launch. The refinements over the roofline:

- GEMM-like ops (matmul, linear, conv as an implicit GEMM, attention as two GEMMs in one fused kernel). The output is
  cut into tiles of at most `gemm_tile_m` x `gemm_tile_n`; tiles run in waves over the cores (SMs), and a partial
  last wave costs a whole one (wave quantization), as does a partly empty tile; each tile also pays `gemm_k_overhead`
  extra K steps to fill its pipeline and store its result (small-problem inefficiency); a CPU BLAS also copies each
  operand into its blocked panels once a call (`gemm_pack_rows`, `gemm_pack_columns`), which a product of few rows or
  columns reuses least. Traffic follows a blocked-GEMM
  model over the memory hierarchy: each level inside the one the data lives in receives A once per block of B's
  columns and B once per block of A's rows. On a GPU the blocks in shared memory are the tiles, so of the tile sizes
  (halved down to `gemm_min_tile`) the model takes, as a library's heuristic does, the one that finishes first: big
  tiles re-read less, small ones keep more SMs busy. A CPU's caches hold square blocks that fill a third of a level.
  Where the weights come from DRAM (`weights_in_dram`), a CPU BLAS first packs them into its blocked layout on the
  cores that then multiply, at `gemm_pack` of DRAM's bandwidth, and that pass adds to the FMAs; with at most
  `MATRIX_VECTOR_ROWS` rows it streams them once per row instead, overlapped, as matrix-vector products. A CPU
  convolution library (oneDNN under ATen) reorders plain weights into its blocked layout on every call: the same
  pass, whatever the rows.
- depthwise convolution: a stencil on the vector units (one input channel per output channel leaves matrix units
  nothing to reuse), usually memory-bound; the library call around it (`conv_call_s`) is a convolution's.
- a CPU convolution library's passes over the activations (`_layout_passes_s`): channels-first ones reordered into
  its blocked layout and the result back; a channels-last result copied into the runtime's buffer.
- transposes: their bytes at `transpose` of the streaming bandwidth, as is a fused group of streaming ops that holds
  one: a tiled transpose and a permutation that keeps the innermost axis both move short runs (a tile's row, an
  attention head's row), not whole lines of a stream;
- windowed pooling, as the runtime runs it (`gnomon.cost.pools.library_pool`): oneDNN's and the window sums'
  vectorized windows, their bytes moved as often as they move them; ATen's, its window reductions (a max pool's
  at `MAX_POOL_INSTRUCTIONS` each; on a CPU, at least `POOL_OUTPUT_FLOOR` per output) at `pool` of the vector
  peak, or `pool3d` for 3-D windows (ATen's CPU pooling loops run far below the vector units, its volumetric
  ones further still), or its bytes, whichever takes longer; a global pool is a reduction (ATen's `mean`);
- elementwise, reductions, normalizations and data movement: their vector instructions (`rates.VECTOR_INSTRUCTIONS`:
  a transcendental function is a polynomial of a dozen or more, where the roofline counts it as one FLOP) at
  `vector` of the vector peak, or their bytes, at the bandwidth of the innermost
  level that holds the op's working set between kernels (on a GPU, L2 or HBM: per-SM memory does not keep data
  from one kernel to the next), plus the per-kernel launch.
- recurrent layers (lstm, gru, rnn): the input projection of every step is one GEMM; the steps then run one after
  another, each a small GEMM by the recurrent weights (read from the level that holds them, once per step) and
  its gate arithmetic (`RECURRENT_CELL_INSTRUCTIONS` per hidden unit) at `vector` of the vector peak, and each
  a launch of its own (a GPU's kernels per step, a CPU library's dispatches);
- embedding lookups and bags (`gnomon.cost.lookups`): each distinct row is fetched once from wherever the table
  lives, in whole access granules (cache lines, DRAM sectors); repeated lookups of a row hit in cache, as do
  indices and the result; each lookup also costs `lookup_s` of index handling (bounds checks, finding its bag).

A fused group (`group_cost`) is one kernel: its members' compute, the bytes that cross the group's boundary (not its
intermediates, which stay on chip), its members' blocked-GEMM re-reads, and one launch.

A kernel that a runtime runs as a library call (`library=True`: an ATen op called from gnomon's Python runtime)
also pays `library_call_s` at its launch: the call's dispatch, argument checks and output handling.

`Efficiency` holds the factors the models assume. A device file's `[efficiency]` table overrides them: that is where
a calibration writes what it fits. On a device with datasheet figures (`calibrated = false`) every time here is an
analytical prediction, not a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.ir import Operation, SSAValue

from gnomon.cost.convs import packs_weight
from gnomon.cost.devices import Device
from gnomon.cost.efficiency import Efficiency, efficiency
from gnomon.cost.gemm_model import KernelTime, Traffic, gemm_kernel
from gnomon.cost.linears import packs_linear_weight
from gnomon.cost.lookups import bag_grad_kernel, embedding_kernel, lookup_kernel
from gnomon.cost.pools import MAX_POOL_INSTRUCTIONS, ONEDNN_POOL_COPIES, POOL_OUTPUT_FLOOR, library_pool
from gnomon.cost.rates import (
    DROPOUT_INSTRUCTIONS,
    LAYER_NORM_ROW_INSTRUCTIONS,
    TRAINING_RATES,
    VECTOR_INSTRUCTIONS,
    resident_index,
    sustained,
    weights_bandwidth,
)
from gnomon.cost.roofline import VIEW_OPS, Bound, OpWork, gemm_shapes, op_work
from gnomon.cost.values import CostModelError, element_bytes, nbytes, static_shape
from gnomon.dialects.graph.attention_train import AttentionGradOp, AttentionTrainOp
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.elementwise import DropoutOp, DropoutTrainOp
from gnomon.dialects.graph.embedding import EmbeddingBagOp, EmbeddingOp
from gnomon.dialects.graph.grad import (
    AvgPoolGradOp,
    ConvWeightGradOp,
    EmbeddingBagAdamUpdateOp,
    EmbeddingBagGradOp,
    EmbeddingBagUpdateOp,
    MaxPoolGradOp,
)
from gnomon.dialects.graph.layout import channels_last
from gnomon.dialects.graph.linalg import LinearOp, MatmulOp
from gnomon.dialects.graph.nn import (
    AdaptivePoolOp,
    AttentionOp,
    AvgPoolOp,
    BatchNormTrainOp,
    ConvOp,
    ConvTransposeOp,
    LayerNormOp,
    MaxPoolOp,
)
from gnomon.dialects.graph.recurrent import GruOp, LstmOp, Recurrent, RnnOp
from gnomon.dialects.graph.recurrent_train import LstmGradOp, LstmTrainOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp, TransposeOp


@dataclass(frozen=True)
class OpCost:
    """What one op (or one fused group) costs on a device: roofline and analytical figures."""

    flops: int
    bytes: int
    """The least bytes it must move (a group: only those that cross its boundary)."""
    roofline_s: float
    roofline_bound: Bound
    compute_s: float
    """Its FLOPs at the rate its kernel attains."""
    memory_s: float
    """Its traffic, re-reads included, at the bandwidths of the levels it comes from."""
    launch_s: float
    """The runtime's overhead to launch its kernel; 0 for a view."""
    model: str
    """Which model priced it: gemm, conv, depthwise-conv, attention, recurrent, embedding, stream, view or fused."""
    first_touch_s: float = 0.0
    """Page faults on its results' first touch, where they are fresh memory (`gnomon.cost.eager.fresh_pages_s`):
    the kernel takes them before its stores, not overlapped with its loads or FMAs."""

    @property
    def intensity(self) -> float:
        """FLOPs per byte; 0 for an op that moves nothing."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def kernel_s(self) -> float:
        """The kernel's run time on the device, without its launch."""
        return max(self.compute_s, self.memory_s) + self.first_touch_s

    @property
    def predicted_s(self) -> float:
        """The op's time run alone: its launch, then its kernel."""
        return self.launch_s + self.kernel_s

    @property
    def bound(self) -> Bound:
        """What limits the kernel under the analytical model."""
        return "compute" if self.compute_s > self.memory_s else "memory"


def op_cost(
    op: GraphOperation,
    device: Device,
    *,
    conv_as_gemm: bool = False,
    library: bool = False,
    weights_in_dram: bool = False,
    cores: int | None = None,
    generated: bool = False,
) -> OpCost:
    """The cost of one graph op on `device`; a CostModelError if its shapes are not static. With `conv_as_gemm` a
    convolution is priced as the BLAS product a runtime computes it with (gnomon's, for 1x1 convolutions); with
    `library` the kernel is a library call, which pays `library_call_s` at its launch; with `weights_in_dram` the
    model's weights and tables do not fit the caches together, so each kernel reads its own from DRAM, however
    small (else they are where the op's working set fits, as activations are); `cores` is how many of the device's
    cores the kernel runs on (default: all), a share of its compute and bandwidth; with `generated` the kernel is
    gnomon's generated one (a convolution's `kernel_to_linalg.conv`, not the library's), whose loops stream at
    `generated_stream`."""
    work = op_work(op)
    eff = _code_efficiency(device, generated)
    kernel = _kernel(op, work, device, eff, conv_as_gemm, weights_in_dram, generated)
    compute_roof = work.flops / device.peak(work.peak_key) if work.flops else 0.0
    call_s = eff.library_call_s if library else 0.0
    return _cost(work.flops, work.bytes, compute_roof, _on_cores(kernel, device, cores), device, call_s)


def group_cost(
    ops: Sequence[GraphOperation],
    device: Device,
    *,
    conv_as_gemm: bool = False,
    library: bool = False,
    weights_in_dram: bool = False,
    cores: int | None = None,
    generated: bool = False,
) -> OpCost:
    """The cost of `ops` fused into one kernel: only the bytes that cross the group's boundary count (the options
    are `op_cost`'s)."""
    if not ops:
        raise CostModelError("cost model: a fused group needs at least one op")
    eff = _code_efficiency(device, generated)
    flops, compute_roof, compute_s, reuse_s, weights_s = 0, 0.0, 0.0, 0.0, 0.0
    works = [op_work(op) for op in ops]
    for op, work in zip(ops, works, strict=True):
        kernel = _kernel(op, work, device, eff, conv_as_gemm, weights_in_dram, generated)
        flops += work.flops
        compute_roof += work.flops / device.peak(work.peak_key) if work.flops else 0.0
        compute_s += kernel.compute_s
        reuse_s += kernel.reuse_s
        weights_s += kernel.weights_s
    moved = _boundary_bytes(ops, works)
    if all(isinstance(op, VIEW_OPS) for op in ops):
        return _cost(flops, moved, compute_roof, KernelTime("view", 0.0, 0.0), device)
    bandwidth = sustained(device, eff, resident_index(device, moved))
    if any(isinstance(op, TransposeOp) for op in ops) and not any(isinstance(op, GEMM_OPS) for op in ops):
        bandwidth *= eff.transpose  # a GEMM reads a transposed operand as a strided view, at its own pace
    call_s = eff.library_call_s if library else 0.0
    # The members' weights cross the group's boundary: from DRAM, they take at least their streaming time.
    memory_s = max(moved / bandwidth, weights_s)
    kernel = _on_cores(KernelTime("fused", compute_s, memory_s, reuse_s), device, cores)
    return _cost(flops, moved, compute_roof, kernel, device, call_s)


def _code_efficiency(device: Device, generated: bool) -> Efficiency:
    """The device's factors for a kernel of gnomon's `generated` code (its loops stream at `generated_stream` of a
    cache level's bandwidth) or a library's."""
    eff = efficiency(device)
    return replace(eff, stream=eff.generated_stream) if generated else eff


def written_in_place(cost: OpCost, written: int, device: Device) -> OpCost:
    """`cost` of a kernel that writes `written` of its bytes over inputs it has just read (an optimizer's update, a
    pointwise kernel reusing a dying input). Streaming from DRAM, an out-of-place kernel first fetches each line it
    writes (write-allocate), which the streaming efficiency fitted on such kernels includes; an in-place one writes
    back lines it read, so its memory time shrinks by that share of the traffic. In cache, nothing changes."""
    if written <= 0 or cost.bytes <= 0 or resident_index(device, cost.bytes) != len(device.memory) - 1:
        return cost
    return replace(cost, memory_s=cost.memory_s * cost.bytes / (cost.bytes + written))


def pass_cost(read: int, written: int, flops: int, device: Device, *, in_place: bool) -> OpCost:
    """An elementwise fp32 kernel that no graph op stands for (one tensor's kernel of an eager optimizer's foreach
    op): it streams `read` bytes in and `written` out, over bytes it read if `in_place`, at elementwise code's
    rate."""
    eff = efficiency(device)
    moved = read + written
    bandwidth = sustained(device, eff, resident_index(device, moved))
    peak = device.peak("fp32")
    kernel = KernelTime("stream", flops / (peak * eff.vector), moved / bandwidth)
    cost = _cost(flops, moved, flops / peak, kernel, device)
    return written_in_place(cost, written, device) if in_place else cost


def boundary_bytes(ops: Sequence[GraphOperation]) -> int:
    """The bytes a kernel of `ops` moves: what crosses the group's boundary, whatever the device."""
    return _boundary_bytes(ops, [op_work(op) for op in ops])


def _boundary_bytes(ops: Sequence[GraphOperation], works: Sequence[OpWork]) -> int:
    members = set[Operation](ops)
    reads: dict[SSAValue, int] = {}
    writes: dict[SSAValue, int] = {}
    for work in works:
        for value, count in work.reads.items():
            if not _produced_inside(value, members):
                reads[value] = max(reads.get(value, 0), count)
        writes |= {value: count for value, count in work.writes.items() if _escapes(value, members)}
    return sum(reads.values()) + sum(writes.values())


def _on_cores(kernel: KernelTime, device: Device, cores: int | None) -> KernelTime:
    """`kernel` on `cores` of the device's cores: their share of its compute and of its bandwidth (a core's own
    caches, and its share of the shared ones)."""
    if cores is None or cores >= device.cores:
        return kernel
    slower = device.cores / max(cores, 1)
    return replace(
        kernel, compute_s=kernel.compute_s * slower, memory_s=kernel.memory_s * slower, reuse_s=kernel.reuse_s * slower
    )


def _cost(
    flops: int, moved: int, compute_roof: float, kernel: KernelTime, device: Device, call_s: float = 0.0
) -> OpCost:
    memory_roof = moved / device.dram.bandwidth_bytes_per_s
    return OpCost(
        flops=flops,
        bytes=moved,
        roofline_s=max(compute_roof, memory_roof),
        roofline_bound="compute" if compute_roof > memory_roof else "memory",
        compute_s=kernel.compute_s,
        memory_s=kernel.memory_s + kernel.reuse_s,
        launch_s=0.0 if kernel.model == "view" else device.launch_overhead_s + call_s,
        model=kernel.model,
    )


def _produced_inside(value: SSAValue, members: set[Operation]) -> bool:
    """Whether a group member computes `value` (a constant's value is resident storage, read from outside)."""
    owner = value.owner
    return isinstance(owner, Operation) and owner in members and not isinstance(owner, ConstantOp)


def _escapes(value: SSAValue, members: set[Operation]) -> bool:
    """Whether a result must be written out: read outside the group (directly or through a view), or never read."""
    if not value.uses:
        return True
    for use in value.uses:
        user = use.operation
        if user not in members:
            return True
        if isinstance(user, VIEW_OPS) and any(_escapes(result, members) for result in user.results):
            return True
    return False


# ---- per-family kernels ----


def _kernel(
    op: GraphOperation,
    work: OpWork,
    device: Device,
    eff: Efficiency,
    conv_as_gemm: bool = False,
    weights_in_dram: bool = False,
    generated: bool = False,
) -> KernelTime:
    if generated and isinstance(op, ConvOp):
        # gnomon's register-blocked loops over packed weights, which stay in cache (`kernel_to_linalg.conv`).
        fraction = eff.generated_depthwise if _is_depthwise(op) else eff.generated_conv
        if channels_last(op) and not _is_depthwise(op):
            fraction = eff.generated_conv_channels_last
        return _stream("generated-conv", work, device, eff, device.peak(work.peak_key) * fraction)
    kernel = _family_kernel(op, work, device, eff, conv_as_gemm, weights_in_dram)
    if weights_in_dram and isinstance(op, LinearOp | ConvOp | ConvTransposeOp):
        rows = min(shape.m for shape in gemm_shapes(op))
        packs = kernel.model == "conv" or (kernel.model == "gemm" and rows > MATRIX_VECTOR_ROWS)
        packed_once = (isinstance(op, ConvOp) and packs_weight(op)) or (
            isinstance(op, LinearOp) and packs_linear_weight(op)
        )
        if device.kind == "cpu" and packs and not packed_once:
            # The library's packing pass (module docstring): it reads the weights from DRAM at a fraction of its
            # bandwidth, before and apart from the FMAs, so it adds to them rather than overlapping; unless the
            # runtime packed it once, when it bound the kernel (`packs_weight`, `packs_linear_weight`).
            pack_s = nbytes(op.operands[1]) / (device.dram.bandwidth_bytes_per_s * eff.gemm_pack)
            return replace(kernel, compute_s=kernel.compute_s + pack_s)
        # Otherwise they stream in from DRAM: once per row through a CPU BLAS's matrix-vector products, whatever the
        # blocked model says of the rest; once from a weight packed when the kernel was bound.
        passes = rows if device.kind == "cpu" and kernel.model == "gemm" and not packed_once else 1
        weights_s = passes * nbytes(op.operands[1]) / weights_bandwidth(device, eff)
        return replace(kernel, memory_s=max(kernel.memory_s, weights_s), weights_s=weights_s)
    return kernel


MATRIX_VECTOR_ROWS = 2
"""The most rows a CPU BLAS multiplies by weights from DRAM as matrix-vector products, streaming the weights once
per row, rather than packing them: with so few rows, packing costs more than it saves, so a fully connected layer
with weights in DRAM takes about twice as long at two rows as at one."""


def _family_kernel(
    op: GraphOperation, work: OpWork, device: Device, eff: Efficiency, conv_as_gemm: bool, weights_in_dram: bool
) -> KernelTime:
    match op:
        case ConstantOp() | DropoutOp() | ReshapeOp():
            return KernelTime("view", 0.0, 0.0)
        case ConvOp() if _is_depthwise(op):
            # On the vector units whatever the dtype: matrix units would have nothing to reuse.
            vector_peak = device.peak("fp64" if work.peak_key == "fp64" else "fp32")
            kernel = _stream("depthwise-conv", work, device, eff, vector_peak * eff.depthwise)
            # The same library call as a conv.
            return replace(kernel, compute_s=kernel.compute_s + _conv_call_s(op, device, eff))
        case MatmulOp() | LinearOp() | ConvOp() | ConvTransposeOp() | ConvWeightGradOp():
            a, b = op.operands[0], op.operands[1]
            traffic = Traffic(nbytes(a), nbytes(b), work.bytes - nbytes(a) - nbytes(b), element_bytes(a))
            if isinstance(op, MatmulOp | LinearOp) or conv_as_gemm:
                return gemm_kernel("gemm", gemm_shapes(op), traffic, work, device, eff)
            kernel = gemm_kernel("conv", gemm_shapes(op), traffic, work, device, eff)
            return replace(kernel, compute_s=kernel.compute_s + _conv_call_s(op, device, eff))
        case AttentionOp() | AttentionTrainOp() | AttentionGradOp():
            return _attention(op, work, device, eff)
        case MaxPoolOp() | AvgPoolOp() | AdaptivePoolOp():
            volumetric = len(static_shape(op.results[0])) > 4
            rate = device.peak(work.peak_key) * (eff.pool3d if volumetric else eff.pool)
            kernel = _stream("pool", work, device, eff, rate)
            if isinstance(op, MaxPoolOp | AvgPoolOp) and device.kind == "cpu" and library_pool(op) != "aten":
                # Vectorized windows: oneDNN's over a blocked copy of the input (and the result copied back), ATen's
                # channels-last ones in one pass, or slices summed, which overlap, so that one pass from where the
                # bytes live brings them in (a pass per window position predicted Inception-v1's two LRN pools 4-5x
                # too slow; one pass predicts AlexNet's and ZFNet's four, not used to set it, at 0.92-1.21x of the
                # measured time).
                onednn = library_pool(op) == "onednn"
                passes = ONEDNN_POOL_COPIES if onednn else 1
                bandwidth = sustained(device, eff, resident_index(device, work.bytes))
                bandwidth *= eff.onednn_pool if onednn else 1.0
                compute_s = work.flops / (device.peak(work.peak_key) * eff.vector)
                return KernelTime("pool", compute_s, passes * work.bytes / bandwidth)
            if isinstance(op, MaxPoolOp | AvgPoolOp) and not volumetric and device.kind == "cpu":
                floor = math.prod(static_shape(op.results[0])) * POOL_OUTPUT_FLOOR[type(op)]
                kernel = replace(kernel, compute_s=max(work.flops, floor) / rate)
            if isinstance(op, MaxPoolOp):
                return replace(kernel, compute_s=kernel.compute_s * MAX_POOL_INSTRUCTIONS)
            return kernel
        case EmbeddingOp() | EmbeddingBagOp():
            return embedding_kernel(op, work, device, eff, weights_in_dram)
        case LstmOp() | GruOp() | RnnOp() | LstmTrainOp():
            return _recurrent(op, work, device, eff)
        case LstmGradOp():
            return _recurrent_grad(op, work, device, eff)
        case EmbeddingBagGradOp():
            return bag_grad_kernel(op, work, device, eff)
        case (
            BatchNormTrainOp() | MaxPoolGradOp() | AvgPoolGradOp() | EmbeddingBagUpdateOp() | EmbeddingBagAdamUpdateOp()
        ):
            # A training step's library kernels, each a few passes over its tensors at a rate the calibration
            # suite's kernels of the family set (`norm_train`, `pool_grad`, `index_add`).
            kernel = _stream("stream", work, device, eff, device.peak(work.peak_key) * eff.vector)
            rate = TRAINING_RATES[type(op)](eff)
            return KernelTime("stream", kernel.compute_s / rate, kernel.memory_s / rate)
        case DropoutTrainOp():
            kernel = _stream("stream", work, device, eff, device.peak(work.peak_key) * eff.vector)
            instructions = DROPOUT_INSTRUCTIONS[device.kind] * math.prod(static_shape(op.result))
            return replace(kernel, compute_s=instructions / (device.peak(work.peak_key) * eff.vector))
        case TransposeOp():
            bandwidth = sustained(device, eff, resident_index(device, work.bytes)) * eff.transpose
            return KernelTime(
                "transpose", work.flops / (device.peak(work.peak_key) * eff.vector), work.bytes / bandwidth
            )
        case _:
            kernel = _stream("stream", work, device, eff, device.peak(work.peak_key) * eff.vector)
            if type(op) not in VECTOR_INSTRUCTIONS:
                return kernel
            shape = static_shape(op.results[0])
            instructions = VECTOR_INSTRUCTIONS[type(op)] * math.prod(shape)
            if isinstance(op, LayerNormOp):
                instructions += LAYER_NORM_ROW_INSTRUCTIONS * math.prod(shape[: op.axis.value.data % len(shape)])
            return replace(kernel, compute_s=instructions / (device.peak(work.peak_key) * eff.vector))


GEMM_OPS = (
    MatmulOp, LinearOp, ConvOp, ConvTransposeOp, ConvWeightGradOp, AttentionOp, AttentionTrainOp, AttentionGradOp,
)  # fmt: skip


def _conv_call_s(op: ConvOp | ConvTransposeOp | ConvWeightGradOp, device: Device, eff: Efficiency) -> float:
    """What a library convolution costs beside its main loop: the call's setup, by the activations' layout, and
    the passes over them."""
    last = isinstance(op, ConvOp) and channels_last(op)
    return (eff.channels_last_call_s if last else eff.conv_call_s) + _layout_passes_s(op, device, eff)


def _layout_passes_s(op: ConvOp | ConvTransposeOp | ConvWeightGradOp, device: Device, eff: Efficiency) -> float:
    """A CPU convolution library's passes over the activations beside its kernel, which it makes apart from the
    FMAs: channels-first ones it reorders into its blocked layout and the result back (each read and written once
    more), at `reorder` of the bandwidth of the level they live in; a channels-last result (`layout = "nhwc"`,
    which its kernels take as they are) it copies into the runtime's buffer, a stream. Zero on a GPU, whose
    libraries take NCHW."""
    if device.kind != "cpu":
        return 0.0
    activations = nbytes(op.operands[0]) + nbytes(op.results[0])
    level = resident_index(device, activations)
    if isinstance(op, ConvOp) and channels_last(op):
        return 2 * nbytes(op.results[0]) / sustained(device, eff, level)
    return 2 * activations / (device.memory[level].bandwidth_bytes_per_s * eff.reorder)


def _is_depthwise(op: ConvOp) -> bool:
    groups = op.groups.value.data
    return groups > 1 and static_shape(op.weight)[1] == 1


def _stream(model: str, work: OpWork, device: Device, eff: Efficiency, flop_rate: float) -> KernelTime:
    """A kernel that streams its bytes once, from the level that holds them, computing at `flop_rate`."""
    bandwidth = sustained(device, eff, resident_index(device, work.bytes))
    return KernelTime(model, work.flops / flop_rate, work.bytes / bandwidth)


def _attention(
    op: AttentionOp | AttentionTrainOp | AttentionGradOp, work: OpWork, device: Device, eff: Efficiency
) -> KernelTime:
    """Flash-style: scores stay on chip; K and V stream past each block of queries (with, backward, the output,
    its gradient and the row statistics), as B streams past A; the backward pass's five products likewise."""
    rows = [op.query] if not isinstance(op, AttentionGradOp) else [op.query, op.grad_output, op.output, op.logsumexp]
    a_bytes, c_bytes = sum(nbytes(v) for v in rows), sum(nbytes(r) for r in op.results)
    traffic = Traffic(a_bytes, work.bytes - a_bytes - c_bytes, c_bytes, element_bytes(op.query))
    kernel = gemm_kernel("attention", gemm_shapes(op), traffic, work, device, eff)
    if not op.is_causal.value.data:
        return kernel
    # A causal mask skips the query-key blocks above the diagonal: (b + 1) / 2b of b x b blocks remain.
    blocks = math.ceil(gemm_shapes(op)[0].m / eff.gemm_tile_m)
    return replace(kernel, compute_s=kernel.compute_s * (blocks + 1) / (2 * blocks))


RECURRENT_CELL_INSTRUCTIONS: dict[type[GraphOperation], int] = {
    LstmOp: 3 * 17 + 2 * 14 + 6,  # three sigmoids, two tanh, the gate adds and products
    LstmTrainOp: 3 * 17 + 2 * 14 + 6,
    LstmGradOp: 14 + 24,  # the cell state's tanh, the four gates' derivative products and the states' carries
    GruOp: 2 * 17 + 14 + 7,  # two sigmoids, a tanh, the gate adds and products
    RnnOp: 14 + 2,  # a tanh (a relu is cheaper, not by enough to matter), the add
}
"""Vector instructions per hidden unit per step of a recurrent op's gate arithmetic."""


def _recurrent(op: Recurrent | LstmTrainOp, work: OpWork, device: Device, eff: Efficiency) -> KernelTime:
    """The input projection as one GEMM, then the steps in sequence: a GEMM and the gate arithmetic each."""
    projection, recurrence = gemm_shapes(op)
    size = element_bytes(op.input)
    gates = projection.m * projection.n * size
    projected = gemm_kernel(
        "recurrent", (projection,), Traffic(nbytes(op.input), nbytes(op.weight_ih), gates, size), work, device, eff
    )
    state = recurrence.m * recurrence.k * size
    step_traffic = Traffic(state, nbytes(op.weight_hh), recurrence.m * recurrence.n * size, size)
    step = gemm_kernel("recurrent", (replace(recurrence, batch=1),), step_traffic, work, device, eff)
    cell = RECURRENT_CELL_INSTRUCTIONS[type(op)] * recurrence.m * recurrence.k
    cell_s = cell / (device.peak(work.peak_key) * eff.vector)
    steps = recurrence.batch
    compute_s = projected.compute_s + steps * (step.compute_s + cell_s + device.launch_overhead_s)
    memory_s = projected.memory_s + steps * step.memory_s
    if isinstance(op, LstmTrainOp):  # every step's gates and states written for the backward pass
        memory_s += _workspace_s(op, device, eff)
    return KernelTime("recurrent", compute_s, memory_s, projected.reuse_s + steps * step.reuse_s)


def _workspace_s(op: LstmTrainOp | LstmGradOp, device: Device, eff: Efficiency) -> float:
    workspace = nbytes(op.workspace)
    return workspace / sustained(device, eff, resident_index(device, workspace))


def _recurrent_grad(op: LstmGradOp, work: OpWork, device: Device, eff: Efficiency) -> KernelTime:
    """Backward through time: the steps in reverse, each its gate gradients and a small GEMM by the recurrent
    weights; then the input's and both weights' gradients, each one GEMM over every step at once."""
    to_input, to_weight_ih, step_shape, to_weight_hh = gemm_shapes(op)
    size = element_bytes(op.input)
    gates = to_input.m * to_input.k * size  # every step's gate gradients
    states = to_weight_hh.k * to_weight_hh.n * size  # every step's hidden state
    products = [
        gemm_kernel(
            "recurrent", (to_input,), Traffic(gates, nbytes(op.weight_ih), nbytes(op.input), size), work, device, eff
        ),
        gemm_kernel(
            "recurrent",
            (to_weight_ih,),
            Traffic(gates, nbytes(op.input), nbytes(op.weight_ih), size),
            work,
            device,
            eff,
        ),
        gemm_kernel(
            "recurrent", (to_weight_hh,), Traffic(gates, states, nbytes(op.weight_hh), size), work, device, eff
        ),
    ]
    state = step_shape.m * step_shape.k * size
    step_traffic = Traffic(step_shape.m * step_shape.n * size, nbytes(op.weight_hh), state, size)
    step = gemm_kernel("recurrent", (replace(step_shape, batch=1),), step_traffic, work, device, eff)
    cell_s = RECURRENT_CELL_INSTRUCTIONS[LstmGradOp] * state / size / (device.peak(work.peak_key) * eff.vector)
    steps = step_shape.batch
    compute_s = sum(p.compute_s for p in products) + steps * (step.compute_s + cell_s + device.launch_overhead_s)
    memory_s = (
        sum(p.memory_s for p in products)
        + steps * step.memory_s
        + nbytes(op.workspace) / sustained(device, eff, resident_index(device, nbytes(op.workspace)))
    )
    reuse_s = sum(p.reuse_s for p in products) + steps * step.reuse_s
    return KernelTime("recurrent", compute_s, memory_s, reuse_s)


def lookup_cost(
    lookups: int, distinct: int, row_bytes: int, table_bytes: int, other_bytes: int, flops: int, device: Device,
    *, table_in_dram: bool = False,
) -> OpCost:  # fmt: skip
    """A pooled lookup that no graph op stands for (a shard of a sharded table, looked up by a library's batched
    kernel): `lookups` ids of which `distinct` rows of `row_bytes`, from a table of `table_bytes`; `other_bytes` of
    ids, offsets and pooled results; `flops` of pooling. Priced as `graph.embedding_bag` is."""
    eff = efficiency(device)
    peak = device.peak("fp32")
    kernel = lookup_kernel(lookups, distinct, row_bytes, table_bytes, other_bytes, flops / (peak * eff.vector), device,
                      eff, table_in_dram)  # fmt: skip
    moved = distinct * row_bytes + other_bytes
    return _cost(flops, moved, flops / peak, kernel, device)


def sparse_update_cost(lookups: int, columns: int, element_bytes: int, other_bytes: int, device: Device) -> OpCost:
    """A fused backward and SGD update of a table (a library's batched kernel): each lookup's row of `columns`
    read and written in place with its bag's gradient (`other_bytes` with the ids), a multiply and an add per
    element. Priced as `graph.embedding_bag_update` is."""
    eff = efficiency(device)
    touched = lookups * columns * element_bytes
    moved = 2 * touched + other_bytes
    flops = 2 * lookups * columns
    peak = device.peak("fp32")
    rate = TRAINING_RATES[EmbeddingBagUpdateOp](eff)
    bandwidth = sustained(device, eff, resident_index(device, moved))
    kernel = KernelTime("stream", flops / (peak * eff.vector) / rate, moved / bandwidth / rate)
    return _cost(flops, moved, flops / peak, kernel, device)
