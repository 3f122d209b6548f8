"""The table of torch-op converters: op name -> (argument names, function).

A converter reads its op's arguments through `AtenArgs`, emits graph ops with `args.emit`/
`args.value`, and returns the values that replace the op's results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import SSAValue

from gnomon.passes.torch_to_graph.args import AtenArgs

Converter = Callable[[AtenArgs], SSAValue | Sequence[SSAValue]]

CONVERTERS: dict[str, tuple[tuple[str, ...], Converter]] = {}


def converts(*op_names: str, args: str) -> Callable[[Converter], Converter]:
    """Register a converter for torch ops whose operands are named by `args` (space separated)."""

    def register(fn: Converter) -> Converter:
        for name in op_names:
            if name in CONVERTERS:
                raise ValueError(f"two converters for {name}")
            CONVERTERS[name] = (tuple(args.split()), fn)
        return fn

    return register
