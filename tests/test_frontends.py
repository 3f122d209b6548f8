"""Frontends: ONNX, torch modules, TorchScript and torch.export files into the torch dialect."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import Builtin, DenseIntOrFPElementsAttr, DenseResourceAttr, ModuleOp, NameLoc, StringAttr
from xdsl.ir import Operation
from xdsl.printer import Printer

from gnomon import models
from gnomon.dialects.graph.constant_values import resource_to_numpy as resource_array
from gnomon.errors import InputShapeError, ModelLoadError
from gnomon.frontends import ImportedModel, import_model
from gnomon.frontends.mlir_text import SPLAT_LIMIT, parse_torch_mlir

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(LIGHT_DIR.glob("light_*.onnx"))


def op_name(op: Operation) -> str:
    """The op's name as torch-mlir spells it; unregistered `torch.aten.*` ops included."""
    name = getattr(op, "op_name", None)
    return name.data if isinstance(name, StringAttr) else op.name


def op_counts(module: ModuleOp) -> Counter[str]:
    return Counter(op_name(op) for op in module.walk())


def locations(module: ModuleOp, name: str) -> list[str]:
    """The NameLoc of each op called `name`."""
    found: list[str] = []
    for op in module.walk():
        if op_name(op) == name:
            assert isinstance(op.location, NameLoc), f"{name} has location {op.location}"
            found.append(op.location.desc.data)
    return found


def resources(module: ModuleOp) -> list[np.ndarray]:
    return [
        resource_array(value)
        for op in module.walk()
        if isinstance(value := op.properties.get("value"), DenseResourceAttr)
    ]


def print_with_resources(module: ModuleOp) -> str:
    stream = io.StringIO()
    printer = Printer(stream=stream)
    printer.print_op(module)
    printer.print_metadata([Builtin])
    return stream.getvalue()


# ONNX


@pytest.mark.parametrize("path", LIGHT_MODELS, ids=lambda path: path.stem)
def test_light_onnx_model_imports_with_high_level_ops(path: Path):
    imported = import_model(path)
    counts = op_counts(imported.module)
    assert (imported.kind, imported.source) == ("onnx", path.name)
    assert counts["torch.aten.convolution"] > 0
    assert counts["torch.operator"] == 0, "every ONNX op of these networks has a torch-mlir lowering"
    # Opset-9 exporters list every weight as a graph input too; those are not model inputs.
    assert len(imported.input_names) == 1
    assert len(imported.output_names) == 1


def test_batch_norm_stays_whole_and_anonymous_nodes_are_named():
    model = onnx.load(LIGHT_DIR / "light_resnet50.onnx")
    node_names = {node.name or f"{node.op_type}_{index}" for index, node in enumerate(model.graph.node)}
    imported = import_model(LIGHT_DIR / "light_resnet50.onnx")
    counts = op_counts(imported.module)
    assert counts["torch.aten.batch_norm"] == counts["torch.aten.convolution"] == 53
    for name in ("torch.aten.convolution", "torch.aten.batch_norm", "torch.aten.relu"):
        assert set(locations(imported.module, name)) <= node_names


def test_large_splat_weights_stay_compact():
    imported = import_model(LIGHT_DIR / "light_vgg19.onnx")
    assert op_counts(imported.module)["torch.aten.full"] > 0
    for op in imported.module.walk():
        value = op.properties.get("value")
        assert not isinstance(value, DenseIntOrFPElementsAttr) or len(value) <= SPLAT_LIMIT


def tiny_onnx(path: Path, custom_op: bool = False) -> Path:
    """Conv and Relu without node names, optionally followed by an op torch-mlir cannot lower."""
    weight = numpy_helper.from_array(np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"])]
    opsets = [helper.make_opsetid("", 17)]
    if custom_op:
        nodes.append(helper.make_node("Foo", ["r"], ["y"], domain="com.example", name="custom"))
        opsets.append(helper.make_opsetid("com.example", 1))
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["y"], name="out"))
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    return path


def test_onnx_locations_name_nodes_and_unlowered_ops_stay(tmp_path: Path):
    imported = import_model(tiny_onnx(tmp_path / "tiny.onnx", custom_op=True))
    assert locations(imported.module, "torch.aten.convolution") == ["Conv_0"]
    assert locations(imported.module, "torch.aten.relu") == ["Relu_1"]
    [custom] = [op for op in imported.module.walk() if op_name(op) == "torch.operator"]
    assert custom.properties["name"] == StringAttr("com.example.Foo")
    assert locations(imported.module, "torch.operator") == ["custom"]


def test_input_shape_override_sets_the_function_type(tmp_path: Path):
    imported = import_model(tiny_onnx(tmp_path / "tiny.onnx"), input_shapes={"x": [2, 3, 16, 16]})
    function = imported.module.body.block.first_op
    assert function is not None
    assert "[2,4,16,16]" in str(function.properties["function_type"])


def test_input_shape_errors_name_the_input(tmp_path: Path):
    path = tiny_onnx(tmp_path / "tiny.onnx")
    with pytest.raises(InputShapeError) as error:
        import_model(path, input_shapes={"image": [1, 3, 8, 8]})
    assert str(error.value) == f"--input-shape names no input 'image' of {path}; inputs are: x"
    with pytest.raises(InputShapeError) as error:
        import_model(path, input_shapes={"x": [1, 3]})
    assert str(error.value) == f"--input-shape x=1x3 has rank 2 but input 'x' of {path} has rank 4"


def reshaping_onnx(path: Path, flatten_to: list[int]) -> Path:
    """A channel shuffle as exporters write it at batch 1 (Reshape to [1, 2, 2, 2, 2], Transpose, Reshape back),
    then a Reshape to `flatten_to`."""
    shapes = {"split": [1, 2, 2, 2, 2], "merged": [1, 4, 2, 2], "flat": flatten_to}
    initializers = [numpy_helper.from_array(np.array(dims, np.int64), name) for name, dims in shapes.items()]
    nodes = [
        helper.make_node("Reshape", ["x", "split"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "merged"], ["m"]),
        helper.make_node("Reshape", ["m", "flat"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "shuffle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializers,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_reshapes_written_for_a_batch_of_one_follow_a_new_batch(tmp_path: Path):
    import gnomon

    path = reshaping_onnx(tmp_path / "shuffle.onnx", [1, -1])
    executable = gnomon.compile(str(path), input_shapes={"x": [3, 4, 2, 2]})
    x = np.arange(3 * 16, dtype=np.float32).reshape(3, 4, 2, 2)
    (y,) = executable.run([x])
    shuffled = x.reshape(3, 2, 2, 2, 2).transpose(0, 2, 1, 3, 4).reshape(3, 16)
    np.testing.assert_array_equal(y, shuffled)


def test_a_batch_the_model_fixes_is_a_shape_error_not_an_internal_one(tmp_path: Path):
    from gnomon.errors import GnomonError
    from gnomon.pipeline import load

    path = reshaping_onnx(tmp_path / "fixed.onnx", [16])  # no batch dim to follow: 16 elements, whatever the batch
    with pytest.raises(GnomonError) as error:
        load(path, input_shapes={"x": [2, 4, 2, 2]})
    assert str(error.value) == (
        "the input shapes do not fit fixed.onnx: a reshape in the model fixes its sizes "
        "(graph.reshape: input [2, 4, 2, 2] has 32 elements, result [16] has 16)"
    )


def mean_square_onnx(path: Path, batch: int | str) -> Path:
    """The mean of x² over every axis after the first, whose axes come as ONNX's RMSNormalization function body
    computes them: Range(1, Size(Shape(x)), 1)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Size", ["shape"], ["rank"]),
        helper.make_node("Range", ["one", "rank", "one"], ["axes"]),
        helper.make_node("Mul", ["x", "x"], ["squares"]),
        helper.make_node("ReduceMean", ["squares", "axes"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mean_square",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "one")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


@pytest.mark.parametrize("batch", [2, "N"])
def test_shape_arithmetic_is_folded_before_torch_mlir(tmp_path: Path, batch: int | str):
    """torch-mlir leaves a ReduceMean whose axes are computed unlowered: they are folded to constants first, even
    under a dynamic batch (the rank is known), and the Shape that only the folded Size read goes."""
    imported = import_model(mean_square_onnx(tmp_path / "mean_square.onnx", batch))
    counts = op_counts(imported.module)
    assert counts["torch.aten.mean.dim"] == 1
    assert counts["torch.operator"] == counts["torch.aten._shape_as_tensor"] == 0


def test_file_errors(tmp_path: Path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(ModelLoadError) as error:
        import_model(missing)
    assert str(error.value) == f"no such file: {missing}"

    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"garbage \x00\x01\xff bytes")
    with pytest.raises(ModelLoadError) as error:
        import_model(corrupt)
    assert str(error.value).startswith(f"{corrupt} is not a valid ONNX model: ")

    text = tmp_path / "notes.pt"
    text.write_text("not a model")
    with pytest.raises(ModelLoadError) as error:
        import_model(text)
    assert str(error.value).startswith(f"{text} is not a loadable TorchScript file: ")

    unknown = tmp_path / "model.tflite"
    unknown.write_bytes(b"")
    with pytest.raises(ModelLoadError) as error:
        import_model(unknown)
    assert str(error.value) == f"{unknown}: unknown model format (expected .onnx, .pt, .pth or .pt2)"


# torch


@pytest.fixture(scope="module")
def cnn() -> models.SmallCNN:
    return models.SmallCNN()


@pytest.fixture(scope="module")
def imported_cnn(cnn: models.SmallCNN) -> ImportedModel:
    return import_model(cnn, cnn.example_inputs())


def test_cnn_keeps_conv_batch_norm_and_linear(imported_cnn: ImportedModel):
    counts = op_counts(imported_cnn.module)
    assert counts["torch.aten.conv2d"] == 4
    assert counts["torch.aten.linear"] == 1
    assert counts["torch.aten.addmm"] == counts["torch.aten.mm"] == 0
    batch_norms = [op for op in imported_cnn.module.walk() if op_name(op) == "torch.operator"]
    assert {op.properties["name"] for op in batch_norms} == {
        StringAttr("torch.aten._native_batch_norm_legit_no_training")
    }
    assert len(batch_norms) == 3
    assert (imported_cnn.kind, imported_cnn.input_names, imported_cnn.output_names) == ("torch", ["x"], ["output_0"])


def test_torch_locations_name_module_paths(imported_cnn: ImportedModel):
    assert locations(imported_cnn.module, "torch.aten.conv2d") == ["stem.0", "block1.0", "depthwise.0", "pointwise"]
    assert locations(imported_cnn.module, "torch.aten.linear") == ["head"]


def test_weights_round_trip_through_xdsl_text(cnn: models.SmallCNN, imported_cnn: ImportedModel):
    arrays = resources(imported_cnn.module)
    expected = [t.numpy() for t in cnn.state_dict().values() if t.is_floating_point()]
    for tensor in expected:
        assert any(a.shape == tensor.shape and np.array_equal(a, tensor) for a in arrays)
    reparsed = resources(parse_torch_mlir(print_with_resources(imported_cnn.module)))
    assert len(reparsed) == len(arrays)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, reparsed, strict=True))


def test_two_imports_keep_their_own_weights(cnn: models.SmallCNN, imported_cnn: ImportedModel):
    before = resources(imported_cnn.module)
    other = models.SmallCNN(seed=1)
    import_model(other, other.example_inputs())
    after = resources(imported_cnn.module)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def test_transformer_block_keeps_attention_whole():
    block = models.TransformerBlock()
    imported = import_model(block, block.example_inputs())
    counts = op_counts(imported.module)
    assert counts["torch.aten.scaled_dot_product_attention"] == 1
    assert counts["torch.aten.layer_norm"] == 2
    assert counts["torch.aten.gelu"] == 1
    assert counts["torch.aten.linear"] == 4
    assert locations(imported.module, "torch.aten.scaled_dot_product_attention") == ["attn"]


def test_dlrm_with_embedding_bags_and_a_non_persistent_buffer():
    dlrm = models.DLRM()
    imported = import_model(dlrm, dlrm.example_inputs())
    counts = op_counts(imported.module)
    assert counts["torch.aten.embedding_bag.padding_idx"] == 4
    assert counts["torch.aten.bmm"] == 1
    assert imported.input_names == ["dense", "indices", "offsets"]
    assert locations(imported.module, "torch.aten.embedding_bag.padding_idx") == [f"embeddings.{i}" for i in range(4)]


def test_structured_outputs_are_flattened_and_named():
    class Heads(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor | tuple[torch.Tensor, ...] | None]:
            return {"logits": x + 1, "aux": (x * 2, x - 1), "unused": None}

    imported = import_model(Heads(), (torch.zeros(2),))
    assert imported.output_names == ["logits", "aux.0", "aux.1"]


class PrefixedKeys(torch.nn.Module):
    """A learned prefix concatenated with the input, and a KV cache's empty initial key as TorchScript keeps it:
    state inside a list argument, which torch-mlir's importer refuses unless it is lifted."""

    def __init__(self) -> None:
        super().__init__()
        self.prefix = torch.nn.Parameter(torch.randn(2, 4))
        self.register_buffer("cache", torch.zeros(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.cache, torch.cat([self.prefix, x]).flatten()]) * 2


@pytest.mark.parametrize("door", ["module", "torchscript"])
def test_parameters_and_buffers_inside_a_list_argument(tmp_path: Path, door: str):
    import gnomon

    model, x = PrefixedKeys().eval(), torch.randn(3, 4)
    source: torch.nn.Module | Path = model
    if door == "torchscript":
        source = tmp_path / "prefixed.pt"
        torch.jit.save(torch.jit.trace(model, (x,)), source)
    (got,) = gnomon.compile(source, example_inputs=(x,)).run([x.numpy()])
    np.testing.assert_array_equal(got, model(x).detach().numpy())


def test_training_mode_is_refused():
    with pytest.raises(ModelLoadError, match=r"updates buffers when run .*call \.eval\(\)"):
        import_model(torch.nn.BatchNorm1d(2), (torch.zeros(3, 2),))


def test_torchscript_file(tmp_path: Path, cnn: models.SmallCNN):
    path = tmp_path / "cnn.pt"
    torch.jit.save(torch.jit.trace(cnn, cnn.example_inputs()), path)
    with pytest.raises(InputShapeError) as error:
        import_model(path)
    assert str(error.value) == f"{path} is a TorchScript file: give --input-shape for each input (inputs: x)"
    imported = import_model(path, input_shapes={"x": [1, 3, 32, 32]})
    assert (imported.kind, imported.input_names) == ("torchscript", ["x"])
    assert op_counts(imported.module)["torch.aten.convolution"] == 4
    function = imported.module.body.block.first_op
    assert function is not None
    assert "!torch.vtensor<[1,3,32,32],f32>" in str(function.properties["function_type"])


@pytest.mark.parametrize("name", ["SmallCNN", "MLP"])
def test_scripted_torchscript_file(tmp_path: Path, name: str):
    model = getattr(models, name)()
    path = tmp_path / f"{name}.pt"
    torch.jit.save(torch.jit.script(model), path)
    imported = import_model(path, example_inputs=model.example_inputs())
    assert imported.kind == "torchscript"
    assert "torch.aten.linear" in op_counts(imported.module) or "torch.aten.addmm" in op_counts(imported.module)


def test_scripted_control_flow_is_a_clear_error(tmp_path: Path):
    """EmbeddingBag's scripted forward branches (prim::If), which torch's TorchScript converter rejects."""
    model = models.DLRM()
    path = tmp_path / "dlrm.pt"
    torch.jit.save(torch.jit.script(model), path)
    with pytest.raises(ModelLoadError) as error:
        import_model(path, example_inputs=model.example_inputs())
    expected = (
        f"{path}: cannot convert TorchScript to torch.export: TS2EPConverter failed for node prim::If: "
        "Output weight.5 not found"
    )
    assert str(error.value) == expected


@pytest.mark.parametrize("suffix", [".pt2", ".pt"])
def test_exported_program_file(tmp_path: Path, cnn: models.SmallCNN, suffix: str):
    path = tmp_path / f"cnn{suffix}"
    torch.export.save(torch.export.export(cnn, cnn.example_inputs(), strict=False), path)
    imported = import_model(path)
    assert (imported.kind, imported.source) == ("torch", path.name)
    assert locations(imported.module, "torch.aten.linear") == ["head"]


def test_non_finite_constants_keep_their_values(tmp_path: Path):
    """torch-mlir prints -inf and nan as bare hex bit patterns, which xDSL would read as integers."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from gnomon.dialects.graph.constant_values import dense_to_numpy
    from gnomon.dialects.graph.tensor import ConstantOp
    from gnomon.pipeline import load

    bounds = numpy_helper.from_array(np.array([-np.inf, 1.0, np.nan], dtype=np.float32), "bounds")
    graph = helper.make_graph(
        [helper.make_node("Max", ["x", "bounds"], ["y"], name="max")],
        "non_finite",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [bounds],
    )
    path = tmp_path / "non_finite.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    constants = [op for op in load(path).walk() if isinstance(op, ConstantOp)]
    values = [dense_to_numpy(op.value) for op in constants]  # type: ignore[arg-type]
    assert any(v is not None and v.shape == (3,) and np.isneginf(v[0]) and v[1] == 1 and np.isnan(v[2]) for v in values)
