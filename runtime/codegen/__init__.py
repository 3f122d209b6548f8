"""Compiling generated kernels: the JIT, its disk cache and the threads their calls split over.

`compile_kernel` turns a generated `kernel.func` into a `CompiledKernel` (through `kernel-to-linalg`,
MLIR and LLVM, or the disk cache), whose `bind` gives the runtime a zero-argument closure per
launch. Which ops can be generated is the pass's to say (`gnomon.passes.kernel_to_linalg.generatable`).
MLIR itself (torch-mlir) is imported only when a kernel has to be compiled.
"""

from gnomon.runtime.codegen.cache import cache_directory
from gnomon.runtime.codegen.jit import CompiledKernel, compilation_count, compile_kernel

__all__ = [
    "CompiledKernel",
    "cache_directory",
    "compilation_count",
    "compile_kernel",
]
