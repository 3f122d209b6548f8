"""`gnomon calibrate`: sysfs parsing, the fit of the efficiency factors, and a quick calibration's device file.

The quick calibration runs small problems only; the test checks what it writes (a loadable device marked calibrated,
with this machine's cache levels), never how fast anything ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from xdsl.dialects import func

from gnomon import calibrate as calibrate_module
from gnomon.calibrate import Calibration
from gnomon.cli import main
from gnomon.cost.devices import load_device, save_device
from gnomon.cost.fit import (
    FITTED,
    Measured,
    call_warm_costs,
    fastest_of_rounds,
    fit_efficiency,
    lower_quantile,
    round_spread,
    spread,
    suite_prediction,
)
from gnomon.cost.program import kernel_cost
from gnomon.dialects import kernel, rt
from gnomon.dialects.graph.elementwise import ReluOp
from gnomon.executable import lower
from gnomon.runtime.calibration.host import CpuTimes, cache_levels, cpu_list_count, others_busy
from gnomon.runtime.calibration.programs import (
    Program,
    avg_pool,
    concat,
    conv,
    layer_norm,
    linear,
    max_pool,
    same_shape,
    weight,
)
from gnomon.runtime.calibration.suite import suite_program


def write_cache(root: Path, index: int, level: int, kind: str, size: str, shared: str) -> None:
    directory = root / f"index{index}"
    directory.mkdir(parents=True)
    for name, value in (("level", str(level)), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (directory / name).write_text(value + "\n")


def test_cache_levels_from_sysfs(tmp_path: Path) -> None:
    write_cache(tmp_path, 0, 1, "Data", "32K", "0")
    write_cache(tmp_path, 1, 1, "Instruction", "32K", "0")
    write_cache(tmp_path, 2, 2, "Unified", "1024K", "0")
    write_cache(tmp_path, 3, 3, "Unified", "32M", "0-1,4")
    assert cache_levels(tmp_path) == [("l1", 32 << 10, True), ("l2", 1 << 20, True), ("l3", 32 << 20, False)]
    assert cpu_list_count("0-1,4") == 3
    assert cache_levels(tmp_path / "missing") == []


def test_dram_figure_is_the_floor_of_two_regimes() -> None:
    """DRAM rounds from a shared host: a floor near 46 GB/s and a faster regime whose share of the run varies.
    The lower quintile stays on the floor whether the fast regime took a quarter or most of the rounds."""
    floor = [45.0, 46.0, 46.5, 47.0]
    mostly_fast, mostly_floor = floor * 2 + [70.0] * 22, floor * 6 + [70.0] * 6
    assert lower_quantile(mostly_fast, 0.2) == pytest.approx(46.9)
    assert lower_quantile(mostly_floor, 0.2) == pytest.approx(45.8)
    assert lower_quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert lower_quantile([5.0], 0.2) == 5.0


def test_the_fit_recovers_known_factors() -> None:
    """Kernels 'measured' as a device with known factors predicts them: the fit finds factors that predict as well."""
    program = lower(suite_program(quick=True).module, layout="nchw")
    kernels = [op for op in program.ops if isinstance(op, kernel.FuncOp)]
    base = load_device("generic-cpu")
    truth = replace(base, efficiency={"gemm": 0.4, "gemm_k_overhead": 40.0, "vector": 0.1, "stream": 0.5})
    measured = [Measured(k, suite_prediction(Measured(k, 0.0), truth)) for k in kernels]
    result = fit_efficiency(base, measured)
    assert set(result.factors) == set(FITTED)
    assert result.kernels == len(kernels)
    assert result.error_after < 0.03
    assert result.error_after < result.error_before


def test_the_fit_recovers_known_parameters() -> None:
    """A small and a large generated relu separate the thread team's wake-up from the generated streaming rate; a
    GEMM and a convolution set their own factors. Times predicted with known parameters give those parameters back
    (the library's `stream` is not among them: these compute-bound library kernels hardly depend on it)."""
    p = Program()
    for name, dims in (("small", (1, 8, 4, 4)), ("large", (1, 64, 56, 56))):
        p.results.append(same_shape(p, name, ReluOp, p.argument(f"{name}_x", dims)))
    x, w, b = p.argument("x", (256, 1024)), p.argument("w", (1024, 1024)), p.argument("b", (1024,))
    p.results.append(linear(p, "linear", x, w, b))
    p.results.append(conv(p, "conv", p.argument("cx", (1, 64, 56, 56)), p.argument("cw", (64, 64, 3, 3)), 1, 1))
    kernels = [op for op in lower(p.module(), layout="nchw").ops if isinstance(op, kernel.FuncOp)]
    base = load_device("generic-cpu")
    known = {"gemm": 0.425, "conv": 0.3, "generated_stream": 0.35, "pool_wake_s": 6e-6}
    truth = replace(base, efficiency=known)
    result = fit_efficiency(base, [Measured(k, suite_prediction(Measured(k, 0.0), truth)) for k in kernels])
    assert {name: result.factors[name] for name in known} == pytest.approx(known, rel=0.01)
    assert result.error_after < 1e-3


def test_slow_onednn_pools_do_not_pull_the_stream_rate_down() -> None:
    """oneDNN picks its pooling kernels by the CPU; where they run far below a stream's rate (a Zen 1 host: 7x ATen's
    channels-last pool), their own factor takes it and the library's streaming kernels still set `stream`."""
    p = Program()
    p.results.append(max_pool(p, "max_pool", p.argument("mx", (1, 64, 112, 112)), (3, 3), 2, 1))
    p.results.append(avg_pool(p, "avg_pool", p.argument("ax", (1, 96, 56, 56)), (3, 3), 1, 1, True))
    for name, rows in (("norm", 1024), ("norm_mid", 512), ("norm_large", 4096)):
        x = p.argument(f"{name}_x", (rows, 256))
        p.results.append(layer_norm(p, name, x, weight(p, f"{name}_g", (256,)), weight(p, f"{name}_b", (256,))))
    p.results.append(concat(p, "concat", [p.argument(f"c{i}", (1, 128, 28, 28)) for i in range(3)]))
    kernels = [op for op in lower(p.module(), layout="nchw").ops if isinstance(op, kernel.FuncOp)]
    base = load_device("generic-cpu")
    truth = replace(base, efficiency={"stream": 0.5, "onednn_pool": 0.05})
    measured = [Measured(k, suite_prediction(Measured(k, 0.0), truth)) for k in kernels]
    result = fit_efficiency(base, measured, names=("onednn_pool", "stream"))
    assert result.factors == pytest.approx({"stream": 0.5, "onednn_pool": 0.05}, rel=0.1)  # the grid's last step: 9%
    assert result.error_after < 0.03 < result.error_before


def test_each_probed_function_gets_its_own_warm_call() -> None:
    """Tiny calls of two library functions, run back to back, timed as a device whose warm calls differ 4x would
    run them: their warm calls come back, each function's own, and a function without probes costs a typical
    one's."""
    from gnomon.cost.calls import library_call_s, typical_call_warm_s

    p = Program()
    x, w, b = p.argument("x", (4, 32)), p.argument("w", (32, 32)), p.argument("b", (32,))
    p.results += [linear(p, "linear", x, w, b), layer_norm(p, "norm", x, b, b)]
    kernels = [op for op in lower(p.module(), layout="nchw").ops if isinstance(op, kernel.FuncOp)]
    base = load_device("generic-cpu")
    known = {"aten.linear": 8e-6, "aten.layer_norm": 32e-6}
    truth = replace(base, call_warm_s=known)
    probes = [Measured(k, 0.0, (0,)) for k in kernels for _ in range(2)]
    probes = [replace(m, seconds=kernel_cost(m.kernel, truth, call_distances=(0,)).predicted_s) for m in probes]
    assert call_warm_costs(base, probes) == pytest.approx(known)
    assert library_call_s(0, truth, function="aten.layer_norm") == pytest.approx(32e-6)
    assert library_call_s(0, truth, function="aten.mm") == typical_call_warm_s(truth) == 32e-6  # the upper median


def test_a_thin_calls_misses_come_from_tiny_launches_after_traffic() -> None:
    """Tiny generated launches timed as a device whose thin calls miss for 9 us when cold would run them, after
    traffic from 16 KB (within L1: says nothing) to 4 MB: that amplitude comes back."""
    from gnomon.cost.fit import thin_call_cold

    p = Program()
    p.results.append(same_shape(p, "tiny", ReluOp, p.argument("x", (1, 4, 4, 4))))
    (tiny,) = [op for op in lower(p.module(), layout="nchw").ops if isinstance(op, kernel.FuncOp)]
    base = load_device("generic-cpu")
    truth = replace(base, efficiency={"thin_call_cold_s": 9e-6})
    probes = [Measured(tiny, 0.0, (distance,)) for distance in (16 << 10, 100 << 10, 1 << 20, 4 << 20)]
    probes = [
        replace(m, seconds=kernel_cost(m.kernel, truth, call_distances=m.call_distances).predicted_s) for m in probes
    ]
    assert thin_call_cold(base, probes) == pytest.approx(9e-6)
    assert thin_call_cold(base, probes[:1]) == 0.0


def test_the_full_suite_probes_each_function_back_to_back() -> None:
    from gnomon.runtime.calibration.suite import PROBE_RUNS

    suite = suite_program(quick=False)
    assert len(suite.probes) == len(suite.fitted)
    assert not any(fit and probe for fit, probe in zip(suite.fitted, suite.probes, strict=True))
    lowered = lower(suite.module.clone(), "the calibration suite", layout="nchw")
    launched = [op for op in lowered.walk() if isinstance(op, rt.LaunchOp)]
    probed = [launch.callee.string_value() for launch, probe in zip(launched, suite.probes, strict=True) if probe]
    assert len(probed) == 12 * (PROBE_RUNS - 1)
    assert sum(name.startswith("attention") for name in probed) == PROBE_RUNS - 1


def test_each_kernel_takes_its_fastest_round() -> None:
    kernels = [
        op for op in lower(suite_program(quick=True).module, layout="nchw").ops if isinstance(op, kernel.FuncOp)
    ][:2]
    rounds = [[Measured(k, seconds * (i + 1)) for i, k in enumerate(kernels)] for seconds in (3.0, 1.0, 2.0)]
    assert [m.seconds for m in fastest_of_rounds(rounds)] == [1.0, 2.0]
    assert [m.kernel for m in fastest_of_rounds(rounds)] == kernels


def test_the_full_suite_says_which_of_its_launches_are_fitted() -> None:
    """Every kernel of the suite reads its own inputs and returns its result, so none fuse: a kernel launches once
    (a chain of calls once per call), and `fitted` has one entry per launch."""
    suite = suite_program(quick=False)
    suite.module.verify()
    (function,) = suite.module.ops
    assert isinstance(function, func.FuncOp)
    lowered = lower(suite.module.clone(), "the calibration suite", layout="nchw")
    assert len(suite.fitted) == sum(isinstance(op, rt.LaunchOp) for op in lowered.walk())
    assert len(suite.warm) == len(suite.fitted)


def test_a_warm_launch_is_timed_on_its_second_run_in_a_row() -> None:
    """The suite's activation kernels run twice in a row and are timed the second time, with their inputs and
    output in cache and their code warm (each call's distance 0); the weights' kernels and the small library calls
    run once each run, their call distances as the program's order gives them."""
    from gnomon.cost.program import launch_call_distances
    from gnomon.runtime.calibration.profile import load, profile_suite

    suite = suite_program(quick=True)  # two activation kernels and two kernels reading weights
    loaded = load(suite.module, lambda module: lower(module, "the calibration suite", layout="nchw"))
    launches = loaded.program.launches
    assert list(suite.warm) == [launch.kernel.is_generated for launch in launches]
    assert sum(suite.warm) == 2
    runs = [0] * len(launches)
    for index, launch in enumerate(launches):

        def counted(inner: Callable[[], None] = launch.run, index: int = index) -> None:
            runs[index] += 1
            inner()

        launches[index] = replace(launch, run=counted)
    measured = profile_suite(loaded, 3, suite.warm)
    # One warm-up run, then three profiled runs: a warm launch runs twice in each of those.
    assert runs == [1 + 3 * (2 if warm else 1) for warm in suite.warm]
    distances = launch_call_distances(loaded.module)
    for m, warm, given in zip(measured, suite.warm, distances, strict=True):
        assert m.call_distances == (tuple(0 for _ in given) if warm else tuple(given))
        assert m.seconds > 0


@pytest.mark.parametrize("fit", [True, False])
def test_a_quick_calibration_writes_a_calibrated_device(tmp_path: Path, fit: bool) -> None:
    path = tmp_path / "machine.toml"
    assert main(["calibrate", "--quick", "-o", str(path), *([] if fit else ["--no-fit"])]) == 0
    device = load_device(str(path))
    assert device.calibrated
    assert device.kind == "cpu"
    assert device.peak("fp32") > 0
    assert device.launch_overhead_s > 0
    assert device.dispatch_overhead_s > 0
    assert device.module_call_s > 0
    assert device.host_branch_s > 0
    from gnomon.cost.eager_training import DEFAULTS

    assert set(device.eager_training) == set(DEFAULTS)  # eager training's host costs, each measured
    assert device.eager_training["autograd_node_s"] > 0
    assert [level.name for level in device.memory] == [name for name, _, _ in cache_levels()] + ["dram"]
    # Measured, not fitted: a thin call's misses (unless no probe's traffic left L1 here), fresh pages' faults, a
    # post-op's cost.
    assert device.efficiency["page_fault_s"] > 0
    # fbgemm's embedding kernels are measured and fitted whether or not the suite is: all thirteen factors, or none
    # where a quick calibration's few points give a degenerate fit (tests/test_tbe.py checks the fit itself).
    tbe = {"tbe_call_s", "tbe_lookup_s", "tbe_read", "tbe_row_s", "tbe_row_outgrown_s", "tbe_update_call_s",
           "tbe_update_lookup_s", "tbe_update", "tbe_update_spread", "tbe_update_row_s",
           "tbe_update_row_outgrown_s", "tbe_lookup_byte_s", "tbe_update_lookup_byte_s"}  # fmt: skip
    assert tbe & set(device.efficiency) in (tbe, set())
    assert all(device.efficiency[key] > 0 for key in tbe & set(device.efficiency))
    assert device.efficiency["post_op_s"] > 0  # a nanosecond where a post-op measured no slower
    measured = {"thin_call_cold_s", "page_fault_s", "post_op_s", *tbe}
    assert set(device.efficiency) - measured == (set(FITTED) if fit else set())
    assert "gnomon calibrate on" in device.source


def test_round_spread_is_the_median_kernel_spread_across_rounds() -> None:
    kernels = [
        op for op in lower(suite_program(quick=True).module, layout="nchw").ops if isinstance(op, kernel.FuncOp)
    ][:3]
    rounds = [[Measured(k, s) for k, s in zip(kernels, times, strict=True)] for times in ((1, 2, 4), (1.5, 2, 4))]
    # spreads per kernel: 50%, 0%, 0%: one kernel's outlier does not make the round unsteady
    assert round_spread(rounds) == 0.0
    assert round_spread(rounds[:1]) == 0.0
    assert spread([2.0, 3.0, 2.5]) == pytest.approx(0.5)


def test_others_busy_is_the_cpu_share_others_took() -> None:
    before = CpuTimes(busy=10.0, total=100.0, own=5.0)
    # 20 CPU seconds passed; 12 were busy, 4 of them this process's: others took 8 of 20.
    assert others_busy(before, CpuTimes(busy=22.0, total=120.0, own=9.0)) == pytest.approx(0.4)
    assert others_busy(before, None) == 0.0
    assert others_busy(before, before) == 0.0


def _calibration(others: float, suite: float) -> Calibration:
    steadiness = {"others_busy": others, "suite_spread": suite, "peak_spread": 0.5, "dram_spread": 0.3}
    return Calibration(replace(load_device("generic-cpu"), name="local", calibrated=True, steadiness=steadiness))


def test_the_device_file_records_how_steady_the_machine_was(tmp_path: Path) -> None:
    device = _calibration(0.02, 0.3).device
    save_device(device, tmp_path / "d.toml")
    assert load_device(str(tmp_path / "d.toml")).steadiness == device.steadiness
    assert _calibration(0.02, 0.3).disturbed == []
    assert _calibration(0.41, 0.25).disturbed == ["other processes used 41% of the CPUs' time"]
    assert _calibration(0.0, 0.9).disturbed == ["the suite's kernels moved 90% between rounds"]


def test_a_disturbed_calibration_keeps_the_previous_steady_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "local.toml"
    save_device(_calibration(0.02, 0.3).device, path)
    steady = path.read_text()
    monkeypatch.setattr(calibrate_module, "calibrate", lambda **_: _calibration(0.41, 0.25))
    assert main(["calibrate", "-o", str(path)]) != 0
    assert path.read_text() == steady
    disturbed = tmp_path / "local.disturbed.toml"
    assert load_device(str(disturbed)).steadiness["others_busy"] == 0.41
    error = capsys.readouterr().err.strip()
    assert error == (
        "gnomon: error: the machine was busy while calibrating (other processes used 41% of the CPUs' time): kept "
        f"the previous calibration {path}, wrote this one to {disturbed} (`gnomon calibrate --force` takes it)"
    )
    assert main(["calibrate", "-o", str(path), "--force"]) == 0
    assert load_device(str(path)).steadiness["others_busy"] == 0.41
    # With no steady calibration to keep, a disturbed one is written, with a warning.
    fresh = tmp_path / "fresh.toml"
    assert main(["calibrate", "-o", str(fresh)]) == 0
    assert "warning: the machine was busy while calibrating" in capsys.readouterr().out
    assert fresh.is_file()
