"""Models with `?` dims: the reference backend runs them at any size; named dims must agree across inputs."""

from __future__ import annotations

import numpy as np
import pytest


def test_reference_backend_runs_a_dynamic_model_at_any_size_and_checks_named_dims() -> None:
    import torch
    from torch.export import Dim

    import gnomon
    from gnomon.executable import InputError

    class Residual(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return self.norm(self.linear(x)) + y

    model = Residual().eval()
    seq = Dim("seq", min=1, max=64)
    example = (torch.randn(2, 8, 16), torch.randn(2, 8, 16))
    executable = gnomon.compile(model, example, backend="reference", dynamic_shapes=({1: seq}, {1: seq}))
    for length in (1, 5, 64):
        x, y = torch.randn(2, length, 16), torch.randn(2, length, 16)
        np.testing.assert_allclose(executable(x, y)[0], model(x, y).detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match=r"^input 'y': dim 1 \(seq\) is 6, but input 'x' gives seq = 5$"):
        executable(torch.randn(2, 5, 16), torch.randn(2, 6, 16))
    with pytest.raises(InputError, match=r"^input 'x': expected float32 of shape \[2, seq, 16\], got float32 of shape"):
        executable(torch.randn(2, 5, 15), torch.randn(2, 5, 16))
