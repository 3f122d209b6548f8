"""Measuring what multi-rank work costs on this machine: torch.distributed's collectives across local ranks.

`collectives` times all_reduce, all_gather, reduce_scatter and all_to_all at given message sizes, one spawned
process per rank; `gnomon calibrate --collectives` fits the collective cost model to its timings.
"""

from gnomon.runtime.distributed.collectives import (
    COLLECTIVES,
    CollectiveMeasureError,
    CollectiveTiming,
    measure_collectives,
)

__all__ = ["COLLECTIVES", "CollectiveMeasureError", "CollectiveTiming", "measure_collectives"]
