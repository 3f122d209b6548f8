"""`gnomon.runtime.distributed.duplex`: how much of what a rank receives it pays as if sent, from three all-to-alls
on real gloo ranks. The measured run checks the harness's contract (a share from 0 to 1), not this host's figure."""

from __future__ import annotations

import pytest

from gnomon.runtime.distributed import DuplexMeasureError, measure_send_receive_share
from gnomon.runtime.distributed.duplex import send_receive_share


def test_the_share_is_read_from_where_the_one_way_call_lands_between_the_uniform_ones() -> None:
    """Uniform: 1 ms at S sent per rank, 1.8 ms at 2S (0.2 ms of latency); one-way at 2S."""
    assert send_receive_share(1.0e-3, 1.8e-3, 1.8e-3) == pytest.approx(0.0)  # full duplex: as long as 2S each way
    assert send_receive_share(1.0e-3, 1.8e-3, 1.0e-3) == pytest.approx(1.0)  # shared: as long as S each way
    assert send_receive_share(1.0e-3, 1.8e-3, 1.3e-3) == pytest.approx(1.6 / 1.1 - 1)  # 0.2 + 1.6 / (1 + h)
    assert send_receive_share(1.0e-3, 1.8e-3, 0.9e-3) == 1.0  # faster than S each way (no self copies): 1
    assert send_receive_share(1.0e-3, 1.8e-3, 2.5e-3) == 0.0  # slower than 2S each way: 0
    assert send_receive_share(1.0e-3, 0.9e-3, 1.0e-3) == 0.0  # no slope between the uniform calls: full duplex


def test_measures_a_share_on_local_ranks() -> None:
    share = measure_send_receive_share(2, sent_bytes=256 * 1024, repeats=2, iterations=5)
    assert 0.0 <= share <= 1.0


@pytest.mark.parametrize(
    ("ranks", "sent_bytes", "message"),
    [
        (1, 1 << 20, "send/receive share measurement: ranks must be at least 2, got 1"),
        (2, 2, "send/receive share measurement: sent_bytes must be at least 4"),
    ],
)
def test_argument_errors(ranks: int, sent_bytes: int, message: str) -> None:
    with pytest.raises(DuplexMeasureError) as error:
        measure_send_receive_share(ranks, sent_bytes=sent_bytes)
    assert str(error.value) == message
