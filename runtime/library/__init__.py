"""Library kernels: graph ops computed by tuned libraries (oneDNN, BLAS) through PyTorch's ATen ops.

This package implements what `gnomon.passes.graph_to_kernel.library` declares the library can do. One
module per op family, mirroring `gnomon.reference`, registers each op's one torch implementation in
`base.TORCH_IMPLS`: `TORCH_IMPLS[type(op)](op)` is a `TorchImpl`, its functional form (what eager
PyTorch runs for the op) and its binding into the runtime's preallocated buffers. `bind_call` turns a
`kernel.library`'s call (callee, epilogue, transposed operands) and body into a `LibraryKernel`;
`library_kernel` first chooses the call for a block of graph ops.
"""

from __future__ import annotations

from gnomon.runtime.library import elementwise, embedding, grad, linalg, nn, recurrent, reduce, tensor
from gnomon.runtime.library.base import TORCH_IMPLS, TorchFn, TorchImpl
from gnomon.runtime.library.kernel import LibraryKernel, bind_call, library_kernel

__all__ = [
    "FAMILIES",
    "TORCH_IMPLS",
    "LibraryKernel",
    "TorchFn",
    "TorchImpl",
    "bind_call",
    "library_kernel",
]

FAMILIES = (elementwise, embedding, grad, linalg, nn, recurrent, reduce, tensor)
"""The op-family modules: importing them registers their implementations in `TORCH_IMPLS`."""
