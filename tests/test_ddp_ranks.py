"""`bench/ddp_ranks.py`: timing DDP training steps on local gloo ranks against the same step without DDP.

The measured run checks the harness's contract (positive times, a DDP step no cheaper than its compute alone, the
all-reduced bytes and buckets covering the model's parameters), not how fast gloo is. The process handling is
`run_ranks`'s, tested in test_distributed_ranks.py."""

from __future__ import annotations

import multiprocessing
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import ddp_ranks  # pyright: ignore[reportMissingImports]: bench/ is a folder of scripts, put on sys.path above
from ddp_ranks import DataParallelMeasureError, measure_data_parallel  # pyright: ignore[reportMissingImports]
from multidevice_cases import DATA_PARALLEL  # pyright: ignore[reportMissingImports]


def test_mlp_small_ddp_step_and_buckets() -> None:
    timing = measure_data_parallel("mlp_small", 64, steps=3, repeats=2)
    assert (timing.case, timing.ranks, timing.batch) == ("mlp_small", 2, 64)
    assert timing.ddp_step_s > 0
    assert timing.local_step_s > 0
    assert timing.ddp_spread >= 0
    assert timing.local_spread >= 0
    assert timing.ddp_step_s >= 0.8 * timing.local_step_s  # the same compute plus an all-reduce
    parameters = dict(DATA_PARALLEL["mlp_small"].build().named_parameters())
    assert timing.gradient_bytes == sum(p.numel() * p.element_size() for p in parameters.values())
    if timing.buckets:  # torch exposes the reducer's buckets
        names = [name for bucket in timing.buckets for name in bucket]
        assert all(timing.buckets)
        assert sorted(names) == sorted(parameters)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"case": "nosuch"}, "data-parallel measurement: unknown case 'nosuch' (known: mlp, mlp_small, "),
        ({"ranks": 1}, "data-parallel measurement: ranks must be at least 2, got 1"),
        ({"batch": 0}, "data-parallel measurement: batch must be at least 1, got 0"),
        ({"steps": 0}, "data-parallel measurement: steps must be at least 1, got 0"),
        ({"warmup": 1}, "data-parallel measurement: warmup must be at least 2 (DDP rebuilds its buckets in step 2)"),
        ({"timeout_s": 0}, "data-parallel measurement: timeout_s must be positive, got 0"),
    ],
)
def test_argument_errors_are_one_line(arguments: dict[str, Any], message: str) -> None:
    call: dict[str, Any] = {"case": "mlp_small", "batch": 64, **arguments}
    with pytest.raises(DataParallelMeasureError) as raised:
        measure_data_parallel(call.pop("case"), call.pop("batch"), **call)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def _no_ddp(module: Any) -> Any:
    """A stand-in for DistributedDataParallel that never all-reduces: each replica trains on its own batch."""
    return module


def _rank_main_without_ddp(rank: int, plan: Any) -> Any:
    ddp_ranks.DistributedDataParallel = _no_ddp  # pyright: ignore[reportAttributeAccessIssue]
    return ddp_ranks._rank_main(rank, plan)  # pyright: ignore[reportPrivateUsage]


def test_replicas_that_diverge_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the all-reduce, the ranks' own batches drive the replicas apart, and the check says so."""
    monkeypatch.setattr(ddp_ranks, "_rank_main", _rank_main_without_ddp)
    with pytest.raises(DataParallelMeasureError) as raised:
        measure_data_parallel("mlp_small", 8, steps=1, repeats=1, warmup=2)
    expected = r"data-parallel measurement: after 2 DDP steps of mlp_small, the replicas' model\.\S+ differ across 2 "
    assert re.match(expected + r"ranks \(sum .* to .*; 6 of 6 parameters differ\)$", str(raised.value)), raised.value
    assert multiprocessing.active_children() == []
