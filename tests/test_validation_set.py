"""The cost model's validation set (bench/validation_set.py): every model compiles and matches torch at both of
its batch sizes. Slow (the whole set compiles twice), so outside `make test`."""

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import load_script

import gnomon

pytestmark = pytest.mark.slow

VALIDATION_SET = load_script(Path(__file__).parent.parent / "bench" / "validation_set.py").VALIDATION_SET


@pytest.mark.parametrize(
    ("name", "batch"),
    [pytest.param(name, batch, id=f"{name}-b{batch}") for name, m in VALIDATION_SET.items() for batch in m.batches],
)
def test_matches_torch(name: str, batch: int) -> None:
    entry = VALIDATION_SET[name]
    model = entry.build()
    inputs = entry.example_inputs(model, batch)
    with torch.no_grad():
        expected = model(*inputs).numpy()
    exe = gnomon.compile(model, example_inputs=inputs)
    (got,) = exe(*[i.numpy() for i in inputs])
    assert got.shape == expected.shape
    assert np.linalg.norm(got - expected) / np.linalg.norm(expected) < 1e-4
