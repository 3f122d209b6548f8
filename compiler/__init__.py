"""gnomon: a cost-model-driven compiler for ML models on xDSL and MLIR.

`gnomon.load(model, example_inputs=None, input_shapes=None)` imports an ONNX file, a
TorchScript file, a `torch.export` file, an `nn.Module` or an `ExportedProgram` into the
graph dialect. Submodules load lazily: `import gnomon` does not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["load"]
__version__ = "0.1.0"


def load(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dynamic_shapes: Any = None,
) -> ModuleOp:
    """Import `model` into a verified graph-dialect module (see `gnomon.pipeline.load`).

    `dynamic_shapes` (for a torch module) are torch.export's; their `Dim` names name the `?` dims.
    """
    from gnomon.pipeline import load as load_model

    return load_model(model, example_inputs=example_inputs, input_shapes=input_shapes, dynamic_shapes=dynamic_shapes)
