"""The data-parallel step model: DDP's buckets from the gradients' ready order, their all-reduces overlapped with the
backward pass where the collectives have engines of their own, added to the step where they do not."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

import gnomon
from gnomon.analysis import eager_training_graph
from gnomon.cost.collectives import collective_s
from gnomon.cost.data_parallel import BUCKET_BYTES, FIRST_BUCKET_BYTES, DataParallelStep, data_parallel_step
from gnomon.cost.topology import System, load_system
from gnomon.models import MLP
from gnomon.optimizers import SGD

SIZES = (256, 1024, 1024, 512, 10)
"""Gradients of 1 KiB (biases) to 4 MiB (the 1024 x 1024 weight): more than one bucket."""


def predicted(system: System, ranks: int, overlapped: bool | None = None) -> tuple[DataParallelStep, dict[str, int]]:
    torch.manual_seed(0)
    model = MLP(sizes=SIZES)
    inputs = (*model.example_inputs(16), torch.randint(0, 10, (16,)))
    wrapped = gnomon.with_loss(copy.deepcopy(model), "cross_entropy")
    graph = eager_training_graph(wrapped, inputs, None, None, SGD(lr=0.01, momentum=0.9))
    step = data_parallel_step(graph.module, graph.report(system.device), graph.parameters, system, ranks, overlapped)
    return step, {name: p.numel() * p.element_size() for name, p in model.named_parameters()}


def test_buckets_follow_the_backward_pass_under_ddps_caps() -> None:
    step, sizes = predicted(load_system("8xh100"), 8)
    names = [name for bucket in step.buckets for name in bucket.parameters]
    assert sorted(names) == sorted(sizes)  # each gradient in one bucket
    assert names[0].startswith("layers.6")  # the last layer's gradients are ready first
    assert names[-1].startswith("layers.0")
    for index, bucket in enumerate(step.buckets):
        assert bucket.bytes == sum(sizes[name] for name in bucket.parameters)
        cap = FIRST_BUCKET_BYTES if index == 0 else BUCKET_BYTES
        if index < len(step.buckets) - 1:  # closed by the gradient that reached its cap
            assert bucket.bytes >= cap
            assert bucket.bytes - sizes[bucket.parameters[-1]] < cap
    ready = [bucket.ready_s for bucket in step.buckets]
    assert ready == sorted(ready)
    assert all(
        b.all_reduce_s == collective_s(load_system("8xh100"), "all_reduce", b.bytes).seconds for b in step.buckets
    )


def test_on_gpus_the_all_reduces_overlap_the_backward_pass() -> None:
    step, _ = predicted(load_system("8xh100"), 8)
    assert step.overlapped
    assert step.sync_s == load_system("8xh100").sync_s  # once: the optimizer waits for the last bucket
    extra = step.copies_s + step.sync_s
    assert step.compute_s + extra <= step.step_s <= step.compute_s + extra + step.all_reduce_s
    # A bucket starts when its gradients are ready and the one before it has started and finished.
    for before, after in zip(step.buckets, step.buckets[1:], strict=False):
        assert after.start_s >= max(after.ready_s, before.start_s + before.all_reduce_s)


def test_without_cores_to_spare_the_all_reduces_add_to_the_step() -> None:
    system = load_system("8xh100")
    step, _ = predicted(system, 8, overlapped=False)
    assert step.sync_s == system.sync_s  # once: where the reducer waits for the asynchronous all-reduces
    assert step.step_s == pytest.approx(step.compute_s + step.all_reduce_s + step.sync_s + step.copies_s)
    assert step.exposed_s == pytest.approx(step.all_reduce_s)


def test_one_rank_communicates_nothing() -> None:
    step, _ = predicted(load_system("8xh100"), 1)
    assert (step.all_reduce_s, step.copies_s, step.sync_s) == (0.0, 0.0, 0.0)
    assert step.step_s == pytest.approx(step.compute_s)


def test_analyze_predicts_a_models_ddp_step_on_a_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gnomon import cli

    torch.manual_seed(0)
    model = MLP(sizes=SIZES)
    inputs = (*model.example_inputs(16), torch.randint(0, 10, (16,)))
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(gnomon.with_loss(model, "cross_entropy"), inputs), path)
    assert cli.main(["analyze", "--train", str(path), "--momentum", "0.9", "--devices", "4xa100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "data-parallel training step (PyTorch DDP) on 4 devices of 4xa100: datasheet figures, not measured; "
        "predicted times are analytical"
    )
    step, _ = predicted(load_system("4xa100"), 4)  # the same model and batch through the Python API
    assert out[-len(step.buckets) - 1] == f"  step                      {step.step_s * 1e3:10.3f} ms"
    assert cli.main(["analyze", str(path), "--devices", "4xa100"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gnomon: error: --devices predicts a model's data-parallel training step: add --train and give the model"
    )
