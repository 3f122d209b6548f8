"""Library kernels: graph ops computed by tuned libraries (oneDNN, BLAS) through PyTorch's ATen ops.

One module per op family, mirroring `gnomon.runtime.reference`, fills the tables of `base`:
`TORCH_IMPLS[type(op)].build(op)` is the op's torch implementation (what eager PyTorch runs for it)
and, where ATen has a real out= kernel, `OUT_IMPLS` binds the op to the runtime's preallocated
buffers without copies. `library_kernel` turns a block of graph ops (one op, or a conv, linear or
matmul with a fused epilogue) into a `LibraryKernel`; `fusible_epilogue` and `reads_transposed` say what
such a block may hold.
"""

from __future__ import annotations

from gnomon.runtime.library import elementwise, embedding, linalg, nn, reduce, tensor
from gnomon.runtime.library.base import OUT_IMPLS, TORCH_IMPLS, TorchFn, TorchImpl
from gnomon.runtime.library.kernel import (
    LibraryKernel,
    OneDNNPolicy,
    fusible_epilogue,
    library_kernel,
    reads_transposed,
)

__all__ = [
    "FAMILIES",
    "OUT_IMPLS",
    "TORCH_IMPLS",
    "LibraryKernel",
    "OneDNNPolicy",
    "TorchFn",
    "TorchImpl",
    "fusible_epilogue",
    "library_kernel",
    "reads_transposed",
]

FAMILIES = (elementwise, embedding, linalg, nn, reduce, tensor)
"""The op-family modules: importing them registers their implementations in the tables."""
