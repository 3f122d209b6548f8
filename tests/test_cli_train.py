"""`gnomon run --train` and `gnomon memory --train` on model files: losses against torch's, the memory report,
and the one-line errors."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from gnomon import cli
from gnomon.frontends.torch import input_names_of
from gnomon.frontends.torch_training import LOSSES, training_model_from_file, with_loss
from gnomon.models import DLRM, MLP, SmallCNN


@pytest.fixture(scope="module")
def cnn_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmallCNN exported in training mode (its batch norms update their statistics); it returns logits."""
    model = SmallCNN().train()
    path = tmp_path_factory.mktemp("models") / "cnn.pt2"
    torch.export.save(torch.export.export(model, model.example_inputs(4)), path)
    return path


def test_cli_losses_match_torch(cnn_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three SGD steps with momentum on the file's random batch (seeded) give torch's losses."""
    args = ["run", "--train", str(cnn_file), "--loss", "cross_entropy", "--steps", "3", "--lr", "0.1"]
    assert cli.main([*args, "--momentum", "0.9", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    module, batch = training_model_from_file(cnn_file, None, "cross_entropy", seed=0)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    expected = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = module(*batch)
        loss.backward()
        optimizer.step()
        expected.append(loss.item())
    assert report["losses"] == pytest.approx(expected, rel=1e-4)
    memory = report["memory"]
    assert memory["parameters_bytes"] == sum(p.numel() * 4 for p in SmallCNN().parameters())
    assert memory["arena_lower_bound_bytes"] <= memory["arena_bytes"] <= 1.05 * memory["arena_lower_bound_bytes"]


def test_cli_memory_prints_each_category(cnn_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["memory", "--train", str(cnn_file), "--loss", "mse", "--optimizer", "adam"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "memory of the training step of cnn.pt2 (Adam(lr=0.001))"
    labels = [re.split(r"\s{2,}", line.strip())[0] for line in lines[1 : lines.index("")]]
    assert labels[:4] == ["parameters", "buffers", "optimizer state", "batch"]
    assert labels[4].startswith("arena (")
    assert labels[5:8] == [f"at its peak: {c}" for c in ("gradients", "saved activations", "temporaries")]
    assert labels[8:] == ["total", "PyTorch eager's measured peak"]


def test_cli_memory_json_names_the_layers_live_at_the_peak(cnn_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every byte live at the arena's peak belongs to a layer of the model (forward, backward or optimizer), and
    they add up to the peak; PyTorch's peak holds at least the parameters and their gradients."""
    assert cli.main(["memory", "--train", str(cnn_file), "--loss", "cross_entropy", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["at_peak_by_layer"]
    assert sum(row["bytes"] for row in rows) == sum(report["at_arena_peak"].values())
    modules = {name for name, _ in SmallCNN().named_modules() if name}
    assert {row["layer"].removeprefix("backward.") for row in rows} <= modules
    assert report["batch_bytes"] == 4 * 3 * 32 * 32 * 4 + 4 * 8  # four images and their int64 class indices
    assert report["pytorch_peak_bytes"] >= 2 * report["parameters_bytes"]


def test_cli_memory_with_released_gradients_is_smaller(cnn_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["memory", "--train", str(cnn_file), "--loss", "cross_entropy", "--json"]
    assert cli.main(args) == 0
    kept = json.loads(capsys.readouterr().out)
    assert cli.main([*args, "--release-gradients"]) == 0
    released = json.loads(capsys.readouterr().out)
    assert released["peak_bytes"] < kept["peak_bytes"]
    assert released["parameters_bytes"] == kept["parameters_bytes"]


def test_cli_training_resumes_from_a_saved_state(cnn_file: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Two steps, saved, then one more from the saved state: the losses of three steps in one run, Adam's moments
    and step count included."""
    common = ["run", "--train", str(cnn_file), "--loss", "cross_entropy", "--optimizer", "adam", "--json"]
    assert cli.main([*common, "--steps", "3"]) == 0
    straight = json.loads(capsys.readouterr().out)["losses"]
    state = tmp_path / "state.npz"
    assert cli.main([*common, "--steps", "2", "--save-state", str(state)]) == 0
    capsys.readouterr()
    assert cli.main([*common, "--restore", str(state)]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["steps_taken"] == 3
    assert resumed["losses"] == pytest.approx(straight[2:], rel=1e-6)


def test_cli_trains_a_traced_torchscript_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TorchScript's converter keeps parameters as buffers; they are trained all the same."""
    path = tmp_path / "mlp.pt"
    torch.jit.trace(MLP(sizes=(8, 16, 4)), torch.randn(3, 8)).save(str(path))
    args = ["run", "--train", str(path), "--input-shape", "x=3x8", "--loss", "cross_entropy", "--steps", "2"]
    assert cli.main([*args, "--lr", "0.5", "--json"]) == 0
    losses = json.loads(capsys.readouterr().out)["losses"]
    assert losses[1] < losses[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--train", "{cnn}"], "returns [4, 10], not a loss: give --loss (cross_entropy, mse, bce_with_logits, nll)"),
        (["{cnn}", "--steps", "3"], "--loss, --steps, --restore, --save-state and --release-gradients train the model"),
        (["--train", "{cnn}", "--loss", "mse", "--restore", "{onnx}"], "is not a training state written by save()"),
        (["--train", "{cnn}", "--loss", "mse", "--optimizer", "adam", "--momentum", "0.9"], "--momentum is SGD's"),
        (["--train", "{cnn}", "--loss", "mse", "--steps", "0"], "--steps 0: run at least one step"),
        (["--train", "{onnx}"], "is an ONNX model: gnomon trains torch modules, torch.export (.pt2) and TorchScript"),
    ],
)
def test_cli_training_errors_are_one_line(
    args: list[str], message: str, cnn_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"not read")
    filled = [a.format(cnn=cnn_file, onnx=onnx) for a in args]
    assert cli.main(["run", *filled]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("gnomon: error: ")
    assert len(error.splitlines()) == 1
    assert message in error


def test_the_cli_knows_every_loss() -> None:
    assert cli.LOSSES == tuple(LOSSES)


def test_file_batches_are_seeded(cnn_file: Path) -> None:
    _, first = training_model_from_file(cnn_file, None, "nll", seed=3)
    _, again = training_model_from_file(cnn_file, None, "nll", seed=3)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert copy.deepcopy(first[1]).max() < 10  # class indices into SmallCNN's 10 outputs


def test_import_prints_the_training_step(cnn_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gnomon import --train`: the joint graph, with the gradient ops, before any optimizer."""
    assert cli.main(["import", "--train", str(cnn_file), "--loss", "cross_entropy", "--elide-weights"]) == 0
    text = capsys.readouterr().out
    for op in ("graph.conv_weight_grad", "graph.conv_transpose", "graph.max_pool_grad", "graph.batch_norm_train"):
        assert op in text


def test_load_imports_the_training_step_of_a_module() -> None:
    """gnomon.load(train=True): (parameters, updated buffers, inputs) to (loss, gradients, new buffers)."""
    from xdsl.dialects import func

    import gnomon

    model = SmallCNN()
    x = model.example_inputs(2)[0]
    module = gnomon.load(model, (x, torch.randint(0, 10, (2,))), train=True, loss="cross_entropy")
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    parameters = list(model.parameters())
    statistics = [b for n, b in model.named_buffers() if "running" in n or "num_batches" in n]
    assert len(function.function_type.inputs) == len(parameters) + len(statistics) + 2
    assert len(function.function_type.outputs) == 1 + len(parameters) + len(statistics)


@pytest.fixture(scope="module")
def dlrm_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A DLRM that returns its loss, exported, and a batch of real inputs for it."""
    model = with_loss(DLRM(13, tables=3, rows=1000, dim=16, pooling=4), "bce_with_logits").train()
    folder = tmp_path_factory.mktemp("models")
    path, batch_path = folder / "dlrm.pt2", folder / "batch.npz"
    batch = (*model.model.example_inputs(8), torch.rand(8, 1))  # pyright: ignore[reportCallIssue]
    program = torch.export.export(model, batch, strict=False)
    torch.export.save(program, path)
    names = input_names_of(program)
    np.savez(batch_path, **{name: value.numpy() for name, value in zip(names, batch, strict=True)})
    return path, batch_path


def test_cli_trains_an_embedding_bag_model_on_its_random_batch_or_on_real_inputs(
    dlrm_file: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The random batch's integers are valid for the lookups they feed (table rows, rising bag offsets), so a
    DLRM file trains and `gnomon memory` measures PyTorch's peak without a batch given; `--inputs` gives one."""
    path, batch_path = dlrm_file
    for extra in ([], ["--inputs", str(batch_path)]):
        assert cli.main(["run", "--train", str(path), *extra, "--steps", "2", "--json"]) == 0
        losses = json.loads(capsys.readouterr().out)["losses"]
        assert len(losses) == 2
        assert all(np.isfinite(losses))
    assert cli.main(["memory", str(path), "--train", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pytorch_peak_bytes"] > 0


class Gather(torch.nn.Module):
    """Reads a one-row parameter at integer positions: gnomon's random integers (0 or 1) go past it."""

    def __init__(self) -> None:
        super().__init__()
        self.row = torch.nn.Parameter(torch.randn(1, 4))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.row[ids].square().mean()


def test_data_a_model_rejects_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The model's output is probed on fake tensors, so it compiles; running it on the random batch is one error
    naming the kernel and layer, and `gnomon memory` reports gnomon's step with one warning line for PyTorch's."""
    path = tmp_path / "gather.pt2"
    torch.export.save(torch.export.export(Gather(), (torch.tensor([0, 0, 0, 0, 0, 0]),)), path)
    assert cli.main(["run", "--train", str(path), "--steps", "1"]) == 2
    error = capsys.readouterr().err
    assert re.search(r"error: kernel @\w+ \(.*\) failed on its data: index out of range in self", error)
    assert cli.main(["memory", str(path), "--train", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["pytorch_peak_bytes"] is None
    assert "PyTorch's peak not measured: gather.pt2 fails eagerly on a random batch" in captured.err


@pytest.fixture(scope="module")
def cnn_step(cnn_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`gnomon compile --train` of the CNN file: SGD with momentum, cross-entropy."""
    path = tmp_path_factory.mktemp("steps") / "step.mlir"
    args = ["compile", "--train", str(cnn_file), "--loss", "cross_entropy", "--lr", "0.1", "--momentum", "0.9"]
    assert cli.main([*args, "-o", str(path)]) == 0
    return path


def test_a_compiled_training_step_trains_as_its_model_file_does(
    cnn_file: Path, cnn_step: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The compiled file holds the step, its optimizer, its state at the first step and the seeded batch: three
    steps from it give the model file's three losses; its state saves and resumes; its layers keep their names;
    `gnomon memory` reports the arena it runs in, `gnomon analyze` prices it as compiled."""
    capsys.readouterr()
    common = ["--loss", "cross_entropy", "--lr", "0.1", "--momentum", "0.9", "--steps", "3", "--json"]
    assert cli.main(["run", "--train", str(cnn_file), *common]) == 0
    expected = json.loads(capsys.readouterr().out)["losses"]
    assert cli.main(["run", "--train", str(cnn_step), "--steps", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["losses"] == pytest.approx(expected, rel=1e-6)
    assert report["optimizer"] == "SGD(lr=0.1, momentum=0.9)"
    assert "?" not in {row["layer"] for row in report["memory"]["at_peak_by_layer"]}
    assert cli.main(["memory", "--train", str(cnn_step), "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)
    assert memory["arena_bytes"] == report["memory"]["arena_bytes"]
    assert memory["pytorch_peak_bytes"] is None  # no torch model in the file
    assert cli.main(["analyze", "--train", str(cnn_step), "--device", "generic-cpu", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert predicted["target"] == "gnomon"
    assert predicted["totals"]["parameters"] == sum(p.numel() for p in SmallCNN().parameters())
    state = tmp_path / "state.npz"
    assert cli.main(["run", "--train", str(cnn_step), "--steps", "2", "--save-state", str(state), "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["run", "--train", str(cnn_step), "--restore", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["losses"] == pytest.approx(expected[2:], rel=1e-6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "{step}"], "step.mlir is a compiled training step: run it with `gnomon run --train`"),
        (["run", "--train", "{step}", "--lr", "0.5"], "its loss, optimizer, shapes and batch were fixed by `gnomon"),
        (["run", "--train", "{step}", "--seed", "3"], "compile it again to change them, or give --inputs"),
        (["memory", "{step}"], "step.mlir is a compiled training step: add --train"),
        (["analyze", "{step}"], "step.mlir is a compiled training step: add --train"),
        (["analyze", "--train", "{step}", "--target", "torch-eager"], "the torch-eager target prices a model"),
        (["memory", "--train", "{step}", "--batch", "2"], "step.mlir is a compiled program: its shapes"),
        (["compile", "--train", "{cnn}", "--loss", "mse", "-o", "{out}", "--explain"], "--explain prints an infer"),
        (
            ["compile", "{cnn}", "--loss", "mse", "-o", "{out}"],
            "--release-gradients are a training step's: add --train",
        ),
    ],
)
def test_compiled_training_step_errors_are_one_line(
    args: list[str], message: str, cnn_file: Path, cnn_step: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    filled = [a.format(cnn=cnn_file, step=cnn_step, out=tmp_path / "out.mlir") for a in args]
    assert cli.main(filled) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("gnomon: error: ")
    assert len(error.splitlines()) == 1
    assert message in error
