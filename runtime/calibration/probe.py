"""Peak FLOP/s and streaming bandwidth: what the machine's cores and memory levels can do.

Each figure is the best of a few calls: a peak is what the machine can do, and noise from other processes only
ever slows a call down, so the best call is the reproducible figure.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
from xdsl.dialects.builtin import FunctionType, TensorType, f32
from xdsl.ir import Block, Region

from gnomon.dialects import kernel
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.runtime.calibration.host import cores
from gnomon.runtime.calibration.timing import best_time

__all__ = ["generated_matmul_flops", "peak_flops", "stream_bandwidth"]


def peak_flops(n: int, dtype: str, trials: int) -> float:
    """FLOP/s of an n x n x n torch.mm on torch's threads (the library GEMM the runtime's linear and matmul kernels
    call)."""
    import torch

    torch_dtype = {"fp32": torch.float32, "fp64": torch.float64}[dtype]
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator, dtype=torch_dtype)
    b = torch.randn(n, n, generator=generator, dtype=torch_dtype)
    c = torch.empty(n, n, dtype=torch_dtype)
    return 2 * n**3 / best_time(lambda: torch.mm(a, b, out=c), trials)


def _matmul_kernel(n: int) -> kernel.FuncOp:
    """`kernel.func @calibrate_matmul`: an n x n x n f32 matmul, generated, split over all cores."""
    matrix = TensorType(f32, [n, n])
    block = Block(arg_types=[matrix, matrix])
    block.args[0].name_hint, block.args[1].name_hint = "a", "b"
    product = MatmulOp.build(operands=list(block.args), result_types=[matrix])
    product.results[0].name_hint = "r"
    block.add_ops([product, kernel.YieldOp(product.results[0])])
    schedule = kernel.ScheduleAttr.get([0, 0], 8, [0, 1], cores())
    function_type = FunctionType.from_lists([matrix, matrix], [matrix])
    return kernel.FuncOp("calibrate_matmul", function_type, Region(block), schedule=schedule)


def generated_matmul_flops(n: int, trials: int) -> float | None:
    """FLOP/s of gnomon's generated n x n x n f32 matmul on all cores; None where the code generator has none."""
    from gnomon.passes.kernel_to_linalg import MATMUL_GENERATED
    from gnomon.runtime.codegen import compile_kernel

    if not MATMUL_GENERATED:
        return None
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    c = np.empty((n, n), np.float32)
    run = compile_kernel(_matmul_kernel(n)).bind([a, b], [c])
    return 2 * n**3 / best_time(run, trials)


def stream_bandwidth(per_thread_bytes: int, threads: int, trials: int, moved_per_call: int) -> float:
    """Bytes per second of `threads` NumPy threads, each summing a stride-0 view of its own array into an
    accumulator (`acc += x`, again and again: two reads and a write per element); each thread's array and
    accumulator together take `per_thread_bytes`."""
    n = max(per_thread_bytes // 8, 64)
    rows = max(2, moved_per_call // (12 * n))
    arrays = [np.ones(n, np.float32) for _ in range(threads)]
    sums = [np.zeros(n, np.float32) for _ in range(threads)]
    views = [np.lib.stride_tricks.as_strided(x, (rows, n), (0, x.itemsize)) for x in arrays]
    best = math.inf
    for _ in range(trials + 1):  # the first pass faults the pages in
        start, done = threading.Barrier(threads + 1), threading.Barrier(threads + 1)

        def work(i: int, start: threading.Barrier = start, done: threading.Barrier = done) -> None:
            start.wait()
            np.add.reduce(views[i], axis=0, out=sums[i])
            done.wait()

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        done.wait()
        best = min(best, time.perf_counter() - began)
        for worker in workers:
            worker.join()
    # The first row is copied into the accumulator (a read, a write); each later one is added (two reads, a write).
    return threads * n * 4 * (2 + 3 * (rows - 1)) / best
