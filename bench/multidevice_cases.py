"""The cases of `bench/multidevice.py`: data-parallel training steps (each rank a replica, DDP's gradient all-reduce)
and, by name, what each rank builds and trains (importable by the spawned ranks, which rebuild the model from its
name and a seed, so every replica starts equal, as DDP requires).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from training_cases import Batch, classes, like_output

from gnomon.models import MLP, TransformerBlock
from gnomon.optimizers import SGD, Optimizer


@dataclass(frozen=True)
class DataParallelCase:
    family: str
    build: Callable[[], torch.nn.Module]
    batch: Callable[[torch.nn.Module, int], Batch]
    """A rank's batch of the given size (its share of the global batch)."""
    loss: str
    batches: tuple[int, ...]
    """Per-rank batch sizes measured."""


DATA_PARALLEL: dict[str, DataParallelCase] = {
    "mlp": DataParallelCase(
        "mlp", lambda: MLP(sizes=(1024, 2048, 2048, 1000)), classes(1000), "cross_entropy", (32, 128)),
    "mlp_small": DataParallelCase(
        "mlp", lambda: MLP(sizes=(256, 512, 512, 10)), classes(10), "cross_entropy", (64, 512)),
    "transformer": DataParallelCase(
        "transformer", lambda: TransformerBlock(d_model=256, heads=8, seq=128), like_output, "mse", (2, 8)),
    "transformer_wide": DataParallelCase(
        "transformer", lambda: TransformerBlock(d_model=384, heads=6, seq=64), like_output, "mse", (4, 16)),
}  # fmt: skip
"""Data-parallel training cases: model, loss and per-rank batch sizes."""

OPTIMIZER: Optimizer = SGD(lr=0.01, momentum=0.9)
"""What every case trains with (torch.optim.SGD with foreach, as `torch_optimizers` makes it)."""
