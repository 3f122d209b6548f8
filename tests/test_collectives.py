"""Systems of devices and the time of their collectives: the shipped datasheet systems, the latency-bandwidth model
of NCCL's algorithms, and a calibration's measurements interpolated and scaled to other rank counts."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from gnomon.cost.collectives import COLLECTIVES, collective_s, fit_latency_bandwidth, model_s, uneven_all_to_all_s
from gnomon.cost.devices import load_device, save_device
from gnomon.cost.topology import SYSTEM_DIR, System, TopologyError, available_systems, load_system
from gnomon.cost.topology.measured import MeasuredCollectives, local_collectives_path, write_collectives

MIB = 1 << 20


def test_shipped_systems_are_datasheet_figures() -> None:
    assert {"8xh100", "8xh200", "4xa100"} <= set(available_systems())
    for name in available_systems():
        system = load_system(name)
        assert not system.calibrated
        assert "datasheet" in system.source
        assert system.provenance.endswith("datasheet figures, not measured; predicted times are analytical")


def test_a_system_of_n_devices_takes_a_shipped_systems_links() -> None:
    four, two_nodes = load_system("4xh100"), load_system("2x8xh100")
    dgx = load_system("8xh100")
    assert (four.ranks, four.intra_node, four.inter_node) == (4, dgx.intra_node, dgx.inter_node)
    assert (two_nodes.ranks, two_nodes.nodes, two_nodes.name) == (16, 2, "2x8xh100")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("16xh100", "system '16xh100': a node of 8xh100 holds 8 h100 devices, not 16"),
        ("4xv100", "no system of v100 devices is known, so '4xv100' has no links; known systems: 4xa100, 8xh100, "
                   "8xh200, NxDEVICE or MxNxDEVICE of their devices, Nxlocal"),
        ("tpu", "unknown system 'tpu'; known systems: 4xa100, 8xh100, 8xh200, NxDEVICE or MxNxDEVICE of their "
                "devices, Nxlocal"),
        ("nowhere/x.toml", "system file nowhere/x.toml does not exist"),
    ],
)  # fmt: skip
def test_an_unknown_system_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(TopologyError) as error:
        load_system(spec)
    assert str(error.value) == message


def test_a_malformed_system_file_names_the_key(tmp_path: Path) -> None:
    text = (SYSTEM_DIR / "4xa100.toml").read_text()
    path = tmp_path / "broken.toml"
    path.write_text(text.replace("bandwidth_bytes_per_s = 300e9", 'bandwidth_bytes_per_s = "fast"'))
    with pytest.raises(TopologyError) as error:
        load_system(str(path))
    assert str(error.value) == (
        f"system file {path}: missing or mistyped 'intra_node.bandwidth_bytes_per_s' (expected float)"
    )


def test_a_system_file_may_say_its_links_share_sending_and_receiving(tmp_path: Path) -> None:
    assert load_system("4xa100").send_receive_share == 0.0  # full-duplex NVLink: the shipped files say nothing
    text = (SYSTEM_DIR / "4xa100.toml").read_text()
    path = tmp_path / "shared.toml"
    path.write_text(text.replace("sync_s =", "send_receive_share = 0.5\nsync_s ="))
    assert load_system(str(path)).send_receive_share == 0.5
    path.write_text(text.replace("sync_s =", "send_receive_share = -0.5\nsync_s ="))
    with pytest.raises(TopologyError) as error:
        load_system(str(path))
    assert str(error.value) == f"system file {path}: 'send_receive_share' must be a number from 0 to 1"


def test_ring_and_tree_all_reduce_and_the_faster_is_taken() -> None:
    a, b = 2e-6, 100e9
    # 8 ranks: the ring takes 14 steps and moves 2 * 7/8 of the message; the tree 6 steps and twice the message.
    assert model_s("all_reduce", MIB, 8, a, b) == pytest.approx((6 * a + 2 * MIB / b, "tree"))
    assert model_s("all_reduce", 256 * MIB, 8, a, b) == pytest.approx((14 * a + 1.75 * 256 * MIB / b, "ring"))
    assert model_s("all_gather", MIB, 4, a, b) == pytest.approx((3 * a + 0.75 * MIB / b, "ring"))
    assert model_s("all_to_all", MIB, 4, a, b) == pytest.approx((3 * a + 0.75 * MIB / b, "pairwise"))


def test_one_node_uses_its_links_at_the_collective_efficiency() -> None:
    system = load_system("4xa100")
    bandwidth = system.collective_efficiency * system.intra_node.bandwidth_bytes_per_s
    got = collective_s(system, "reduce_scatter", 64 * MIB)
    assert got.seconds == pytest.approx(3 * system.intra_node.latency_s + 0.75 * 64 * MIB / bandwidth)
    assert collective_s(system, "all_reduce", 64 * MIB, ranks=1).seconds == 0.0


def test_across_nodes_an_all_reduce_is_hierarchical() -> None:
    system = load_system("2x8xh100")
    fast = system.collective_efficiency * system.intra_node.bandwidth_bytes_per_s
    slow = system.collective_efficiency * system.inter_node.bandwidth_bytes_per_s  # pyright: ignore[reportOptionalMemberAccess]
    m = 256 * MIB
    within = 7 * system.intra_node.latency_s + 7 / 8 * m / fast
    across = 2 * system.inter_node.latency_s + 2 * (1 / 2) * (m / 8) / slow  # pyright: ignore[reportOptionalMemberAccess]
    got = collective_s(system, "all_reduce", m)
    assert (got.algorithm, got.seconds) == ("hierarchical", pytest.approx(2 * within + across))
    # The network carries an all-to-all's share bound for the other node: half of it, at 1/9 of NVLink's speed.
    assert collective_s(system, "all_to_all", m).seconds > collective_s(load_system("8xh100"), "all_to_all", m).seconds


def test_an_uneven_all_to_all_carries_its_busiest_ranks_load() -> None:
    """Rank 0 sends 1 MiB to rank 1, which sends 3 MiB back: over full-duplex links (share 0) as long as 3 MiB each
    way; where receiving costs as much as sending (share 1, ranks on one host) as 2 MiB each way, the mean."""
    duplex = load_system("4xa100")
    shared = replace(duplex, send_receive_share=1.0)

    def uniform(system: System, each_way: int) -> float:  # the nccl-tests message of 2 ranks sending each_way
        return collective_s(system, "all_to_all", 2 * each_way, 2).seconds

    sent = [[0, MIB], [3 * MIB, 0]]
    assert uneven_all_to_all_s(duplex, sent) == pytest.approx(uniform(duplex, 3 * MIB))
    assert uneven_all_to_all_s(shared, sent) == pytest.approx(uniform(shared, 2 * MIB))
    half = replace(duplex, send_receive_share=0.5)  # 3 + 0.5 x 1 MiB, as a uniform rank's 1.5 x what it sends
    assert uneven_all_to_all_s(half, sent) == pytest.approx(uniform(half, round(3.5 / 1.5 * MIB)), rel=1e-6)
    for system in (duplex, shared, half):  # even: the uniform all-to-all, whatever the share
        assert uneven_all_to_all_s(system, [[5, MIB], [MIB, 5]]) == pytest.approx(uniform(system, MIB))
        assert uneven_all_to_all_s(system, [[0, 0], [0, 0]]) == 0.0


def test_a_latency_and_bandwidth_are_recovered_from_exact_measurements() -> None:
    a, b = 30e-6, 2e9
    points = [(size, model_s("all_gather", size, 2, a, b)[0]) for size in (4096, 65536, MIB, 16 * MIB)]
    assert fit_latency_bandwidth("all_gather", points, 2) == pytest.approx((a, b))


@pytest.fixture
def measured_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[int, float]]]:
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path))
    a, b = 50e-6, 1e9
    curves = {c: [(size, model_s(c, size, 2, a, b)[0]) for size in (65536, MIB, 16 * MIB)] for c in COLLECTIVES}
    points = {c: tuple((size, t, 0.01) for size, t in curve) for c, curve in curves.items()}
    write_collectives(
        MeasuredCollectives("gloo over loopback (test)", "gloo", 2, 1, 0.001, points), local_collectives_path()
    )
    save_device(load_device("generic-cpu"), tmp_path / "rank.toml")  # what `calibrate --collectives` measures
    return curves


def test_measured_collectives_are_interpolated_between_sizes(measured_here: dict[str, list[tuple[int, float]]]) -> None:
    system = load_system("local")
    assert (system.name, system.calibrated, system.ranks) == ("2xlocal", True, 2)
    (small, t0), (_, t1) = measured_here["all_reduce"][:2]
    assert collective_s(system, "all_reduce", small).seconds == t0
    between = collective_s(system, "all_reduce", 4 * small)  # a third of the way in log size, from 64 KiB to 1 MiB
    assert between.algorithm == "measured"
    assert t0 < between.seconds < t1
    assert collective_s(system, "all_reduce", 1024).seconds == t0  # below the smallest: its (latency-bound) time


def test_measured_collectives_scale_to_other_rank_counts_by_the_model(
    measured_here: dict[str, list[tuple[int, float]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Measured on 2 ranks as a link of 50 us and 1 GB/s: on 4 ranks the model's time at the fitted link.
    four = replace(load_system("2xlocal"), devices_per_node=4)
    got = collective_s(four, "all_gather", MIB)
    assert got.seconds == pytest.approx(model_s("all_gather", MIB, 4, 50e-6, 1e9)[0], rel=1e-6)
    assert collective_s(load_system("1xlocal"), "all_gather", MIB).seconds == 0.0
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    with pytest.raises(TopologyError, match=r"^system '4xlocal': this machine has 2 cores, too few for 4 ranks"):
        load_system("4xlocal")


def test_torchrecs_fitted_costs_reach_the_local_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path))
    points = {"all_to_all": ((65536, 1e-4, 0.01), (MIB, 1e-3, 0.01))}
    fitted = MeasuredCollectives("test", "gloo", 2, 1, 0.001, points, {"table_wise": 2e-3}, 1e-4, 2e-9)
    write_collectives(fitted, local_collectives_path())
    save_device(load_device("generic-cpu"), tmp_path / "rank.toml")
    system = load_system("2xlocal")
    assert (system.embedding_group_s, system.embedding_step_s, system.embedding_pooled_byte_s) == (
        {"table_wise": 2e-3}, 1e-4, 2e-9,
    )  # fmt: skip
    text = (
        local_collectives_path().read_text().replace("embedding_pooled_byte_s = 2e-09", "embedding_pooled_byte_s = -1")
    )
    local_collectives_path().write_text(text)
    with pytest.raises(TopologyError, match=r"'embedding_pooled_byte_s' must be a number >= 0$"):
        load_system("2xlocal")


def test_the_send_receive_share_reaches_the_local_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path))
    points = {"all_to_all": ((65536, 1e-4, 0.01), (MIB, 1e-3, 0.01))}
    write_collectives(
        MeasuredCollectives("test", "gloo", 2, 1, 0.001, points, send_receive_share=0.9), local_collectives_path()
    )
    save_device(load_device("generic-cpu"), tmp_path / "rank.toml")
    assert load_system("2xlocal").send_receive_share == 0.9
    text = local_collectives_path().read_text()
    local_collectives_path().write_text(text.replace("send_receive_share = 0.9\n", ""))
    assert load_system("2xlocal").send_receive_share == 0.0  # a file from before it was measured: full duplex
    local_collectives_path().write_text(text.replace("send_receive_share = 0.9", "send_receive_share = 1.5"))
    with pytest.raises(TopologyError, match=r"'send_receive_share' must be a number from 0 to 1$"):
        load_system("2xlocal")


def test_a_missing_collective_calibration_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path))
    with pytest.raises(TopologyError) as error:
        load_system("2xlocal")
    assert str(error.value) == (
        f"no collective calibration of this machine ({tmp_path / 'collectives.toml'} does not exist): "
        "run `gnomon calibrate --collectives`"
    )


def test_calibrate_collectives_writes_what_the_local_system_predicts_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gnomon import cli

    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path))
    assert cli.main(["calibrate", "--collectives", "--ranks", "2", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "collectives over gloo, 2 ranks:" in out
    assert "a collective right after compute: " in out
    assert "an uneven all-to-all: a rank pays " in out
    assert f"wrote {tmp_path / 'collectives.toml'} (the `local` system's collectives)" in out
    # TorchRec's cost per sharding group, fitted to its steps on the ranks just calibrated.
    assert "per step: " in out
    assert "per sharding group: " in out
    assert f"wrote {tmp_path / 'collectives.toml'} (with TorchRec's cost per group)" in out
    system = load_system("2xlocal")
    assert set(system.embedding_group_s) == {"table_wise", "row_wise", "column_wise"}
    assert system.embedding_step_s >= 0
    assert 0 <= system.send_receive_share <= 1
    for collective in COLLECTIVES:
        measured = system.measured[collective]
        assert len(measured) == 3
        size, seconds = measured[1]
        assert collective_s(system, collective, size).seconds == seconds  # at a measured size: the measurement


def test_ranks_without_collectives_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from gnomon import cli

    assert cli.main(["calibrate", "--ranks", "4"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gnomon: error: --ranks is the number of processes of `gnomon calibrate --collectives`: add --collectives"
    )


def test_torchrecs_costs_are_fitted_once_a_step_per_group_and_per_pooled_byte() -> None:
    from gnomon.calibrate_torchrec import fit_host_costs

    once, per_group, per_byte = 1.0e-3, 2.0e-3, 2.0e-9
    plans = [(1, 12_288), (1, 12_288), (1, 12_288), (2, 12_288), (3, 12_288), (1, 1_179_648), (1, 1_179_648)]
    excess = [(g, b, once + g * per_group + b * per_byte) for g, b in plans]
    assert fit_host_costs(excess) == pytest.approx((once, per_group, per_byte), rel=1e-6)


def test_a_cost_the_steps_do_not_show_is_fitted_at_zero() -> None:
    """More groups cost less here: the group cost is 0, not negative, and the rest is fitted without it."""
    from gnomon.calibrate_torchrec import fit_host_costs

    once, per_group, per_byte = fit_host_costs([(1, 1000, 4.0e-3), (3, 1000, 2.0e-3), (1, 1_000_000, 6.0e-3)])
    assert per_group == 0.0
    assert once > 0
    assert per_byte > 0


def test_a_ranks_gemm_fraction_makes_the_model_give_the_times_measured() -> None:
    """Every product timed at 2 ms: with the fraction found, the cost model's median price of them is 2 ms."""
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.ir import Block

    from gnomon.calibrate_ranks import GEMM_SHAPES, gemm_fraction
    from gnomon.cost.analytical import op_cost
    from gnomon.dialects.graph.linalg import MatmulOp

    cpu = load_device("generic-cpu")
    fraction = gemm_fraction(cpu, lambda call, trials: 2e-3)
    scaled = replace(cpu, efficiency=cpu.efficiency | {"gemm": fraction})
    times = []
    for m, k, n in GEMM_SHAPES:
        inputs = Block(arg_types=[TensorType(f32, [m, k]), TensorType(f32, [k, n])])
        op = MatmulOp.build(operands=list(inputs.args), result_types=[TensorType(f32, [m, n])])
        times.append(op_cost(op, scaled).kernel_s)
    assert statistics.median(times) == pytest.approx(2e-3, rel=0.01)


def test_a_rank_holds_its_share_of_the_caches_its_cores_share() -> None:
    from gnomon.calibrate_ranks import cache_share

    cpu = load_device("generic-cpu")
    rank = cache_share(cpu, 2)
    for whole, share in zip(cpu.memory[:-1], rank.memory[:-1], strict=True):
        expected = whole.capacity_bytes if whole.per_core else whole.capacity_bytes // 2
        assert (share.name, share.capacity_bytes, share.bandwidth_bytes_per_s) == (
            whole.name, expected, whole.bandwidth_bytes_per_s
        )  # fmt: skip
    assert rank.memory[-1] == cpu.memory[-1]  # main memory: what fits a rank is checked against all of it
    assert any(not level.per_core for level in cpu.memory[:-1])  # the test cuts a shared level
