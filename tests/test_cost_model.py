"""The cost service: devices as data, exact FLOPs against FlopCounterMode, bounds, fused groups, embeddings.

GPU figures come from datasheet device files (`calibrated = false`), so these tests check the models' logic
and their agreement with hand-derivable figures, not measured times.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import gnomon
from gnomon.context import gnomon_context
from gnomon.cost import CostModelError, analytical, efficiency, group_cost, op_cost, op_work, roofline
from gnomon.cost.devices import (
    DeviceError,
    DeviceFileError,
    Interconnect,
    UnknownDeviceError,
    available_devices,
    device_toml,
    load_device,
    save_device,
)
from gnomon.cost.linears import packs_linear_weight
from gnomon.cost.pools import ONEDNN_POOL_COPIES, ONEDNN_POOL_MIN, library_pool
from gnomon.cost.rates import weights_bandwidth
from gnomon.dialects.graph import Graph
from gnomon.dialects.graph.base import GraphOperation
from gnomon.models import DLRM, MLP, SmallCNN, TransformerBlock
from gnomon.passes.graph_cost import annotate_cost
from gnomon.passes.graph_roofline import annotate_roofline

REPO = Path(__file__).resolve().parents[1]
MATRIX_OPS = ("graph.conv", "graph.conv_transpose", "graph.matmul", "graph.linear", "graph.attention")
RECURRENT_OPS = ("graph.lstm", "graph.gru", "graph.rnn")


def parse(text: str) -> ModuleOp:
    module = Parser(gnomon_context(), text).parse_module()
    module.verify()
    return module


def graph_ops(module: ModuleOp) -> list[GraphOperation]:
    return [op for op in module.walk() if isinstance(op, GraphOperation)]


def only(module: ModuleOp, name: str) -> GraphOperation:
    (op,) = [op for op in graph_ops(module) if op.name == name]
    return op


# ---- FLOPs against FlopCounterMode ----


@pytest.mark.parametrize("model_class", [SmallCNN, TransformerBlock, MLP, DLRM])
def test_matrix_flops_equal_flop_counter(model_class: type[torch.nn.Module]) -> None:
    model = model_class()
    inputs = model.example_inputs(2)  # pyright: ignore[reportCallIssue]
    # CPU's fused attention kernel has no FlopCounterMode formula; the math backend runs (and counts) its two bmms.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(*inputs)
    module = gnomon.load(model, example_inputs=inputs)
    ours = sum(op_work(op).flops for op in graph_ops(module) if op.name in MATRIX_OPS)
    assert counter.get_total_flops() > 0
    assert ours == counter.get_total_flops()


def test_transposed_and_grouped_conv_flops_equal_flop_counter() -> None:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 3, padding=1, groups=4),
        torch.nn.ConvTranspose2d(16, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
    ).eval()
    x = torch.randn(2, 8, 10, 10)
    with FlopCounterMode(display=False) as counter:
        model(x)
    module = gnomon.load(model, example_inputs=(x,))
    assert sum(op_work(op).flops for op in graph_ops(module) if op.name in MATRIX_OPS) == counter.get_total_flops()


def test_recurrent_flops_are_the_gate_products() -> None:
    """GRU and RNN: FlopCounterMode's count of the addmms ATen runs for them; LSTM (oneDNN's kernel on CPU, which
    FlopCounterMode does not see): the same formula, 2 x steps x batch x gates x hidden x (input + hidden)."""
    x = torch.randn(7, 2, 16)
    for layer in (torch.nn.GRU(16, 32, num_layers=2), torch.nn.RNN(16, 32, bidirectional=True)):
        with FlopCounterMode(display=False) as counter:
            layer(x)
        module = gnomon.load(layer.eval(), example_inputs=(x,))
        assert counter.get_total_flops() > 0
        ours = sum(op_work(op).flops for op in graph_ops(module) if op.name in RECURRENT_OPS)
        assert ours == counter.get_total_flops()
    lstm = only(gnomon.load(torch.nn.LSTM(16, 32).eval(), example_inputs=(x,)), "graph.lstm")
    assert op_work(lstm).flops == 2 * 7 * 2 * 4 * 32 * (16 + 32)
    assert op_cost(lstm, load_device("generic-cpu")).model == "recurrent"


def test_every_graph_op_has_a_cost() -> None:
    # The dialect's round-trip file uses every op; with its `?` dims made static, every op gets priced.
    text = (REPO / "filecheck/dialects/graph/ops.mlir").read_text()
    text = re.sub(r", #graph\.dims<\[[^]]*\]>", "", text).replace("?", "2")
    ops = graph_ops(Parser(gnomon_context(), text).parse_module())  # some ops no longer verify: not needed here
    # Control flow (graph.if, graph.while, graph.yield) is priced by its regions: `gnomon.cost.control_flow`.
    assert {op.name for op in ops} == {op.name for op in Graph.operations if issubclass(op, GraphOperation)}
    h100 = load_device("h100")
    for op in ops:
        cost = op_cost(op, h100)
        assert cost.predicted_s >= cost.kernel_s >= 0
        assert min(cost.bytes, cost.flops) >= 0


# ---- devices ----


def test_shipped_devices_load() -> None:
    assert set(available_devices()) >= {"v100", "a100", "h100", "h200", "generic-cpu"}
    for name in available_devices():
        device = load_device(name)
        assert device.name == name
        assert not device.calibrated
        assert device.source
        assert device.peak_flops["fp32"] > 0
        capacities = [level.capacity_bytes for level in device.memory]
        assert capacities == sorted(capacities)  # innermost first
        assert min(device.launch_overhead_s, device.dispatch_overhead_s) > 0
        assert "not measured" in device.provenance
    assert load_device("generic-cpu").kind == "cpu"
    assert load_device("generic-cpu").interconnect is None
    h100 = load_device("h100")
    assert (h100.kind, h100.cores, h100.peak_flops["fp16"], h100.dram.bandwidth_bytes_per_s) == (
        "gpu", 132, 989.5e12, 3.35e12
    )  # fmt: skip
    assert h100.interconnect == Interconnect("nvlink4", 900e9, 2e-6)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    device = load_device("a100")
    calibrated = replace(
        device, name='lab "a100"', calibrated=True, efficiency={"gemm": 0.7}, call_warm_s={"aten.layer_norm": 2e-5}
    )
    path = tmp_path / "measured.toml"
    save_device(calibrated, path)
    assert load_device(str(path)) == calibrated
    assert device_toml(load_device(str(path))) == path.read_text()


def test_unknown_device_lists_the_known_ones() -> None:
    with pytest.raises(UnknownDeviceError, match="unknown device 'h900'; known devices: a100, generic-cpu, h100"):
        load_device("h900")


def test_missing_device_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(DeviceFileError, match=f"device file {re.escape(str(missing))} does not exist"):
        load_device(str(missing))


def _without(text: str, line: str) -> str:
    assert line in text
    return text.replace(line + "\n", "", 1)


@pytest.mark.parametrize(
    ("drop", "key"),
    [
        ("cores = 132", "cores"),
        ("fp32 = 67e12", "peak_flops.fp32"),
        ("bandwidth_bytes_per_s = 10.1e12", "memory[1].bandwidth_bytes_per_s"),
        ("latency_s = 2e-06", "interconnect.latency_s"),
    ],
)
def test_device_file_missing_a_key(tmp_path: Path, drop: str, key: str) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(_without((REPO / "compiler/cost/devices/h100.toml").read_text(), drop))
    with pytest.raises(DeviceFileError, match=re.escape(f"device file {path}: missing key '{key}'")) as error:
        load_device(str(path))
    assert "\n" not in str(error.value)


def test_device_file_with_a_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text((REPO / "compiler/cost/devices/h100.toml").read_text().replace("cores = 132", 'cores = "many"'))
    with pytest.raises(DeviceFileError, match=re.escape(f"{path}: expected a positive integer at 'cores'")):
        load_device(str(path))
    path.write_text((REPO / "compiler/cost/devices/h100.toml").read_text().replace("3.35e12", "0"))
    with pytest.raises(
        DeviceFileError, match=re.escape("expected a positive number at 'memory[2].bandwidth_bytes_per_s'")
    ):
        load_device(str(path))
    path.write_text("name = [")
    with pytest.raises(DeviceFileError, match="not valid TOML"):
        load_device(str(path))


def test_missing_peak_names_the_device_and_dtype() -> None:
    with pytest.raises(DeviceError, match="device v100 lists no peak_flops for bf16"):
        load_device("v100").peak("bf16")


def test_efficiency_table_overrides_the_defaults(tmp_path: Path) -> None:
    h100 = load_device("h100")
    slow = replace(h100, efficiency={"gemm": 0.4, "gemm_tile_m": 128.0})
    assert (efficiency(slow).gemm, efficiency(slow).gemm_tile_m) == (0.4, 128)
    module = parse(f"""
    func.func @f(%a: tensor<4096x4096xf16>, %b: tensor<4096x4096xf16>) -> tensor<4096x4096xf16> {{
      %0 = graph.matmul %a, %b : {MATMUL_4096_F16}
      func.return %0 : tensor<4096x4096xf16>
    }}""")
    matmul = only(module, "graph.matmul")
    assert op_cost(matmul, slow).compute_s > 1.9 * op_cost(matmul, h100).compute_s
    with pytest.raises(DeviceError, match="unknown \\[efficiency\\] key 'gem'"):
        efficiency(replace(h100, efficiency={"gem": 0.4}))


# ---- roofline and analytical models ----

MATMUL_4096_F16 = "(tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<4096x4096xf16>"


def test_big_matmul_is_compute_bound_and_relu_memory_bound_on_h100() -> None:
    module = parse("""
    func.func @f(%a: tensor<4096x4096xf32>, %b: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
      %0 = graph.matmul %a, %b : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
      %1 = graph.relu %0 : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
      func.return %1 : tensor<4096x4096xf32>
    }""")
    h100 = load_device("h100")
    matmul, relu = only(module, "graph.matmul"), only(module, "graph.relu")
    figures = roofline(matmul, h100)
    assert figures.flops == 2 * 4096**3
    assert figures.bytes == 3 * 4096**2 * 4
    assert figures.bound == "compute"
    assert figures.time_s == pytest.approx(2 * 4096**3 / 67e12)
    assert op_cost(matmul, h100).bound == "compute"
    assert roofline(relu, h100).bound == "memory"
    assert roofline(relu, h100).time_s == pytest.approx(2 * 4096**2 * 4 / 3.35e12)
    assert op_cost(relu, h100).bound == "memory"
    # The analytical model never beats the roofline: it only adds inefficiencies.
    for op in (matmul, relu):
        assert op_cost(op, h100).kernel_s >= roofline(op, h100).time_s


def test_a_transcendental_costs_its_vector_instructions_not_its_flop() -> None:
    # Both count 1 FLOP per element in the roofline; pow is exp(y log x), 28 vector instructions.
    module = parse("""
    func.func @f(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>)
        -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>) {
      %0 = graph.add %a, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
      %1 = graph.pow %a, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
      func.return %0, %1 : tensor<1024x1024xf32>, tensor<1024x1024xf32>
    }""")
    cpu = load_device("generic-cpu")
    add, power = only(module, "graph.add"), only(module, "graph.pow")
    assert roofline(add, cpu).flops == roofline(power, cpu).flops == 1024**2
    assert op_cost(power, cpu).compute_s == pytest.approx(28 * op_cost(add, cpu).compute_s)


def test_a_layer_norm_pays_a_fixed_cost_per_row() -> None:
    """ATen's layer norm sets up each row's moments: many short rows cost more than few long ones of as many
    elements."""
    from gnomon.cost.rates import LAYER_NORM_ROW_INSTRUCTIONS, VECTOR_INSTRUCTIONS
    from gnomon.dialects.graph.nn import LayerNormOp

    def norm(rows: int, columns: int) -> str:
        t, c = f"tensor<{rows}x{columns}xf32>", f"tensor<{columns}xf32>"
        return (
            f"func.func @f(%x: {t}, %g: {c}, %b: {c}) -> {t} {{\n  %0 = graph.layer_norm %x, %g, %b "
            f"{{axis = 1 : i64, epsilon = 1.000000e-05 : f64}} : ({t}, {c}, {c}) -> {t}\n  func.return %0 : {t}\n}}"
        )

    cpu = load_device("generic-cpu")
    rate = cpu.peak("fp32") * efficiency(cpu).vector
    short, long = (op_cost(only(parse(norm(r, c)), "graph.layer_norm"), cpu) for r, c in ((4096, 16), (16, 4096)))
    assert short.compute_s == pytest.approx(
        (VECTOR_INSTRUCTIONS[LayerNormOp] * 4096 * 16 + LAYER_NORM_ROW_INSTRUCTIONS * 4096) / rate
    )
    assert short.compute_s - long.compute_s == pytest.approx(LAYER_NORM_ROW_INSTRUCTIONS * (4096 - 16) / rate)


def test_gemm_wave_quantization_on_h100() -> None:
    # m = 256 x 132 rows, n = 128: 132 tiles of 256x128 fill the 132 SMs once; 133 tiles need a second wave.
    def matmul(rows: int) -> GraphOperation:
        module = parse(f"""
        func.func @f(%a: tensor<{rows}x4096xf32>, %b: tensor<4096x128xf32>) -> tensor<{rows}x128xf32> {{
          %0 = graph.matmul %a, %b : (tensor<{rows}x4096xf32>, tensor<4096x128xf32>) -> tensor<{rows}x128xf32>
          func.return %0 : tensor<{rows}x128xf32>
        }}""")
        return only(module, "graph.matmul")

    full, spilled = matmul(256 * 132), matmul(256 * 133)
    h100 = load_device("h100")
    one_tile_size = replace(h100, efficiency={"gemm_min_tile": 256.0})
    assert op_cost(spilled, one_tile_size).compute_s == pytest.approx(2 * op_cost(full, one_tile_size).compute_s)
    # With smaller tiles to choose from, the spill costs less, but still more than its 1/132 more work.
    assert op_cost(spilled, h100).kernel_s > 1.02 * op_cost(full, h100).kernel_s


def test_small_problems_pay_launch_and_tile_overheads() -> None:
    module = parse("""
    func.func @f(%x: tensor<2x64xf32>, %w: tensor<10x64xf32>) -> tensor<2x10xf32> {
      %0 = graph.linear %x, %w : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
      %1 = graph.relu %0 : (tensor<2x10xf32>) -> tensor<2x10xf32>
      func.return %1 : tensor<2x10xf32>
    }""")
    for device in (load_device("h100"), load_device("generic-cpu")):
        linear, relu = only(module, "graph.linear"), only(module, "graph.relu")
        # A 2x10 output pads the smallest tile (GPU 32x32, CPU 6x16), and each tile pays its K overhead.
        assert op_cost(linear, device).compute_s > 3 * roofline(linear, device).compute_s
        assert op_cost(relu, device).predicted_s == pytest.approx(device.launch_overhead_s, rel=0.01)


def test_depthwise_conv_is_memory_bound_on_h100() -> None:
    module = parse("""
    func.func @f(%x: tensor<8x256x56x56xf32>, %w: tensor<256x1x3x3xf32>) -> tensor<8x256x56x56xf32> {
      %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
          groups = 256 : i64} : (tensor<8x256x56x56xf32>, tensor<256x1x3x3xf32>) -> tensor<8x256x56x56xf32>
      func.return %0 : tensor<8x256x56x56xf32>
    }""")
    cost = op_cost(only(module, "graph.conv"), load_device("h100"))
    assert cost.model == "depthwise-conv"
    assert cost.flops == 2 * 8 * 256 * 56 * 56 * 9
    assert (cost.bound, cost.roofline_bound) == ("memory", "memory")


def test_dynamic_shapes_ask_for_static_ones() -> None:
    module = parse("""
    func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %0 = graph.relu %x : (tensor<?x64xf32>) -> tensor<?x64xf32>
      func.return %0 : tensor<?x64xf32>
    }""")
    with pytest.raises(CostModelError, match=r"graph\.relu has a dynamic shape \[\?, 64\].*static shapes.*--batch"):
        op_cost(only(module, "graph.relu"), load_device("h100"))


def test_generated_loops_stream_at_their_own_fitted_rate() -> None:
    """gnomon's generated kernels stream at `generated_stream` of a cache level's bandwidth, the library's at
    `stream` (the calibration fits them apart); a device file with only `stream` gives both."""
    module = parse("""
    func.func @f(%x: tensor<64x1024xf32>, %y: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
      %0 = graph.add %x, %y : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
      %1 = graph.relu %0 : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
      func.return %1 : tensor<64x1024xf32>
    }""")
    cpu = load_device("generic-cpu")
    split = replace(cpu, efficiency={"stream": 0.2, "generated_stream": 0.4})
    relu, ops = only(module, "graph.relu"), graph_ops(module)
    for generated, factor in ((False, 0.2), (True, 0.4)):
        alone, fused = op_cost(relu, split, generated=generated), group_cost(ops, split, generated=generated)
        assert alone.memory_s == pytest.approx(op_cost(relu, replace(cpu, efficiency={"stream": factor})).memory_s)
        assert fused.memory_s == pytest.approx(group_cost(ops, replace(cpu, efficiency={"stream": factor})).memory_s)
    assert efficiency(replace(cpu, efficiency={"stream": 0.3})).generated_stream == 0.3


# ---- fused groups ----


def test_group_cost_drops_intermediate_bytes() -> None:
    module = parse("""
    func.func @f(%a: tensor<512x256xf32>, %b: tensor<256x128xf32>, %c: tensor<128xf32>) -> tensor<512x128xf32> {
      %0 = graph.matmul %a, %b : (tensor<512x256xf32>, tensor<256x128xf32>) -> tensor<512x128xf32>
      %1 = graph.add %0, %c : (tensor<512x128xf32>, tensor<128xf32>) -> tensor<512x128xf32>
      %2 = graph.relu %1 : (tensor<512x128xf32>) -> tensor<512x128xf32>
      func.return %2 : tensor<512x128xf32>
    }""")
    ops = [only(module, name) for name in ("graph.matmul", "graph.add", "graph.relu")]
    for device in (load_device("h100"), load_device("generic-cpu")):
        fused = group_cost(ops, device)
        alone = [op_cost(op, device) for op in ops]
        a, b, c, out = 512 * 256 * 4, 256 * 128 * 4, 128 * 4, 512 * 128 * 4
        assert fused.bytes == a + b + c + out
        # Each unfused op writes its result and the next reads it back: two intermediates, twice each.
        assert sum(cost.bytes for cost in alone) - fused.bytes == 4 * out
        assert fused.flops == sum(cost.flops for cost in alone)
        assert fused.launch_s == device.launch_overhead_s
        assert fused.model == "fused"
        assert fused.predicted_s < sum(cost.predicted_s for cost in alone)


def test_group_cost_follows_views() -> None:
    # The relu's result leaves the group through a reshape, and the reshape's input comes from outside.
    module = parse("""
    func.func @f(%x: tensor<4x8xf32>) -> tensor<32xf32> {
      %0 = graph.reshape %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %1 = graph.relu %0 : (tensor<8x4xf32>) -> tensor<8x4xf32>
      %2 = graph.reshape %1 : (tensor<8x4xf32>) -> tensor<32xf32>
      func.return %2 : tensor<32xf32>
    }""")
    fused = group_cost(graph_ops(module), load_device("generic-cpu"))
    assert fused.bytes == 2 * 32 * 4


# ---- embeddings ----


def _embedding_bag(indices: str) -> str:
    return f"""
    func.func @f(%table: tensor<1000000x64xf32>, %ids: tensor<8xi64>) -> (tensor<2x64xf32>, tensor<2x64xf32>) {{
      %const = graph.constant {{value = dense<{indices}> : tensor<8xi64>}} : () -> tensor<8xi64>
      %offsets = graph.constant {{value = dense<[0, 4]> : tensor<2xi64>}} : () -> tensor<2xi64>
      %known = graph.embedding_bag %table, %const, %offsets {{mode = "sum", include_last_offset = false}}
          : (tensor<1000000x64xf32>, tensor<8xi64>, tensor<2xi64>) -> tensor<2x64xf32>
      %unknown = graph.embedding_bag %table, %ids, %offsets {{mode = "sum", include_last_offset = false}}
          : (tensor<1000000x64xf32>, tensor<8xi64>, tensor<2xi64>) -> tensor<2x64xf32>
      func.return %known, %unknown : tensor<2x64xf32>, tensor<2x64xf32>
    }}"""


def test_embedding_bag_counts_distinct_rows_of_constant_indices() -> None:
    module = parse(_embedding_bag("[7, 7, 7, 3, 3, 7, 9, 9]"))
    known, unknown = [op for op in graph_ops(module) if op.name == "graph.embedding_bag"]
    row, streams = 64 * 4, 8 * 8 + 2 * 8 + 2 * 64 * 4  # indices, offsets, result
    assert op_work(known).bytes == 3 * row + streams  # rows 3, 7, 9
    assert op_work(unknown).bytes == 8 * row + streams  # runtime indices: all assumed distinct
    assert op_work(known).flops == op_work(unknown).flops == (8 - 2) * 64
    for device in (load_device("h100"), load_device("generic-cpu")):
        assert op_cost(known, device).memory_s < op_cost(unknown, device).memory_s
        assert op_cost(known, device).model == "embedding"


def test_embedding_rows_are_fetched_in_whole_granules() -> None:
    module = parse(_embedding_bag("[0, 1, 2, 3, 4, 5, 6, 7]"))
    known = next(op for op in graph_ops(module) if op.name == "graph.embedding_bag")
    cpu = load_device("generic-cpu")
    # 8 distinct 256-byte rows from a 256 MB table in DRAM, whole 64-byte lines; indices and result from cache.
    rows_s = 8 * 256 / cpu.dram.bandwidth_bytes_per_s
    assert op_cost(known, cpu).memory_s > rows_s / efficiency(cpu).stream


def test_weights_that_do_not_fit_the_caches_stream_from_dram() -> None:
    # A batch-1 linear with 1 MB of weights: they fit the caches alone, but not with a whole model's weights.
    module = parse("""
    func.func @f(%x: tensor<1x512xf32>, %w: tensor<512x512xf32>) -> tensor<1x512xf32> {
      %0 = graph.linear %x, %w : (tensor<1x512xf32>, tensor<512x512xf32>) -> tensor<1x512xf32>
      func.return %0 : tensor<1x512xf32>
    }""")
    linear, cpu = only(module, "graph.linear"), load_device("generic-cpu")
    weights_s = 512 * 512 * 4 / (cpu.dram.bandwidth_bytes_per_s * efficiency(cpu).stream_dram)
    assert op_cost(linear, cpu).memory_s < weights_s
    assert op_cost(linear, cpu, weights_in_dram=True).memory_s == pytest.approx(weights_s, rel=0.01)


def test_a_fused_linear_streams_its_weights_from_dram_too() -> None:
    module = parse("""
    func.func @f(%x: tensor<1x512xf32>, %w: tensor<512x512xf32>) -> tensor<1x512xf32> {
      %0 = graph.linear %x, %w : (tensor<1x512xf32>, tensor<512x512xf32>) -> tensor<1x512xf32>
      %1 = graph.relu %0 : (tensor<1x512xf32>) -> tensor<1x512xf32>
      func.return %1 : tensor<1x512xf32>
    }""")
    ops, cpu = [only(module, "graph.linear"), only(module, "graph.relu")], load_device("generic-cpu")
    weights_s = 512 * 512 * 4 / (cpu.dram.bandwidth_bytes_per_s * efficiency(cpu).stream_dram)
    assert group_cost(ops, cpu).memory_s < weights_s
    assert group_cost(ops, cpu, weights_in_dram=True).memory_s == pytest.approx(weights_s, rel=0.01)


def _linear_module(rows: int, width: int) -> ModuleOp:
    x, w = f"tensor<{rows}x{width}xf32>", f"tensor<{width}x{width}xf32>"
    return parse(f"""
    func.func @f(%x: {x}, %w: {w}) -> {x} {{
      %0 = graph.linear %x, %w : ({x}, {w}) -> {x}
      func.return %0 : {x}
    }}""")


def test_a_cpu_blas_packs_weights_from_dram_before_multiplying() -> None:
    # 64 rows: a GEMM, whose weights a CPU BLAS packs (a pass added to its FMAs); one row is streamed, overlapped.
    linear, cpu = only(_linear_module(64, 256), "graph.linear"), load_device("generic-cpu")
    assert not packs_linear_weight(linear)
    pack_s = 256 * 256 * 4 / (cpu.dram.bandwidth_bytes_per_s * efficiency(cpu).gemm_pack)
    cold, warm = op_cost(linear, cpu, weights_in_dram=True), op_cost(linear, cpu)
    assert cold.compute_s == pytest.approx(warm.compute_s + pack_s)
    assert cold.memory_s == warm.memory_s
    gpu = load_device("a100")
    assert op_cost(linear, gpu, weights_in_dram=True).compute_s == op_cost(linear, gpu).compute_s


def test_a_linear_weight_the_runtime_packed_once_is_not_packed_again_per_call() -> None:
    """512 x 512 at 64 rows is large enough for the runtime to pack the weight into oneDNN's layout when it binds
    the kernel (`packs_linear_weight`): a call pays no packing pass, only the weights' stream from DRAM."""
    linear, cpu = only(_linear_module(64, 512), "graph.linear"), load_device("generic-cpu")
    assert packs_linear_weight(linear)
    cold, warm = op_cost(linear, cpu, weights_in_dram=True), op_cost(linear, cpu)
    assert cold.compute_s == pytest.approx(warm.compute_s)
    once = 512 * 512 * 4 / weights_bandwidth(cpu, efficiency(cpu))
    assert once <= cold.memory_s < 2 * once  # once a call, not once a row (64 rows)


@pytest.mark.parametrize(
    ("rows", "inputs", "outputs", "packed"),
    [(1, 2048, 1000, True), (64, 1024, 2048, True), (1, 512, 256, False), (256, 13, 512, False), (8, 64, 64, False)],
)
def test_the_runtime_packs_a_linear_weight_only_for_large_products(
    rows: int, inputs: int, outputs: int, packed: bool
) -> None:
    x, w = f"tensor<{rows}x{inputs}xf32>", f"tensor<{outputs}x{inputs}xf32>"
    module = parse(f"""
    func.func @f(%x: {x}, %w: {w}) -> tensor<{rows}x{outputs}xf32> {{
      %0 = graph.linear %x, %w : ({x}, {w}) -> tensor<{rows}x{outputs}xf32>
      func.return %0 : tensor<{rows}x{outputs}xf32>
    }}""")
    assert packs_linear_weight(only(module, "graph.linear")) == packed


def _conv_module(channels: int, size: int) -> ModuleOp:
    x, w = f"tensor<1x{channels}x{size}x{size}xf32>", f"tensor<{channels}x{channels}x3x3xf32>"
    return parse(f"""
    func.func @f(%x: {x}, %w: {w}) -> {x} {{
      %0 = graph.conv %x, %w {{strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
        groups = 1 : i64}} : ({x}, {w}) -> {x}
      func.return %0 : {x}
    }}""")


def test_a_cpu_convolution_reorders_weights_from_dram_unless_the_runtime_packed_them() -> None:
    """A plain weight is reordered to the library's blocked layout on every call (64 > 64 3x3 at 56x56: its weight
    is smaller than its activations, so the runtime leaves it plain); a weight larger than the activations the
    runtime packs once (ResNet-50's last 3x3 convolution, 9.4 MB), so only its stream from DRAM remains."""
    cpu = load_device("generic-cpu")
    plain = only(_conv_module(64, 56), "graph.conv")
    pack_s = 64 * 64 * 9 * 4 / (cpu.dram.bandwidth_bytes_per_s * efficiency(cpu).gemm_pack)
    cold, warm = op_cost(plain, cpu, weights_in_dram=True), op_cost(plain, cpu)
    assert cold.model == "conv"
    assert cold.compute_s == pytest.approx(warm.compute_s + pack_s)
    packed = only(_conv_module(512, 7), "graph.conv")
    cold, warm = op_cost(packed, cpu, weights_in_dram=True), op_cost(packed, cpu)
    assert cold.compute_s == pytest.approx(warm.compute_s)
    stream_s = 512 * 512 * 9 * 4 / (cpu.dram.bandwidth_bytes_per_s * efficiency(cpu).stream_dram)
    assert cold.memory_s >= stream_s


def test_a_cpu_blas_streams_weights_from_dram_once_per_row_of_a_matrix_vector_product() -> None:
    module = parse("""
    func.func @f(%x: tensor<2x512xf32>, %w: tensor<512x512xf32>) -> tensor<2x512xf32> {
      %0 = graph.linear %x, %w : (tensor<2x512xf32>, tensor<512x512xf32>) -> tensor<2x512xf32>
      func.return %0 : tensor<2x512xf32>
    }""")
    linear, cpu = only(module, "graph.linear"), load_device("generic-cpu")
    weights_s = 512 * 512 * 4 / (cpu.dram.bandwidth_bytes_per_s * efficiency(cpu).stream_dram)
    assert op_cost(linear, cpu, weights_in_dram=True).memory_s == pytest.approx(2 * weights_s, rel=0.01)


def test_a_kernel_on_fewer_cores_gets_their_share() -> None:
    module = parse("""
    func.func @f(%a: tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> {
      %0 = graph.relu %a : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
      func.return %0 : tensor<1x64x56x56xf32>
    }""")
    relu, cpu = only(module, "graph.relu"), load_device("generic-cpu")
    everywhere, alone = op_cost(relu, cpu), op_cost(relu, cpu, cores=1)
    assert alone.kernel_s == pytest.approx(cpu.cores * everywhere.kernel_s)
    assert alone.launch_s == everywhere.launch_s


def test_library_calls_pay_their_call_cost_at_launch() -> None:
    module = parse("""
    func.func @f(%a: tensor<4x500xf32>) -> tensor<4x500xf32> {
      %0 = graph.softmax %a {axis = 1 : i64} : (tensor<4x500xf32>) -> tensor<4x500xf32>
      func.return %0 : tensor<4x500xf32>
    }""")
    softmax, cpu = only(module, "graph.softmax"), load_device("generic-cpu")
    called = op_cost(softmax, cpu, library=True)
    assert called.launch_s == pytest.approx(cpu.launch_overhead_s + efficiency(cpu).library_call_s)
    assert called.kernel_s == op_cost(softmax, cpu).kernel_s


def test_pools_and_transposes_have_their_own_rates() -> None:
    module = parse("""
    func.func @f(%a: tensor<1x16x56x56xf32>, %c: tensor<1x1x68x40x40xf32>, %t: tensor<512x2048xf32>)
        -> (tensor<1x16x28x28xf32>, tensor<1x16x28x28xf32>, tensor<1x1x64x40x40xf32>, tensor<2048x512xf32>) {
      %0 = graph.max_pool %a {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
        dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x16x56x56xf32>) -> tensor<1x16x28x28xf32>
      %1 = graph.avg_pool %a {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
        count_include_pad = true, ceil_mode = false} : (tensor<1x16x56x56xf32>) -> tensor<1x16x28x28xf32>
      %2 = graph.avg_pool %c {kernel = array<i64: 5, 1, 1>, strides = array<i64: 1, 1, 1>,
        pads = array<i64: 0, 0, 0, 0, 0, 0>, count_include_pad = true, ceil_mode = false}
        : (tensor<1x1x68x40x40xf32>) -> tensor<1x1x64x40x40xf32>
      %3 = graph.transpose %t {permutation = array<i64: 1, 0>} : (tensor<512x2048xf32>) -> tensor<2048x512xf32>
      func.return %0, %1, %2, %3 : tensor<1x16x28x28xf32>, tensor<1x16x28x28xf32>, tensor<1x1x64x40x40xf32>,
        tensor<2048x512xf32>
    }""")
    cpu = load_device("generic-cpu")
    eff = efficiency(cpu)
    max_pool = only(module, "graph.max_pool")
    avg_pool, channel_pool = [op for op in graph_ops(module) if op.name == "graph.avg_pool"]
    # Below ONEDNN_POOL_MIN input elements ATen pools: a 2x2 window's output costs a CPU the floor
    # (POOL_OUTPUT_FLOOR): 9 adds for an average, 5 compares for a max, each at MAX_POOL_INSTRUCTIONS (2) adds.
    assert library_pool(max_pool) == library_pool(avg_pool) == "aten"
    average_adds = 16 * 28 * 28 * 9
    assert op_cost(avg_pool, cpu).compute_s == pytest.approx(average_adds / (cpu.peak("fp32") * eff.pool))
    assert op_cost(max_pool, cpu).compute_s == pytest.approx(op_cost(avg_pool, cpu).compute_s * 2 * 5 / 9)
    gpu = load_device("a100")  # no floor: 3 compares against 4 adds
    assert op_cost(max_pool, gpu).compute_s == pytest.approx(op_cost(avg_pool, gpu).compute_s * 2 * 3 / 4)
    # A window along one dim (LRN's channel pool) is its shifted slices summed, at the vector rate.
    assert library_pool(channel_pool) == "window-sums"
    work = op_work(channel_pool)
    assert op_cost(channel_pool, cpu).compute_s == pytest.approx(work.flops / (cpu.peak("fp32") * eff.vector))
    transpose = only(module, "graph.transpose")
    assert op_cost(transpose, cpu).model == "transpose"
    streamed = replace(cpu, efficiency={"transpose": 1.0})
    assert op_cost(transpose, cpu).memory_s == pytest.approx(op_cost(transpose, streamed).memory_s / eff.transpose)


def test_large_pools_are_priced_as_onednn_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """From ONEDNN_POOL_MIN input elements a 2-D float32 pool runs on oneDNN: its vectorized windows, and its bytes
    moved ONEDNN_POOL_COPIES times (into the blocked layout, the pooling, back out, the NaN check)."""
    module = parse("""
    func.func @f(%a: tensor<1x64x56x56xf32>) -> (tensor<1x64x27x27xf32>, tensor<1x64x26x26xf32>) {
      %0 = graph.max_pool %a {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
        dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x64x56x56xf32>) -> tensor<1x64x27x27xf32>
      %1 = graph.max_pool %a {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
        dilations = array<i64: 2, 2>, ceil_mode = false} : (tensor<1x64x56x56xf32>) -> tensor<1x64x26x26xf32>
      func.return %0, %1 : tensor<1x64x27x27xf32>, tensor<1x64x26x26xf32>
    }""")
    plain, dilated = [op for op in graph_ops(module) if op.name == "graph.max_pool"]
    assert 64 * 56 * 56 >= ONEDNN_POOL_MIN
    assert library_pool(plain) == "onednn"
    assert library_pool(dilated) == "aten"  # oneDNN's max pooling takes no dilation
    cpu = load_device("generic-cpu")
    work = op_work(plain)
    assert op_cost(plain, cpu).compute_s == pytest.approx(work.flops / (cpu.peak("fp32") * efficiency(cpu).vector))
    moved = op_cost(plain, cpu).memory_s
    monkeypatch.setattr(analytical, "ONEDNN_POOL_COPIES", 1)
    assert moved == pytest.approx(ONEDNN_POOL_COPIES * op_cost(plain, cpu).memory_s)


def test_embedding_lookups_pay_their_index_handling() -> None:
    module = parse(_embedding_bag("[0, 1, 2, 3, 4, 5, 6, 7]"))
    known = next(op for op in graph_ops(module) if op.name == "graph.embedding_bag")
    cpu = load_device("generic-cpu")
    free = replace(cpu, efficiency={"lookup_s": 1e-12})
    assert op_cost(known, cpu).compute_s - op_cost(known, free).compute_s == pytest.approx(
        8 * (efficiency(cpu).lookup_s - 1e-12)
    )


# ---- the passes' reports ----


def test_annotations_and_reports_agree() -> None:
    model = SmallCNN()
    module = gnomon.load(model, example_inputs=model.example_inputs(1))
    device = load_device("a100")
    report = annotate_cost(module, device)
    assert [r.op for r in report.records] == graph_ops(module)
    assert report.total_flops == sum(r.figures.flops for r in report.records) > 0
    assert report.total_predicted_s == pytest.approx(sum(r.figures.predicted_s for r in report.records))
    for record in report.records:
        attributes = record.op.attributes
        assert attributes["gnomon.model"].data == record.figures.model  # pyright: ignore[reportAttributeAccessIssue]
        assert attributes["gnomon.time_s"].value.data == pytest.approx(record.figures.predicted_s, rel=1e-5)  # pyright: ignore[reportAttributeAccessIssue]
    roof = annotate_roofline(module, device)
    assert roof.total_flops == report.total_flops
    assert roof.total_time_s == pytest.approx(sum(r.figures.roofline_s for r in report.records))
    assert roof.total_bytes == report.total_bytes
    assert module.attributes["gnomon.device"].data == "a100"  # pyright: ignore[reportAttributeAccessIssue]


def test_the_cost_package_example_runs() -> None:
    """The typed API's example in `gnomon.cost`'s docstring: one op, a fused group, a program, both targets."""
    import doctest

    import gnomon.cost

    results = doctest.testmod(gnomon.cost)
    assert results.attempted > 0
    assert results.failed == 0


def test_a_kernel_writing_in_place_from_dram_pays_no_write_allocate() -> None:
    """An update over tensors beyond the last cache writes back lines it read: its memory time is the out-of-place
    kernel's (whose fitted efficiency includes fetching each written line first) times reads-and-writes over
    reads, writes and fetches. In cache, nothing changes."""
    device = load_device("generic-cpu")
    last_cache = device.memory[-2].capacity_bytes * (device.cores if device.memory[-2].per_core else 1)
    streamed = analytical.OpCost(3 * last_cache, 3 * last_cache, 1e-3, "memory", 1e-4, 2e-3, 1e-6, "stream")
    written = last_cache  # buf = momentum * buf + grad: reads two tensors, writes one
    assert analytical.written_in_place(streamed, written, device).memory_s == pytest.approx(2e-3 * 3 / 4)
    cached = replace(streamed, bytes=last_cache // 8)
    assert analytical.written_in_place(cached, written, device) == cached


def test_a_training_kernel_is_priced_at_its_familys_fitted_rate() -> None:
    """Batch norm with batch statistics, pooling gradients and an embedding's dense gradient run at the fraction of
    a streaming kernel's rate that the calibration suite's kernels of their family set: half the rate, twice the
    time."""
    from gnomon.dialects.graph.nn import BatchNormTrainOp
    from gnomon.runtime.calibration.programs import Program, batch_norm_train

    program = Program()
    x, g, b = program.argument("x", (8, 64, 28, 28)), program.argument("g", (64,)), program.argument("b", (64,))
    batch_norm_train(program, "bn", x, g, b)
    (op,) = [o for o in program.module().walk() if isinstance(o, BatchNormTrainOp)]
    device = load_device("generic-cpu")
    slower = replace(device, efficiency={**device.efficiency, "norm_train": 0.25})
    faster = replace(device, efficiency={**device.efficiency, "norm_train": 0.5})
    assert op_cost(op, slower).kernel_s == pytest.approx(2 * op_cost(op, faster).kernel_s)


def test_a_cpu_blas_pays_for_copying_its_operands_into_panels_most_at_few_rows() -> None:
    """A CPU BLAS copies B (k x n) into its panels once a call and reuses them for every row: at 16 rows the copy
    costs as much as `gemm_pack_rows` more rows would, per FLOP far more than at 512 rows. cuBLAS copies nothing."""

    def linear(rows: int) -> GraphOperation:
        x, y = f"tensor<{rows}x1024xf32>", f"tensor<{rows}x1024xf32>"
        return only(parse(f"""
        func.func @f(%x: {x}, %w: tensor<1024x1024xf32>) -> {y} {{
          %0 = graph.linear %x, %w : ({x}, tensor<1024x1024xf32>) -> {y}
          func.return %0 : {y}
        }}"""), "graph.linear")  # fmt: skip

    cpu = load_device("generic-cpu")
    unpacked = replace(cpu, efficiency={**cpu.efficiency, "gemm_pack_rows": 0.0, "gemm_pack_columns": 0.0})
    few, many = linear(16), linear(512)
    eff = efficiency(cpu)
    packing_s = 2 * 1024 * (eff.gemm_pack_rows * 1024 + eff.gemm_pack_columns * 16) / (cpu.peak("fp32") * eff.gemm)
    assert op_cost(few, cpu).compute_s == pytest.approx(op_cost(few, unpacked).compute_s + packing_s)
    per_row = [op_cost(op, cpu).compute_s / rows for op, rows in ((few, 16), (many, 512))]
    assert per_row[0] > 1.5 * per_row[1]
    gpu = load_device("a100")
    assert efficiency(gpu).gemm_pack_rows == 0
    assert efficiency(gpu).gemm_pack_columns == 0


def test_eager_results_beyond_the_mmap_threshold_fault_their_pages_in() -> None:
    """An eager CPU op's result above glibc's mmap threshold is fresh memory each run: its kernel pays
    `page_fault_s` per 4 KiB page; one below reuses freed memory, and a GPU's caching allocator reuses blocks."""
    from gnomon.cost.eager import MMAP_THRESHOLD, PAGE_BYTES, eager_op_cost

    def relu(elements: int) -> GraphOperation:
        t = f"tensor<{elements}xf32>"
        return only(parse(f"""
        func.func @f(%x: {t}) -> {t} {{
          %0 = graph.relu %x : ({t}) -> {t}
          func.return %0 : {t}
        }}"""), "graph.relu")  # fmt: skip

    cpu, gpu = load_device("generic-cpu"), load_device("a100")
    large, small = relu(2 * MMAP_THRESHOLD // 4), relu(MMAP_THRESHOLD // 4)
    pages = 2 * MMAP_THRESHOLD // PAGE_BYTES
    assert eager_op_cost(large, cpu).first_touch_s == pytest.approx(pages * efficiency(cpu).page_fault_s)
    assert eager_op_cost(large, cpu).kernel_s == pytest.approx(
        op_cost(large, cpu).kernel_s + pages * efficiency(cpu).page_fault_s
    )
    assert eager_op_cost(small, cpu).first_touch_s == 0
    assert eager_op_cost(large, gpu).first_touch_s == 0


def test_eager_reads_a_transposed_operand_of_a_matrix_product_as_a_view() -> None:
    """`mm(grad.t(), x)`: eager's transpose is a strided view the BLAS reads as it is, so it runs no kernel; one
    that an elementwise op reads is copied, as the runtime copies it."""
    from gnomon.cost.eager import eager_op_cost

    module = parse("""
    func.func @f(%g: tensor<64x256xf32>, %x: tensor<64x128xf32>) -> (tensor<256x128xf32>, tensor<256x64xf32>) {
      %t = graph.transpose %g {permutation = array<i64: 1, 0>} : (tensor<64x256xf32>) -> tensor<256x64xf32>
      %w = graph.matmul %t, %x : (tensor<256x64xf32>, tensor<64x128xf32>) -> tensor<256x128xf32>
      %u = graph.transpose %g {permutation = array<i64: 1, 0>} : (tensor<64x256xf32>) -> tensor<256x64xf32>
      %r = graph.relu %u : (tensor<256x64xf32>) -> tensor<256x64xf32>
      func.return %w, %r : tensor<256x128xf32>, tensor<256x64xf32>
    }""")
    cpu = load_device("generic-cpu")
    read_by_matmul, read_by_relu = [op for op in graph_ops(module) if op.name == "graph.transpose"]
    assert eager_op_cost(read_by_matmul, cpu).model == "view"
    assert eager_op_cost(read_by_matmul, cpu).kernel_s == 0
    assert eager_op_cost(read_by_relu, cpu).kernel_s > 0
