"""Frontends: ONNX files, TorchScript files, exported programs and live torch modules.

Each produces an xDSL module in torch-mlir's `torch` dialect (value tensors, `torch.aten.*`
ops; weights as `dense_resource` literals from torch, `dense` ones from ONNX, and large splats
as `torch.aten.full`) with locations that name the source's node or module path. torch-mlir
runs in a forked child (`isolation`): when it crashes, the user gets an error, not a dead process.
The frontends are imported lazily: torch and onnx are slow to import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnomon.errors import FileAccessError, ModelLoadError
from gnomon.files import check_readable
from gnomon.frontends.imported import ImportedModel

__all__ = ["ImportedModel", "check_model_kind", "import_model"]

if TYPE_CHECKING:
    import torch

_TORCH_MODELS = {"torch.nn.modules.module.Module", "torch.export.exported_program.ExportedProgram"}


def check_model_kind(model: Any) -> None:
    """A ModelLoadError unless `model` is something gnomon imports: a file's path, a torch module or exported
    program (checked by class name: importing torch to check would cost seconds for a mistake)."""
    if isinstance(model, str | Path):
        return
    classes = {f"{c.__module__}.{c.__qualname__}" for c in type(model).__mro__}
    if not classes & _TORCH_MODELS:
        raise ModelLoadError(
            "a model is a file (a str or Path), a torch.nn.Module or a torch.export.ExportedProgram, "
            f"not {type(model).__name__}"
        )


def import_model(
    model: str | Path | torch.nn.Module | torch.export.ExportedProgram,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dynamic_shapes: Any = None,
) -> ImportedModel:
    """Imports a model file (by its extension) or a live torch module or exported program.

    `example_inputs` serve torch modules and TorchScript files; `input_shapes` override
    or supply input shapes (ONNX, TorchScript), by input name; `dynamic_shapes` (torch modules)
    are torch.export's, and the names of their `Dim`s name the graph's `?` dims.
    """
    check_model_kind(model)
    if not isinstance(model, str | Path):
        from gnomon.frontends.torch import import_torch

        return import_torch(model, example_inputs, type(model).__name__, dynamic_shapes)
    path = Path(model)
    try:
        check_readable(path)
    except FileAccessError as error:  # a model that cannot be read is a model that cannot be loaded
        raise ModelLoadError(str(error)) from error
    match path.suffix.lower():
        case ".onnx":
            from gnomon.frontends.onnx import import_onnx

            return import_onnx(path, input_shapes)
        case ".pt" | ".pth":
            from gnomon.frontends.torch import import_exported_file, import_torchscript, is_exported_archive

            # `torch.export.save` writes zip archives too, and people name them .pt.
            if is_exported_archive(path):
                return import_exported_file(path)
            return import_torchscript(path, example_inputs, input_shapes)
        case ".pt2":
            from gnomon.frontends.torch import import_exported_file

            return import_exported_file(path)
        case _:
            raise ModelLoadError(f"{path}: unknown model format (expected .onnx, .pt, .pth or .pt2)")
