"""Measuring what multi-rank work costs on this machine: torch.distributed's collectives across local ranks.

`collectives` times all_reduce, all_gather, reduce_scatter and all_to_all at given message sizes, one spawned
process per rank; `gnomon calibrate --collectives` fits the collective cost model to its timings. `ranks` runs a
function on N spawned local ranks, the process handling that harness and others share.
"""

from gnomon.runtime.distributed.collectives import (
    COLLECTIVES,
    CollectiveMeasureError,
    CollectiveTiming,
    measure_collectives,
)
from gnomon.runtime.distributed.ranks import free_port, run_ranks

__all__ = ["COLLECTIVES", "CollectiveMeasureError", "CollectiveTiming", "free_port", "measure_collectives", "run_ranks"]
