"""Pointing generated launches at the caller's arrays for one run: the inputs and results `gnomon.cost.direct_io`
names are read from where the caller's arrays lie and written into the arrays a run returns, not copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gnomon.runtime.codegen.jit import Descriptor

__all__ = ["Redirect", "fits"]


class Redirect:
    """The descriptors of generated launches whose data lies in one array (`home`), each with its byte offset
    into it: a run points them into another array of `home`'s layout, and back to `home` after."""

    __slots__ = ("_moved", "home")

    def __init__(self, home: np.ndarray, descriptors: Sequence[Descriptor]):
        self.home = home
        start = home.ctypes.data
        end = start + home.nbytes
        self._moved = [
            (d, d.aligned - start) for d in descriptors if d.aligned is not None and start <= d.aligned < end
        ]

    def point_at(self, array: np.ndarray) -> None:
        address = array.ctypes.data
        for descriptor, offset in self._moved:
            descriptor.allocated = descriptor.aligned = address + offset

    def restore(self) -> None:
        self.point_at(self.home)


def fits(array: np.ndarray, home: np.ndarray) -> bool:
    """Whether the launches can read `array` in `home`'s place: the same bytes in the same order."""
    return array.dtype == home.dtype and array.shape == home.shape and array.flags.c_contiguous
