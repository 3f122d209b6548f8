"""`gnomon calibrate`: sysfs parsing, the fit of the efficiency factors, and a quick calibration's device file.

The quick calibration runs small problems only; the test checks what it writes (a loadable device marked calibrated,
with this machine's cache levels), never how fast anything ran.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from xdsl.dialects import func

from gnomon.cli import main
from gnomon.cost.devices import load_device
from gnomon.cost.fit import FITTED, Measured, fit_efficiency, lower_quantile, median_of_rounds, suite_prediction
from gnomon.dialects import kernel
from gnomon.dialects.graph.elementwise import ReluOp
from gnomon.executable import lower
from gnomon.runtime.calibration.host import cache_levels, cpu_list_count
from gnomon.runtime.calibration.programs import Program, conv, linear, same_shape
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
    program = lower(suite_program(quick=True).module)
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
    """A small and a large relu separate the launch overhead from the streaming rate; a GEMM and a convolution set
    their own factors. Times predicted with known parameters give those parameters back."""
    p = Program()
    for name, dims in (("small", (1, 8, 4, 4)), ("large", (1, 64, 56, 56))):
        p.results.append(same_shape(p, name, ReluOp, p.argument(f"{name}_x", dims)))
    x, w, b = p.argument("x", (256, 1024)), p.argument("w", (1024, 1024)), p.argument("b", (1024,))
    p.results.append(linear(p, "linear", x, w, b))
    p.results.append(conv(p, "conv", p.argument("cx", (1, 64, 56, 56)), p.argument("cw", (64, 64, 3, 3)), 1, 1))
    kernels = [op for op in lower(p.module()).ops if isinstance(op, kernel.FuncOp)]
    base = load_device("generic-cpu")
    known = {"gemm": 0.425, "conv": 0.3, "stream": 0.35}
    truth = replace(base, efficiency=known, launch_overhead_s=2 * base.launch_overhead_s)
    result = fit_efficiency(base, [Measured(k, suite_prediction(Measured(k, 0.0), truth)) for k in kernels])
    assert {name: result.factors[name] for name in known} == pytest.approx(known, rel=0.01)
    assert result.launch_overhead_s == pytest.approx(truth.launch_overhead_s, rel=0.01)
    assert result.error_after < 1e-3


def test_each_kernel_takes_its_median_over_rounds() -> None:
    kernels = [op for op in lower(suite_program(quick=True).module).ops if isinstance(op, kernel.FuncOp)][:2]
    rounds = [[Measured(k, seconds * (i + 1)) for i, k in enumerate(kernels)] for seconds in (3.0, 1.0, 2.0)]
    assert [m.seconds for m in median_of_rounds(rounds)] == [2.0, 4.0]
    assert [m.kernel for m in median_of_rounds(rounds)] == kernels


def test_the_full_suite_launches_one_kernel_per_result() -> None:
    """Every kernel of the suite reads its own inputs and returns its result, so none fuse: one launch each."""
    suite = suite_program(quick=False)
    suite.module.verify()
    (function,) = suite.module.ops
    assert isinstance(function, func.FuncOp)
    assert len(suite.fitted) == len(function.function_type.outputs)


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
    assert [level.name for level in device.memory] == [name for name, _, _ in cache_levels()] + ["dram"]
    assert set(device.efficiency) == (set(FITTED) if fit else set())
    assert "gnomon calibrate on" in device.source
