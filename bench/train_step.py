"""One training step (forward, backward, optimizer), gnomon against PyTorch eager and torch.compile, side by side.

    python bench/train_step.py [--models mlp,cnn,...] [--repeat 10] [--no-compile]

Each model of `gnomon.models` is trained with a loss attached by `gnomon.with_loss` and SGD with momentum, at two
batch sizes. gnomon runs the step compiled by `gnomon.compile(..., train=gnomon.SGD(...))`; PyTorch eager runs
zero_grad, the loss, backward and `torch.optim.SGD(foreach=True).step()`; torch.compile the same with the
module compiled (where it compiles; its compile time is not counted). The systems take turns, each on its own copy
of the model, so every step trains from where that system left off. Each cell is the median of `repeat` turns of
a few back-to-back steps, in ms; the table also gives gnomon's time over eager's and the geomean over all rows
(issue 17's target: at most 1.0). Before each row, the step's memory: gnomon's (parameters, updated buffers,
optimizer state, batch and arena) with the arena against its liveness lower bound, and PyTorch eager's peak as its
memory profiler counts it. Run it alone on the machine: never beside the tests or another benchmark.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))

from latency import Case, geomean, measure

import gnomon
from gnomon.models import DLRM, MLP, LSTMClassifier, ResNet18, SmallCNN, TransformerBlock
from gnomon.pytorch_memory import eager_training_step, peak_bytes

LR, MOMENTUM = 0.01, 0.9

Batch = tuple[torch.Tensor, ...]


Maker = Callable[[torch.nn.Module, int], Batch]


def _models() -> dict[str, tuple[Callable[[], torch.nn.Module], Maker, str, tuple[int, int]]]:
    """name -> (model, batch of inputs and target, loss, two batch sizes)."""

    def classes(count: int) -> Maker:
        def batch(m: torch.nn.Module, size: int) -> Batch:
            return (*m.example_inputs(size), torch.randint(0, count, (size,)))  # type: ignore[operator]

        return batch

    def like_output(m: torch.nn.Module, size: int) -> Batch:
        inputs = m.example_inputs(size)  # type: ignore[operator]
        with torch.no_grad():
            return (*inputs, torch.randn_like(m(*inputs)))

    def clicks(m: torch.nn.Module, size: int) -> Batch:
        return (*m.example_inputs(size), torch.rand(size, 1))  # type: ignore[operator]

    return {
        "mlp": (lambda: MLP(sizes=(1024, 2048, 2048, 1000)), classes(1000), "cross_entropy", (32, 128)),
        "cnn": (SmallCNN, classes(10), "cross_entropy", (16, 64)),
        "transformer": (lambda: TransformerBlock(d_model=256, heads=8, seq=128), like_output, "mse", (2, 8)),
        "dlrm": (lambda: DLRM(dense_features=13, tables=8, rows=100_000, dim=64, pooling=20), clicks,
                 "bce_with_logits", (128, 512)),
        "resnet18": (lambda: ResNet18(width=32, classes=100, image=64), classes(100), "cross_entropy", (4, 16)),
        "lstm": (lambda: LSTMClassifier(features=32, hidden=128, layers=2, classes=10, steps=32), classes(10),
                 "cross_entropy", (16, 64)),
    }  # fmt: skip


def _case(name: str, build: Callable[[], torch.nn.Module], make_batch: Maker,
          loss: str, size: int, with_compile: bool) -> Case:  # fmt: skip
    model = build().train()
    batch = make_batch(model, size)
    arrays = [x.numpy() for x in batch]
    optimizer = gnomon.SGD(LR, MOMENTUM)
    trained = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), loss), batch, train=optimizer)
    systems: dict[str, Callable[[], Any]] = {
        "gnomon": lambda: trained.step(*arrays),
        "eager": eager_training_step(gnomon.with_loss(copy.deepcopy(model), loss).train(), batch, optimizer),
    }
    if with_compile:
        # Every model's loss wrapper shares one forward: without a reset, dynamo's cache for it fills up over the
        # models and the later ones silently run eager (recompile_limit).
        torch._dynamo.reset()
        compiled_model = torch.compile(gnomon.with_loss(copy.deepcopy(model), loss).train())
        compiled = eager_training_step(compiled_model, batch, optimizer)  # pyright: ignore[reportArgumentType]
        try:
            compiled()  # compiles; not timed
            systems["compile"] = compiled
        except Exception as error:  # torch.compile fails in many ways; the table says where
            print(f"{name} batch {size}: torch.compile failed: {str(error).splitlines()[0][:100]}")
    memory = trained.memory()
    print(
        f"{name} b{size} memory: gnomon {memory.total / 2**20:.2f} MiB (arena {memory.arena / 2**20:.2f} MiB,"
        f" {memory.arena / max(memory.arena_lower_bound, 1):.3f}x its lower bound), PyTorch eager's peak"
        f" {peak_bytes(systems['eager']) / 2**20:.2f} MiB",
        flush=True,
    )
    return Case(f"{name} b{size}", arrays, systems)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset of: " + ", ".join(_models()))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    args = parser.parse_args()
    models = _models()
    names = args.models.split(",") if args.models else list(models)
    started = time.perf_counter()
    print(f"threads: {os.cpu_count()}; SGD(lr={LR}, momentum={MOMENTUM}); median of {args.repeat} turns; ms per step")
    print(f"{'model':<18} {'gnomon':>9} {'eager':>9} {'compile':>9} {'g/eager':>8} {'g/compile':>10}")
    ratios: list[float] = []
    for name in names:
        build, make_batch, loss, sizes = models[name]
        for size in sizes:
            case = _case(name, build, make_batch, loss, size, not args.no_compile)
            times = measure(case, args.repeat)
            g, e, c = times["gnomon"], times["eager"], times.get("compile", math.nan)
            ratios.append(g / e)
            print(f"{case.name:<18} {g:>9.3f} {e:>9.3f} {c:>9.3f} {g / e:>8.2f} {g / c:>10.2f}", flush=True)
    print(f"geomean gnomon/eager: {geomean(ratios):.2f} over {len(ratios)} rows; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
