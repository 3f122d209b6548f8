"""Readable names for source locations: the ONNX node name, or the torch module path."""

from __future__ import annotations

from typing import cast

from xdsl.dialects.builtin import (
    ArrayAttr,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    NameLoc,
    NoneAttr,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Attribute


def location_name(loc: Attribute) -> str:
    """The most specific human name of a location; '?' when there is none."""
    match loc:
        case NameLoc():
            return loc.desc.data or "?"
        case FileLineColLoc():
            return f"{loc.filename.data}:{loc.line.data}"
        case FusedLoc():
            # xDSL declares `locations` as Attribute; its constraint makes it an ArrayAttr.
            locations = cast(ArrayAttr[Attribute], loc.locations)
            names = [location_name(inner) for inner in locations.data]
            return next((n for n in names if n != "?"), "?")
        case CallSiteLoc():
            return location_name(loc.callee)
        case UnknownLoc():
            return "?"
        case _:
            return "?"


def name_location(name: str) -> NameLoc:
    """A location that names what an op computes for, where no source node does (an optimizer's update)."""
    return NameLoc(StringAttr(name), NoneAttr())
