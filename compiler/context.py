"""The xDSL context gnomon's programs live in."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func

from gnomon.registry import DIALECTS


def gnomon_context() -> Context:
    """builtin, func and gnomon's dialects; unregistered ops allowed, for the torch ops converters read by name."""
    ctx = Context(allow_unregistered=True)
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    for name, dialect in DIALECTS.items():
        ctx.register_dialect(name, dialect)
    return ctx
