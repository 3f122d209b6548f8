"""Embedding tables sharded across a system's devices: plans (`plan`), the tables' shapes and ids (`tables`), a
plan's predicted training step as TorchRec runs it (`step`), and the search for the fastest plan that fits
(`search`). `gnomon.shard` is the entry point; this package imports only the plan types eagerly, so that the
command line's parser stays light."""

from gnomon.cost.sharding.plan import KINDS, Placement, ShardingError

__all__ = ["KINDS", "Placement", "ShardingError"]
