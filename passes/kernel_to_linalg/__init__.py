"""`kernel-to-linalg`: generated kernels as upstream linalg, arith and math on memrefs.

Each `kernel.func` of kind "generated" becomes a `func.func` of the same name (with
`llvm.emit_c_interface`) that takes the kernel's inputs, then its outputs, as memrefs, then
`%part, %parts : index`: a call computes the `part`-th of `parts` slices of the outermost loop,
so the runtime can run the slices on threads of its own (the bundled MLIR has no OpenMP runtime).

- The kernel's ops are fused into one `linalg.generic` per result shape (usually one): its body
  computes every op for one element and reads the inputs through indexing maps that say where
  broadcasting, transposes and expands move the index, so no intermediate touches memory.
- Loops of extent 1 are dropped, and neighbouring loops that every operand walks contiguously
  are coalesced after a `memref.collapse_shape` of the operands (a 1x64x56x56 add is one loop of
  200704): LLVM's loop vectorizer gets long inner loops and the threads a long outer one.
- The schedule's loop order permutes the loops. A loop with a tile size is split into an
  `scf.for` over tiles, with the `linalg.generic` on `memref.subview`s of one tile (a blocked
  transpose); a tiled loop is never coalesced.
- Shapes may have `?` dims (but a matmul's or convolution's, planned for static sizes): loop
  extents, subview sizes and per-row buffers are read from the memref arguments (`memref.dim`), so
  one function serves every size; `LoweredKernel.parts_rule` tells the runtime how many slices a
  call splits into, from its arrays.
- A kernel may instead start with an anchor that is not one pointwise generic, and follow it
  with an elementwise epilogue over the anchor's result, in place in the output buffer and split
  between threads exactly as the anchor is:
  - a `graph.matmul` (2-D, f32): a register-blocked vector micro-kernel (`matmul.py`), split by rows;
  - a float reduction over trailing axes: a fill of the initial value, then a generic with a
    reduction loop (sums reassociable, so that LLVM vectorizes them), split by rows;
  - a softmax (or log-softmax) over the last axis: each row's max and sum of exponentials into
    per-row buffers by two reductions, then one pointwise generic that normalizes and applies
    the epilogue.

The package, one concern a module: `lowering` (a kernel to a function, and the pass), `nest`
(fused bodies and loop nests), `scalar` (each elementwise op's body), `approx` (vectorizable
exp, log, tanh, erf), `matmul` (the micro-kernel and its plan), `builder` (the op builder they
share) and `support` (`generatable`: which ops the code generator handles).
"""

from gnomon.passes.kernel_to_linalg.lowering import KernelToLinalgPass, LoweredKernel, lower_kernel
from gnomon.passes.kernel_to_linalg.support import MATMUL_GENERATED, CodegenError, generatable, is_depthwise

__all__ = [
    "MATMUL_GENERATED",
    "CodegenError",
    "KernelToLinalgPass",
    "LoweredKernel",
    "generatable",
    "is_depthwise",
    "lower_kernel",
]
