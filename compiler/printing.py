"""Printing graph programs: whole (weights in the resource section) or for people (weights elided)."""

from __future__ import annotations

from typing import IO

from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.printer import Printer


class ElidingPrinter(Printer):
    """A printer whose `graph.constant`s show values of more than `large_elements_limit` elements as
    `dense_resource<__elided__>`, so a network reads like a network."""

    large_elements_limit: int = 16


def print_module(module: ModuleOp, stream: IO[str], elide_weights: bool = False, locations: bool = False) -> None:
    """Print in the graph dialect's custom form; `locations` adds each op's `loc(...)` (its source node)."""
    printer_type = ElidingPrinter if elide_weights else Printer
    printer = printer_type(stream=stream, print_debuginfo=locations)
    printer.print_op(module)
    stream.write("\n")
    if not elide_weights:
        printer.print_metadata([Builtin])  # the weights: the dialect_resources section
