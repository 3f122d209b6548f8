"""Op families and shape classes of gnomon's kernels, for grouping prediction errors where a mechanism shows.

A kernel's class is its anchor op's family and the shape property its cost turns on: a convolution's window and
stride (a depthwise one apart), a layer norm's reduced length, a GEMM's rows (a few rows stream the weights, many
reuse them), a generated kernel's ops and size.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import TensorType

from gnomon.dialects import kernel
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.linalg import LinearOp, MatmulOp
from gnomon.dialects.graph.nn import ConvOp, ConvTransposeOp, LayerNormOp
from gnomon.dialects.graph.tensor import TransposeOp


def shape_class(kernel_func: kernel.FuncOp) -> str:
    """`depthwise 7x7 s1`, `layer_norm over 64`, `gemm rows<=16`, `generated add+relu <=64K`..."""
    ops = [op for op in kernel_func.body.block.ops if isinstance(op, GraphOperation)]
    anchor = next((op for op in ops if not isinstance(op, TransposeOp)), ops[0])
    match anchor:
        case ConvOp():
            window = "x".join(str(d) for d in anchor.weight.type.get_shape()[2:])
            stride = max(anchor.strides.get_values())
            groups = anchor.groups.value.data
            family = "depthwise" if groups > 1 and groups == anchor.input.type.get_shape()[1] else "conv"
            return f"{family} {window} s{stride}"
        case ConvTransposeOp():
            return f"conv_transpose {'x'.join(str(d) for d in anchor.weight.type.get_shape()[2:])}"
        case LayerNormOp():
            shape = anchor.operands[0].type.get_shape()
            return f"layer_norm over {math.prod(anchor.affine_shape(tuple(shape)))}"
        case LinearOp() | MatmulOp():
            shape = anchor.operands[0].type.get_shape()
            rows = math.prod(shape[:-1])
            return f"gemm rows {'<=16' if rows <= 16 else '<=256' if rows <= 256 else '>256'}"
    name = "+".join(op.name.removeprefix("graph.") for op in ops)
    if len(name) > 28:
        name = name[:25] + "..."
    result = ops[-1].results[0].type
    size = math.prod(result.get_shape()) if isinstance(result, TensorType) else 0
    where = "generated" if kernel_func.is_generated else "library"
    return f"{where} {name} {'<=64K' if size <= 1 << 16 else '<=1M' if size <= 1 << 20 else '>1M'}"
