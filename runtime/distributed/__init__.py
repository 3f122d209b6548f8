"""Measuring what multi-rank work costs on this machine: torch.distributed's collectives across local ranks.

`collectives` times all_reduce, all_gather, reduce_scatter and all_to_all at given message sizes, one spawned
process per rank; `gnomon calibrate --collectives` fits the collective cost model to its timings. `ranks` runs a
function on N spawned local ranks, the process handling that harness and others share. `sync` measures what a
collective right after compute costs beyond its own time, `duplex` how much of what a rank receives it pays as if
sent (an uneven all-to-all's price). `group` is what each rank of them does: join the process
group, time calls as the slowest rank sees them.
"""

from gnomon.runtime.distributed.collectives import (
    COLLECTIVES,
    CollectiveMeasureError,
    CollectiveTiming,
    measure_collectives,
)
from gnomon.runtime.distributed.duplex import DuplexMeasureError, measure_send_receive_share
from gnomon.runtime.distributed.ranks import free_port, rank_cores, run_ranks
from gnomon.runtime.distributed.sync import SyncMeasureError, measure_sync_s

__all__ = [
    "COLLECTIVES",
    "CollectiveMeasureError",
    "CollectiveTiming",
    "DuplexMeasureError",
    "SyncMeasureError",
    "free_port",
    "measure_collectives",
    "measure_send_receive_share",
    "measure_sync_s",
    "rank_cores",
    "run_ranks",
]
