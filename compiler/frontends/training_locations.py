"""Locations for a joint forward-backward graph: which layer each of its ops computes for.

torch's joint graph (`_export_forward_backward`) is traced again from the exported program and keeps no module
stacks, so gnomon infers them from the data flow, with the parameters' names as anchors (a parameter `l1.weight`
belongs to module `l1`):

- The modules are ranked by the forward op that first reads one of their parameters or buffers.
- The backward ops are those that depend on the loss (their seed is its gradient, `ones_like(loss)`); the rest,
  the running statistics' updates among them, are forward ops.
- A forward op computes for the latest-ranked module among those of its operands: the parameters it reads and
  the ops that produce its inputs. An op before any module (input normalization) has none.
- A backward op computes for the layer whose backward it is (`_locate_backward`): a layer's input gradient reads
  its weight; its weight gradient reads what the layer read in the forward pass; a bias gradient reads only the
  incoming gradient, computed for the same layer.

Forward ops are located at the module's path, as in inference; backward ops at `backward.<path>`, as the
optimizer's updates are at `optimizer.<parameter>`. An op with no module keeps its node name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["locate_joint_graph"]


def locate_joint_graph(graph: torch.fx.Graph, state_of: Mapping[str, str], loss: str,
                       module_name: Callable[[str], str]) -> None:  # fmt: skip
    """Set each call's `nn_module_stack` to its inferred layer (see the module docstring), which the importer
    turns into locations. `state_of` maps placeholder names to the torch names of the parameters and buffers they
    carry; `loss` names the loss's node; `module_name` maps a module path to the name users know it by."""
    nodes = list(graph.nodes)
    by_name = {node.name: node for node in nodes}
    backward = _descendants(by_name[loss])
    forward = {node for node in nodes if node not in backward}
    rank: dict[str, int] = {}
    layer: dict[torch.fx.Node, str] = {}
    for node in nodes:
        if node.op == "placeholder" and node.name in state_of:
            layer[node] = state_of[node.name].rpartition(".")[0]
    for node in nodes:
        if node in forward and node.op != "placeholder":
            for source in node.all_input_nodes:
                if source.op == "placeholder" and source in layer:
                    rank.setdefault(layer[source], len(rank))
            _take_latest(node, node.all_input_nodes, layer, rank)
    for node in nodes:
        if node.op == "call_function" and node not in forward:
            _locate_backward(node, forward, layer, rank)
    for node in nodes:
        if node.op != "call_function" or node not in layer or not (path := module_name(layer[node])):
            continue
        location = path if node in forward else f"backward.{path}"
        node.meta["nn_module_stack"] = {location: (location, "")}


def _take_latest(node: torch.fx.Node, sources: list[torch.fx.Node], layer: dict[torch.fx.Node, str],
                 rank: Mapping[str, int]) -> None:  # fmt: skip
    ranked = [layer[s] for s in sources if s in layer and layer[s] in rank]
    if ranked:
        layer[node] = max(ranked, key=rank.__getitem__)


def _locate_backward(node: torch.fx.Node, forward: set[torch.fx.Node], layer: dict[torch.fx.Node, str],
                     rank: Mapping[str, int]) -> None:  # fmt: skip
    """A backward op's layer: that of the parameters it reads (an input gradient reads the layer's weight); else
    the earliest layer that read in the forward pass what it reads (a weight gradient reads the layer's saved
    input, an earlier layer's output); else the earliest of its backward operands' (the incoming gradient:
    backward runs from the last layer to the first)."""
    sources = node.all_input_nodes
    state = [layer[s] for s in sources if s.op == "placeholder" and s in layer and layer[s] in rank]
    if state:
        layer[node] = max(state, key=rank.__getitem__)
        return
    readers = [reader for s in sources if s in forward for reader in _forward_readers(s, forward, layer)]
    if not readers:
        readers = [layer[s] for s in sources if s in layer]
    readers = [r for r in readers if r in rank]
    if readers:
        layer[node] = min(readers, key=rank.__getitem__)


def _forward_readers(value: torch.fx.Node, forward: set[torch.fx.Node], layer: dict[torch.fx.Node, str]) -> list[str]:
    """The layers of the forward ops that read `value` in another layer than its own (a view of a value is in its
    layer; the next layer reads it), else its own."""
    own = layer.get(value)
    readers = [layer[user] for user in value.users if user in forward and user in layer and layer[user] != own]
    return readers or ([own] if own is not None else [])


def _descendants(node: torch.fx.Node) -> set[torch.fx.Node]:
    """What the backward pass computes: everything that depends on the loss (its seed gradient is `ones_like`)."""
    seen: set[torch.fx.Node] = set()
    pending = [node]
    while pending:
        for user in pending.pop().users:
            if user not in seen:
                seen.add(user)
                pending.append(user)
    return seen
