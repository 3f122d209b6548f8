"""Models with `?` dims: the reference backend runs them at any size; named dims must agree across inputs."""

from __future__ import annotations

from pathlib import Path

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


def dynamic_onnx(tmp_path: Path) -> Path:
    """x[N, 8] @ w -> relu, with N a `dim_param`."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8], np.arange(64, dtype=np.float32) / 64)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "dyn", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)]
    )
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    return path


def test_declared_ranges_bound_the_sizes_an_input_may_take(tmp_path: Path) -> None:
    import gnomon
    from gnomon.errors import GnomonError
    from gnomon.executable import InputError

    path = dynamic_onnx(tmp_path)
    executable = gnomon.compile(path, backend="reference", dim_ranges={"N": (2, 16)})
    assert executable.largest_input_shapes() == [(16, 8)]
    x = np.ones((3, 8), np.float32)
    np.testing.assert_allclose(
        executable(x)[0], np.maximum(x @ (np.arange(64, dtype=np.float32) / 64).reshape(8, 8), 0)
    )
    with pytest.raises(InputError, match=r"^input 'x': dim 0 \(N\) is 17, outside its declared range 2\.\.16$"):
        executable(np.ones((17, 8), np.float32))
    with pytest.raises(GnomonError, match=r"^dyn\.onnx has no dynamic dim named 'seq' \(its named dims: N\)$"):
        gnomon.compile(path, backend="reference", dim_ranges={"seq": (1, 4)})


def test_cli_declares_a_range_and_runs_at_its_top(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gnomon import cli

    path = dynamic_onnx(tmp_path)
    assert cli.main(["run", str(path), "--backend", "reference", "--input-shape", "N=1..16"]) == 0
    assert "16x8" in capsys.readouterr().out
    assert cli.main(["run", str(path), "--backend", "reference"]) != 0
    assert capsys.readouterr().err.strip().splitlines() == [
        "gnomon: error: input 'x': dim 0 (N) is dynamic with no declared range (declare one, e.g. --input-shape"
        " N=1..64, or give the inputs)"
    ]
    assert cli.main(["run", str(path), "--input-shape", "N=9..3"]) != 0
    assert capsys.readouterr().err.strip().splitlines() == [
        f"gnomon: error: --input-shape 'N=9..3': a range needs 1 <= LOW <= HIGH <= {2**63 - 1}"
    ]


def test_bert_style_encoder_compiles_once_for_every_sequence_length() -> None:
    from torch.export import Dim

    import gnomon
    from gnomon.executable import InputError
    from gnomon.models import BertEncoder

    model = BertEncoder()
    seq = Dim("seq", min=1, max=model.max_len)
    executable = gnomon.compile(model, model.example_inputs(), backend="reference", dynamic_shapes=({1: seq},))
    for length in (1, 2, 37, 128):
        (ids,) = model.example_inputs(seq=length)
        np.testing.assert_allclose(executable(ids)[0], model(ids).detach().numpy(), rtol=1e-4, atol=1e-5)
    # The Dim's range came with the program: a longer sequence than its position table is refused by name.
    with pytest.raises(InputError, match=r"^input 'ids': dim 1 \(seq\) is 129, outside its declared range 1\.\.128$"):
        executable(model.example_inputs(seq=129)[0])
