"""Inference rewrites keep the numbers: reference results before and after each pass agree on real models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ModelCache, random_input, relative_l2
from torch import nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.passes import ModulePass

from gnomon import load
from gnomon.bundled import model_path
from gnomon.context import gnomon_context
from gnomon.dialects.graph.elementwise import DropoutOp, MulOp
from gnomon.dialects.graph.linalg import LinearOp
from gnomon.dialects.graph.nn import BatchNormOp, ConvOp, ConvTransposeOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp, TransposeOp
from gnomon.passes.graph_drop_dropout import GraphDropDropoutPass
from gnomon.passes.graph_fold_batch_norm import GraphFoldBatchNormPass
from gnomon.passes.graph_fold_constants import GraphFoldConstantsPass
from gnomon.reference import run_reference


def apply(module: ModuleOp, graph_pass: ModulePass) -> None:
    graph_pass.apply(gnomon_context(), module)
    module.verify()


def count(module: ModuleOp, op_type: type[Operation]) -> int:
    return sum(isinstance(op, op_type) for op in module.walk())


def parse(text: str) -> ModuleOp:
    return Parser(gnomon_context(), text).parse_module()


# ---- graph-fold-batch-norm ----


@pytest.mark.xdist_group("SmallCNN")
def test_fold_batch_norm_small_cnn_matches_torch(model_cache: ModelCache) -> None:
    model, (x,) = model_cache.torch_model("SmallCNN")
    module = model_cache.imported("SmallCNN").clone()
    before = run_reference(module, [x.numpy()])[0]
    convs = count(module, ConvOp)
    assert count(module, BatchNormOp) == 3

    apply(module, GraphFoldBatchNormPass())

    assert count(module, BatchNormOp) == 0
    assert count(module, ConvOp) == convs
    after = run_reference(module, [x.numpy()])[0]
    assert relative_l2(after, before) <= 1e-4
    with torch.no_grad():
        assert relative_l2(after, model(x).numpy()) <= 1e-4


@pytest.mark.xdist_group("light_resnet50")
def test_fold_batch_norm_light_resnet50(model_cache: ModelCache) -> None:
    random_weights, x, before = model_cache.random_weights(model_path("light_resnet50"))
    module = random_weights.clone()
    assert before.max() > 10 / before.size  # the softmax output is far from uniform: the weights matter
    assert count(module, BatchNormOp) == 53

    apply(module, GraphFoldBatchNormPass())

    assert count(module, BatchNormOp) == 0
    assert count(module, ConvOp) == 53
    # Every conv now has a bias and the old weights and statistics are gone: 53 weights, 53 biases, the head's 2.
    assert count(module, ConstantOp) == 2 * 53 + 2
    assert relative_l2(run_reference(module, [x])[0], before) <= 1e-4


class _TransposedConvAndLinear(nn.Module):
    """A grouped transposed conv and a linear layer, each followed by a batch norm with random statistics."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.up = nn.Sequential(nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), nn.BatchNorm2d(6))
        self.fc = nn.Sequential(nn.Linear(6 * 9 * 9, 5, bias=False), nn.BatchNorm1d(5))
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d | nn.BatchNorm1d):
                nn.init.uniform_(module.weight, 0.5, 1.5)
                nn.init.normal_(module.bias)
                module.running_mean = torch.randn(module.num_features)
                module.running_var = torch.rand(module.num_features) + 0.5
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.up(x), 1))


def test_fold_batch_norm_into_conv_transpose_and_linear() -> None:
    model = _TransposedConvAndLinear()
    x = torch.randn(3, 4, 4, 4)
    module = load(model, (x,))
    assert count(module, ConvTransposeOp) == 1
    assert count(module, LinearOp) == 1
    assert count(module, BatchNormOp) == 2

    apply(module, GraphFoldBatchNormPass())

    assert count(module, BatchNormOp) == 0
    with torch.no_grad():
        assert relative_l2(run_reference(module, [x.numpy()])[0], model(x).numpy()) <= 1e-4


# ---- graph-drop-dropout ----

DROPOUT = """
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.constant {value = dense<0.25> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %d0 = graph.dropout %x {ratio = 0.1 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.linear %d0, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %r = graph.relu %y : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %d1 = graph.dropout %r {ratio = 0.5 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %d1 : tensor<2x4xf32>
}
"""


def test_drop_dropout_keeps_results() -> None:
    # No bundled network keeps its dropout through import (both frontends drop inference dropout), so
    # the program is written by hand.
    module = parse(DROPOUT)
    x = random_input(module)
    before = run_reference(module, [x])[0]

    apply(module, GraphDropDropoutPass())

    assert count(module, DropoutOp) == 0
    np.testing.assert_array_equal(run_reference(module, [x])[0], before)


# ---- graph-fold-constants ----


@pytest.mark.xdist_group("light_inception_v2")
def test_fold_constants_light_inception_v2(model_cache: ModelCache) -> None:
    # Its Caffe2 export scales and shifts each batch norm's output by reshaped per-channel constants.
    random_weights, x, before = model_cache.random_weights(model_path("light_inception_v2"))
    module = random_weights.clone()
    assert count(module, ReshapeOp) == 27

    apply(module, GraphFoldConstantsPass())

    assert count(module, ReshapeOp) == 1  # the flatten before the classifier, of an activation
    assert relative_l2(run_reference(module, [x])[0], before) <= 1e-4


TRANSPOSED_WEIGHT = """
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.constant {value = dense<WEIGHT> : tensor<4x2x4xf32>} : () -> tensor<4x2x4xf32>
  %b = graph.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %flat = graph.reshape %w : (tensor<4x2x4xf32>) -> tensor<4x8xf32>
  %wt = graph.transpose %flat {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %wh = graph.cast %wt : (tensor<8x4xf32>) -> tensor<8x4xf16>
  %wf = graph.cast %wh : (tensor<8x4xf16>) -> tensor<8x4xf32>
  %y = graph.matmul %x, %wf : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %z = graph.add %y, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %z : tensor<2x4xf32>
}
"""


def test_fold_constants_transposed_weight() -> None:
    weight = np.random.default_rng(0).standard_normal((4, 2, 4)).round(3)
    module = parse(TRANSPOSED_WEIGHT.replace("WEIGHT", str(weight.tolist())))
    x = random_input(module)
    before = run_reference(module, [x])[0]

    apply(module, GraphFoldConstantsPass())

    assert count(module, ReshapeOp) + count(module, TransposeOp) == 0
    ops = [op.name for op in module.walk() if not isinstance(op, ModuleOp | func.FuncOp)]
    assert ops == ["graph.constant", "graph.constant", "graph.matmul", "graph.add", "func.return"]
    np.testing.assert_array_equal(run_reference(module, [x])[0], before)


@pytest.mark.xdist_group("light_densenet121")
def test_batch_norm_after_concat_becomes_affine_light_densenet121(model_cache: ModelCache) -> None:
    # DenseNet's norms follow concats, not layers: they become a per-channel multiply-add.
    random_weights, x, before = model_cache.random_weights(model_path("light_densenet121"))
    module = random_weights.clone()
    norms = count(module, BatchNormOp)
    multiplies = count(module, MulOp)

    apply(module, GraphFoldBatchNormPass())

    assert count(module, BatchNormOp) == 0
    assert norms == 121  # the other 59 fold into the convolutions before them
    # The Caffe2 export scales each norm's output with an explicit multiply: 62 norms add one each, and the
    # 59 that follow a convolution (once its norm is folded) fold into it as well.
    assert multiplies == 121
    assert count(module, MulOp) == multiplies + 62 - 59
    assert relative_l2(run_reference(module, [x])[0], before) <= 1e-4


def test_an_onnx_matmul_by_a_weight_runs_as_a_linear_layer(tmp_path: Path) -> None:
    """torch.onnx writes a linear layer on 3-D activations as MatMul by the transposed weight and an Add: imported,
    it is one graph.linear again, its weight transposed back once, and runs as the library's linear call (packed
    once where large: 768 x 768 at 128 rows), with torch's numbers."""
    import gnomon

    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(768, 768), nn.GELU(), nn.Linear(768, 64)).eval()
    x = torch.randn(1, 128, 768)
    exported = tmp_path / "mlp.onnx"
    torch.onnx.export(model, (x,), str(exported), dynamo=False, opset_version=17)
    module = load(exported)
    assert count(module, LinearOp) == 2
    executable = gnomon.compile(exported)
    [out] = executable(x.numpy())
    executable.run([x.numpy()], profile=True)
    assert [t.kind for t in executable.profile().timings] == ["aten.linear", "generated", "aten.linear"]
    with torch.inference_mode():
        assert relative_l2(out, model(x).numpy()) <= 1e-5
