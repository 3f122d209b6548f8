"""Import time of the onnx package's light networks into verified graph IR.

Prints, per model: graph op count, the time of each stage (ONNX prep + torch-mlir import +
xDSL parse, then gnomon's passes + verify), the total, and ops per second. Library loading
(torch, torch-mlir, onnx, xDSL, gnomon) is timed once, separately, since every import pays it
once per process. Each model is imported `--repeat` times; the table shows the median.

    python bench/import_time.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

T0 = time.perf_counter()
import onnx  # noqa: E402
import torch  # noqa: E402, F401
import torch_mlir.ir  # noqa: E402, F401
import xdsl.parser  # noqa: E402, F401

from gnomon.bundled import light_models  # noqa: E402
from gnomon.dialects.graph.base import GraphOperation  # noqa: E402
from gnomon.dialects.graph.tensor import ConstantOp  # noqa: E402
from gnomon.errors import GnomonError  # noqa: E402
from gnomon.frontends import import_model  # noqa: E402
from gnomon.pipeline import to_graph  # noqa: E402

LOAD_SECONDS = time.perf_counter() - T0


def time_import(path: str) -> tuple[float, float, int]:
    start = time.perf_counter()
    imported = import_model(path)
    frontend = time.perf_counter() - start
    start = time.perf_counter()
    module = to_graph(imported)
    passes = time.perf_counter() - start
    ops = sum(1 for op in module.walk() if isinstance(op, GraphOperation) and not isinstance(op, ConstantOp))
    return frontend, passes, ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    light = light_models()
    print(f"library load (torch, torch-mlir, onnx {onnx.__version__}, xDSL, gnomon): {LOAD_SECONDS:.2f} s")
    print(f"{'model':<24}{'graph ops':>10}{'frontend s':>12}{'passes s':>10}{'total s':>9}{'ops/s':>8}{'ms/op':>7}")
    for path in light:
        name = path.stem.removeprefix("light_")
        try:
            time_import(str(path))  # warm caches (torch-mlir's pass registry, xDSL's op tables)
        except GnomonError as error:
            print(f"{name:<24}  failed: {str(error).splitlines()[0]}")
            continue
        runs = [time_import(str(path)) for _ in range(args.repeat)]
        frontend = statistics.median(r[0] for r in runs)
        passes = statistics.median(r[1] for r in runs)
        ops = runs[0][2]
        total = frontend + passes
        timings = f"{frontend:>12.3f}{passes:>10.3f}{total:>9.3f}"
        print(f"{name:<24}{ops:>10}{timings}{ops / total:>8.0f}{1000 * total / ops:>7.2f}")


if __name__ == "__main__":
    main()
