"""Every backend against the same expectations: the reference interpreter, the torch eager baseline and the
native runtime run the ONNX backend models (against their recorded outputs), the light networks (against
onnxruntime) and gnomon's torch models (against torch eager). Each model is imported once and compiled once
per backend (tests/conftest.py's `model_cache`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import (
    BACKEND_MODELS,
    BACKENDS,
    LIGHT_NETWORKS,
    TORCH_MODELS,
    Backend,
    ModelCache,
    by_model,
    read_tensors,
    relative_l2,
)
from xdsl.dialects.builtin import IntegerAttr

from gnomon.dialects import rt
from gnomon.passes.kernel_to_rt import rt_functions


def test_all_backend_models_are_collected() -> None:
    assert len(BACKEND_MODELS) == 117


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", by_model(BACKEND_MODELS))
def test_backend_model_matches_recorded_outputs(model_cache: ModelCache, model: Path, backend: Backend) -> None:
    # ONNX's own backend tests compare with rtol=1e-3, atol=1e-7; every model passes at those on every backend.
    data = model.parent / "test_data_set_0"
    outputs = model_cache.run(backend, model, read_tensors(data, "input"))
    expected = read_tensors(data, "output")
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert actual.shape == want.shape
        assert actual.dtype == want.dtype
        np.testing.assert_allclose(actual, want, rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", by_model(LIGHT_NETWORKS))
def test_light_network_matches_onnxruntime(model_cache: ModelCache, model: Path, backend: Backend) -> None:
    inputs, expected = model_cache.onnxruntime(model)
    outputs = model_cache.run(backend, model, inputs)
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert actual.shape == want.shape
        assert relative_l2(actual, want) <= 1e-4


@pytest.mark.parametrize("model", by_model(LIGHT_NETWORKS))
def test_light_network_arena_is_within_five_percent_of_its_lower_bound(model_cache: ModelCache, model: Path) -> None:
    function = rt_functions(model_cache.executable(model).module)[0]
    size, bound = function.attributes[rt.ARENA_SIZE], function.attributes[rt.ARENA_LOWER_BOUND]
    assert isinstance(size, IntegerAttr)
    assert isinstance(bound, IntegerAttr)
    assert bound.value.data <= size.value.data <= 1.05 * bound.value.data


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", by_model(TORCH_MODELS))
def test_torch_model_matches_eager(model_cache: ModelCache, model: str, backend: Backend) -> None:
    module, inputs = model_cache.torch_model(model)
    with torch.no_grad():
        expected = module(*inputs)
    outputs = model_cache.run(backend, model, [x.numpy() for x in inputs])
    assert len(outputs) == 1
    assert outputs[0].shape == tuple(expected.shape)
    assert relative_l2(outputs[0], expected.numpy()) <= 1e-5
