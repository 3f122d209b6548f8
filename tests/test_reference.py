"""The reference interpreter's errors. Its numbers against ONNX's recorded outputs, onnxruntime and torch eager
are checked in test_backends, with every other backend's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ModelCache
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32

from gnomon.dialects.graph.base import f64_attr
from gnomon.dialects.graph.nn import BatchNormTrainOp
from gnomon.reference import ReferenceRunError, run_reference


def test_op_without_semantics_is_named() -> None:
    x = TensorType(f32, [2, 3, 4])
    c = TensorType(f32, [3])
    function = func.FuncOp("main", ((x, c, c), (x,)))
    block = function.body.blocks.first
    assert block is not None
    train = BatchNormTrainOp.build(
        operands=list(block.args),
        result_types=[x, c, c],
        properties={"epsilon": f64_attr(1e-5), "momentum": f64_attr(0.1)},
    )
    block.add_ops([train, func.ReturnOp(train.results[0])])
    with pytest.raises(ReferenceRunError, match=r"no reference semantics for graph\.batch_norm_train"):
        run_reference(
            ModuleOp([function]), [np.zeros((2, 3, 4), np.float32), np.ones(3, np.float32), np.ones(3, np.float32)]
        )


@pytest.mark.xdist_group("MLP")
def test_input_count_is_checked(model_cache: ModelCache) -> None:
    with pytest.raises(ReferenceRunError, match="takes 1 inputs, got 0"):
        run_reference(model_cache.imported("MLP"), [])
