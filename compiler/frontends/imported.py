"""What every frontend returns: the imported module and the names the CLI and messages use.

It lives apart from the package's `import_model`, which imports the frontends lazily, so that
the frontends can name it without importing their own package's `__init__`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp


@dataclass
class TrainingState:
    """What a training step's function carries beside the model's inputs: its leading arguments are the trained
    parameters, then the buffers the step updates, each by its torch name; its results are the loss, one gradient
    per parameter and the updated buffers, in the same orders."""

    parameters: list[str]
    buffers: list[str]
    values: dict[str, np.ndarray]
    """Each parameter's and buffer's value when the model was imported: where training starts."""


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
    dim_bounds: dict[str, tuple[int, int]] = field(default_factory=dict[str, tuple[int, int]])
    """The declared range of named dynamic dims (torch.export's `Dim(min=, max=)`): name -> (smallest, largest)."""
    module_calls: int = 0
    """The `nn.Module` calls one eager run of the model makes, each a Python call that the torch-eager target
    prices (`gnomon.cost.eager`); 0 where the model has no Python modules (ONNX, TorchScript)."""
    training: TrainingState | None = None
    """For a training step (`train=True`): its parameters and updated buffers; None for inference."""
