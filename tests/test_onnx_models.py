"""Real ONNX networks through the import pipeline: the light networks, and the 117 models of onnx's
`pytorch-converted` and `pytorch-operator` backend tests."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from conftest import BACKEND_MODELS, ModelCache, by_model
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from gnomon.bundled import light_models, model_path
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.nn import AvgPoolOp, ConvOp, MaxPoolOp
from gnomon.dialects.graph.tensor import PadOp
from gnomon.errors import UnsupportedOpsError
from gnomon.locations import location_name
from gnomon.pipeline import load

# The ops each light network must have (counts of the ONNX nodes they come from) and its output type.
LIGHT_NETWORKS: dict[str, tuple[dict[str, int], str]] = {
    "light_bvlc_alexnet": (
        {"graph.conv": 5, "graph.linear": 3, "graph.max_pool": 3, "graph.softmax": 1},
        "tensor<1x1000xf32>",
    ),
    "light_densenet121": (
        {"graph.conv": 121, "graph.batch_norm": 121, "graph.concat": 58, "graph.global_avg_pool": 1},
        "tensor<1x1000x1x1xf32>",
    ),
    "light_inception_v1": (
        {"graph.conv": 57, "graph.max_pool": 13, "graph.concat": 9, "graph.linear": 1, "graph.softmax": 1},
        "tensor<1x1000xf32>",
    ),
    "light_inception_v2": (
        {"graph.conv": 69, "graph.batch_norm": 69, "graph.max_pool": 5, "graph.concat": 10, "graph.linear": 1},
        "tensor<1x1000xf32>",
    ),
    "light_resnet50": (
        {"graph.conv": 53, "graph.batch_norm": 53, "graph.add": 16, "graph.global_avg_pool": 1, "graph.linear": 1},
        "tensor<1x1000xf32>",
    ),
    "light_shufflenet": (
        {"graph.conv": 49, "graph.batch_norm": 49, "graph.transpose": 16, "graph.linear": 1},
        "tensor<1x1000xf32>",
    ),
    "light_squeezenet": (
        {"graph.conv": 26, "graph.concat": 8, "graph.max_pool": 3, "graph.global_avg_pool": 1},
        "tensor<1x1000x1x1xf32>",
    ),
    "light_vgg19": (
        {"graph.conv": 16, "graph.linear": 3, "graph.max_pool": 5, "graph.softmax": 1},
        "tensor<1x1000xf32>",
    ),
    "light_zfnet512": (
        {"graph.conv": 5, "graph.linear": 3, "graph.max_pool": 3, "graph.softmax": 1},
        "tensor<1x1000xf32>",
    ),
}


def graph_ops(module: ModuleOp) -> Iterator[Operation]:
    return (op for op in module.walk() if op.name.startswith("graph."))


def function(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def test_every_light_network_is_listed() -> None:
    assert sorted(LIGHT_NETWORKS) == [path.stem for path in light_models()]


@pytest.mark.parametrize("model", by_model(model_path(name) for name in sorted(LIGHT_NETWORKS)))
def test_light_network_imports(model_cache: ModelCache, model: Path) -> None:
    module = model_cache.imported(model)
    module.verify()
    expected_ops, output_type = LIGHT_NETWORKS[model.stem]
    counts = Counter(op.name for op in graph_ops(module))
    assert {op: counts[op] for op in expected_ops} == expected_ops
    outputs = function(module).function_type.outputs.data
    assert [str(t) for t in outputs] == [output_type]
    assert not [op for op in module.walk() if op.dialect_name() in ("torch", "builtin") and op.name != "builtin.module"]


@pytest.mark.parametrize("model", by_model(BACKEND_MODELS))
def test_backend_model_imports(model_cache: ModelCache, model: Path) -> None:
    """Every one of the 117 imports; one that stops importing fails with the ops it lacks, one line each."""
    module = model_cache.import_result(model)
    assert isinstance(module, ModuleOp), str(module)
    module.verify()


def computations(module: ModuleOp) -> list[str]:
    return [op.name for op in graph_ops(module) if op.name != "graph.constant"]


ONNX_OPS = [  # a backend model and the graph ops it computes, in order
    ("test_operator_flatten", ["graph.reshape"]),  # Flatten
    ("test_operator_view", ["graph.reshape"]),  # Flatten
    ("test_operator_index", ["graph.reshape"]),  # Slice + Squeeze of a 1x1 tensor
    ("test_AvgPool1d", ["graph.reshape", "graph.avg_pool", "graph.reshape"]),  # Unsqueeze, 2-d pool, Squeeze
    ("test_Linear", ["graph.linear"]),  # Gemm
    ("test_SELU", ["graph.selu"]),
    ("test_operator_clip", ["graph.clip"]),
    ("test_GLU", ["graph.slice", "graph.slice", "graph.sigmoid", "graph.mul"]),
]


@pytest.mark.parametrize(
    ("name", "ops"), [pytest.param(name, ops, marks=pytest.mark.xdist_group(name)) for name, ops in ONNX_OPS]
)
def test_onnx_ops_become_their_graph_ops(model_cache: ModelCache, name: str, ops: list[str]) -> None:
    model = next(path for path in BACKEND_MODELS if path.parent.name == name)
    assert computations(model_cache.imported(model)) == ops


def _nodes(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """ONNX nodes by the names the frontend gives them (`OpType_<index>` for anonymous nodes)."""
    return {node.name or f"{node.op_type}_{index}": node for index, node in enumerate(model.graph.node)}


def _attributes(node: onnx.NodeProto) -> dict[str, object]:
    return {attr.name: onnx.helper.get_attribute_value(attr) for attr in node.attribute}


def _effective_pads(op: ConvOp | MaxPoolOp | AvgPoolOp) -> list[int]:
    """The op's pads plus those of a zero `graph.pad` in front of it (how torch-mlir lowers asymmetric pads)."""
    pads = list(ints(op.pads))
    spatial = len(pads) // 2
    producer = op.input.owner
    if isinstance(producer, PadOp) and producer.mode.data == "constant":
        outer = ints(producer.pads)
        rank = len(outer) // 2
        assert not any(outer[:2]), "padding of batch or channel dims"
        assert not any(outer[rank : rank + 2]), "padding of batch or channel dims"
        pads = [p + outer[2 + i % spatial + (rank if i >= spatial else 0)] for i, p in enumerate(pads)]
    return pads


@pytest.mark.parametrize("model", by_model(BACKEND_MODELS))
def test_window_attributes_match_the_onnx_nodes(model_cache: ModelCache, model: Path) -> None:
    """Each graph.conv / pooling op has the strides, pads, dilations and groups of the ONNX node it came from."""
    module = model_cache.imported(model)
    nodes = _nodes(onnx.load(model))
    for op in graph_ops(module):
        if not isinstance(op, ConvOp | MaxPoolOp | AvgPoolOp):
            continue
        node = nodes[location_name(op.location)]
        attrs = _attributes(node)
        spatial = len(ints(op.strides))
        if (
            node.op_type not in ("Conv", "MaxPool", "AveragePool")
            or len(attrs.get("kernel_shape", [0] * spatial)) != spatial
        ):
            continue  # a lowering of another op (1-d pooling runs as 2-d)
        assert list(ints(op.strides)) == list(attrs.get("strides", [1] * spatial)), node.name
        assert _effective_pads(op) == list(attrs.get("pads", [0] * 2 * spatial)), node.name
        if isinstance(op, ConvOp):
            assert list(ints(op.dilations)) == list(attrs.get("dilations", [1] * spatial)), node.name
            assert op.groups.value.data == attrs.get("group", 1), node.name
        else:
            assert list(ints(op.kernel)) == list(attrs["kernel_shape"]), node.name


# ---- ONNX ops that torch-mlir leaves or lowers in ways the conversion must know about ----


def save_model(
    path: Path,
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, list[int]]],
    outputs: dict[str, tuple[int, list[int]]],
    opset: int = 23,
    preview: bool = False,
) -> Path:
    """A model of `nodes`; `preview` imports the ai.onnx.preview domain too."""

    def values(specs: dict[str, tuple[int, list[int]]]) -> list[onnx.ValueInfoProto]:
        return [onnx.helper.make_tensor_value_info(name, dtype, shape) for name, (dtype, shape) in specs.items()]

    graph = onnx.helper.make_graph(nodes, "g", values(inputs), values(outputs))
    opsets = [
        onnx.helper.make_opsetid("", opset),
        *([onnx.helper.make_opsetid("ai.onnx.preview", 1)] if preview else []),
    ]
    onnx.save(onnx.helper.make_model(graph, opset_imports=opsets), path)
    return path


F32 = onnx.TensorProto.FLOAT


def test_onnx_attention_with_grouped_heads_becomes_graph_attention(tmp_path: Path) -> None:
    node = onnx.helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", q_num_heads=4, kv_num_heads=2)
    path = save_model(
        tmp_path / "attention.onnx",
        [node],
        {"q": (F32, [2, 5, 32]), "k": (F32, [2, 7, 16]), "v": (F32, [2, 7, 16])},
        {"y": (F32, [2, 5, 32])},
    )
    module = load(path)
    (attention,) = [op for op in module.walk() if op.name == "graph.attention"]
    assert [str(o.type) for o in attention.operands] == ["tensor<2x4x5x8xf32>", *["tensor<2x4x7x8xf32>"] * 2]
    assert attention.properties["scale"].value.data == pytest.approx(8**-0.5)  # type: ignore[union-attr]
    assert [str(t) for t in function(module).function_type.outputs.data] == ["tensor<2x5x32xf32>"]


def test_onnx_attention_with_a_kv_cache_stays_one_graph_attention(tmp_path: Path) -> None:
    """The cache joins the keys and values; the causal mask, offset by the cache's length, becomes a constant bias."""
    node = onnx.helper.make_node(
        "Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "pk2", "pv2"], name="attn", is_causal=1
    )
    shapes = {"q": [1, 2, 3, 8], "k": [1, 2, 3, 8], "v": [1, 2, 3, 8], "pk": [1, 2, 4, 8], "pv": [1, 2, 4, 8]}
    path = save_model(
        tmp_path / "model.onnx",
        [node],
        {name: (F32, shape) for name, shape in shapes.items()},
        {"y": (F32, [1, 2, 3, 8]), "pk2": (F32, [1, 2, 7, 8]), "pv2": (F32, [1, 2, 7, 8])},
    )
    counts = Counter(op.name for op in load(path).walk() if op.name.startswith("graph."))
    assert counts == {"graph.concat": 2, "graph.constant": 1, "graph.attention": 1}


def test_onnx_attention_with_a_softcap_is_composed(tmp_path: Path) -> None:
    node = onnx.helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", softcap=2.0)
    path = save_model(
        tmp_path / "model.onnx",
        [node],
        {name: (F32, [1, 2, 3, 8]) for name in ("q", "k", "v")},
        {"y": (F32, [1, 2, 3, 8])},
    )
    counts = Counter(op.name for op in load(path).walk() if op.name.startswith("graph."))
    assert (counts["graph.attention"], counts["graph.matmul"], counts["graph.tanh"], counts["graph.softmax"]) == (
        0,
        2,
        1,
        1,
    )


def test_onnx_attention_with_a_kv_cache_and_kv_lengths_is_unsupported(tmp_path: Path) -> None:
    node = onnx.helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv", "n"], ["y", "pk2", "pv2"], name="attn")
    shapes = {"q": [1, 2, 3, 8], "k": [1, 2, 3, 8], "v": [1, 2, 3, 8], "pk": [1, 2, 4, 8], "pv": [1, 2, 4, 8]}
    path = save_model(
        tmp_path / "model.onnx",
        [node],
        {**{name: (F32, shape) for name, shape in shapes.items()}, "n": (onnx.TensorProto.INT64, [1])},
        {"y": (F32, [1, 2, 3, 8]), "pk2": (F32, [1, 2, 7, 8]), "pv2": (F32, [1, 2, 7, 8])},
        opset=24,
    )
    message = (
        "unsupported op onnx.Attention at node 'attn' in model.onnx (attention with both past_key and nonpad_kv_seqlen)"
    )
    with pytest.raises(UnsupportedOpsError, match=f"^{re.escape(message)}$"):
        load(path)


def test_onnx_tensor_scatter_with_an_unknown_mode_is_unsupported(tmp_path: Path) -> None:
    node = onnx.helper.make_node("TensorScatter", ["cache", "update"], ["present"], name="scatter", mode="stride")
    path = save_model(
        tmp_path / "model.onnx",
        [node],
        {"cache": (F32, [2, 4, 3]), "update": (F32, [2, 1, 3])},
        {"present": (F32, [2, 4, 3])},
        opset=24,
    )
    message = "unsupported op onnx.TensorScatter at node 'scatter' in model.onnx (TensorScatter mode 'stride')"
    with pytest.raises(UnsupportedOpsError, match=f"^{re.escape(message)}$"):
        load(path)


def _flex_attention(path: Path, **modifiers: onnx.GraphProto) -> Path:
    node = onnx.helper.make_node(
        "FlexAttention", ["q", "k", "v"], ["y"], name="flex", domain="ai.onnx.preview", **modifiers
    )
    shapes = {"q": [1, 2, 3, 8], "k": [1, 2, 5, 8], "v": [1, 2, 5, 8]}
    inputs = {name: (F32, shape) for name, shape in shapes.items()}
    return save_model(path, [node], inputs, {"y": (F32, [1, 2, 3, 8])}, opset=26, preview=True)


def test_onnx_flex_attention_without_modifiers_is_one_graph_attention(tmp_path: Path) -> None:
    counts = Counter(
        op.name for op in load(_flex_attention(tmp_path / "flex.onnx")).walk() if op.name.startswith("graph.")
    )
    assert counts == {"graph.attention": 1}


def test_onnx_flex_attention_inlines_its_score_mod(tmp_path: Path) -> None:
    """The subgraph, typed by the frontend and converted before the op, sits between the scores and the softmax;
    the prob_mod the frontend adds as the identity leaves nothing."""
    given, taken = (onnx.helper.make_tensor_value_info(name, F32, None) for name in ("s", "t"))
    score_mod = onnx.helper.make_graph([onnx.helper.make_node("Tanh", ["s"], ["t"])], "score_mod", [given], [taken])
    module = load(_flex_attention(tmp_path / "flex.onnx", score_mod=score_mod))
    names = [op.name for op in module.walk() if op.name in ("graph.matmul", "graph.tanh", "graph.softmax")]
    assert names == ["graph.matmul", "graph.tanh", "graph.softmax", "graph.matmul"]


def test_onnx_linear_attention_without_its_rule_s_input_is_unsupported(tmp_path: Path) -> None:
    node = onnx.helper.make_node(
        "LinearAttention",
        ["q", "k", "v"],
        ["y", "state"],
        name="la",
        update_rule="gated",
        q_num_heads=2,
        kv_num_heads=2,
    )
    path = save_model(
        tmp_path / "model.onnx",
        [node],
        {name: (F32, [1, 3, 16]) for name in ("q", "k", "v")},
        {"y": (F32, [1, 3, 16]), "state": (F32, [1, 2, 8, 8])},
        opset=27,
    )
    message = "unsupported op onnx.LinearAttention at node 'la' in model.onnx (update_rule 'gated' needs decay input)"
    with pytest.raises(UnsupportedOpsError, match=f"^{re.escape(message)}$"):
        load(path)


def test_a_node_reading_an_output_onnx_cannot_shape_blames_its_producer(tmp_path: Path) -> None:
    """ONNX's own expansion of LinearAttention runs a Scan over the steps whose per-step output ONNX cannot shape;
    torch-mlir types that output 0-d and fails on the Transpose that reads it. The error names the Scan."""
    from onnx.backend.test.case.node import function_testcase_helper

    node = onnx.helper.make_node(
        "LinearAttention", ["q", "k", "v"], ["y", "state"], update_rule="linear", q_num_heads=2, kv_num_heads=2
    )
    types = [onnx.helper.make_tensor_type_proto(F32, [1, 3, 16])] * 3
    (nodes, _), *_ = function_testcase_helper(node, types, "linear")[0]
    shapes = {"y": (F32, [1, 3, 16]), "state": (F32, [1, 2, 8, 8])}
    path = save_model(tmp_path / "model.onnx", nodes, {name: (F32, [1, 3, 16]) for name in ("q", "k", "v")}, shapes, 27)
    message = (
        r"^unsupported op onnx\.Scan at node 'Scan_\d+' in model\.onnx "
        r"\(ONNX infers no shape for its output, which torch-mlir needs to lower node 'Transpose_\d+'\)\n"
    )
    with pytest.raises(UnsupportedOpsError, match=message):
        load(path)


def test_onnx_functions_are_inlined_into_one_graph(tmp_path: Path) -> None:
    """torch-mlir imports ops that ONNX defines as functions (MeanVarianceNormalization) as a private
    func.func that the graph calls."""
    node = onnx.helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn")
    path = save_model(tmp_path / "mvn.onnx", [node], {"x": (F32, [2, 3, 4, 4])}, {"y": (F32, [2, 3, 4, 4])}, 17)
    module = load(path)
    assert len([op for op in module.walk() if isinstance(op, func.FuncOp)]) == 1
    assert {"graph.reduce_mean", "graph.sqrt", "graph.div"} <= set(computations(module))


def test_onnx_prelu_slope_broadcasts_along_the_last_dim(tmp_path: Path) -> None:
    """ONNX PRelu broadcasts its slope NumPy-style; torch-mlir hands it over as aten.prelu, whose torch
    meaning is channel-wise."""
    node = onnx.helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    path = save_model(
        tmp_path / "p.onnx", [node], {"x": (F32, [3, 4, 5]), "slope": (F32, [5])}, {"y": (F32, [3, 4, 5])}, 17
    )
    (prelu,) = [op for op in load(path).walk() if op.name == "graph.prelu"]
    assert str(prelu.operands[1].type) == "tensor<5xf32>"


@pytest.mark.xdist_group("light_vgg19")
def test_splat_weights_are_stored_once(model_cache: ModelCache) -> None:
    """VGG-19's generated fc6 weight is a 4096x25088 splat: one element in memory, the full value when read."""
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType

    from gnomon.dialects.graph.constant_values import dense_to_numpy
    from gnomon.dialects.graph.tensor import ConstantOp

    module = model_cache.imported(model_path("light_vgg19"))
    constants = [op for op in module.walk() if isinstance(op, ConstantOp) and isinstance(op.result.type, TensorType)]
    fc6 = next(op for op in constants if op.result.type.get_shape() == (4096, 25088))
    assert isinstance(fc6.value, DenseIntOrFPElementsAttr)
    assert len(fc6.value.data.data) == 4
    value = dense_to_numpy(fc6.value)
    assert value is not None
    assert value.shape == (4096, 25088)
    assert float(value[4095, 25087]) == pytest.approx(float(value[0, 0]))
    assert "dense<2.000000e-02> : tensor<4096x25088xf32>" in str(fc6)
