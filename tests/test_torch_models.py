"""gnomon's reference torch models through each torch door: a live module, a TorchScript `.pt` and a
`torch.export` `.pt2`; each must become graph IR with the ops that express the model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from gnomon import models
from gnomon.errors import UnsupportedOpsError
from gnomon.locations import location_name
from gnomon.pipeline import load

pytestmark = pytest.mark.filterwarnings(
    "ignore::torch.jit.TracerWarning",
    "ignore:`torch.jit.:DeprecationWarning",
    "ignore:Manually populate:UserWarning",
)

# The ops each model must have, and its output types.
EXPECTED: dict[str, tuple[dict[str, int], list[str]]] = {
    "MLP": ({"graph.linear": 3, "graph.relu": 2}, ["tensor<2x10xf32>"]),
    "SmallCNN": (
        {"graph.conv": 4, "graph.batch_norm": 3, "graph.max_pool": 1, "graph.global_avg_pool": 1, "graph.linear": 1},
        ["tensor<2x10xf32>"],
    ),
    "TransformerBlock": (
        {"graph.layer_norm": 2, "graph.attention": 1, "graph.gelu": 1, "graph.linear": 4},
        ["tensor<2x16x64xf32>"],
    ),
    "DLRM": (
        {"graph.embedding_bag": 4, "graph.matmul": 1, "graph.linear": 4, "graph.sigmoid": 1},
        ["tensor<2x1xf32>"],
    ),
}

Door = Callable[[nn.Module, tuple[torch.Tensor, ...], Path], ModuleOp]


def through_module(model: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path: Path) -> ModuleOp:
    return load(model, example_inputs=inputs)


def through_torchscript(model: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path: Path) -> ModuleOp:
    path = tmp_path / "model.pt"
    # Tracing nn.MultiheadAttention twice gives graphs that differ only in mangled class names.
    torch.jit.save(torch.jit.trace(model, inputs, check_trace=False), str(path))
    if all(x.dtype == torch.float32 for x in inputs):
        names = [value.debugName().split(".")[0] for value in torch.jit.load(str(path)).graph.inputs()][1:]
        return load(path, input_shapes={name: list(x.shape) for name, x in zip(names, inputs, strict=True)})
    return load(path, example_inputs=inputs)  # integer inputs (DLRM's indices) need real values


def through_exported_file(model: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path: Path) -> ModuleOp:
    path = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(model, inputs), path)
    return load(path)


DOORS: dict[str, Door] = {"module": through_module, "pt": through_torchscript, "pt2": through_exported_file}


def op_counts(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk() if op.name.startswith("graph."))


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_model_converts(name: str, door: str, tmp_path: Path) -> None:
    model = getattr(models, name)()
    module = DOORS[door](model, model.example_inputs(), tmp_path)
    module.verify()
    expected_ops, output_types = EXPECTED[name]
    counts = op_counts(module)
    assert {op: counts[op] for op in expected_ops} == expected_ops
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert [str(t) for t in function.function_type.outputs.data] == output_types
    assert not [op for op in module.walk() if op.dialect_name() in ("torch", "builtin") and op.name != "builtin.module"]


@pytest.mark.parametrize("door", ["module", "pt2"])
def test_locations_name_module_paths(door: str, tmp_path: Path) -> None:
    model = models.SmallCNN()
    module = DOORS[door](model, model.example_inputs(), tmp_path)
    convs = [location_name(op.location) for op in module.walk() if op.name == "graph.conv"]
    assert convs == ["stem.0", "block1.0", "depthwise.0", "pointwise"]
    linears = [location_name(op.location) for op in module.walk() if op.name == "graph.linear"]
    assert linears == ["head"]


def test_transformer_attention_is_one_op() -> None:
    model = models.TransformerBlock()
    module = load(model, example_inputs=model.example_inputs())
    (attention,) = [op for op in module.walk() if op.name == "graph.attention"]
    assert location_name(attention.location) == "attn"
    assert str(attention.results[0].type) == "tensor<2x4x16x16xf32>"  # (batch, heads, seq, head_dim)


class PoolWithIndices(nn.Module):
    def __init__(self, use_indices: bool) -> None:
        super().__init__()
        self.use_indices = use_indices

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return values + indices.float() if self.use_indices else values


def test_max_pool_converts_when_its_indices_are_unused() -> None:
    module = load(PoolWithIndices(use_indices=False), example_inputs=(torch.randn(1, 2, 4, 4),))
    assert op_counts(module)["graph.max_pool"] == 1


def test_max_pool_indices_that_are_used_match_eager() -> None:
    import gnomon

    model, x = PoolWithIndices(use_indices=True), torch.randn(2, 3, 6, 6)
    (got,) = gnomon.compile(model, example_inputs=(x,)).run([x.numpy()])
    torch.testing.assert_close(torch.from_numpy(got), model(x))


@pytest.mark.parametrize("model_class", [models.MLP, models.SmallCNN])
def test_dynamic_batch_is_named_after_the_users_dim(model_class: type[torch.nn.Module]) -> None:
    from torch.export import Dim

    model = model_class()
    module = load(model, example_inputs=model.example_inputs(4), dynamic_shapes=({0: Dim("batch")},))
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    for tensor in (*function.function_type.inputs.data, *function.function_type.outputs.data):
        assert str(tensor).startswith("tensor<?x")
        assert '#graph.dims<["batch"' in str(tensor)


def test_dynamic_dims_the_converters_cannot_slice_are_reported() -> None:
    from torch.export import Dim

    class DropFirst(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x[:, 1:])

    with pytest.raises(UnsupportedOpsError, match=r"unsupported op aten\.slice\.Tensor at node '.*' in DropFirst"):
        load(DropFirst(), example_inputs=(torch.randn(2, 8),), dynamic_shapes=({1: Dim("seq", min=3)},))


def test_a_transformer_block_imports_with_a_dynamic_batch() -> None:
    """Slices of its other dims take a dynamic one whole (nn.MultiheadAttention's projections)."""
    from torch.export import Dim

    model = models.TransformerBlock()
    module = load(model, example_inputs=model.example_inputs(4), dynamic_shapes=({0: Dim("batch")},))
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert '#graph.dims<["batch", "", ""]>' in str(function.function_type.inputs.data[0])
