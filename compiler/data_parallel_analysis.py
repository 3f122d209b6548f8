"""`gnomon analyze --train MODEL --devices SYSTEM`: a data-parallel training step predicted on a system of devices,
as PyTorch's DistributedDataParallel runs it (`gnomon.cost.data_parallel`), each rank on its share of the batch (the
example inputs are one rank's) as eager trains it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gnomon.cost.data_parallel import DataParallelStep, data_parallel_step
from gnomon.cost.eager_training import eager_training_report
from gnomon.cost.topology import System, load_system

__all__ = ["analyze_data_parallel", "render"]


def analyze_data_parallel(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    devices: str = "8xh100",
    *,
    ranks: int | None = None,
    train: object = True,
    loss: str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> tuple[DataParallelStep, System]:
    """The DDP step of `model` (what `gnomon.analyze(..., train=)` takes) on `ranks` of `devices`' devices (a system
    `gnomon.cost.topology.load_system` knows; default: all of them), and the system."""
    from gnomon.frontends.torch_training import training_model_from_file, with_loss
    from gnomon.optimizers import optimizer_of
    from gnomon.training import training_graph

    system = load_system(devices)
    name = str(model) if isinstance(model, str | Path) else type(model).__name__
    if isinstance(model, str | Path):
        model, example_inputs = training_model_from_file(Path(model), input_shapes, loss)
    elif loss is not None:
        model = with_loss(model, loss)
    optimizer = optimizer_of(train)
    module, training = training_graph(model, example_inputs, optimizer, source=name)
    values = [training.values[n] for n in training.parameters]
    parameters = (sum(v.size for v in values), sum(v.nbytes for v in values))
    report = eager_training_report(module, system.device, name, optimizer, len(values), parameters)
    return data_parallel_step(module, report, training.parameters, system, ranks), system


def render(step: DataParallelStep, system: System) -> str:
    lines = [
        f"data-parallel training step (PyTorch DDP) on {step.ranks} devices of {system.provenance}",
        f"  one rank's step (eager)   {step.compute_s * 1e3:10.3f} ms",
        f"  all-reduces               {step.all_reduce_s * 1e3:10.3f} ms in {len(step.buckets)} buckets"
        f" ({'overlapped with backward' if step.overlapped else 'added: no core or engine to spare'})",
        f"    exposed                 {step.exposed_s * 1e3:10.3f} ms",
        f"  ranks' sync               {step.sync_s * 1e3:10.3f} ms",
        f"  bucket copies             {step.copies_s * 1e3:10.3f} ms",
        f"  step                      {step.step_s * 1e3:10.3f} ms",
    ]
    for index, bucket in enumerate(step.buckets):
        lines.append(
            f"    bucket {index}: {bucket.bytes / 2**20:8.2f} MiB, {len(bucket.parameters)} parameters, ready at"
            f" {bucket.ready_s * 1e3:.3f} ms, all-reduce {bucket.all_reduce_s * 1e3:.3f} ms"
        )
    return "\n".join(lines)
