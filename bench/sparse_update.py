"""DLRM training: gnomon's sparse table updates against PyTorch's sparse and dense gradients.

    python bench/sparse_update.py [--repeat 10] [--optimizer sgd|adam]

gnomon compiles the step with released gradients (`keep_gradients=False`), so each embedding table is updated on its
looked-up rows alone, in place: plain SGD's update (`graph.embedding_bag_update`), or with `--optimizer adam`
torch.optim.SparseAdam's (`gnomon.Adam(sparse=True)`, `graph.embedding_bag_adam_update`). PyTorch eager runs
zero_grad, forward, backward and the optimizer's step with the tables' `sparse=True` (sparse gradients, as DLRM
trains; SGD, or SparseAdam for the tables beside Adam for the rest) and with dense ones (the default; SGD, or Adam
for everything, which moves every row: another update than SparseAdam's after the first step). The systems take
turns in one process; each cell is the median of `repeat` turns, in ms, and the memory line gives gnomon's step
memory beside PyTorch's peaks. Before the table, the three are checked to take the same first step (relative L2 of
the tables after it). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from latency import Case, measure

import gnomon
from gnomon.models import DLRM
from gnomon.optimizers import optimizer_label
from gnomon.pytorch_memory import eager_training_step, peak_bytes

LR = 0.05
CONFIGS = {
    "8 x 100k x 64, pooling 20": (lambda: DLRM(13, tables=8, rows=100_000, dim=64, pooling=20), (128, 512)),
    "4 x 500k x 32, pooling 10": (lambda: DLRM(13, tables=4, rows=500_000, dim=32, pooling=10), (256, 1024)),
}


def _sparse(model: torch.nn.Module) -> torch.nn.Module:
    for module in model.modules():
        if isinstance(module, torch.nn.EmbeddingBag):
            module.sparse = True
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    args = parser.parse_args()
    adam = args.optimizer == "adam"
    optimizer = gnomon.Adam(lr=LR / 10, sparse=True) if adam else gnomon.SGD(lr=LR)
    dense_optimizer = gnomon.Adam(lr=LR / 10) if adam else optimizer
    print(f"{optimizer_label(optimizer)}; median of {args.repeat} turns; ms per step")
    print(f"{'DLRM':<28} {'batch':>6} {'gnomon':>9} {'sparse':>9} {'dense':>9} {'g/sparse':>9} {'g/dense':>8}")
    for name, (build, sizes) in CONFIGS.items():
        for size in sizes:
            model = build().train()
            batch = (*model.example_inputs(size), torch.rand(size, 1))
            arrays = [x.numpy() for x in batch]
            step = gnomon.compile(gnomon.with_loss(copy.deepcopy(model), "bce_with_logits"), batch, train=optimizer,
                                  keep_gradients=False)  # fmt: skip
            sparse_model = gnomon.with_loss(_sparse(copy.deepcopy(model)), "bce_with_logits").train()
            dense_model = gnomon.with_loss(copy.deepcopy(model), "bce_with_logits").train()
            systems = {
                "gnomon": lambda s=step, a=arrays: s.step(*a),
                "sparse": eager_training_step(sparse_model, batch, optimizer),
                "dense": eager_training_step(dense_model, batch, dense_optimizer),
            }
            for call in systems.values():
                call()
            table = "model.embeddings.0.weight"
            reference = sparse_model.state_dict()[table].numpy()
            errors = [
                np.linalg.norm(values - reference) / np.linalg.norm(reference)
                for values in (step.state_dict()[table.removeprefix("model.")], dense_model.state_dict()[table].numpy())
            ]
            memory = step.memory()
            print(
                f"{name} b{size}: after one step, table 0 differs from torch sparse's by {errors[0]:.1e} (gnomon), "
                f"{errors[1]:.1e} (dense); memory: gnomon {memory.total / 2**20:.1f} MiB (arena "
                f"{memory.arena / 2**20:.2f}), PyTorch's peak sparse {peak_bytes(systems['sparse']) / 2**20:.1f}, "
                f"dense {peak_bytes(systems['dense']) / 2**20:.1f}",
                flush=True,
            )
            times = measure(Case(f"{name} b{size}", arrays, systems), args.repeat)
            g, s, d = times["gnomon"], times["sparse"], times["dense"]
            print(f"{name:<28} {size:>6} {g:>9.3f} {s:>9.3f} {d:>9.3f} {g / s:>9.2f} {g / d:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
