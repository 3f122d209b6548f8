"""`gnomon analyze --train MODEL --devices SYSTEM`: a data-parallel training step predicted on a system of devices,
as PyTorch's DistributedDataParallel runs it (`gnomon.cost.data_parallel`), each rank on its share of the batch (the
example inputs are one rank's) as eager trains it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gnomon.cost.data_parallel import DataParallelStep, data_parallel_step
from gnomon.cost.topology import System, load_system
from gnomon.errors import GnomonError

__all__ = ["analyze_data_parallel", "data_parallel_command", "render"]


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
    from gnomon.analysis import eager_training_graph

    system = load_system(devices)
    graph = eager_training_graph(model, example_inputs, input_shapes, loss, train)
    report = graph.report(system.device)
    return data_parallel_step(graph.module, report, graph.parameters, system, ranks), system


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


def data_parallel_command(
    model: Path, devices: str, train: object, loss: str | None, input_shapes: Mapping[str, Sequence[int]] | None
) -> None:
    """`gnomon analyze --train MODEL --devices SYSTEM`: the step printed; `train` None when --train was not given."""
    if train is None or model.suffix == ".mlir":
        raise GnomonError("--devices predicts a model's data-parallel training step: add --train and give the model")
    step, system = analyze_data_parallel(model, devices=devices, train=train, loss=loss, input_shapes=input_shapes)
    print(render(step, system))
