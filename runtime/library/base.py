"""The table every family module fills: one torch implementation per graph op, registered once.

`TORCH_IMPLS[type(op)](op)` builds the op's `TorchImpl` from its properties and types: the functional
form (what eager PyTorch would run for the op) and, where ATen has a real `out=` kernel (or a copy-free
composition of them), the op bound into the runtime's preallocated results, so nothing is allocated per
call. Ops without one run functionally and are copied back. `aten(fn, ...)` derives both forms from one
ATen function that takes `out=`, which is what most ops are.

The ATen name a kernel has in profiles is declared beside what the library can do, in
`gnomon.passes.graph_to_kernel.library.LIBRARY_CALLS`; the registered ops are exactly the ones it lists.

A binding of an elementwise op must read each input element before writing that element of the output:
fused epilogues run them in place, with the output also as an operand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
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
Into = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor]], Launch]
"""`(args, results) -> launch`: the op bound to its operands and preallocated results."""

OpT = TypeVar("OpT", bound=Operation)


def copy_back(run: TorchFn, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
    """`run` on `args`, its results copied into `results`: for ops without an out= kernel."""
    out = results[0]

    def launch() -> None:
        value = run(*args)
        if isinstance(value, torch.Tensor):
            out.copy_(value)
            return
        for result, v in zip(results, value, strict=True):
            result.copy_(v)

    return launch


@dataclass(frozen=True)
class TorchImpl:
    """An op's torch computation, built from the op once."""

    run: TorchFn
    """The functional form: what eager PyTorch runs for the op."""
    into: Into | None = None
    """The op computed into preallocated results without copies; None where ATen has no out= kernel for it."""

    def bind(self, args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        """A closure computing the op from `args` into `results`: `into`, or `run` copied back."""
        if self.into is not None:
            return self.into(args, results)
        return copy_back(self.run, args, results)


def aten(fn: Callable[..., Any], **kwargs: Any) -> TorchImpl:
    """`fn(*operands, **kwargs)`, an ATen function with an `out=` overload: its functional form and its binding."""

    def into(args: Sequence[torch.Tensor], results: Sequence[torch.Tensor]) -> Launch:
        return partial(fn, *args, **kwargs, out=results[0])

    return TorchImpl(partial(fn, **kwargs) if kwargs else fn, into)


# aten's `_nn` namespace: the `out=` overloads of torch.nn.functional's kernels, called without the
# dispatch overhead of `torch.ops`. Its stub omits most `out=` parameters.
ATEN_NN: Any = torch._C._nn  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]

TORCH_IMPLS: dict[type[Operation], Callable[[Any], TorchImpl]] = {}
"""Each supported op type's `(op) -> TorchImpl`."""


def torch_impl(op_type: type[OpT]) -> Callable[[Callable[[OpT], TorchImpl]], Callable[[OpT], TorchImpl]]:
    """Register `(op) -> TorchImpl` as `op_type`'s torch implementation."""

    def register(build: Callable[[OpT], TorchImpl]) -> Callable[[OpT], TorchImpl]:
        TORCH_IMPLS[op_type] = build
        return build

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
