"""What every frontend returns: the imported module and the names the CLI and messages use.

It lives apart from the package's `import_model`, which imports the frontends lazily, so that
the frontends can name it without importing their own package's `__init__`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp


@dataclass
class ImportedModel:
    """A model in the torch dialect, with what error messages and the CLI need to name it."""

    module: ModuleOp
    """One `func.func` over value tensors, in the torch dialect."""
    source: str
    """The file name (or class name of a live module) to show in messages, e.g. `model.onnx`."""
    input_names: list[str]
    """The model's inputs, in the order of the function's arguments."""
    output_names: list[str]
    """The model's outputs, in the order of the function's results."""
    kind: str
    """`onnx`, `torchscript` or `torch`."""
    input_dim_names: list[tuple[str, ...]] = field(default_factory=list[tuple[str, ...]])
    """Per input, the name of each dynamic dim ("" for none), e.g. ONNX's `dim_param` "N"; may be empty."""
    module_calls: int = 0
    """The `nn.Module` calls one eager run of the model makes, each a Python call that the torch-eager target
    prices (`gnomon.cost.eager`); 0 where the model has no Python modules (ONNX, TorchScript)."""
