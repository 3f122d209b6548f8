"""`gnomon memory` on inference programs, the timeline plot, and the locations of a training step's ops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import gnomon
from gnomon import cli
from gnomon.memory_profile import memory_profile
from gnomon.models import MLP, SmallCNN
from gnomon.optimizers import SGD, Adam, AdamW, optimizer_label


@pytest.fixture(scope="module")
def cnn_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmallCNN in ONNX with a symbolic batch dim `N`."""
    model = SmallCNN()
    path = tmp_path_factory.mktemp("models") / "cnn.onnx"
    torch.onnx.export(model, model.example_inputs(1), str(path), dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "N"}})  # fmt: skip
    return path


def test_an_inference_profile_accounts_for_every_byte_at_the_peak() -> None:
    """The activations and outputs live at the peak add up to the plan's lower bound; the weights and inputs are
    counted outside the arena by their arrays' sizes; the outputs live to the end."""
    model = MLP(sizes=(64, 256, 256, 10))
    executable = gnomon.compile(model, model.example_inputs(8))
    profile = memory_profile(executable.module)
    assert profile.outside == {
        "weights": sum(p.numel() * 4 for p in model.parameters()),
        "inputs": 8 * 64 * 4,
    }
    assert sum(profile.at_peak.values()) == profile.arena_lower_bound == max(profile.live)
    (output,) = [t for t in profile.tensors if t.category == "outputs"]
    assert (output.size, output.last) == (8 * 10 * 4, len(profile.layers))
    assert {t.layer for t in profile.tensors} <= {f"layers.{i}" for i in range(5)}


def test_cli_memory_rebatches_an_onnx_model(cnn_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--batch` sets the symbolic batch dim: the input and every activation scale with it."""
    reports = []
    for batch in (2, 8):
        assert cli.main(["memory", str(cnn_onnx), "--batch", str(batch), "--json"]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    small, large = reports
    assert (small["inputs_bytes"], large["inputs_bytes"]) == (2 * 3 * 32 * 32 * 4, 8 * 3 * 32 * 32 * 4)
    assert large["peak_bytes"] == 4 * small["peak_bytes"]
    assert small["weights_bytes"] == large["weights_bytes"]
    assert small["pytorch_peak_bytes"] is None  # no PyTorch run for an ONNX file


def test_cli_memory_plots_the_timeline(cnn_onnx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "timeline.png"
    assert cli.main(["memory", str(cnn_onnx), "--batch", "2", "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.splitlines()[-1] == f"timeline written to {plot}"


def test_cli_memory_of_a_torch_file_shows_pytorchs_peak(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PyTorch's eager inference holds at least the weights and the input."""
    model = MLP(sizes=(64, 512, 10))
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(model, model.example_inputs(4)), path)
    assert cli.main(["memory", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pytorch_peak_bytes"] >= report["weights_bytes"] + report["inputs_bytes"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["{onnx}", "--loss", "mse"],
            "--loss, --optimizer, --lr, --momentum and --release-gradients are a training step's: add --train",
        ),
        (["{onnx}", "--batch", "0"], "--batch 0: a batch holds at least one sample"),
        (["{onnx}", "--plot", "{tmp}/timeline.txt"], "the plot is written as .png, .svg or .pdf"),
        (["{pt2}", "--batch", "2"], "a torch.export program's shapes are fixed at export"),
        (["{pt2}", "--train", "--loss", "mse", "--batch", "2"], "was exported with a static batch of 4"),
    ],
)
def test_cli_memory_errors_are_one_line(args: list[str], message: str, cnn_onnx: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    pt2 = tmp_path / "cnn.pt2"
    model = SmallCNN()
    torch.export.save(torch.export.export(model, model.example_inputs(4)), pt2)
    filled = [a.format(onnx=cnn_onnx, pt2=pt2, tmp=tmp_path) for a in args]
    assert cli.main(["memory", *filled]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert message in error


def test_training_ops_are_located_by_layer() -> None:
    """The joint graph keeps no module stacks; gnomon locates its forward ops at their module, its backward ops at
    `backward.<module>` (a weight gradient at the layer whose weight it is) and the updates at
    `optimizer.<parameter>`."""
    model = MLP(sizes=(16, 32, 8))  # layers.0, a ReLU, layers.2
    x, target = torch.randn(4, 16), torch.randint(0, 8, (4,))
    step = gnomon.compile(gnomon.with_loss(model, "cross_entropy"), (x, target), train=True)
    step.step(x.numpy(), target.numpy(), profile=True)
    timings = step.profile().timings
    matmuls = {t.location for t in timings if {"graph.linear", "graph.matmul"} & set(t.source_ops)}
    assert {"layers.0", "layers.2", "backward.layers.0", "backward.layers.2"} <= matmuls
    updates = {t.location for t in timings if t.location.startswith("optimizer.")}
    assert updates == {f"optimizer.{name}" for name, _ in model.named_parameters()}


def test_optimizer_labels_name_what_differs_from_torchs_defaults() -> None:
    assert optimizer_label(SGD(lr=0.1, momentum=0.9)) == "SGD(lr=0.1, momentum=0.9)"
    assert optimizer_label(Adam()) == "Adam(lr=0.001)"
    assert optimizer_label(AdamW(weight_decay=0.1)) == "AdamW(lr=0.001, weight_decay=0.1)"
