"""The reference interpreter's errors. Its numbers against ONNX's recorded outputs, onnxruntime and torch eager
are checked in test_backends, with every other backend's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ModelCache
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32

from gnomon.reference import ReferenceRunError, run_reference


def test_op_without_semantics_is_named() -> None:
    """An op the oracle has no semantics for (every graph op has some; arith's, outside the graph dialect, not)."""
    x = TensorType(f32, [2, 3, 4])
    function = func.FuncOp("main", ((x,), (x,)))
    block = function.body.blocks.first
    assert block is not None
    add = arith.AddfOp(block.args[0], block.args[0])
    block.add_ops([add, func.ReturnOp(add.result)])
    with pytest.raises(ReferenceRunError, match=r"no reference semantics for arith\.addf"):
        run_reference(ModuleOp([function]), [np.zeros((2, 3, 4), np.float32)])


@pytest.mark.xdist_group("MLP")
def test_input_count_is_checked(model_cache: ModelCache) -> None:
    with pytest.raises(ReferenceRunError, match="takes 1 inputs, got 0"):
        run_reference(model_cache.imported("MLP"), [])
