"""How many threads a kernel runs on, on a CPU: the policy the runtime splits calls by, and the cost model prices.

gnomon's runtime cuts a generated kernel's outer loop into slices and hands them to the OpenMP team torch's library
kernels use (`gnomon.runtime.codegen.threads`); `parts_for` decides how many. Library kernels split themselves:
most over all cores, ATen's CPU pooling over its input's planes only (`library_threads`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType, TensorType

from gnomon.cost.devices import Device
from gnomon.cost.roofline import gemm_shapes
from gnomon.cost.values import static_shape
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import AdaptivePoolOp, AvgPoolOp, ConvOp, MaxPoolOp

PART_WORK = 1 << 15
"""Scalar results a slice needs to be worth a thread: waking the OpenMP team and joining it costs a few
microseconds, as much as a slice of fewer results computes (bench/codegen.py's table 2 is where this is set)."""


def parts_for(work: int, most: int, threads: int) -> int:
    """How many slices to split a call into: one per thread, each of at least PART_WORK results."""
    return max(1, min(most, threads, work // PART_WORK))


def generated_threads(kernel_func: kernel.FuncOp, device: Device) -> int:
    """The threads a call of a generated kernel splits over on a CPU, as the runtime splits it (`parts_for`), up to
    its schedule's threads. Its work is counted as the lowering counts it: a convolution's or matmul's multiply-adds
    (`kernel_to_linalg`'s `conv_kernel`, `_matmul_kernel`), else the elements of its largest array (a reduction's
    work is its input's). Counting a convolution's elements instead priced a 1x1 convolution of 256 to 48 channels
    at 13x13 on one thread, and so twice the time it measured on two."""
    schedule = kernel_func.schedule
    most = schedule.threads.data if schedule is not None else device.cores
    anchor = next((op for op in kernel_func.body.block.ops if isinstance(op, GraphOperation)), None)
    if isinstance(anchor, ConvOp | MatmulOp):  # static: `generatable` sends dynamic ones to the library
        return parts_for(_multiply_adds(kernel_func), most, device.cores)
    function_type = kernel_func.function_type
    largest = 0
    for array in (*function_type.inputs.data, *function_type.outputs.data):
        if isinstance(array, TensorType | MemRefType):
            largest = max(largest, math.prod(array.get_shape()))
    return parts_for(largest, most, device.cores)


def _multiply_adds(kernel_func: kernel.FuncOp) -> int:
    """A generated convolution's multiply-adds (with the depthwise convolution it takes) or a matmul's: the products
    `gnomon.cost.roofline` prices it by."""
    products = [op for op in kernel_func.body.block.ops if isinstance(op, ConvOp | MatmulOp)]
    return sum(shape.flops // 2 for op in products for shape in gemm_shapes(op))


def library_threads(ops: Sequence[GraphOperation], device: Device) -> int | None:
    """The threads a library kernel runs on a CPU, where it uses fewer than all (None: all). ATen's CPU pooling
    splits over its input's planes, batch x channels, so a local response norm's channel pool (one plane per image,
    as torch-mlir lowers it) runs single-threaded at batch 1."""
    if len(ops) != 1 or not isinstance(ops[0], MaxPoolOp | AvgPoolOp | AdaptivePoolOp):
        return None
    batch, channels = (*static_shape(ops[0].operands[0]), 1, 1)[:2]
    return max(1, min(device.cores, batch * channels))
