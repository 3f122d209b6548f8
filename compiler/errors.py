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


class ImporterCrashError(ModelLoadError):
    """torch-mlir died (or stopped making progress) importing a model in a child process; the user's survives."""

    def __init__(self, source: str, what: str, step: str = "", reason: str = "") -> None:
        self.source = source
        self.what = what
        """What happened, e.g. `crashed (SIGABRT)`."""
        self.step = step
        """The step the child had started, e.g. `importing QuantizeLinear node 'q'`; empty if none."""
        self.reason = reason
        """LLVM's own line for it (`LLVM ERROR: ...`), when it printed one."""
        message = f"{source}: torch-mlir {what}" + (f" while {step}" if step else "")
        super().__init__(f"{message}: {reason}" if reason else message)


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


class GnomonWarning(UserWarning):
    """Base class of the warnings gnomon gives users: something was wrong and gnomon worked around it (a damaged
    kernel cache entry rebuilt, an unusable cache directory replaced); the message is meant to be shown as is."""


class FileAccessError(GnomonError):
    """A file to read is missing, a directory or unreadable, or a file to write cannot be written."""


class TooLargeError(GnomonError):
    """A tensor or the runtime's arena needs more bytes than this machine's memory: fail before allocating it."""
