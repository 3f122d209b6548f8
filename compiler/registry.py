"""gnomon's dialects and passes by name, loaded on first use so that importing gnomon stays fast."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass


def _graph() -> Dialect:
    from gnomon.dialects.graph import Graph

    return Graph


def _torch() -> Dialect:
    from gnomon.dialects.torch import Torch

    return Torch


def _graph_canonicalize() -> type[ModulePass]:
    from gnomon.passes.graph_canonicalize import GraphCanonicalizePass

    return GraphCanonicalizePass


def _graph_shape_inference() -> type[ModulePass]:
    from gnomon.passes.graph_shape_inference import GraphShapeInferencePass

    return GraphShapeInferencePass


def _torch_to_graph() -> type[ModulePass]:
    from gnomon.passes.torch_to_graph import TorchToGraphPass

    return TorchToGraphPass


DIALECTS: dict[str, Callable[[], Dialect]] = {
    "graph": _graph,
    "torch": _torch,
}

PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "graph-canonicalize": _graph_canonicalize,
    "graph-shape-inference": _graph_shape_inference,
    "torch-to-graph": _torch_to_graph,
}
