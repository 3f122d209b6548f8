"""`gnomon tune`: schedules priced by the cost model, measured, kept; later runs take them and compile nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper
from test_conv_fusion import ConvPair, _graph, _lowered
from xdsl.dialects.builtin import ModuleOp

from gnomon.cost.devices import load_device
from gnomon.cost.schedules import predicted_s
from gnomon.dialects import kernel
from gnomon.dialects.kernel import ScheduleAttr
from gnomon.errors import GnomonError, GnomonWarning
from gnomon.passes.kernel_to_linalg import CodegenError
from gnomon.passes.kernel_to_linalg.conv_rows import register_tile
from gnomon.passes.kernel_tuned_schedules import TUNED_ATTR, KernelTunedSchedulesPass
from gnomon.runtime.executor import Program
from gnomon.tuning import TuningDatabase, kernel_key
from gnomon.tuning.space import candidates
from gnomon.tuning.tuner import tune_program

LOCAL_LIKE = load_device("generic-cpu")


def _generated(module: ModuleOp) -> list[kernel.FuncOp]:
    return [op for op in module.ops if isinstance(op, kernel.FuncOp) and op.is_generated]


def _pair() -> tuple[torch.nn.Module, torch.Tensor, np.ndarray]:
    torch.manual_seed(0)
    model = ConvPair(24, 40, (1, 1, 0, 1), (3, 2, 1, 1), "relu6").eval()
    x = torch.randn(1, 24, 20, 20)
    with torch.inference_mode():
        expected = model(x).numpy()
    return model, x, expected


def _pair_program() -> tuple[ModuleOp, Program, np.ndarray, np.ndarray]:
    model, x, expected = _pair()
    lowered = _lowered(_graph(model, x), [0, 0, 0, 0], ["generated"])
    return lowered, Program(lowered), x.numpy(), expected


def test_tuning_a_fused_conv_stores_a_checked_winner_that_the_pass_applies(tmp_path: Path) -> None:
    lowered, program, x, expected = _pair_program()
    database = TuningDatabase(tmp_path)
    (result,) = tune_program(program, [x], LOCAL_LIKE, database, budget_s=120, top=2, lanes=16)
    assert result.status == "tuned"
    assert result.entry is not None
    measured = [t for t in result.entry.trials if t.measured_s is not None]
    assert len(measured) == 3
    assert all(t.error is None for t in measured)
    assert result.entry.trials[0].schedule == str(_generated(lowered)[0].schedule)
    assert result.entry.best_s <= result.entry.default_s

    KernelTunedSchedulesPass(database=str(tmp_path)).apply(None, lowered)  # pyright: ignore[reportArgumentType]
    (tuned,) = _generated(lowered)
    assert str(tuned.schedule) == result.entry.schedule
    assert TUNED_ATTR in tuned.attributes
    again = Program(lowered)
    assert again.profile.kernels_compiled == 0
    assert again.profile.kernels_tuned == 1
    (output,) = again.run([x])
    assert np.linalg.norm(output - expected) / np.linalg.norm(expected) <= 1e-5


def test_a_second_tuning_finds_every_kernel_in_the_database(tmp_path: Path) -> None:
    _, program, x, _ = _pair_program()
    database = TuningDatabase(tmp_path)
    tune_program(program, [x], LOCAL_LIKE, database, budget_s=120, top=1, lanes=16)
    (again,) = tune_program(program, [x], LOCAL_LIKE, database, budget_s=120, top=1, lanes=16)
    assert again.status == "cached"


def test_a_spent_budget_leaves_the_default_and_stores_nothing(tmp_path: Path) -> None:
    _, program, x, _ = _pair_program()
    (result,) = tune_program(program, [x], LOCAL_LIKE, TuningDatabase(tmp_path), budget_s=1e-9, top=2, lanes=16)
    assert result.status == "budget"
    assert result.entry is None
    assert list(tmp_path.iterdir()) == []


def test_a_schedule_that_does_not_compile_is_dropped_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gnomon.tuning import tuner

    broken = ScheduleAttr.get([2, 15], 16, [0, 1], 2)  # 32 accumulators and 2 weight vectors: 35 registers
    original = tuner.candidates
    monkeypatch.setattr(tuner, "candidates", lambda k, d, lanes: [*original(k, d, lanes)[:2], broken])
    _, program, x, _ = _pair_program()
    (result,) = tune_program(program, [x], LOCAL_LIKE, TuningDatabase(tmp_path), budget_s=120, top=2, lanes=16)
    assert result.entry is not None
    (dropped,) = [t for t in result.entry.trials if t.schedule == str(broken)]
    assert dropped.measured_s is None
    assert dropped.error == (
        "a generated convolution's micro-tile of 15 positions x 2 vectors does not fit 32 vector registers"
    )
    assert result.entry.schedule != str(broken)


def test_a_damaged_entry_is_ignored_with_a_warning(tmp_path: Path) -> None:
    lowered, _, _, _ = _pair_program()
    (kernel_func,) = _generated(lowered)
    key = kernel_key(kernel_func)
    (tmp_path / f"{key}.json").write_text('{"format": 1, "kernel": "k", "schedule": "#kernel.schedule<tile = [')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        KernelTunedSchedulesPass(database=str(tmp_path)).apply(None, lowered)  # pyright: ignore[reportArgumentType]
    assert [str(w.message).split(" (")[0] for w in caught if w.category is GnomonWarning] == [
        f"tuning entry {tmp_path / f'{key}.json'} does not read"
    ]
    assert TUNED_ATTR not in _generated(lowered)[0].attributes


def test_the_key_ignores_name_and_schedule_but_not_the_kernel() -> None:
    lowered, _, _, _ = _pair_program()
    (kernel_func,) = _generated(lowered)
    renamed = kernel_func.clone()
    renamed.sym_name = type(renamed.sym_name)("other")
    renamed.schedule = ScheduleAttr.get([1, 8], 16, [0, 1], 1)
    assert kernel_key(renamed) == kernel_key(kernel_func)
    model = ConvPair(24, 40, (1, 1, 0, 1), (3, 1, 1, 1), "relu6").eval()  # stride 1: another kernel
    other = _lowered(_graph(model, torch.randn(1, 24, 20, 20)), [0, 0, 0, 0], ["generated"])
    assert kernel_key(_generated(other)[0]) != kernel_key(kernel_func)


@pytest.mark.parametrize("tile", [[1, 4], [1, 28], [2, 3], [2, 14]])
@pytest.mark.parametrize("width", [16, 8])
def test_every_register_tile_computes_the_same_convolution(tile: list[int], width: int) -> None:
    model, x, expected = _pair()
    lowered = _lowered(_graph(model, x), [0, 0, 0, 0], ["generated"])
    (kernel_func,) = _generated(lowered)
    registers = 32 if width == 16 else 16
    if tile[0] * width < 16 or tile[0] * (tile[1] + 1) + 1 > registers:
        with pytest.raises(CodegenError):
            register_tile(tile, width)
        return
    kernel_func.schedule = ScheduleAttr.get(tile, width, [0, 1], 2)
    (output,) = Program(lowered).run([x.numpy()])
    assert np.linalg.norm(output - expected) / np.linalg.norm(expected) <= 1e-5


def test_the_space_holds_only_tiles_that_fit_and_threads_that_differ() -> None:
    lowered, _, _, _ = _pair_program()
    (kernel_func,) = _generated(lowered)
    space = candidates(kernel_func, LOCAL_LIKE, 16)
    assert space[0] == kernel_func.schedule
    for schedule in space[1:]:
        tile = list(schedule.tile.get_values())
        register_tile(tile, schedule.vector.data)  # raises for one that does not fit
    assert len(space) == len(set(space))


def test_the_cost_model_prices_a_latency_bound_tile_slower() -> None:
    """Two accumulators cannot hide the FMA latency: the model must rank that tile below the default (at the
    default's vector width, the host's: a fixed 16 lanes passed on AVX-512 hosts, where it is the default, and was
    priced faster than the default's 8 on an AVX2 one)."""
    lowered, _, _, _ = _pair_program()
    (default,) = _generated(lowered)
    device = load_device("generic-cpu")
    slow = default.clone()
    slow.schedule = ScheduleAttr.get([1, 2], default.schedule.vector.data, [0, 1], 2)
    assert predicted_s(slow, default, device, 16) > predicted_s(default, default, device, 16)


def _elementwise_onnx(path: Path) -> Path:
    """relu(x * 2 + 1) over 1x64x64x64: one generated kernel with enough work for two threads."""
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["a"]),
        helper.make_node("Add", ["a", "one"], ["b"]),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "elementwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 64, 64])],
        [
            helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
            helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _gnomon(*args: str, tuning: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GNOMON_TUNING_DIR": str(tuning)}
    return subprocess.run(
        [sys.executable, "-m", "gnomon.cli", *args], capture_output=True, text=True, check=False, env=env
    )


def test_run_after_tune_compiles_and_tunes_nothing_and_says_so(tmp_path: Path) -> None:
    model = _elementwise_onnx(tmp_path / "model.onnx")
    tuned = _gnomon("tune", str(model), "--budget-s", "60", tuning=tmp_path / "db")
    assert tuned.returncode == 0, tuned.stderr
    assert "1 distinct generated kernels: 1 tuned now, 0 from the tuning database" in tuned.stdout
    assert re.search(r"model: default schedules [\d.]+ ms \(spread \d+%\), tuned [\d.]+ ms", tuned.stdout)
    (entry,) = (tmp_path / "db").iterdir()
    assert len([t for t in json.loads(entry.read_text())["trials"] if t["measured_s"] is not None]) == 2

    ran = _gnomon("run", str(model), "--profile", tuning=tmp_path / "db")
    assert ran.returncode == 0, ran.stderr
    assert "generated kernels: 0 compiled, 1 from the disk cache" in ran.stdout
    assert "schedules: 1 of 1 generated kernels tuned (from the tuning database), none tuned in this run" in ran.stdout

    again = _gnomon("tune", str(model), "--budget-s", "60", tuning=tmp_path / "db")
    assert "1 distinct generated kernels: 0 tuned now, 1 from the tuning database" in again.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-s", "0"], "gnomon: error: --budget-s 0.0: the budget is a positive number of seconds\n"),
        (["--top", "0"], "gnomon: error: --top 0: at least one schedule besides the default must be measured\n"),
        (
            ["--device", "h100"],
            "gnomon: error: --device h100: tuning measures on this machine, so it prices on a CPU device\n",
        ),
    ],
)
def test_tune_rejects_bad_options_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    model = _elementwise_onnx(tmp_path / "model.onnx")
    result = _gnomon("tune", str(model), *args, tuning=tmp_path / "db")
    assert result.returncode == 2
    assert result.stderr == message


def test_tune_names_an_unwritable_database_before_it_starts(tmp_path: Path) -> None:
    model = _elementwise_onnx(tmp_path / "model.onnx")
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = _gnomon("tune", str(model), tuning=blocker / "db")
    assert result.returncode == 2
    assert result.stderr == f"gnomon: error: cannot write the tuning database {blocker / 'db'}: Not a directory\n"


def test_tune_names_a_missing_model(tmp_path: Path) -> None:
    result = _gnomon("tune", str(tmp_path / "missing.onnx"), tuning=tmp_path / "db")
    assert result.returncode == 2
    assert "missing.onnx" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_bad_schedule_text_is_a_one_line_error() -> None:
    from gnomon.passes.kernel_tuned_schedules.database import parse_schedule

    with pytest.raises(GnomonError, match=re.escape("'#kernel.schedule<tile = [1]' is not a kernel schedule")):
        parse_schedule("#kernel.schedule<tile = [1]")
