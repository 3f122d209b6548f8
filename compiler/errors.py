"""gnomon's user-facing errors.

Each carries a message meant to be shown as is: the CLI prints `str(error)` and exits
with status 2, so a message says what is wrong and names the file, input or node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class GnomonError(Exception):
    """Base class of the errors gnomon reports to users instead of a traceback."""


class ModelLoadError(GnomonError):
    """The model file is missing, unreadable, or cannot be imported."""


class InputShapeError(GnomonError):
    """An `--input-shape` names no input, has the wrong rank, or a needed shape is missing."""


@dataclass(frozen=True)
class UnsupportedOp:
    """One op that gnomon cannot convert, and where it came from."""

    op_name: str
    """The op as the source spells it, e.g. `onnx.Foo` or `torch.aten.foo`."""
    node: str
    """The node (ONNX) or module path (torch) the op belongs to."""
    source: str
    """The model's file name, e.g. `model.onnx`."""
    reason: str = ""
    """Why a known op could not be converted (a dynamic argument, say); empty when the op is unknown."""

    def message(self) -> str:
        line = f"unsupported op {self.op_name} at node '{self.node}' in {self.source}"
        return f"{line} ({self.reason})" if self.reason else line


class UnsupportedOpsError(GnomonError):
    """The model uses ops gnomon cannot convert; the message lists each (op, node) once."""

    def __init__(self, ops: Iterable[UnsupportedOp]) -> None:
        self.ops = list(dict.fromkeys(ops))
        super().__init__("\n".join(op.message() for op in self.ops))
