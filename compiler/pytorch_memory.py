"""PyTorch's measured peak memory for the work gnomon compiles, beside gnomon's plan (`gnomon memory`, benches).

The peak is that of PyTorch's memory profiler timeline on this CPU: parameters, optimizer state, inputs,
activations, gradients and temporaries, every allocation the run makes. The timeline is a private API of the
pinned torch (`torch.profiler._memory_profiler`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnomon.optimizers import SGD, Adam, Optimizer

__all__ = [
    "eager_inference_peak",
    "eager_training_peak",
    "eager_training_step",
    "peak_bytes",
    "quiet_stderr",
    "torch_optimizer",
    "torch_optimizers",
]


def peak_bytes(run: Callable[[], Any]) -> int:
    """The most bytes PyTorch holds at once during `run()`, by its memory profiler."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline  # pyright: ignore[reportPrivateImportUsage]

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                                  with_stack=True) as prof:  # fmt: skip
        run()
    timeline = MemoryProfileTimeline(prof._memory_profile())  # pyright: ignore[reportPrivateUsage]
    _, sizes = timeline._coalesce_timeline(torch.device("cpu"))  # pyright: ignore[reportPrivateUsage]
    return max((sum(row) for row in sizes), default=0)


@contextlib.contextmanager
def quiet_stderr() -> Generator[None]:
    """The process's stderr (its file descriptor, which C++ writes to) sent nowhere: the profiler's C++ side logs its
    start and stop, and a warning about memory allocated before it, there; not for a user of `gnomon memory`, nor a
    bench's table. Python errors still raise."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def torch_optimizer(optimizer: Optimizer, parameters: Any) -> torch.optim.Optimizer:
    """torch.optim's form of a gnomon optimizer, in its `foreach` implementation."""
    if isinstance(optimizer, SGD):
        o = optimizer
        return torch.optim.SGD(parameters, lr=o.lr, momentum=o.momentum, dampening=o.dampening,
                               weight_decay=o.weight_decay, nesterov=o.nesterov, foreach=True)  # fmt: skip
    maker = torch.optim.AdamW if optimizer.decoupled else torch.optim.Adam
    return maker(parameters, lr=optimizer.lr, betas=optimizer.betas, eps=optimizer.eps,
                 weight_decay=optimizer.weight_decay, foreach=True)  # fmt: skip


def torch_optimizers(optimizer: Optimizer, module: torch.nn.Module) -> list[torch.optim.Optimizer]:
    """What a PyTorch user trains `module` with for a gnomon optimizer: its torch.optim form, or, for
    `Adam(sparse=True)`, the embedding tables made `sparse=True` and trained by SparseAdam beside Adam for the rest
    (`module` is changed so)."""
    if not (isinstance(optimizer, Adam) and optimizer.sparse):
        return [torch_optimizer(optimizer, module.parameters())]
    tables: list[torch.Tensor] = []
    for layer in module.modules():
        if isinstance(layer, torch.nn.EmbeddingBag | torch.nn.Embedding):
            layer.sparse = True
            tables.append(layer.weight)
    rest = [p for p in module.parameters() if all(p is not t for t in tables)]
    o = optimizer
    return [
        torch.optim.SparseAdam(tables, lr=o.lr, betas=o.betas, eps=o.eps),
        torch.optim.Adam(rest, lr=o.lr, betas=o.betas, eps=o.eps, foreach=True),
    ]


def eager_training_step(module: torch.nn.Module, batch: Sequence[Any], optimizer: Optimizer) -> Callable[[], Any]:
    """One eager training step of `module` (which returns its loss) as PyTorch users write it: zero_grad, the loss,
    backward, the optimizer's step (`torch_optimizers`)."""
    tensors = [torch.as_tensor(x) for x in batch]
    torch_opts = torch_optimizers(optimizer, module)

    def step() -> Any:
        for torch_opt in torch_opts:
            torch_opt.zero_grad()
        loss = module(*tensors)
        loss.backward()
        for torch_opt in torch_opts:
            torch_opt.step()
        return loss

    return step


def eager_training_peak(module: torch.nn.Module, batch: Sequence[Any], optimizer: Optimizer) -> int:
    """PyTorch's peak over one eager training step of a copy of `module`, after a first step has created the
    optimizer's state (as in every step but the first)."""
    step = eager_training_step(copy.deepcopy(module).train(), batch, optimizer)
    step()
    return peak_bytes(step)


def eager_inference_peak(model: Path, inputs: Sequence[np.ndarray]) -> int:
    """PyTorch's peak over one eager forward pass of a TorchScript or torch.export file, without autograd."""
    from gnomon.frontends.torch import exported_program, is_exported_archive

    if model.suffix.lower() == ".pt2" or is_exported_archive(model):
        module: Any = exported_program(model).module()
    else:
        module = torch.jit.load(str(model), map_location="cpu")
    tensors = [torch.from_numpy(np.ascontiguousarray(x)) for x in inputs]
    with torch.no_grad():
        module(*tensors)  # the first run of a TorchScript module profiles and optimizes its graph

        def forward() -> None:
            module(*tensors)

        return peak_bytes(forward)
