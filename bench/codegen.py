"""Generated kernels next to torch and NumPy: fused elementwise, threads, matmul, transpose, compile and cache.

Tables (medians of `--repeat` calls after a warm-up; torch runs on all cores, as it does by default):

1. add + relu on 4M f32 elements, one fused kernel, on 1 and 2 threads; torch.relu(a + b) as
   written (two ops, allocating) and into preallocated outputs; NumPy likewise.
2. when splitting pays off: add + relu from 4K to 256K elements on 1 and 2 threads
   (`PART_WORK` in gnomon/cost/threads.py is set from this table).
3. matmul, 256^3 and 1024^3 f32, in GFLOP/s: the generated micro-kernel on 1 and 2 threads, and
   torch.mm on 1 thread and on all.
4. a 2048 x 2048 f32 transpose, untiled and tiled 32 x 32 (the schedule's `tile`), in GB/s.
5. row kernels: a softmax over 256 x 1000 and a sum over the rows of 1024 x 4096, against torch.
6. compiling: seconds per kernel into an empty cache, and a fresh process that loads the
   same kernels from the cache (its compilations, and whether it imported MLIR).

    python bench/codegen.py [--repeat 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.dialects import kernel
from gnomon.runtime.codegen import CompiledKernel, compile_kernel


def kernel_func(name: str, args: list[str], body: list[str], result: str, tile: list[int], threads: int) -> str:
    """A generated kernel.func's text; `body` names the arguments %a0, %a1, ... and yields %r."""
    rank = result.count("x")
    schedule = f"tile = {tile or [0] * rank}, vector = 8, order = {list(range(rank))}, threads = {threads}"
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(args))
    lines = "\n".join(f"  {line}" for line in body)
    attributes = f'{{kind = "generated", schedule = #kernel.schedule<{schedule}>}}'
    header = f"kernel.func @{name}({params}) -> {result} attributes {attributes}"
    return f"{header} {{\n{lines}\n  kernel.yield %r : {result}\n}}\n"


def compile_text(text: str) -> CompiledKernel:
    module = Parser(gnomon_context(), text).parse_module()
    (kernel_op,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    return compile_kernel(kernel_op)


def add_relu(n: int, threads: int) -> str:
    t = f"tensor<{n}xf32>"
    body = [f"%s = graph.add %a0, %a1 : ({t}, {t}) -> {t}", f"%r = graph.relu %s : ({t}) -> {t}"]
    return kernel_func(f"add_relu_{n}", [t, t], body, t, [], threads)


def matmul(n: int, threads: int) -> str:
    t = f"tensor<{n}x{n}xf32>"
    return kernel_func(f"matmul_{n}", [t, t], [f"%r = graph.matmul %a0, %a1 : ({t}, {t}) -> {t}"], t, [], threads)


def transpose(n: int, tile: list[int], threads: int) -> str:
    t = f"tensor<{n}x{n}xf32>"
    line = f"%r = graph.transpose %a0 {{permutation = array<i64: 1, 0>}} : ({t}) -> {t}"
    return kernel_func(f"transpose_{n}", [t], [line], t, tile, threads)


def medians(calls: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds per call, after a warm-up; each system's calls run back to back.

    Not interleaved: torch's OpenMP threads (and gnomon's pool, briefly) spin-wait after a call,
    which would steal the second core from whichever system runs next; a pause between systems
    lets them sleep.
    """
    result: dict[str, float] = {}
    for name, call in calls.items():
        time.sleep(0.3)
        call()
        times: list[float] = []
        for _ in range(repeat):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        result[name] = statistics.median(times)
    return result


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))


def elementwise(repeat: int, threads: int) -> None:
    n = 1 << 22
    compiled = compile_text(add_relu(n, threads))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    y = np.empty(n, np.float32)
    ta, tb, ty = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(y)
    times = medians(
        {
            "gnomon, 1 thread": compiled.bind([a, b], [y], threads=1),
            f"gnomon, {threads} threads": compiled.bind([a, b], [y], threads=threads),
            "torch.relu(a + b)": lambda: torch.relu(ta + tb),
            "torch, into y": lambda: torch.clamp_min_(torch.add(ta, tb, out=ty), 0),
            "numpy.maximum(a + b, 0)": lambda: np.maximum(a + b, 0),
            "numpy, into y": lambda: np.maximum(np.add(a, b, out=y), 0, out=y),
        },
        repeat,
    )
    best = times["gnomon, 1 thread"]
    rows = [[name, f"{t * 1e6:.0f}", f"{16 * n / t / 1e9:.1f}", f"{t / best:.2f}"] for name, t in times.items()]
    table(f"add + relu, {n} f32 (torch on {torch.get_num_threads()} threads)", ["", "us", "GB/s", "vs gnomon 1t"], rows)


def threshold(repeat: int, threads: int) -> None:
    rows: list[list[str]] = []
    rng = np.random.default_rng(0)
    for shift in range(12, 19):
        n = 1 << shift
        compiled = compile_text(add_relu(n, threads))
        a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
        y = np.empty(n, np.float32)
        times = medians(
            {"1": compiled.bind([a, b], [y], threads=1), "n": compiled.bind([a, b], [y], threads=threads)}, repeat
        )
        rows.append([str(n), f"{times['1'] * 1e6:.1f}", f"{times['n'] * 1e6:.1f}", f"{times['1'] / times['n']:.2f}"])
    table("when splitting pays off: add + relu", ["elements", "1 thread us", f"{threads} threads us", "speedup"], rows)


def matmuls(repeat: int, threads: int) -> None:
    rows: list[list[str]] = []
    rng = np.random.default_rng(0)
    for n in (256, 1024):
        compiled = compile_text(matmul(n, threads))
        a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
        c = np.empty((n, n), np.float32)
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        default = torch.get_num_threads()

        def torch_mm(count: int) -> Callable[[], object]:
            def call() -> object:
                torch.set_num_threads(count)
                try:
                    return torch.mm(ta, tb, out=tc)
                finally:
                    torch.set_num_threads(default)

            return call

        times = medians(
            {
                "gnomon 1": compiled.bind([a, b], [c], threads=1),
                "gnomon n": compiled.bind([a, b], [c], threads=threads),
                "torch 1": torch_mm(1),
                "torch n": torch_mm(default),
            },
            repeat,
        )
        gflops = {name: 2 * n**3 / t / 1e9 for name, t in times.items()}
        rows.append([f"{n}^3", *(f"{gflops[k]:.1f}" for k in times), f"{gflops['gnomon n'] / gflops['torch n']:.2f}"])
    header = ["", "gnomon 1t", f"gnomon {threads}t", "torch.mm 1t", f"torch.mm {torch.get_num_threads()}t", "ratio"]
    table("matmul, GFLOP/s (ratio: gnomon / torch, all threads)", header, rows)


def transposes(repeat: int, threads: int) -> None:
    n = 2048
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), np.float32)
    y = np.empty((n, n), np.float32)
    untiled, tiled = compile_text(transpose(n, [], threads)), compile_text(transpose(n, [32, 32], threads))
    times = medians(
        {
            "untiled, 1 thread": untiled.bind([x], [y], threads=1),
            "tiled 32x32, 1 thread": tiled.bind([x], [y], threads=1),
            f"tiled 32x32, {threads} threads": tiled.bind([x], [y], threads=threads),
            "numpy x.T.copy()": lambda: x.T.copy(),
        },
        repeat,
    )
    rows = [[name, f"{t * 1e6:.0f}", f"{8 * n * n / t / 1e9:.1f}"] for name, t in times.items()]
    table(f"transpose {n}x{n} f32", ["", "us", "GB/s"], rows)


def row_kernels(repeat: int, threads: int) -> None:
    rng = np.random.default_rng(0)
    rows: list[list[str]] = []
    for name, shape, out, line, reference in (
        ("softmax", (256, 1000), (256, 1000), "graph.softmax %a0 {axis = 1 : i64}", lambda x: torch.softmax(x, -1)),
        (
            "reduce_sum",
            (1024, 4096),
            (1024,),
            "graph.reduce_sum %a0 {axes = array<i64: 1>, keepdims = false}",
            lambda x: torch.sum(x, -1),
        ),
    ):
        source, result = f"tensor<{shape[0]}x{shape[1]}xf32>", f"tensor<{'x'.join(map(str, out))}xf32>"
        text = kernel_func(name, [source], [f"%r = {line} : ({source}) -> {result}"], result, [], threads)
        compiled = compile_text(text)
        x = rng.standard_normal(shape, np.float32)
        y = np.empty(out, np.float32)
        tx = torch.from_numpy(x)
        times = medians(
            {
                "1": compiled.bind([x], [y], threads=1),
                "n": compiled.bind([x], [y], threads=threads),
                "torch": lambda tx=tx, reference=reference: reference(tx),
            },
            repeat,
        )
        rows.append([f"{name} {shape[0]}x{shape[1]}", *(f"{t * 1e6:.0f}" for t in times.values())])
    table("row kernels, us", ["", "gnomon 1t", f"gnomon {threads}t", f"torch {torch.get_num_threads()}t"], rows)


_CACHED = """
import json, sys, time
start = time.perf_counter()
from xdsl.parser import Parser
from gnomon.context import gnomon_context
from gnomon.runtime.codegen import compilation_count, compile_kernel
module = Parser(gnomon_context(), sys.stdin.read()).parse_module()
loaded = time.perf_counter()
kernels = [compile_kernel(op) for op in module.ops]
done = time.perf_counter()
print(json.dumps({"kernels": len(kernels), "seconds": done - loaded, "from_cache": all(k.from_cache for k in kernels),
                  "compilations": compilation_count(), "mlir_imported": "torch_mlir" in sys.modules}))
"""


def compiling(threads: int) -> None:
    texts = [add_relu(1 << 20, threads), matmul(256, threads), transpose(512, [32, 32], threads)]
    rows: list[list[str]] = []
    for text in texts:
        compiled = compile_text(text)
        rows.append(
            [compiled.name, "compiled" if not compiled.from_cache else "cached", f"{compiled.compile_seconds:.3f}"]
        )
    table("compile into an empty cache", ["kernel", "", "seconds"], rows)
    fresh = subprocess.run(
        [sys.executable, "-c", _CACHED],
        input="".join(texts),
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    )
    report = json.loads(fresh.stdout)
    print(
        f"\na fresh process with the same cache: {report['kernels']} kernels in {report['seconds'] * 1e3:.1f} ms, "
        f"from cache: {report['from_cache']}, compilations: {report['compilations']}, "
        f"imported MLIR: {report['mlir_imported']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GNOMON_CACHE_DIR"] = cache
        compiling(arguments.threads)
        elementwise(arguments.repeat, arguments.threads)
        threshold(arguments.repeat, arguments.threads)
        matmuls(arguments.repeat, arguments.threads)
        transposes(arguments.repeat, arguments.threads)
        row_kernels(arguments.repeat, arguments.threads)


if __name__ == "__main__":
    main()
