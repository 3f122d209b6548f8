"""The rates the analytical kernel models price at (`gnomon.cost.analytical`).

- Memory: the innermost level that holds a working set between kernels, and the bytes per second a streaming
  kernel moves from a level; apart, the rate at which a library kernel reads weights or table rows from DRAM.
- Instructions: the vector instructions per element of the ops that cost more than their FLOPs, and a layer
  norm's per-row cost.
- Training kernels: the fraction of a streaming kernel's rate each family of a training step's library kernels
  attains.
"""

from __future__ import annotations

from collections.abc import Callable

from gnomon.cost.devices import Device
from gnomon.cost.efficiency import Efficiency
from gnomon.dialects.graph import elementwise as ew
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.grad import (
    AvgPoolGradOp,
    EmbeddingBagAdamUpdateOp,
    EmbeddingBagUpdateOp,
    MaxPoolGradOp,
)
from gnomon.dialects.graph.nn import BatchNormTrainOp, LayerNormOp, LogSoftmaxOp, SoftmaxOp

__all__ = [
    "DROPOUT_INSTRUCTIONS",
    "LAYER_NORM_ROW_INSTRUCTIONS",
    "TRAINING_RATES",
    "VECTOR_INSTRUCTIONS",
    "resident_index",
    "sustained",
    "weights_bandwidth",
]


def sustained(device: Device, eff: Efficiency, level: int) -> float:
    """Bytes per second a streaming kernel moves from memory level `level`."""
    dram = level == len(device.memory) - 1
    return device.memory[level].bandwidth_bytes_per_s * (eff.stream_dram if dram else eff.stream)


def weights_bandwidth(device: Device, eff: Efficiency) -> float:
    """Bytes per second a library kernel reads weights or table rows from DRAM at: a BLAS's matrix-vector product
    streaming its weights once per row, an embedding bag gathering rows. Not an elementwise stream's rate
    (`stream_dram`): the calibration suite fits the two apart."""
    return device.dram.bandwidth_bytes_per_s * eff.weights_dram


def resident_index(device: Device, working_set: int) -> int:
    """The innermost memory level that holds `working_set` bytes from one kernel to the next."""
    for index, level in enumerate(device.memory[:-1]):
        if level.per_core and device.kind == "gpu":
            continue  # an SM's L1 and shared memory start empty with each kernel
        if working_set <= device.capacity(level):
            return index
    return len(device.memory) - 1


TRAINING_RATES: dict[type[GraphOperation], Callable[[Efficiency], float]] = {
    BatchNormTrainOp: lambda eff: eff.norm_train,
    MaxPoolGradOp: lambda eff: eff.pool_grad,
    AvgPoolGradOp: lambda eff: eff.pool_grad,
    EmbeddingBagUpdateOp: lambda eff: eff.index_add,
    EmbeddingBagAdamUpdateOp: lambda eff: eff.index_add,
}
"""A training step's library kernels, each a few passes over its tensors: the fraction of a streaming kernel's
rate each family attains, as the calibration suite's kernels of the family set it."""

LAYER_NORM_ROW_INSTRUCTIONS = 900
"""A layer norm's fixed cost per normalized row, in vector instructions: ATen's CPU kernel computes each row's moments
with a cascade of Welford accumulators that it then combines, and sets up its scale-and-shift loop, about 50 ns a row
on one core here whatever the row's length (64 or 128 columns); short rows (a transformer's 64-256 features) pay
as much for it as for their elements."""

VECTOR_INSTRUCTIONS: dict[type[GraphOperation], int] = {
    ew.ExpOp: 12, ew.LogOp: 14, ew.ErfOp: 16, ew.TanhOp: 14, ew.SinOp: 16, ew.CosOp: 16,
    ew.SinhOp: 16,  # exp's 12, its reciprocal and the halving
    ew.AtanOp: 20, ew.AsinOp: 22, ew.AcosOp: 22,  # a reduction of the argument, a polynomial (and a root)
    ew.AsinhOp: 22, ew.AcoshOp: 22, ew.AtanhOp: 18,  # log's 14 of an argument built with a root or a division
    ew.PowOp: 28,  # exp(y log x)
    ew.SigmoidOp: 17, ew.SiluOp: 18, ew.EluOp: 15, ew.SeluOp: 16, ew.SoftplusOp: 30,
    ew.GeluOp: 20,  # erf's 16, or tanh's 14 and the cubic: about the same
    ew.DivOp: 4, ew.ReciprocalOp: 4, ew.SqrtOp: 4, ew.RsqrtOp: 4,
    SoftmaxOp: 16,  # ATen's (gnomon's runtime calls it too): max, vectorized exp, sum, a multiply by the reciprocal
    LogSoftmaxOp: 17,  # exp once for the sum, max, subtractions
    LayerNormOp: 8,  # a mean, a variance, then scale and shift
}  # fmt: skip

DROPOUT_INSTRUCTIONS = {"cpu": 320, "gpu": 12}
"""Vector instructions per element of a training step's dropout (`graph.dropout_train`), by device kind. A CPU
draws from torch's default generator in a scalar loop (`aten.native_dropout`: 7 ns per element on this 2-core
EPYC, 130x a relu); a GPU's Philox draws are a few instructions, then the compare and the scaling."""
"""Vector instructions per result element of the elementwise ops that cost more than their FLOPs: polynomial
approximations of the transcendental functions (as gnomon's generated kernels and SLEEF-style libraries compute
them), and divisions and roots, which issue at a fraction of the FMA rate. Other ops cost their FLOPs."""
