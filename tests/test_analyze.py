"""`gnomon analyze` and `gnomon.analyze`: reports, the critical-path model, traces, the roofline plot, CLI errors.

Devices here are datasheet files (`calibrated = false`) or files written by the test, so the figures checked are the
models' arithmetic and the outputs' structure, never measured times.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import make_onnx
from xdsl.dialects.builtin import ModuleOp

import gnomon
from gnomon.bundled import model_path
from gnomon.cli import main
from gnomon.cost.critical_path import Task, schedule
from gnomon.cost.devices import load_device, save_device
from gnomon.cost.eager import eager_report, module_calls
from gnomon.cost.program import program_report
from gnomon.cost.report import Report
from gnomon.cost.trace import write_json
from gnomon.dialects import rt
from gnomon.executable import lower
from gnomon.models import MLP, SmallCNN, TransformerBlock
from gnomon.passes.graph_cost import annotate_cost


def launches(module: Any) -> int:
    return sum(1 for op in module.walk() if isinstance(op, rt.LaunchOp))


def kernel_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def check_trace_events(trace: dict[str, Any]) -> None:
    """The trace-event format's complete and metadata events, as Perfetto reads them."""
    assert isinstance(trace["traceEvents"], list)
    for event in trace["traceEvents"]:
        assert event["ph"] in ("X", "M")
        assert isinstance(event["pid"], int)
        assert isinstance(event["tid"], int)
        if event["ph"] == "X":
            assert isinstance(event["name"], str)
            assert event["ts"] >= 0
            assert event["dur"] >= 0
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "host" in names
    assert "stream 0" in names


# ---- the critical-path model ----


TASKS = [Task("a", 1.0, 10.0), Task("b", 1.0, 10.0), Task("c", 1.0, 1.0, depends_on=(0, 1))]


def test_a_synchronous_schedule_takes_the_sum_of_host_and_device_time() -> None:
    timeline = schedule(TASKS, streams=1, synchronous=True)
    assert timeline.e2e_s == 24.0
    assert timeline.active_s == 21.0
    assert [(s.start_s, s.end_s) for s in timeline.kernels if s is not None] == [(1, 11), (12, 22), (23, 24)]
    assert len(timeline.critical) == 6  # every dispatch and every kernel, in turn


def test_an_asynchronous_host_runs_ahead_and_streams_overlap() -> None:
    one = schedule(TASKS, streams=1, synchronous=False)
    assert [(s.start_s, s.end_s) for s in one.kernels if s is not None] == [(1, 11), (11, 21), (21, 22)]
    two = schedule(TASKS, streams=2, synchronous=False)
    spans = [s for s in two.kernels if s is not None]
    assert [(s.start_s, s.end_s, s.track) for s in spans] == [
        (1, 11, "stream 0"),
        (2, 12, "stream 1"),
        (12, 13, "stream 1"),
    ]
    assert two.e2e_s == 13.0
    assert two.active_s == 12.0
    # c waited for b, which waited for its dispatch, which waited for a's dispatch.
    assert two.critical == ((0, "host"), (1, "host"), (1, "device"), (2, "device"))


def test_a_launch_bound_gpu_schedule_is_the_host_time() -> None:
    tasks = [Task(f"k{i}", 5.0, 1.0, depends_on=(i - 1,) if i else ()) for i in range(10)]
    timeline = schedule(tasks, streams=4, synchronous=False)
    assert timeline.e2e_s == 51.0
    assert timeline.active_s == 10.0


# ---- reports ----


def test_report_flops_equal_the_cost_service_for_both_targets() -> None:
    for model in (TransformerBlock(), MLP(), SmallCNN()):
        example = model.example_inputs(2)
        device = load_device("a100")
        expected = annotate_cost(gnomon.load(model, example), device).total_flops
        eager = gnomon.analyze(model, example, device=device, target="torch-eager")
        assert eager.total_flops == expected
        if not isinstance(model, SmallCNN):  # gnomon folds SmallCNN's batch norms into its convolutions
            assert gnomon.analyze(model, example, device=device, target="gnomon").total_flops == expected


def test_gnomon_report_has_one_record_per_launch_and_its_times_add_up_on_a_cpu() -> None:
    model = TransformerBlock()
    example = model.example_inputs(2)
    report = gnomon.analyze(model, example, device="generic-cpu")
    module = lower(gnomon.load(model, example))
    assert report.kernels == launches(module)
    # On a CPU the host waits for each kernel: end to end is every dispatch and kernel (and copy) in turn.
    assert report.predicted_e2e_s == pytest.approx(sum(r.predicted_s for r in report.records))
    assert report.predicted_active_s == pytest.approx(sum(r.kernel_s for r in report.records))
    assert all(r.critical for r in report.records)
    assert report.activation_bytes > 0
    assert report.parameters == sum(p.numel() for p in model.parameters())
    assert program_report(module, load_device("generic-cpu")).predicted_e2e_s == pytest.approx(report.predicted_e2e_s)


def test_generated_kernels_run_on_the_threads_the_runtime_gives_them() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost.threads import PART_WORK, generated_threads
    from gnomon.dialects import kernel

    def relu_kernel(shape: str) -> kernel.FuncOp:
        t = f"tensor<{shape}xf32>"
        text = f"func.func @main(%x: {t}) -> {t} {{\n  %a = graph.relu %x : ({t}) -> {t}\n  func.return %a : {t}\n}}"
        module = lower(Parser(gnomon_context(), text).parse_module())
        (func_op,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
        return func_op

    cpu = replace(load_device("generic-cpu"), cores=8)
    small, large = relu_kernel("1x64x14x14"), relu_kernel("1x64x56x56")
    assert 64 * 14 * 14 < 2 * PART_WORK  # one slice: the runtime calls it on the calling thread
    assert generated_threads(small, cpu) == 1
    schedule = large.schedule
    assert schedule is not None
    assert generated_threads(large, cpu) == min(schedule.threads.data, 8, 64 * 56 * 56 // PART_WORK)


def test_a_pow_pays_a_libm_call_per_element() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost import efficiency, group_cost, op_cost
    from gnomon.cost.calls import libm_calls
    from gnomon.cost.eager import eager_steps
    from gnomon.cost.program import kernel_cost
    from gnomon.cost.threads import generated_threads
    from gnomon.dialects import kernel
    from gnomon.dialects.graph.base import GraphOperation

    t, s = "tensor<1x8x64x64xf32>", "tensor<f32>"
    text = (
        f"func.func @main(%x: {t}, %y: {s}) -> {t} {{\n  %p = graph.pow %x, %y : ({t}, {s}) -> {t}\n"
        f"  %r = graph.relu %p : ({t}) -> {t}\n  func.return %r : {t}\n}}"
    )
    module = lower(Parser(gnomon_context(), text).parse_module())
    (pow_kernel,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    ops = [op for op in pow_kernel.body.block.ops if isinstance(op, GraphOperation)]
    assert libm_calls(ops, generated=True) == 8 * 64 * 64
    cpu = load_device("generic-cpu")
    threads = generated_threads(pow_kernel, cpu)
    libm_s = 8 * 64 * 64 * efficiency(cpu).libm_call_s / threads
    expected = group_cost(ops, cpu, cores=threads).compute_s + libm_s
    assert kernel_cost(pow_kernel, cpu).compute_s == pytest.approx(expected)
    # Eager's ATen pow calls libm per element too, on all cores.
    (eager_pow, _) = eager_steps(Parser(gnomon_context(), text).parse_module(), cpu)
    assert eager_pow.cost is not None
    expected = op_cost(ops[0], cpu).compute_s + 8 * 64 * 64 * efficiency(cpu).libm_call_s / cpu.cores
    assert eager_pow.cost.compute_s == pytest.approx(expected)


def test_an_inverse_sine_pays_libm_calls_in_a_generated_kernel_only() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost import efficiency, op_cost
    from gnomon.cost.calls import libm_calls
    from gnomon.cost.eager import eager_steps
    from gnomon.cost.program import kernel_cost
    from gnomon.cost.threads import generated_threads, library_threads
    from gnomon.dialects import kernel
    from gnomon.dialects.graph.base import GraphOperation

    t = "tensor<16x1024xf64>"
    text = f"func.func @main(%x: {t}) -> {t} {{\n  %y = graph.asin %x : ({t}) -> {t}\n  func.return %y : {t}\n}}"
    module = lower(Parser(gnomon_context(), text).parse_module())
    (asin_kernel,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    assert asin_kernel.is_generated
    ops = [op for op in asin_kernel.body.block.ops if isinstance(op, GraphOperation)]
    assert (libm_calls(ops, generated=True), libm_calls(ops, generated=False)) == (16 * 1024, 0)
    cpu = load_device("generic-cpu")
    threads = generated_threads(asin_kernel, cpu)
    expected = op_cost(ops[0], cpu, cores=threads).compute_s + 16 * 1024 * efficiency(cpu).libm_call_s / threads
    assert kernel_cost(asin_kernel, cpu).compute_s == pytest.approx(expected)
    # ATen computes it with SLEEF's vector functions: no libm calls.
    (eager_asin,) = eager_steps(Parser(gnomon_context(), text).parse_module(), cpu)
    assert eager_asin.cost is not None
    eager_cores = library_threads(ops, cpu)
    assert eager_asin.cost.compute_s == pytest.approx(op_cost(ops[0], cpu, cores=eager_cores).compute_s)


def test_call_distances_count_the_bytes_since_the_same_function_last_ran_wrapping_around_the_run() -> None:
    from gnomon.cost.calls import call_distances

    launches = [("a", 10), ("b", 20), ("a", 30), (None, 5)]
    # a's first call follows the previous run's second, then the copy's 5 bytes; b runs once a run.
    assert call_distances(launches) == [5, 45, 20, None]


def test_a_library_call_costs_more_the_further_out_its_code_was_pushed() -> None:
    from gnomon.cost import efficiency
    from gnomon.cost.calls import library_call_s

    cpu = load_device("generic-cpu")  # l1 32 KiB per core, l3 16 MiB shared
    eff = efficiency(cpu)
    assert library_call_s(0, cpu) == library_call_s(32 << 10, cpu) == eff.library_call_warm_s
    assert library_call_s(16 << 20, cpu) == library_call_s(1 << 30, cpu) == library_call_s(None, cpu)
    assert library_call_s(None, cpu) == eff.library_call_s
    between = [library_call_s(size, cpu) for size in (64 << 10, 512 << 10, 4 << 20)]
    assert eff.library_call_warm_s < between[0] < between[1] < between[2] < eff.library_call_s
    # log-linear in the traffic: 512 KiB is half of the way from 32 KiB to 16 MiB in decades (4 of 9 doublings)
    assert between[1] == pytest.approx(eff.library_call_warm_s + (eff.library_call_s - eff.library_call_warm_s) * 4 / 9)
    h100 = load_device("h100")
    assert library_call_s(0, h100) == efficiency(h100).library_call_s


def test_a_program_prices_each_call_by_the_traffic_since_its_function_last_ran() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost.calls import library_call_s

    def norms(rows: int) -> list[float]:
        """The host time of each launch of three chained layer norms of `rows` x 192."""
        t, c = f"tensor<{rows}x192xf32>", "tensor<192xf32>"
        norm = "{axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (" + f"{t}, {c}, {c}) -> {t}"
        body = "\n".join(f"  %n{i + 1} = graph.layer_norm %n{i}, %g, %b {norm}" for i in range(3))
        text = f"func.func @main(%n0: {t}, %g: {c}, %b: {c}) -> {t} {{\n{body}\n  func.return %n3 : {t}\n}}"
        report = program_report(lower(Parser(gnomon_context(), text).parse_module()), cpu)
        return [r.overhead_s for r in report.records if r.kind == "aten.layer_norm"]

    cpu = load_device("generic-cpu")
    first, second, third = norms(64)
    assert second == third == pytest.approx(cpu.launch_overhead_s + library_call_s(0, cpu))  # back to back: warm
    assert first > second  # the result and input copies ran since the last run's third
    # 25 MB copies in and out between the last run's third norm and this run's first: cold
    assert norms(16384)[0] == pytest.approx(cpu.launch_overhead_s + library_call_s(None, cpu))


def test_a_generated_launch_after_library_traffic_pays_its_path_misses_and_back_to_back_is_warm() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost import efficiency
    from gnomon.cost.calls import cold_call_s

    def relus(rows: int) -> list[float]:
        """The host time of the two generated launches of: layer norm, relu, reshape (a view), relu."""
        t, c, r = f"tensor<{rows}x192xf32>", "tensor<192xf32>", f"tensor<{rows * 192}xf32>"
        text = (
            f"func.func @main(%x: {t}, %g: {c}, %b: {c}) -> {r} {{\n"
            f"  %n = graph.layer_norm %x, %g, %b {{axis = 1 : i64, epsilon = 1.000000e-05 : f64}} : ({t}, {c}, {c})"
            f" -> {t}\n  %a = graph.relu %n : ({t}) -> {t}\n  %v = graph.reshape %a : ({t}) -> {r}\n"
            f"  %y = graph.relu %v : ({r}) -> {r}\n  func.return %y : {r}\n}}"
        )
        report = program_report(lower(Parser(gnomon_context(), text).parse_module()), cpu)
        return [record.overhead_s for record in report.records if record.kind == "generated"]

    cpu = load_device("generic-cpu")  # l1 32 KiB per core, l3 16 MiB shared
    # 16384 rows: the layer norm moves 25 MB, beyond the last cache level: the first relu's path comes from DRAM.
    first, second = relus(16384)
    assert second == pytest.approx(cpu.launch_overhead_s + efficiency(cpu).pool_wake_s)  # after the first: warm
    assert first - second == pytest.approx(efficiency(cpu).thin_call_cold_s)
    # 4 rows: the layer norm and the input and result copies move 17 KB, within L1: warm too.
    assert relus(4) == pytest.approx([cpu.launch_overhead_s] * 2)
    assert cold_call_s(17 << 10, cpu, thin=True) == 0.0
    # A thin path misses less than a library call's.
    assert efficiency(cpu).thin_call_cold_s < efficiency(cpu).library_call_s - efficiency(cpu).library_call_warm_s


def test_eager_ops_pay_their_dispatch_and_library_ops_their_call() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost import efficiency
    from gnomon.cost.calls import cold_call_s, library_call_s
    from gnomon.cost.eager import eager_steps

    def linears(width: int) -> list[float]:
        """The host time of each eager op of linear, relu, linear, relu, linear, all `width` wide on 32 rows."""
        t, w = f"tensor<32x{width}xf32>", f"tensor<{width}x{width}xf32>"
        linear = f": ({t}, {w}) -> {t}"
        body = (
            f"  %a = graph.linear %x, %w {linear}\n  %b = graph.relu %a : ({t}) -> {t}\n"
            f"  %c = graph.linear %b, %w {linear}\n  %d = graph.relu %c : ({t}) -> {t}\n"
            f"  %e = graph.linear %d, %w {linear}\n  func.return %e : {t}"
        )
        text = f"func.func @main(%x: {t}, %w: {w}) -> {t} {{\n{body}\n}}"
        return [step.task.host_s for step in eager_steps(Parser(gnomon_context(), text).parse_module(), cpu)]

    cpu = load_device("generic-cpu")
    eff, dispatch = efficiency(cpu), cpu.dispatch_overhead_s
    # Between two linears a relu moves its input and output: 16 KB at width 64, 2 MB at width 8192.
    small, large = linears(64), linears(8192)
    assert small[2] == small[4] == pytest.approx(dispatch + library_call_s(2 * 32 * 64 * 4, cpu))
    assert large[2] == large[4] == pytest.approx(dispatch + library_call_s(2 * 32 * 8192 * 4, cpu))
    assert dispatch + eff.library_call_warm_s == small[2] < large[2] < dispatch + eff.library_call_s
    # A relu is a thin op: its warm call is the dispatch alone, a cold one adds a thin call's misses, not a library
    # call's. Between two relus a linear moves its input, output and weights: 32 KB at width 64 (within L1), 256 MB
    # at 8192.
    assert small[3] == pytest.approx(dispatch)
    assert large[3] == pytest.approx(dispatch + cold_call_s(None, cpu, thin=True))
    assert large[3] < dispatch + cold_call_s(None, cpu)
    # A datasheet GPU charges nothing for the call beyond dispatch (its `library_call_s` is 0).
    h100 = load_device("h100")
    t, w = "tensor<32x64xf32>", "tensor<64x64xf32>"
    text = f"func.func @main(%x: {t}, %w: {w}) -> {t} {{\n  %a = graph.linear %x, %w : ({t}, {w}) -> {t}\n"
    (step,) = eager_steps(Parser(gnomon_context(), text + f"  func.return %a : {t}\n}}").parse_module(), h100)
    assert step.task.host_s == h100.dispatch_overhead_s


def test_library_pooling_runs_on_one_thread_per_plane() -> None:
    from xdsl.parser import Parser

    from gnomon.context import gnomon_context
    from gnomon.cost import op_cost
    from gnomon.cost.eager import eager_steps
    from gnomon.cost.threads import library_threads
    from gnomon.dialects.graph.base import GraphOperation

    def pool(shape: str, result: str) -> list[GraphOperation]:
        """A 5-wide average over the channels of a 5-D tensor: a local response norm's pool, as torch-mlir has it."""
        t, r = f"tensor<{shape}xf32>", f"tensor<{result}xf32>"
        attributes = (
            "{kernel = array<i64: 5, 1, 1>, strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, "
            "count_include_pad = true, ceil_mode = false}"
        )
        body = f"%a = graph.avg_pool %x {attributes} : ({t}) -> {r}\n  func.return %a : {r}"
        text = f"func.func @main(%x: {t}) -> {r} {{\n  {body}\n}}"
        module = Parser(gnomon_context(), text).parse_module()
        return [op for op in module.walk() if isinstance(op, GraphOperation)]

    cpu = replace(load_device("generic-cpu"), cores=8)
    assert library_threads(pool("1x1x68x20x20", "1x1x64x20x20"), cpu) == 1
    assert library_threads(pool("2x1x68x20x20", "2x1x64x20x20"), cpu) == 2
    assert library_threads(pool("4x3x68x20x20", "4x3x64x20x20"), cpu) == 8
    assert library_threads([], cpu) is None
    # Eager calls the same ATen pooling: one image's channel pool runs on one thread there too.
    (single,) = pool("1x1x68x20x20", "1x1x64x20x20")
    module = single.get_toplevel_object()
    assert isinstance(module, ModuleOp)
    (eager_pool,) = eager_steps(module, cpu)
    assert eager_pool.cost is not None
    assert eager_pool.cost.kernel_s == pytest.approx(op_cost(single, cpu, cores=1).kernel_s)
    assert eager_pool.cost.kernel_s > op_cost(single, cpu).kernel_s


def test_on_a_gpu_the_host_overlaps_the_device() -> None:
    model = TransformerBlock(d_model=256, heads=8, seq=128)
    example = model.example_inputs(8)
    report = gnomon.analyze(model, example, device="h100")
    kernels_s = sum(r.kernel_s for r in report.records)
    host_s = sum(r.overhead_s for r in report.records)
    assert report.predicted_e2e_s < kernels_s + host_s
    assert report.predicted_e2e_s >= max(host_s, report.predicted_active_s)
    assert "analytical, from datasheets" in report.render()


def _module_calls(model: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> int:
    """The `nn.Module` calls an eager run of `model` makes, counted by a global hook."""
    calls = 0

    def count(*_: object) -> None:
        nonlocal calls
        calls += 1

    hook = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        with torch.inference_mode():
            model(*example)
    finally:
        hook.remove()
    return calls


def test_eager_pays_dispatch_and_its_share_of_module_calls_for_every_op_and_runs_views_on_no_stream() -> None:
    model = MLP()
    example = model.example_inputs(4)
    device = load_device("h100")
    graph = gnomon.load(model, example)
    report = eager_report(graph, device)
    calls = _module_calls(model, example)
    assert module_calls(graph) == calls > 1
    share = calls * device.module_call_s / len(report.records)
    assert [r.overhead_s for r in report.records] == pytest.approx(
        [device.dispatch_overhead_s + share] * len(report.records)
    )
    assert report.kernels == sum(1 for r in report.records if r.kernel_s > 0)
    assert {span.track for span in report.timeline.kernels if span is not None} == {"stream 0"}


def test_the_transformer_blocks_predicted_trace_has_one_kernel_event_per_launch(tmp_path: Path) -> None:
    model = TransformerBlock()
    example = model.example_inputs(2)
    report = gnomon.analyze(model, example, device="a100")
    path = tmp_path / "transformer_block.trace.json"
    write_json(path, report.trace())
    trace = json.loads(path.read_text())
    check_trace_events(trace)
    events = kernel_events(trace)
    assert len(events) == launches(lower(gnomon.load(model, example)))
    assert [e["name"] for e in events] == [r.name for r in report.records if r.is_kernel]
    # On a GPU every kernel has its dispatch on the host track, and starts no earlier than the dispatch ends.
    dispatches = [e for e in trace["traceEvents"] if e.get("cat") == "dispatch"]
    assert len(dispatches) == len(events)
    assert all(k["ts"] >= d["ts"] + d["dur"] - 1e-6 for d, k in zip(dispatches, events, strict=True))


def test_json_is_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "light_squeezenet", "--device", "generic-cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"] == "gnomon"
    assert data["device"]["calibrated"] is False
    assert data["totals"]["kernels"] == sum(1 for op in data["ops"] if op["kind"] != "runtime")
    assert data["totals"]["flops"] == sum(op["flops"] for op in data["ops"])
    assert data["totals"]["predicted_e2e_s"] == pytest.approx(sum(op["predicted_s"] for op in data["ops"]))


def test_the_table_of_resnet50_and_its_roofline_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from matplotlib import image

    png = tmp_path / "resnet50_roofline.png"
    model = str(model_path("light_resnet50"))
    assert main(["analyze", model, "--device", "h100", "--target", "torch-eager", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "graph.conv" not in out  # ops are shown without their dialect
    assert " conv " in out
    assert "predicted: end to end" in out
    assert "analytical, from datasheets" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(png)
    assert pixels.ndim == 3
    assert pixels.shape[0] > 100
    assert pixels.shape[1] > 100
    assert float(np.std(pixels)) > 0  # something is drawn


def test_svg_by_extension(tmp_path: Path) -> None:
    svg = tmp_path / "roofline.svg"
    assert main(["analyze", "light_squeezenet", "--device", "generic-cpu", "--plot", str(svg)]) == 0
    assert "<svg" in svg.read_text()[:1000]


def test_batch_rebinds_a_dynamic_onnx_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(make_onnx("dynamic_batch", tmp_path / "dynamic.onnx"))
    assert main(["analyze", model, "--device", "a100", "--batch", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops"][0]["shapes"][0][0] == 4
    assert main(["analyze", model, "--device", "a100"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 1
    assert "dynamic" in errors[0]


def test_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = str(model_path("light_squeezenet"))
    assert main(["analyze", model, "--device", "h900"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gnomon: error: unknown device 'h900'; known devices: a100")
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path / "empty"))
    assert main(["analyze", model, "--device", "local"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gnomon: error: no calibration of this machine")
    assert "run `gnomon calibrate` first" in line
    assert main(["analyze", str(batch_fixed_onnx(tmp_path / "fixed.onnx")), "--device", "a100", "--batch", "2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gnomon: error: --batch 2: the input shapes do not fit fixed.onnx: a reshape in the model")


def batch_fixed_onnx(path: Path) -> Path:
    """x [1, 4] reshaped to [4]: a size no batch but 1 fits."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    target = numpy_helper.from_array(np.array([4], np.int64), "target")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "target"], ["y"])],
        "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [target],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_local_is_the_last_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GNOMON_CACHE_DIR", str(tmp_path))
    save_device(load_device("generic-cpu"), tmp_path / "local.toml")
    assert main(["analyze", "light_squeezenet", "--device", "local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"]["name"] == "generic-cpu"


def test_run_profile_trace_has_one_event_per_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(make_onnx("conv_block", tmp_path / "conv_block.onnx"))
    trace_path = tmp_path / "measured.json"
    assert main(["run", model, "--profile", "--json", "--trace", str(trace_path)]) == 0
    profile = json.loads(capsys.readouterr().out)["profile"]
    trace = json.loads(trace_path.read_text())
    check_trace_events(trace)
    events = kernel_events(trace)
    assert [e["name"] for e in events] == [k["kernel"] for k in profile["kernels"]]
    assert [e["dur"] for e in events] == pytest.approx([k["ms"] * 1e3 for k in profile["kernels"]])
    assert main(["run", model, "--trace", str(trace_path)]) == 2
    assert "add --profile" in capsys.readouterr().err


def test_report_renders_every_record() -> None:
    report: Report = gnomon.analyze(MLP(), MLP().example_inputs(2), device="v100", target="torch-eager")
    lines = report.render().splitlines()
    assert len(lines) == 2 + len(report.records) + 3


def test_a_library_kernel_lists_the_calls_the_runtime_makes() -> None:
    import torch

    from gnomon.cost.calls import library_calls
    from gnomon.dialects import kernel
    from gnomon.pipeline import load, run_pipeline

    # A 1x1 convolution's library kernel (graph-to-kernel's own rule; graph-fuse may generate it instead) runs as
    # one BLAS product per image, then its relu epilogue in place.
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 8, 1, bias=False), torch.nn.ReLU()).eval()
    module = run_pipeline(
        load(model, (torch.randn(3, 16, 4, 4),)), "lowering", "test", spec="graph-to-kernel,kernel-to-rt"
    )
    (conv,) = [op for op in module.walk() if isinstance(op, kernel.FuncOp) and not op.is_generated]
    assert conv.profile_name == "aten.mm+relu"
    calls = library_calls(conv)
    assert [call.function for call in calls] == ["aten.mm"] * 3 + ["graph.relu"]
    # Each product moves a third of the convolution's input, weights and output; the relu reads and writes it all.
    assert [call.moved for call in calls[:3]] == [(3 * 16 * 16 + 8 * 16 + 3 * 8 * 16) * 4 // 3] * 3
    assert calls[-1].moved == 2 * 3 * 8 * 16 * 4
    assert not any(call.copy for call in calls)


def test_the_cost_model_knows_which_callee_fuses_its_epilogue_as_the_runtime_does() -> None:
    from gnomon.cost.calls import FUSED_EPILOGUE_CALLEES, cold_call_s, library_call_s
    from gnomon.passes.graph_to_kernel.library import ONEDNN_CONV

    assert FUSED_EPILOGUE_CALLEES == {ONEDNN_CONV}
    # A datasheet GPU prices no call beyond its (zero) library call, copies included, and no cold misses.
    h100 = load_device("h100")
    assert library_call_s(1 << 30, h100, copy=True) == library_call_s(None, h100) == 0.0
    assert cold_call_s(1 << 30, h100) == 0.0


def test_a_convolution_fusing_post_ops_pays_their_cost_once_a_call() -> None:
    """oneDNN's convolution with a post-op (here a residual add and a ReLU) costs `post_op_s` more a call, measured
    by calibration; a kernel that calls no fusing callee pays none of it."""
    import torch

    import gnomon
    from gnomon.cost.calls import post_ops_s
    from gnomon.cost.program import kernel_cost
    from gnomon.dialects import kernel
    from gnomon.passes.graph_to_kernel.library import ONEDNN_CONV

    class Residual(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv(x) + x)

    # Channels-first, where a 3x3 convolution is oneDNN's (channels-last, gnomon generates it).
    executable = gnomon.compile(Residual().eval(), example_inputs=(torch.randn(1, 8, 12, 12),), layout="nchw")
    kernels = [op for op in executable.module.ops if isinstance(op, kernel.FuncOp)]
    (fused,) = [k for k in kernels if k.call is not None and k.call.callee == ONEDNN_CONV]
    local = load_device("generic-cpu")
    priced = {s: replace(local, efficiency=local.efficiency | {"post_op_s": s}) for s in (0.0, 5e-6)}
    with_post_ops, without = (kernel_cost(fused, priced[s]).predicted_s for s in (5e-6, 0.0))
    assert with_post_ops - without == pytest.approx(5e-6)
    assert all(post_ops_s(k, priced[5e-6]) == 0.0 for k in kernels if k is not fused)


def test_module_calls_are_counted_for_torch_modules_only(tmp_path: Path) -> None:
    """Each call of a module counts, a module called twice twice; a TorchScript or ONNX model makes none."""

    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(torch.relu(self.linear(x)))

    model, example = Twice().eval(), (torch.randn(2, 8),)
    assert module_calls(gnomon.load(model, example)) == _module_calls(model, example) == 3
    script = tmp_path / "twice.pt"
    torch.jit.trace(model, example).save(str(script))
    assert module_calls(gnomon.load(str(script), input_shapes={"x": [2, 8]})) == 0
    assert module_calls(gnomon.load(str(make_onnx("conv_block", tmp_path / "conv.onnx")))) == 0
