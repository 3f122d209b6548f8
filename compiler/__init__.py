"""gnomon: a cost-model-driven compiler for ML models on xDSL and MLIR.

`gnomon.load(model, example_inputs=None, input_shapes=None, dynamic_shapes=None)` imports an
ONNX file, a TorchScript file, a `torch.export` file, an `nn.Module` or an `ExportedProgram`
into the graph dialect (it is `gnomon.pipeline.load`). Submodules load lazily: `import gnomon`
does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gnomon.pipeline import load

__all__ = ["load"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "load":
        from gnomon.pipeline import load

        return load
    raise AttributeError(f"module 'gnomon' has no attribute {name!r}")
