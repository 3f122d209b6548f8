"""`gnomon.runtime.distributed`: timing torch.distributed's collectives on local ranks over gloo.

The measured run checks the harness's contract (a result per collective and size, the message size convention,
larger messages taking longer), not how fast gloo is. The sizes are 64 KiB and 16 MiB: on a shared 2-core host
gloo's calls stall for 3-4 ms in bursts, which a 1 MiB call's time does not reliably exceed. The process handling
(a rank that dies, fails or never answers) is `run_ranks`'s, tested in test_distributed_ranks.py.
"""

from __future__ import annotations

import math
import multiprocessing
import re
from typing import Any

import pytest

from gnomon.runtime.distributed import COLLECTIVES, CollectiveMeasureError, measure_collectives
from gnomon.runtime.distributed import collectives as collectives_module

SMALL, LARGE = 64 * 1024, 16 * 1024 * 1024


def test_measures_every_collective_and_size(capfd: pytest.CaptureFixture[str]) -> None:
    timings = measure_collectives(2, [SMALL, LARGE], repeats=3, iterations=5)
    assert [(t.collective, t.message_bytes) for t in timings] == [(c, s) for c in COLLECTIVES for s in (SMALL, LARGE)]
    for timing in timings:
        assert timing.ranks == 2
        assert timing.seconds > 0
        assert timing.spread >= 0
    seconds = {(t.collective, t.message_bytes): t.seconds for t in timings}
    for collective in COLLECTIVES:
        assert seconds[collective, LARGE] > seconds[collective, SMALL], collective
    assert "Warning" not in capfd.readouterr().err  # the ranks' stderr: no deprecated collective was called


def test_a_point_is_the_mean_of_its_faster_half_of_medians() -> None:
    """A slow spell (the 9 ms median) never reaches the figure; an odd count leaves its middle median out."""
    assert collectives_module.faster_half_mean([9e-3, 1e-3, 3e-3, 2e-3]) == pytest.approx(1.5e-3)
    assert collectives_module.faster_half_mean([4e-3, 1e-3, 9e-3]) == pytest.approx(1e-3)
    assert collectives_module.faster_half_mean([2e-3]) == pytest.approx(2e-3)


def test_a_point_whose_medians_scatter_is_not_settled() -> None:
    """The uncertainty is how far another draw of the medians may move the figure: none for equal medians; a slow
    spell that reaches most of them moves it by a third."""
    uncertainty = collectives_module.faster_half_uncertainty
    assert uncertainty([2e-3] * 10) == 0.0
    assert uncertainty([1e-3, 1e-3, 1e-3, 1e-3, 3e-3, 3e-3, 3e-3, 3e-3, 3e-3, 3e-3]) > 0.3
    assert uncertainty([1e-3]) == math.inf
    # Points that never settle take every extra round, and are measured as the others.
    timings = measure_collectives(2, [SMALL], collectives=["all_reduce"], repeats=2, until_settled=2, settled=0.0)
    assert [(t.collective, t.message_bytes) for t in timings] == [("all_reduce", SMALL)]
    assert timings[0].seconds > 0


def test_plans_are_told_apart_on_the_rounds_they_shared() -> None:
    """Three plans timed in turn through a drifting host: each round's load slows all three alike, so the paired
    comparison tells the 3% slower plan apart from the fastest though their rounds overlap, not two equal ones whose
    steps scatter by 10% (with this seed's draw; a 90% interval misses a tie once in ten draws)."""
    import random

    from gnomon.runtime.distributed.paired import contenders, fastest, ratio_interval

    load = [1.0 + 0.4 * ((7 * i) % 11) / 10 for i in range(40)]  # the host's drift, round by round
    scatter = random.Random(1)

    def plan(factor: float) -> list[tuple[float, ...]]:
        return [tuple(factor * round_load * scatter.uniform(1, 1.1) for _ in range(10)) for round_load in load]

    plans = [plan(1.03), plan(1.0), plan(1.0)]
    best = fastest(plans)
    assert best in (1, 2)
    low, high = ratio_interval(plans[0], plans[best])
    assert 1.0 < low <= 1.03 <= high
    assert contenders(plans) == [1, 2]
    # A plan that sat out rounds (told apart already) is compared on the rounds both ran.
    sat_out = [steps if i < 20 else () for i, steps in enumerate(plan(1.03))]
    assert ratio_interval(sat_out, plans[best])[0] > 1.0
    # The host slowed after its rounds: its figure is the lower, yet it was the slower of the two where both ran.
    slowing = [tuple(t * (1 if i < 10 else 2) for t in steps) for i, steps in enumerate(plans[1])]
    dropped = [steps if i < 10 else () for i, steps in enumerate(plans[0])]
    assert fastest([dropped, slowing]) == 1
    assert ratio_interval(dropped, slowing)[0] > 1.0
    assert ratio_interval([(), ()], [(1.0,), (1.0,)]) == (0.0, float("inf"))


def test_message_bytes_round_up_to_whole_elements_per_rank() -> None:
    """3 ranks, fp32: messages are multiples of 12 bytes; sizes that round alike are measured once."""
    timings = measure_collectives(3, [1, 12, 13], collectives=["all_gather"], repeats=1, iterations=1)
    assert [(t.collective, t.ranks, t.message_bytes) for t in timings] == [("all_gather", 3, 12), ("all_gather", 3, 24)]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"ranks": 1}, "collective measurement: ranks must be at least 2, got 1"),
        ({"sizes": []}, "collective measurement: no message sizes given"),
        ({"sizes": [1024, 0]}, "collective measurement: message sizes must be positive, got 0"),
        ({"collectives": []}, "collective measurement: no collectives given"),
        ({"until_settled": -1}, "collective measurement: until_settled must be at least 0, got -1"),
        (
            {"collectives": ["all_reduce", "broadcast"]},
            "collective measurement: unknown collective 'broadcast' "
            "(known: all_reduce, all_gather, reduce_scatter, all_to_all)",
        ),
        ({"backend": "nosuch"}, "collective measurement: backend 'nosuch' is not available in torch.distributed"),
        ({"backend": "fake"}, "collective measurement: backend 'fake' is not available in torch.distributed"),
        ({"repeats": 0}, "collective measurement: repeats must be at least 1, got 0"),
        ({"iterations": 0}, "collective measurement: iterations must be at least 1, got 0"),
        ({"threads_per_rank": 0}, "collective measurement: threads_per_rank must be at least 1, got 0"),
        ({"timeout_s": 0}, "collective measurement: timeout_s must be positive, got 0"),
    ],
)
def test_argument_errors(arguments: dict[str, Any], message: str) -> None:
    call: dict[str, Any] = {"ranks": 2, "sizes": [1024], **arguments}
    with pytest.raises(CollectiveMeasureError) as raised:
        measure_collectives(call.pop("ranks"), call.pop("sizes"), **call)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_unavailable_backend_lists_the_available_ones() -> None:
    with pytest.raises(CollectiveMeasureError, match=r"\(available: [^)]*gloo[^)]*\)$"):
        measure_collectives(2, [1024], backend="nosuch")


# A stand-in for the ranks' main function, run in the spawned processes (so defined at module level).


def _drop(*args: object, **kwargs: object) -> None:
    """A stand-in for dist.all_reduce that reduces nothing."""


def _all_reduce_drops_data(rank: int, plan: Any) -> Any:
    collectives_module.dist.all_reduce = _drop  # pyright: ignore[reportAttributeAccessIssue]
    return collectives_module._rank_main(rank, plan)  # pyright: ignore[reportPrivateUsage]


def test_a_wrong_result_fails_the_check_before_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collectives_module, "_rank_main", _all_reduce_drops_data)
    with pytest.raises(CollectiveMeasureError) as raised:
        measure_collectives(2, [1024])
    expected = r"collective measurement: all_reduce on rank [01] of 2 \(gloo\) returned \[([12])\.0, \1\.0, \1\.0\], "
    assert re.fullmatch(expected + r"expected \[3\.0, 3\.0, 3\.0\]", str(raised.value)), str(raised.value)
    assert multiprocessing.active_children() == []
