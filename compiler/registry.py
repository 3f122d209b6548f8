"""gnomon's dialects and passes by name, loaded on first use so that importing gnomon stays fast."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass


def _graph() -> Dialect:
    from gnomon.dialects.graph import Graph

    return Graph


def _kernel() -> Dialect:
    from gnomon.dialects.kernel import Kernel

    return Kernel


def _rt() -> Dialect:
    from gnomon.dialects.rt import Rt

    return Rt


def _torch() -> Dialect:
    from gnomon.dialects.torch import Torch

    return Torch


def _graph_canonicalize() -> type[ModulePass]:
    from gnomon.passes.graph_canonicalize import GraphCanonicalizePass

    return GraphCanonicalizePass


def _graph_cost() -> type[ModulePass]:
    from gnomon.passes.graph_cost import GraphCostPass

    return GraphCostPass


def _graph_drop_dropout() -> type[ModulePass]:
    from gnomon.passes.graph_drop_dropout import GraphDropDropoutPass

    return GraphDropDropoutPass


def _graph_fold_batch_norm() -> type[ModulePass]:
    from gnomon.passes.graph_fold_batch_norm import GraphFoldBatchNormPass

    return GraphFoldBatchNormPass


def _graph_fold_constants() -> type[ModulePass]:
    from gnomon.passes.graph_fold_constants import GraphFoldConstantsPass

    return GraphFoldConstantsPass


def _graph_fuse() -> type[ModulePass]:
    from gnomon.passes.graph_fuse import GraphFusePass

    return GraphFusePass


def _graph_predicate() -> type[ModulePass]:
    from gnomon.passes.graph_predicate import GraphPredicatePass

    return GraphPredicatePass


def _graph_recompute() -> type[ModulePass]:
    from gnomon.passes.graph_recompute import GraphRecomputePass

    return GraphRecomputePass


def _graph_layout() -> type[ModulePass]:
    from gnomon.passes.graph_layout import GraphLayoutPass

    return GraphLayoutPass


def _graph_roofline() -> type[ModulePass]:
    from gnomon.passes.graph_roofline import GraphRooflinePass

    return GraphRooflinePass


def _graph_shape_inference() -> type[ModulePass]:
    from gnomon.passes.graph_shape_inference import GraphShapeInferencePass

    return GraphShapeInferencePass


def _graph_to_kernel() -> type[ModulePass]:
    from gnomon.passes.graph_to_kernel import GraphToKernelPass

    return GraphToKernelPass


def _kernel_to_linalg() -> type[ModulePass]:
    from gnomon.passes.kernel_to_linalg import KernelToLinalgPass

    return KernelToLinalgPass


def _kernel_to_rt() -> type[ModulePass]:
    from gnomon.passes.kernel_to_rt import KernelToRtPass

    return KernelToRtPass


def _kernel_tuned_schedules() -> type[ModulePass]:
    from gnomon.passes.kernel_tuned_schedules import KernelTunedSchedulesPass

    return KernelTunedSchedulesPass


def _torch_to_graph() -> type[ModulePass]:
    from gnomon.passes.torch_to_graph import TorchToGraphPass

    return TorchToGraphPass


DIALECTS: dict[str, Callable[[], Dialect]] = {
    "graph": _graph,
    "kernel": _kernel,
    "rt": _rt,
    "torch": _torch,
}

PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "graph-canonicalize": _graph_canonicalize,
    "graph-cost": _graph_cost,
    "graph-drop-dropout": _graph_drop_dropout,
    "graph-fold-batch-norm": _graph_fold_batch_norm,
    "graph-fold-constants": _graph_fold_constants,
    "graph-fuse": _graph_fuse,
    "graph-layout": _graph_layout,
    "graph-predicate": _graph_predicate,
    "graph-recompute": _graph_recompute,
    "graph-roofline": _graph_roofline,
    "graph-shape-inference": _graph_shape_inference,
    "graph-to-kernel": _graph_to_kernel,
    "kernel-to-linalg": _kernel_to_linalg,
    "kernel-to-rt": _kernel_to_rt,
    "kernel-tuned-schedules": _kernel_tuned_schedules,
    "torch-to-graph": _torch_to_graph,
}
