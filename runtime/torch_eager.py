"""The "PyTorch eager" baseline: a module's function run op by op with the library's torch implementations.

What PyTorch eager would do running the same model (ONNX models have no torch module to run): one
ATen call per graph op, each allocating its result; no out=, no fusion, no rewrites. Constants
become torch tensors once, when the program is built; intermediate tensors are dropped after their
last use, as Python's reference counting frees them in eager code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from gnomon.dialects.graph.tensor import ConstantOp
from gnomon.errors import GnomonError
from gnomon.runtime.library import TORCH_IMPLS, TorchFn
from gnomon.runtime.library.base import to_torch

__all__ = ["TorchEagerError", "TorchEagerProgram", "unsupported_ops"]


class TorchEagerError(GnomonError):
    """The torch eager baseline cannot run a module (an op without a torch implementation, a wrong input count)."""


def _function(module: ModuleOp) -> func.FuncOp:
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise TorchEagerError(f"torch eager: expected one func.func in the module, found {len(functions)}")
    return functions[0]


def unsupported_ops(module: ModuleOp) -> list[str]:
    """The names of the ops in `module`'s function that have no torch implementation, sorted."""
    body = _function(module).body.walk()
    return sorted({op.name for op in body if not isinstance(op, func.ReturnOp) and type(op) not in TORCH_IMPLS})


class TorchEagerProgram:
    """`module`'s function as a sequence of torch calls; call it with the function's inputs."""

    def __init__(self, module: ModuleOp) -> None:
        function = _function(module)
        if missing := unsupported_ops(module):
            raise TorchEagerError(f"torch eager: no torch implementation for {', '.join(missing)}")
        block = function.body.block
        slots: dict[SSAValue, int] = {arg: i for i, arg in enumerate(block.args)}
        self._arity = len(block.args)
        initial: list[torch.Tensor | None] = [None] * self._arity
        # (fn, operand slots, result slots, slots dead after the step)
        steps: list[tuple[TorchFn, tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []
        returned: tuple[int, ...] = ()
        for op in block.ops:
            operands = tuple(slots[v] for v in op.operands)
            if isinstance(op, func.ReturnOp):
                returned = operands
                continue
            for result in op.results:
                slots[result] = len(initial)
                initial.append(None)
            fn = TORCH_IMPLS[type(op)](op).run
            if isinstance(op, ConstantOp):
                value = fn()
                assert isinstance(value, torch.Tensor)
                initial[slots[op.result]] = value
                continue
            steps.append((fn, operands, tuple(slots[r] for r in op.results), ()))
        self._initial = initial
        self._returned = returned
        self._steps = _with_frees(steps, set(returned) | set(range(self._arity)), initial)

    def __call__(self, *inputs: np.ndarray | torch.Tensor) -> tuple[np.ndarray, ...]:
        if len(inputs) != self._arity:
            raise TorchEagerError(f"torch eager: the function takes {self._arity} inputs, got {len(inputs)}")
        env = list(self._initial)
        for i, x in enumerate(inputs):
            env[i] = x if isinstance(x, torch.Tensor) else to_torch(np.asarray(x))
        with torch.inference_mode():
            for fn, operands, results, dead in self._steps:
                value = fn(*[env[i] for i in operands])
                if isinstance(value, torch.Tensor):
                    env[results[0]] = value
                else:
                    for slot, v in zip(results, value, strict=True):
                        env[slot] = v
                for slot in dead:
                    env[slot] = None
            # Copies: a result may be a view of a constant or an input, which the caller must not share.
            return tuple(_returned_tensor(env[slot]).numpy().copy() for slot in self._returned)


def _returned_tensor(value: torch.Tensor | None) -> torch.Tensor:
    assert value is not None, "a returned value is computed before the return"
    return value


def _with_frees(
    steps: Sequence[tuple[TorchFn, tuple[int, ...], tuple[int, ...], tuple[int, ...]]],
    kept: set[int],
    initial: Sequence[torch.Tensor | None],
) -> list[tuple[TorchFn, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """The steps, each with the intermediate slots last read there (neither inputs, constants nor returned).

    A result nothing reads dies at the step that makes it.
    """
    last_use: dict[int, int] = {}
    for index, (_, operands, results, _) in enumerate(steps):
        for slot in (*results, *operands):
            last_use[slot] = index
    dead: list[list[int]] = [[] for _ in steps]
    for slot, index in last_use.items():
        if slot not in kept and initial[slot] is None:
            dead[index].append(slot)
    return [(fn, operands, results, tuple(d)) for (fn, operands, results, _), d in zip(steps, dead, strict=True)]
