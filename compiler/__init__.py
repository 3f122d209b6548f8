"""gnomon: a cost-model-driven compiler for ML models on xDSL and MLIR.

`gnomon.load(model, example_inputs=None, input_shapes=None, dynamic_shapes=None)` imports an
ONNX file, a TorchScript file, a `torch.export` file, an `nn.Module` or an `ExportedProgram`
into the graph dialect (it is `gnomon.pipeline.load`). `gnomon.compile(model, example_inputs=None,
input_shapes=None, backend="native")` imports, rewrites and lowers it into an `Executable`
(`gnomon.executable.compile_model`). `gnomon.analyze(model, example_inputs=None, device="local",
target="gnomon")` predicts its cost on a device (`gnomon.analysis.analyze`). Submodules load lazily:
`import gnomon` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gnomon.analysis import analyze
    from gnomon.executable import compile_model as compile
    from gnomon.pipeline import load

__all__ = ["analyze", "compile", "load"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "analyze":
        from gnomon.analysis import analyze

        return analyze
    if name == "load":
        from gnomon.pipeline import load

        return load
    if name == "compile":
        from gnomon.executable import compile_model

        return compile_model
    raise AttributeError(f"module 'gnomon' has no attribute {name!r}")
