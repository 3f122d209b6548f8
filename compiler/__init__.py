"""gnomon: a cost-model-driven compiler for ML models on xDSL and MLIR.

`gnomon.load(model, example_inputs=None, input_shapes=None, dynamic_shapes=None)` imports an
ONNX file, a TorchScript file, a `torch.export` file, an `nn.Module` or an `ExportedProgram`
into the graph dialect (it is `gnomon.pipeline.load`). `gnomon.compile(model, example_inputs=None,
input_shapes=None, backend="native")` imports, rewrites and lowers it into an `Executable`
(`gnomon.executable.compile_model`). `gnomon.analyze(model, example_inputs=None, device="local",
target="gnomon")` predicts its cost on a device (`gnomon.analysis.analyze`). `gnomon.compile(model,
example_inputs, train=gnomon.SGD(lr=0.1))` compiles a training step of a module that returns its loss
(`gnomon.with_loss(model, "cross_entropy")` attaches one); `gnomon.SGD`, `gnomon.Adam` and `gnomon.AdamW` are
`gnomon.optimizers`'. `gnomon.shard(model, example_inputs, devices="4xh100")` chooses how a recommender's embedding
tables are sharded across a system's devices by predicted step time (`gnomon.sharding.shard`). Submodules load lazily:
`import gnomon` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gnomon.analysis import analyze
    from gnomon.executable import compile_model as compile
    from gnomon.frontends.torch_training import with_loss
    from gnomon.optimizers import SGD, Adam, AdamW
    from gnomon.pipeline import load
    from gnomon.sharding import shard

__all__ = ["SGD", "Adam", "AdamW", "analyze", "compile", "load", "shard", "with_loss"]
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
    if name in ("SGD", "Adam", "AdamW"):
        from gnomon import optimizers

        return getattr(optimizers, name)
    if name == "shard":
        from gnomon.sharding import shard

        return shard
    if name == "with_loss":
        from gnomon.frontends.torch_training import with_loss

        return with_loss
    raise AttributeError(f"module 'gnomon' has no attribute {name!r}")
