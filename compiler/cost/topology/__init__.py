"""Systems of several devices: how many, on how many nodes, and the links between them.

A system file (shipped ones: `available_systems()`) names the device each rank runs on and its two links:

    name = "8xh100"
    calibrated = false
    source = "NVIDIA DGX H100 datasheet ..."
    device = "h100"               # a device name `gnomon.cost.load_device` knows
    devices_per_node = 8
    nodes = 1

    [intra_node]                  # between two devices of one node, per device and direction
    name = "nvlink4"
    bandwidth_bytes_per_s = 450e9
    latency_s = 2e-6              # the fixed cost of one step of a collective over it

    [inter_node]                  # optional: between nodes, per device (its share of the node's NICs)
    name = "infiniband-ndr"
    bandwidth_bytes_per_s = 50e9
    latency_s = 5e-6

    collective_efficiency = 0.8   # the share of a link's bandwidth a collective reaches on large messages
    sync_s = 1e-5                 # a collective ranks reach from their compute: the wait for the last, beyond its time

`load_system` also takes `4xh100` (four devices of a shipped system's kind on one node, with its links) and
`2x8xh100` (two such nodes), and `local` (`ranks` processes on this machine, whose collectives `gnomon calibrate
--collectives` measured: `gnomon.cost.topology.measured`).
"""

from gnomon.cost.topology.load import load_system
from gnomon.cost.topology.system import SYSTEM_DIR, Link, System, TopologyError, available_systems

__all__ = ["SYSTEM_DIR", "Link", "System", "TopologyError", "available_systems", "load_system"]
