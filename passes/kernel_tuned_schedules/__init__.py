"""`kernel-tuned-schedules`: give each generated kernel the schedule `gnomon tune` measured fastest for it.

Each generated `kernel.func` is looked up in the tuning database (`database`) by its IR without name or schedule
and by this machine; where an entry exists, the kernel takes its schedule and a `gnomon.tuned`
attribute, the measured speedup over the default schedule, so that the IR (and `gnomon run --profile`) shows which
kernels are tuned. Kernels without an entry keep the default schedule `graph-to-kernel` gave them. The lowering
pipeline runs this pass last, so `gnomon compile` and `gnomon run` pick tuned schedules up without an option; the
option `database` names another directory than the user's tuning cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, ModuleOp, f64
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from gnomon.dialects import kernel
from gnomon.passes.kernel_tuned_schedules.database import TuningDatabase, kernel_key

__all__ = ["TUNED_ATTR", "KernelTunedSchedulesPass", "is_tuned"]

TUNED_ATTR = "gnomon.tuned"
"""On a kernel that took a tuned schedule: its measured speedup over the default schedule (f64)."""


def is_tuned(kernel_func: kernel.FuncOp) -> bool:
    return TUNED_ATTR in kernel_func.attributes


@dataclass
class ApplyTunedSchedule(RewritePattern):
    database: TuningDatabase
    keys: dict[str, str] = field(default_factory=dict[str, str])

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.FuncOp, rewriter: PatternRewriter) -> None:
        if not op.is_generated or is_tuned(op):
            return
        found = self.database.lookup(kernel_key(op))
        if found is None:
            return
        entry, schedule = found
        op.schedule = schedule
        op.attributes[TUNED_ATTR] = FloatAttr(round(entry.speedup, 3), f64)
        rewriter.notify_op_modified(op)


@dataclass(frozen=True)
class KernelTunedSchedulesPass(ModulePass):
    """Generated kernels take their tuned schedules from the tuning database."""

    name = "kernel-tuned-schedules"

    database: str = ""
    """The database's directory; empty: the user's (`$GNOMON_TUNING_DIR`, else the cache directory's `tuning`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        database = TuningDatabase(Path(self.database) if self.database else None)
        walker = PatternRewriteWalker(ApplyTunedSchedule(database), apply_recursively=False)
        walker.rewrite_module(op)
