"""The training suite of `bench/predict_accuracy.py --train`: training steps predicted against measured.

DLRM-style models over the ranges the DLRM benchmark configurations span (Criteo Kaggle's 26 tables of one lookup
each and 512-256 MLPs, MLPerf-style multi-hot tables, a few tables of half a million rows, 128-wide embeddings;
batch 128 to 2048), gnomon's CNN, its transformer block and a 2-layer LSTM, each at two batch sizes, trained with
SGD with momentum (or `--optimizer adam`). gnomon runs the step `gnomon.compile(..., train=...)` compiles; PyTorch
eager runs `zero_grad`, the loss, `backward` and torch.optim's `foreach` step
(`gnomon.pytorch_memory.eager_training_step`), predicted by `gnomon.cost.eager_training` from the same step's
graph. The cost model was never tuned on these.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import gnomon
from gnomon.cost.devices import Device
from gnomon.cost.eager_training import eager_training_report
from gnomon.cost.report import Report
from gnomon.models import DLRM, LSTMClassifier, SmallCNN, TransformerBlock
from gnomon.optimizers import Optimizer
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


def _classes(count: int) -> Callable[[torch.nn.Module, int], Batch]:
    def make(model: torch.nn.Module, size: int) -> Batch:
        return (*getattr(model, "example_inputs")(size), torch.randint(0, count, (size,)))

    return make


def _like_output(model: torch.nn.Module, size: int) -> Batch:
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
    "cnn": TrainingEntry("cnn", SmallCNN, _classes(10), "cross_entropy", (16, 64)),
    "transformer": TrainingEntry(
        "transformer", lambda: TransformerBlock(d_model=256, heads=8, seq=128), _like_output, "mse", (2, 8)),
    "lstm": TrainingEntry(
        "lstm", lambda: LSTMClassifier(features=32, hidden=128, layers=2, classes=10, steps=32), _classes(10),
        "cross_entropy", (16, 64)),
}  # fmt: skip


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
    eager: Callable[[], Any]
    eager_prediction: Callable[[Device], Report]


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

    eager = eager_training_step(gnomon.with_loss(copy.deepcopy(model), entry.loss).train(), batch, optimizer)
    return TrainingCase(name, entry.family, size, StepRunner(step), [x.numpy() for x in batch], eager, predict)


def training_cases(wanted: set[str] | None, optimizer: Optimizer) -> list[TrainingCase]:
    return [
        training_case(name, entry, size, optimizer)
        for name, entry in TRAINING_SET.items()
        if wanted is None or name in wanted
        for size in entry.batches
    ]
