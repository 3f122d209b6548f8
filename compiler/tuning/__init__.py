"""Cost-pruned tuning of generated kernels' schedules, remembered on disk.

- `space`: the schedules a kernel can take, by what its code generator reads;
- the database of winners, keyed by the kernel's IR and the machine, is the pass's that applies them
  (`gnomon.passes.kernel_tuned_schedules.database`), re-exported here;
- `tuner`: rank a kernel's schedules with the cost package (`gnomon.cost.schedules`), time the best few in the
  program's own arrays, keep the fastest;
- `command`: `gnomon tune MODEL`.
"""

from gnomon.passes.kernel_tuned_schedules.database import Entry, Trial, TuningDatabase, kernel_key, tuning_directory

__all__ = ["Entry", "Trial", "TuningDatabase", "kernel_key", "tuning_directory"]
