"""Move torch-mlir IR into xDSL, through its generic textual form.

Weights arrive as `dense_resource<key>` attributes whose blobs xDSL keeps in the builtin
dialect's `OpAsmDialectInterface`. That storage is process-global, and torch-mlir reuses
keys across imports (`torch_tensor_64_torch.float32`), so each module is parsed against a
private storage first and its blobs are then moved to the global one under keys derived
from their content: two imports in one process never clobber each other's weights.
Large splat literals are rewritten to `torch.aten.full` before printing (see SPLAT_LIMIT).
"""

# torch-mlir's MLIR bindings are a C extension without type stubs: pyright cannot see their names.
# pyright: reportAttributeAccessIssue=false, reportUnknownParameterType=false

from __future__ import annotations

import math
import re

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from xdsl.dialects.builtin import (
    ModuleOp,
)
from xdsl.dialects.func import Func

from gnomon.dialects.graph.constant_values import parse_with_resources
from gnomon.dialects.torch import Torch

SPLAT_LIMIT = 1 << 16
"""Splat literals with more elements than this become `torch.aten.full`.

xDSL stores (and prints) every element of a dense attribute; the weights of the ONNX light
models are splats of up to 10^8 elements, which would take gigabytes and minutes.
"""

_TORCH_DTYPE_CODES = {
    "f64": 7, "f32": 6, "f16": 5, "bf16": 15, "si64": 4, "si32": 3, "si16": 2, "si8": 1, "ui8": 0, "i1": 11,
}  # fmt: skip
"""torch's ScalarType numbering, which `aten.full` takes as its dtype argument."""


def to_text(module: ir.Module) -> str:
    """The generic text `parse_torch_mlir` reads (the module is changed first: large splats become `aten.full`).

    The frontends print in the child process that ran torch-mlir, and parse in the user's."""
    _unfold_large_splats(module)
    # Generic form needs no torch-mlir op syntax in xDSL. Local scope prints locations inline
    # (xDSL cannot resolve location aliases defined at the end of the file) but, as for a
    # nested op, no resource section: that comes from a second print without debug info.
    ops = module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True, use_local_scope=True)
    plain = module.operation.get_asm(print_generic_op_form=True)
    start = plain.rfind("\n{-#")
    return ops + plain[start:] if start >= 0 else ops


def _unfold_large_splats(module: ir.Module) -> None:
    """Replaces each splat `torch.vtensor.literal` over SPLAT_LIMIT elements by the `aten.full` it folded from."""
    literals: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if op.name == "torch.vtensor.literal":
            literals.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for op in literals:
        value = op.attributes["value"]
        if not isinstance(value, ir.DenseElementsAttr) or not value.is_splat:
            continue
        shaped = ir.ShapedType(value.type)
        if math.prod(shaped.shape) <= SPLAT_LIMIT:
            continue
        with op.location, ir.InsertionPoint(op):
            sizes = torch_d.PrimListConstructOp(
                ir.Type.parse("!torch.list<int>"), [torch_d.ConstantIntOp(d).result for d in shaped.shape]
            )
            splat = value.get_splat_value()
            fill = (
                torch_d.ConstantFloatOp(splat.value)
                if isinstance(splat, ir.FloatAttr)
                else torch_d.ConstantIntOp(ir.IntegerAttr(splat).value)
            )
            dtype = torch_d.ConstantIntOp(_TORCH_DTYPE_CODES[str(shaped.element_type)])
            none = torch_d.ConstantNoneOp()
            full = torch_d.AtenFullOp(op.result.type, sizes, fill, dtype, none, none, none)
        op.result.replace_all_uses_with(full.result)
        op.erase()


def parse_torch_mlir(text: str) -> ModuleOp:
    """Parses generic-form torch-dialect IR; its resource blobs get content-derived keys."""
    return parse_with_resources(_quote_hex_floats(text), {"func": lambda: Func, "torch": lambda: Torch})


_HEX_DENSE = re.compile(r"dense<(?P<body>\[[^\"<>]*\]|0x[0-9A-Fa-f]+)>(?P<suffix> : tensor<(?P<type>[^>]*)>)")
_FLOAT_BYTES = {"f16": np.dtype("<f2"), "f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "bf16": None}
_ELEMENT = re.compile(r"0x[0-9A-Fa-f]+|[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?")


def _quote_hex_floats(text: str) -> str:
    """MLIR prints non-finite floats in `dense<...>` as bare bit patterns (`dense<0xFF800000> : tensor<f32>`
    is -inf), which xDSL 0.75 misreads as integers. Rewrite them to the quoted raw-data form
    (`dense<"0x000080FF">`), which xDSL reads correctly."""

    def quote(match: re.Match[str]) -> str:
        body, element = match["body"], match["type"].rsplit("x", 1)[-1]
        if "0x" not in body or element not in _FLOAT_BYTES:
            return match[0]
        size = 2 if element in ("f16", "bf16") else int(element[1:]) // 8
        data = bytearray()
        for token in _ELEMENT.findall(body):
            if token.startswith("0x"):
                data += int(token, 16).to_bytes(size, "little")
            elif (dtype := _FLOAT_BYTES[element]) is not None:
                data += np.array(float(token), dtype=dtype).tobytes()
            else:  # bf16: the upper half of the f32 pattern
                data += np.array(float(token), dtype="<f4").tobytes()[2:]
        return f'dense<"0x{data.hex().upper()}">{match["suffix"]}'

    return _HEX_DENSE.sub(quote, text)
