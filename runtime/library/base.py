"""The tables every family module fills: a torch implementation per graph op, and an `out=` binding where one exists.

Two kinds of entries, both keyed by the op class and built from one op (its properties and types):

- `torch_impl`: `(op) -> fn`, `fn(*operands) -> result or tuple of results`: what eager PyTorch would
  run for the op. Every supported op has one.
- `out_impl`: `(op, args, results) -> launch`, a zero-argument closure writing the op's results into
  preallocated tensors: registered where ATen has a real `out=` kernel (or a copy-free composition of
  them), so nothing is allocated per call. Ops without one are run functionally and copied back.

An `out_impl` of an elementwise op must read each input element before writing that element of the
output: fused epilogues run them in place, with the output also as an operand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from xdsl.dialects.builtin import BFloat16Type, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from gnomon.dialects.graph.constant_values import numpy_dtype

TorchFn = Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
"""An op's computation on torch tensors: operands in definition order, results as the op declares them."""
Launch = Callable[[], object]
"""A bound kernel: computes into the tensors it was bound to (what it returns, often its output, is not used)."""
ImplBuilder = Callable[[Any], TorchFn]
OutBuilder = Callable[[Any, Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]

OpT = TypeVar("OpT", bound=Operation)


@dataclass(frozen=True)
class TorchImpl:
    """A registered torch implementation."""

    build: ImplBuilder
    """`(op) -> fn`, reading the op's properties and types once."""
    aten: str
    """The ATen op it mainly calls, e.g. `aten.convolution`: how library kernels are named in profiles."""


# aten's `_nn` namespace: the `out=` overloads of torch.nn.functional's kernels, called without the
# dispatch overhead of `torch.ops` (half the per-call time). Its stub omits most `out=` parameters.
ATEN_NN: Any = torch._C._nn  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]

TORCH_IMPLS: dict[type[Operation], TorchImpl] = {}
OUT_IMPLS: dict[type[Operation], OutBuilder] = {}


def torch_impl(op_type: type[OpT], aten: str) -> Callable[[Callable[[OpT], TorchFn]], Callable[[OpT], TorchFn]]:
    """Register `(op) -> fn` as `op_type`'s torch implementation; `aten` names the ATen op it runs."""

    def register(build: Callable[[OpT], TorchFn]) -> Callable[[OpT], TorchFn]:
        TORCH_IMPLS[op_type] = TorchImpl(build, aten)
        return build

    return register


def out_impl(
    op_type: type[OpT],
) -> Callable[
    [Callable[[OpT, Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]],
    Callable[[OpT, Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch],
]:
    """Register `(op, args, results) -> launch` as `op_type`'s copy-free binding into preallocated results."""

    def register(
        bind: Callable[[OpT, Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch],
    ) -> Callable[[OpT, Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]:
        OUT_IMPLS[op_type] = bind
        return bind

    return register


# ---- types and values ----


def element_type(value: SSAValue) -> Attribute:
    tensor = value.type
    assert isinstance(tensor, TensorType)
    return tensor.get_element_type()


def static_shape(value: SSAValue) -> tuple[int, ...]:
    """The value's dims, DYNAMIC_INDEX where dynamic."""
    tensor = value.type
    assert isinstance(tensor, TensorType)
    return tensor.get_shape()


def torch_dtype(element: Attribute) -> torch.dtype:
    """The torch dtype of a builtin element type."""
    if isinstance(element, BFloat16Type):
        return torch.bfloat16
    dtype = numpy_dtype(element)
    if dtype is None:
        raise NotImplementedError(f"no torch dtype for element type {element}")
    return torch.from_numpy(np.empty(0, dtype)).dtype


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch tensor over the array's memory, or over a copy if it is read-only (as constants are) or strided."""
    if array.dtype.name == "bfloat16":  # ml_dtypes' type, which torch does not know: same bits as torch's
        return torch.from_numpy(np.array(array).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(array if array.flags.writeable and array.flags.c_contiguous else np.array(array))


def torch_padding(pads: Sequence[int]) -> list[int]:
    """ONNX-order pads of the last dims (all begins, then all ends) as `F.pad` takes them (last dim first)."""
    n = len(pads) // 2
    spec: list[int] = []
    for i in reversed(range(n)):
        spec += [pads[i], pads[i + n]]
    return spec


def symmetric_pads(pads: Sequence[int]) -> bool:
    n = len(pads) // 2
    return tuple(pads[:n]) == tuple(pads[n:])


def copy_back(op: Operation, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    """The op's functional implementation, its results copied into `results`: for ops without an out= kernel."""
    run = TORCH_IMPLS[type(op)].build(op)
    out = results[0]

    def launch() -> None:
        value = run(*args)
        if isinstance(value, torch.Tensor):
            out.copy_(value)
            return
        for result, v in zip(results, value, strict=True):
            result.copy_(v)

    return launch
