"""The training suite of `bench/predict_accuracy.py --train`: training steps predicted against measured.

DLRM-style models over the ranges the DLRM benchmark configurations span (Criteo Kaggle's 26 tables of one lookup
each and 512-256 MLPs, MLPerf-style multi-hot tables, a few tables of half a million rows, 128-wide embeddings;
batch 128 to 2048), gnomon's CNN, its transformer block and a 2-layer LSTM, each at two batch sizes, trained with
SGD with momentum (or `--optimizer adam`). gnomon runs the step `gnomon.compile(..., train=...)` compiles; PyTorch
eager runs `zero_grad`, the loss, `backward` and torch.optim's `foreach` step
(`gnomon.pytorch_memory.eager_training_step`) in a process of its own (`EagerProcess`), predicted by
`gnomon.cost.eager_training` from the same step's graph. The torch-eager training model was refined against these;
`TRAINING_VALIDATION` holds models it never was (a DLRM whose tables exceed glibc's mmap threshold, one with wide
MLPs, a ResNet-18, an MLP, a wider transformer block, a one-layer wide LSTM).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import gnomon
from gnomon.cost.devices import Device
from gnomon.cost.eager_training import eager_training_report
from gnomon.cost.report import Report
from gnomon.models import DLRM, MLP, LSTMClassifier, ResNet18, SmallCNN, TransformerBlock
from gnomon.optimizers import Optimizer, optimizer_spec
from gnomon.pytorch_memory import eager_training_step
from gnomon.training import TrainingExecutable, training_graph

Batch = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class TrainingEntry:
    family: str
    build: Callable[[], torch.nn.Module]
    batch: Callable[[torch.nn.Module, int], Batch]
    loss: str
    batches: tuple[int, int]


def _clicks(model: torch.nn.Module, size: int) -> Batch:
    return (*getattr(model, "example_inputs")(size), torch.rand(size, 1))


def classes(count: int) -> Callable[[torch.nn.Module, int], Batch]:
    def make(model: torch.nn.Module, size: int) -> Batch:
        return (*getattr(model, "example_inputs")(size), torch.randint(0, count, (size,)))

    return make


def like_output(model: torch.nn.Module, size: int) -> Batch:
    inputs = getattr(model, "example_inputs")(size)
    with torch.no_grad():
        return (*inputs, torch.randn_like(model(*inputs)))


TRAINING_SET: dict[str, TrainingEntry] = {
    "dlrm_kaggle": TrainingEntry(
        "dlrm", lambda: DLRM(13, tables=26, rows=10_000, dim=16, pooling=1, bottom=(512, 256), top=(512, 256)),
        _clicks, "bce_with_logits", (128, 2048)),
    "dlrm_multihot": TrainingEntry(
        "dlrm", lambda: DLRM(13, tables=8, rows=100_000, dim=64, pooling=20), _clicks, "bce_with_logits", (128, 512)),
    "dlrm_large_tables": TrainingEntry(
        "dlrm", lambda: DLRM(13, tables=4, rows=500_000, dim=32, pooling=10, bottom=(256,), top=(256, 128)),
        _clicks, "bce_with_logits", (256, 1024)),
    "dlrm_dim128": TrainingEntry(
        "dlrm", lambda: DLRM(13, tables=16, rows=50_000, dim=128, pooling=5, bottom=(512, 256), top=(1024, 512, 256)),
        _clicks, "bce_with_logits", (512, 2048)),
    "cnn": TrainingEntry("cnn", SmallCNN, classes(10), "cross_entropy", (16, 64)),
    "transformer": TrainingEntry(
        "transformer", lambda: TransformerBlock(d_model=256, heads=8, seq=128), like_output, "mse", (2, 8)),
    "lstm": TrainingEntry(
        "lstm", lambda: LSTMClassifier(features=32, hidden=128, layers=2, classes=10, steps=32), classes(10),
        "cross_entropy", (16, 64)),
}  # fmt: skip
"""The training suite the torch-eager training model was refined against (its foreach passes, fresh pages, GEMM
packing: session 11)."""

TRAINING_VALIDATION: dict[str, TrainingEntry] = {
    "dlrm_mlperf": TrainingEntry(
        "dlrm", lambda: DLRM(13, tables=12, rows=200_000, dim=48, pooling=8, bottom=(384, 192), top=(768, 384)),
        _clicks, "bce_with_logits", (256, 1024)),
    "dlrm_wide_mlp": TrainingEntry(
        "dlrm", lambda: DLRM(13, tables=8, rows=20_000, dim=32, pooling=2, bottom=(1024, 512), top=(1024, 1024, 512)),
        _clicks, "bce_with_logits", (512, 2048)),
    "resnet18": TrainingEntry(
        "cnn", lambda: ResNet18(width=32, classes=100, image=64), classes(100), "cross_entropy", (4, 16)),
    "mlp": TrainingEntry(
        "mlp", lambda: MLP(sizes=(1024, 2048, 2048, 1000)), classes(1000), "cross_entropy", (32, 128)),
    "transformer_wide": TrainingEntry(
        "transformer", lambda: TransformerBlock(d_model=384, heads=6, seq=64), like_output, "mse", (4, 16)),
    "lstm_wide": TrainingEntry(
        "lstm", lambda: LSTMClassifier(features=64, hidden=256, layers=1, classes=20, steps=16), classes(20),
        "cross_entropy", (8, 32)),
}  # fmt: skip
"""Held out: models the training prediction is judged on and never refined against (`--train --validate`)."""


class EagerProcess:
    """PyTorch eager's training step of one case in a process of its own (`bench/eager_step_worker.py`), as a
    training script runs it: whether a large allocation reuses freed heap memory or maps fresh pages that fault in
    on first touch depends on what the process allocated before, so a step measured here, after other models, is
    not what its users see (a DLRM's 64 MiB embedding gradients: 54-65 ms a step here, 110-127 ms in its own
    process)."""

    def __init__(self, name: str, size: int, optimizer: Optimizer):
        spec = optimizer_spec(optimizer)
        worker = Path(__file__).with_name("eager_step_worker.py")
        command = [sys.executable, str(worker), name, str(size), spec, str(torch.get_num_threads())]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, request: str) -> Any:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(request + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the eager step's process exited ({self.process.wait()}) on {request!r}")
        return json.loads(answer)

    def __enter__(self) -> EagerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


class StepRunner:
    """A training step with the interface the bench measures an `Executable` by: `run(inputs, profile=)`,
    `profile()`, `module`."""

    def __init__(self, step: TrainingExecutable):
        self.step = step
        self.module = step.executable.module

    def run(self, inputs: list[np.ndarray], profile: bool = False) -> float:
        return self.step.step(*inputs, profile=profile)

    def profile(self) -> Any:
        return self.step.profile()


@dataclass
class TrainingCase:
    name: str
    family: str
    batch: int
    runner: StepRunner
    inputs: list[np.ndarray]
    eager_prediction: Callable[[Device], Report]
    timer: Callable[[int, float], list[float]]
    """Eager's step medians (`runs`, `budget_s`), measured in its own process."""
    profile: Callable[[], tuple[int, float]]
    """Eager's top-level ATen ops and their time, profiled there."""


def training_case(name: str, entry: TrainingEntry, size: int, optimizer: Optimizer) -> TrainingCase:
    model = entry.build().train()
    batch = entry.batch(model, size)
    step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), entry.loss), batch, train=optimizer)
    graph, training = training_graph(gnomon.with_loss(copy.deepcopy(model), entry.loss), batch, optimizer, source=name)
    values = [training.values[n] for n in training.parameters]
    parameters = (sum(v.size for v in values), sum(v.nbytes for v in values))
    trained = len(training.parameters)

    def predict(device: Device) -> Report:
        return eager_training_report(graph, device, name, optimizer, trained, parameters)

    def timer(runs: int, budget_s: float) -> list[float]:
        with EagerProcess(name, size, optimizer) as eager:
            return eager.ask(f"time {runs} {budget_s}")

    def profile() -> tuple[int, float]:
        with EagerProcess(name, size, optimizer) as eager:
            count, seconds = eager.ask("profile")
            return count, seconds

    runner = StepRunner(step)
    return TrainingCase(name, entry.family, size, runner, [x.numpy() for x in batch], predict, timer, profile)


def eager_step(name: str, size: int, optimizer: Optimizer) -> Callable[[], Any]:
    """PyTorch eager's training step of a case (`eager_training_step`) on a batch of `size`."""
    entry = {**TRAINING_SET, **TRAINING_VALIDATION}[name]
    model = entry.build().train()
    return eager_training_step(gnomon.with_loss(model, entry.loss).train(), entry.batch(model, size), optimizer)


def training_cases(
    wanted: set[str] | None, optimizer: Optimizer, entries: dict[str, TrainingEntry]
) -> list[TrainingCase]:
    return [
        training_case(name, entry, size, optimizer)
        for name, entry in entries.items()
        if wanted is None or name in wanted
        for size in entry.batches
    ]
