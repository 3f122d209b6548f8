"""Embedding sharding: the plan types, the index distribution's extrapolation, a plan's predicted step, the plan
search and `gnomon shard`'s output and errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import gnomon
import gnomon.cli
from gnomon.cost.collectives import collective_s
from gnomon.cost.devices import DEVICE_DIR
from gnomon.cost.sharding.equivalence import distinct_plans, plan_class
from gnomon.cost.sharding.plan import Placement, ShardingError, column_blocks, row_blocks
from gnomon.cost.sharding.search import Candidate
from gnomon.cost.sharding.step import DenseStep, sharded_step
from gnomon.cost.sharding.tables import EmbeddingTable, distinct_rows, synthetic_ids
from gnomon.cost.topology import load_system
from gnomon.models import DLRM
from gnomon.sharding import embedding_tables, shard

pytestmark = pytest.mark.xdist_group("sharding")

ROWS = [200_000, 50_000, 10_000, 1_000]
DENSE = DenseStep(step_s=1e-3, compute_s=8e-4, all_reduce_s=1e-4, sync_s=1e-5, local_lookups_s=1e-4,
                  parameter_bytes=1 << 20)  # fmt: skip


def table(name: str, rows: int, dim: int = 32, batch: int = 256, pooling: int = 4, zipf: float = 0.0) -> EmbeddingTable:
    return EmbeddingTable(name, rows, dim, 4, batch, synthetic_ids(rows, batch * pooling, zipf, seed=rows))


def dlrm_inputs(batch: int = 128, zipf: float = 0.0) -> tuple[DLRM, tuple[torch.Tensor, ...]]:
    model = DLRM(13, tables=4, rows=ROWS, dim=32, pooling=4)
    return model, (*model.example_inputs(batch, zipf=zipf), torch.rand(batch, 1))


def test_placements_are_checked_with_one_line_errors() -> None:
    with pytest.raises(ShardingError, match="unknown sharding kind 'diagonal'; choose one of table_wise, row_wise"):
        Placement("diagonal", (0,))
    with pytest.raises(ShardingError, match=r"a table_wise placement is on one device, not \[0, 1\]"):
        Placement("table_wise", (0, 1))
    with pytest.raises(ShardingError, match=r"a row_wise placement names a device twice: \[1, 1\]"):
        Placement("row_wise", (1, 1))
    assert row_blocks(10, 4) == [3, 3, 3, 1]  # TorchRec's blocks: ceil(rows / shards), the last shorter
    assert column_blocks(10, 4) == [3, 3, 2, 2]


def test_distinct_rows_extrapolate_the_sample() -> None:
    uniform = synthetic_ids(100_000, 4096, seed=1)
    for draws in (4096, 32768, 10**6):  # uniform ids: the occupancy of the whole table
        expected = 100_000 * -math.expm1(-draws / 100_000)
        assert distinct_rows(uniform, draws, 100_000) == pytest.approx(expected, rel=0.03)
    hot = synthetic_ids(100_000, 4096, zipf=1.1, seed=1)
    sample_distinct = len(np.unique(hot))
    assert distinct_rows(hot, 4096, 100_000) == pytest.approx(sample_distinct, rel=0.02)
    # Hot rows repeat more as the batch grows, but a power law's tail keeps adding rows: 8x the sample's draws
    # touch what the model says.
    larger = synthetic_ids(100_000, 8 * 4096, zipf=1.1, seed=1)
    assert distinct_rows(hot, 8 * 4096, 100_000) == pytest.approx(len(np.unique(larger)), rel=0.05)
    assert distinct_rows(hot, 8 * 4096, 100_000) < 0.5 * distinct_rows(uniform, 8 * 4096, 100_000)


def test_a_dlrms_hot_rows_are_the_same_on_every_rank() -> None:
    """Click logs' popular items are the same in every batch: two ranks' batches (two seeds) share their hottest row,
    and together touch the distinct rows the model extrapolates from one of them (a shuffle per batch had them
    touch 11-14% more)."""
    model = DLRM(13, tables=2, rows=[50_000, 50_000], dim=8, pooling=8)
    first, second = (model.example_inputs(512, zipf=1.1, seed=seed)[1] for seed in (1, 2))
    assert not torch.equal(first, second)
    for index in range(2):
        assert torch.bincount(first[index]).argmax() == torch.bincount(second[index]).argmax()
        both = len(np.unique(torch.cat([first[index], second[index]]).numpy()))
        assert distinct_rows(first[index].numpy(), 2 * 512 * 8, 50_000) == pytest.approx(both, rel=0.05)
    assert torch.bincount(first[0]).argmax() != torch.bincount(first[1]).argmax()  # each table's own


def test_a_balanced_plan_beats_one_device_holding_every_table() -> None:
    system = load_system("4xh100")
    tables = [table(f"t{i}", rows) for i, rows in enumerate(ROWS)]
    balanced = {t.name: Placement("table_wise", (i,)) for i, t in enumerate(tables)}
    piled = {t.name: Placement("table_wise", (0,)) for t in tables}
    fast, slow = sharded_step(tables, balanced, DENSE, system), sharded_step(tables, piled, DENSE, system)
    assert fast.step_s < slow.step_s
    assert slow.load_balance == pytest.approx(4.0)  # all the embedding work on one of four devices
    assert slow.device_embedding_s[1:] == (0.0, 0.0, 0.0)
    # Memory: each device's shards plus the replicated dense state.
    table_bytes = [t.bytes for t in tables]
    assert slow.memory_bytes_per_device[0] - slow.memory_bytes_per_device[1] >= sum(table_bytes)
    assert fast.memory_bytes_per_device[0] > fast.memory_bytes_per_device[3]


def test_shards_on_one_device_meet_its_caches_together() -> None:
    # Two 38 MB tables: each alone fits an H100's 50 MB L2, the two on one device do not, and then every lookup's
    # row comes from HBM.
    system = load_system("4xh100")
    tables = [table(f"t{i}", 150_000, dim=64, batch=4096, pooling=8) for i in range(2)]
    piled = sharded_step(tables, {t.name: Placement("table_wise", (0,)) for t in tables}, DENSE, system)
    apart = sharded_step(tables, {t.name: Placement("table_wise", (i,)) for i, t in enumerate(tables)}, DENSE, system)
    assert piled.device_embedding_s[0] > 1.05 * sum(apart.device_embedding_s)
    small = [table(f"t{i}", 15_000, dim=64, batch=4096, pooling=8) for i in range(2)]  # 3.8 MB each: L2 holds both
    piled = sharded_step(small, {t.name: Placement("table_wise", (0,)) for t in small}, DENSE, system)
    apart = sharded_step(small, {t.name: Placement("table_wise", (i,)) for i, t in enumerate(small)}, DENSE, system)
    assert piled.device_embedding_s[0] == pytest.approx(sum(apart.device_embedding_s), rel=0.01)


def test_the_rest_of_the_step_passes_through_the_caches_between_two_lookups() -> None:
    # One 3.8 MB table: alone, an H100's 50 MB L2 keeps it from step to step; not when the dense layers move 60 MB
    # through it in between, and then every lookup's row comes from HBM.
    system = load_system("2xh100")
    tables = [table("t0", 15_000, dim=64, batch=4096, pooling=8)]
    plan = {"t0": Placement("table_wise", (0,))}
    kept = sharded_step(tables, plan, DENSE, system)
    evicted = sharded_step(tables, plan, replace(DENSE, traffic_bytes=60 * 2**20), system)
    assert evicted.device_embedding_s[0] > 1.03 * kept.device_embedding_s[0]


def test_row_wise_tables_reduce_scatter_their_partial_sums() -> None:
    system = load_system("2xh100")
    tables = [table("t0", 100_000, dim=64)]
    step = sharded_step(tables, {"t0": Placement("row_wise", (0, 1))}, DENSE, system)
    message = 2 * 256 * 64 * 4  # every rank's bags, full width, fp32
    expected = (
        collective_s(system, "reduce_scatter", message).seconds + collective_s(system, "all_gather", message).seconds
    )
    assert step.all_to_all_s >= expected
    # Each device holds half the rows; both look up about half the ids.
    assert step.memory_bytes_per_device[0] == pytest.approx(step.memory_bytes_per_device[1], rel=0.01)
    assert step.load_balance == pytest.approx(1.0, abs=0.1)


def test_one_device_communicates_nothing() -> None:
    system = load_system("8xh100")
    tables = [table("t0", 10_000)]
    step = sharded_step(tables, {"t0": Placement("table_wise", (0,))}, DENSE, system, ranks=1)
    assert step.all_to_all_s == 0.0
    assert step.host_s == 0.0


def test_torchrec_pays_per_byte_of_pooled_embeddings_every_kind_alike() -> None:
    """Each sharded table's bags come back to a rank once, all columns, whichever way the table is split."""
    base = replace(load_system("2xh100"), embedding_step_s=0.0, embedding_group_s={})
    per_byte = replace(base, embedding_pooled_byte_s=2e-9)
    tables = [table("t0", 10_000, dim=64, batch=512), table("t1", 20_000, dim=16, batch=512)]
    pooled = 512 * (64 + 16) * 4
    for kind, devices in (("table_wise", (0,)), ("row_wise", (0, 1)), ("column_wise", (0, 1))):
        plan = {t.name: Placement(kind, devices) for t in tables}
        added = sharded_step(tables, plan, DENSE, per_byte).host_s - sharded_step(tables, plan, DENSE, base).host_s
        assert added == pytest.approx(2e-9 * pooled)


def test_tables_and_their_ids_are_found_by_running_the_model() -> None:
    model, inputs = dlrm_inputs(64, zipf=1.2)
    found = embedding_tables(model, inputs[:3])
    assert [(t.name, t.rows, t.dim, t.batch, t.pooling) for t in found] == [
        (f"embeddings.{i}.weight", rows, 32, 64, 4.0) for i, rows in enumerate(ROWS)
    ]
    assert np.array_equal(found[0].ids, inputs[1][0].numpy())
    assert found[0].distinct_fraction < 0.9  # hot rows repeat


def test_shard_chooses_the_fastest_plan_that_fits() -> None:
    model, inputs = dlrm_inputs()
    result = gnomon.shard(model, inputs, "4xh100", loss="bce_with_logits")  # the public entry point
    steps = [c.step.step_s for c in result.plans]
    assert steps == sorted(steps)
    assert len(result.plans) > 10  # proposals and the search's moves
    data = result.to_json(top=3)
    assert set(data) >= {"plans", "chosen", "tables", "system", "provenance"}
    assert "datasheet" in data["provenance"]
    assert len(data["plans"]) == 3
    chosen = data["chosen"]
    assert set(chosen["assignment"]) == {f"embeddings.{i}.weight" for i in range(4)}
    assert chosen["predicted_step_s"] == steps[0]
    assert len(chosen["memory_bytes_per_device"]) == 4


def test_plans_that_swap_tables_of_one_shape_or_devices_are_one_plan() -> None:
    system = load_system("2xh100")
    # Two tables of each shape, their ids drawn apart: swapping them (or the devices) prices within the draw.
    tables = [table(name, rows, zipf=0.0) for name, rows in (("a1", 10_000), ("a2", 10_000), ("b1", 50_000))]
    tables += [replace(table("b2", 50_000), ids=synthetic_ids(50_000, 1024, seed=7))]
    by_name = {t.name: t for t in tables}

    def candidate(where: dict[str, int]) -> Candidate:
        assignment = {name: Placement("table_wise", (device,)) for name, device in where.items()}
        return Candidate(assignment, sharded_step(tables, assignment, DENSE, system), "test")

    spread = candidate({"a1": 0, "a2": 1, "b1": 0, "b2": 1})
    swapped = candidate({"a1": 1, "a2": 0, "b1": 0, "b2": 1})  # the two small tables trade devices
    mirrored = candidate({"a1": 1, "a2": 0, "b1": 1, "b2": 0})  # every table on the other device
    paired = candidate({"a1": 0, "a2": 0, "b1": 1, "b2": 1})
    assert plan_class(spread.assignment, by_name, 2, 2) == plan_class(swapped.assignment, by_name, 2, 2)
    assert distinct_plans([spread, swapped, mirrored, paired], tables, 2, 2) == [spread, paired]
    # Devices of different nodes are alike too (whole nodes swap); tables of different shapes are not.
    assert distinct_plans([spread, mirrored], tables, 2, 1) == [spread]
    lone_b2, lone_b1 = candidate({"a1": 0, "a2": 0, "b1": 0, "b2": 1}), candidate({"a1": 0, "a2": 0, "b1": 1, "b2": 0})
    assert distinct_plans([lone_b2, lone_b1], tables, 2, 2) == [lone_b2]
    wide = {**by_name, "b2": replace(by_name["b2"], dim=64)}
    assert plan_class(lone_b2.assignment, wide, 2, 2) != plan_class(lone_b1.assignment, wide, 2, 2)
    # gnomon.shard lists each plan once: a model of nine alike tables has no two equivalent plans among its best.
    model = DLRM(13, tables=6, rows=[20_000] * 2 + [2_000] * 4, dim=16, pooling=4)
    inputs = (*model.example_inputs(64), torch.rand(64, 1))
    result = shard(model, inputs, "2xh100", loss="bce_with_logits")
    names = {t.name: t for t in result.tables}
    classes = [plan_class(c.assignment, names, 2, 2) for c in result.plans]
    assert len(set(classes)) == len(classes)


def test_a_plan_that_cannot_fit_names_the_table_and_the_shortfall(tmp_path: Path) -> None:
    device = (DEVICE_DIR / "h100.toml").read_text().replace("capacity_bytes = 85899345920", "capacity_bytes = 20000000")
    (tmp_path / "small.toml").write_text(device.replace('name = "h100"', 'name = "small"'))
    system = (Path(gnomon.cost.topology.SYSTEM_DIR) / "8xh100.toml").read_text()
    system = system.replace('device = "h100"', f'device = "{tmp_path / "small.toml"}"').replace("8xh100", "small")
    (tmp_path / "sys.toml").write_text(system.replace("devices_per_node = 8", "devices_per_node = 2"))
    model, inputs = dlrm_inputs()
    piled = {f"embeddings.{i}.weight": Placement("table_wise", (0,)) for i in range(4)}
    with pytest.raises(ShardingError) as error:
        shard(model, inputs, str(tmp_path / "sys.toml"), loss="bce_with_logits", plan=piled)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("the plan does not fit: device 0 needs ")
    assert "MiB of its 19.1 MiB (short " in message
    assert message.endswith("its largest table embeddings.0.weight (200000 x 32) takes 24.4 MiB")
    # The search finds a plan that fits where one exists: the largest table alone on a device.
    result = shard(model, inputs, str(tmp_path / "sys.toml"), loss="bce_with_logits")
    assert max(result.chosen.step.memory_bytes_per_device) <= 20_000_000


def test_the_command_prints_plans_and_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, inputs = dlrm_inputs(32)
    path = tmp_path / "dlrm.pt2"
    torch.export.save(torch.export.export(model, inputs[:3]), path)
    assert gnomon.cli.main(["shard", str(path), "--devices", "2xh100", "--loss", "bce_with_logits", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["chosen"] == data["plans"][0]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"chosen": data["chosen"]}))
    assert gnomon.cli.main(["shard", str(path), "--devices", "2xh100", "--loss", "bce_with_logits",
                            "--plan", str(plan)]) == 0  # fmt: skip
    assert "1 plan priced" in capsys.readouterr().out
    exported = tmp_path / "plan.pt"
    assert gnomon.cli.main(["shard", str(path), "--devices", "2xh100", "--loss", "bce_with_logits",
                            "--torchrec-plan", str(exported)]) == 0  # fmt: skip
    assert f"wrote {exported} (TorchRec's ParameterShardings of the chosen plan, cuda)" in capsys.readouterr().out
    shardings = torch.load(exported, weights_only=False)
    assert set(shardings) == {f"embeddings_{i}" for i in range(4)}
    assert all(s.compute_kernel == "fused" for s in shardings.values())
    cases = {
        ("--devices", "3xfoo"): "no system of foo devices is known",
        ("--devices", "2xh100", "--plan", str(tmp_path / "missing.json")): "missing.json",
        ("--devices", "2xh100", "--ranks", "3"): "system 2xh100 has 2 devices, not 3",
    }
    for flags, expected in cases.items():
        assert gnomon.cli.main(["shard", str(path), "--loss", "bce_with_logits", *flags]) == 2
        error = capsys.readouterr().err
        assert expected in error
        assert error.count("\n") == 1
        assert "Traceback" not in error
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"embeddings.9.weight": {"kind": "table_wise", "devices": [0]}}))
    assert gnomon.cli.main(["shard", str(path), "--devices", "2xh100", "--loss", "bce_with_logits",
                            "--plan", str(bad)]) == 2  # fmt: skip
    assert "names no table of the model: embeddings.9.weight" in capsys.readouterr().err


def test_the_chosen_plan_exports_to_torchrecs_parameter_shardings() -> None:
    model, inputs = dlrm_inputs()
    result = shard(model, inputs, "2xh100", loss="bce_with_logits")
    shardings = result.parameter_shardings()
    assert set(shardings) == {f"embeddings_{i}" for i in range(4)}
    for name, placement in result.chosen.assignment.items():
        exported = shardings[name.removesuffix(".weight").replace(".", "_")]
        assert exported.sharding_type == placement.kind
        assert exported.compute_kernel == "fused"
        if placement.kind != "row_wise":  # row-wise shards go to every rank in order
            assert tuple(exported.ranks or ()) == placement.devices
