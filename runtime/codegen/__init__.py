"""Code generation for generated kernels: what can be generated, compiling, the JIT and its disk cache.

`generatable(op)` says which graph ops gnomon generates loops for; `compile_kernel` turns a
generated `kernel.func` into a `CompiledKernel` (through `kernel-to-linalg`, MLIR and LLVM, or
the disk cache), whose `bind` gives the runtime a zero-argument closure per launch. MLIR itself
(torch-mlir) is imported only when a kernel has to be compiled.
"""

from gnomon.runtime.codegen.cache import cache_directory
from gnomon.runtime.codegen.jit import CompiledKernel, compilation_count, compile_kernel
from gnomon.runtime.codegen.support import MATMUL_GENERATED, CodegenError, generatable

__all__ = [
    "MATMUL_GENERATED",
    "CodegenError",
    "CompiledKernel",
    "cache_directory",
    "compilation_count",
    "compile_kernel",
    "generatable",
]
