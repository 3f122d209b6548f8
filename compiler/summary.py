"""A one-screen summary of a graph program: inputs, outputs, ops by kind, parameters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import prod

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType

from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.constant_values import element_bytes
from gnomon.dialects.graph.tensor import ConstantOp


@dataclass
class GraphSummary:
    name: str
    inputs: list[tuple[str, TensorType]]
    outputs: list[tuple[str, TensorType]]
    ops_by_kind: Counter[str] = field(default_factory=Counter[str])
    parameters: int = 0
    parameter_bytes: int = 0
    constants: int = 0

    def render(self) -> str:
        lines = [f"model {self.name}"]
        lines += [f"  input  {name}: {ty}" for name, ty in self.inputs]
        lines += [f"  output {name}: {ty}" for name, ty in self.outputs]
        total = sum(self.ops_by_kind.values())
        size = self.parameter_bytes / 2**20
        lines.append(f"  {total} ops; {self.parameters:,} parameters in {self.constants} constants ({size:.1f} MiB)")
        width = max((len(k) for k in self.ops_by_kind), default=0)
        for kind, count in sorted(self.ops_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {kind:<{width}}  {count}")
        return "\n".join(lines)


def summarize(module: ModuleOp, input_names: list[str], output_names: list[str]) -> GraphSummary:
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    arg_types = [t for t in function.function_type.inputs.data if isinstance(t, TensorType)]
    out_types = [t for t in function.function_type.outputs.data if isinstance(t, TensorType)]
    summary = GraphSummary(
        function.sym_name.data,
        list(zip(_names(input_names, len(arg_types), "input"), arg_types, strict=True)),
        list(zip(_names(output_names, len(out_types), "output"), out_types, strict=True)),
    )
    for op in module.walk():
        if not isinstance(op, GraphOperation):
            continue
        if isinstance(op, ConstantOp):
            ty = op.result.type
            assert isinstance(ty, TensorType)
            count = prod(ty.get_shape())
            summary.constants += 1
            summary.parameters += count
            summary.parameter_bytes += count * _element_bytes(ty)
            continue
        summary.ops_by_kind[op.name] += 1
    return summary


def _names(names: list[str], count: int, kind: str) -> list[str]:
    return names if len(names) == count else [f"{kind}_{i}" for i in range(count)]


def _element_bytes(ty: TensorType) -> int:
    # A weight of a type NumPy cannot hold (none that gnomon imports) counts as 4 bytes rather than stop the summary.
    return element_bytes(ty.get_element_type()) or 4
