"""Write a tuning database entry giving one kernel of a module a schedule: `tuning_entry.py MODULE DIR KERNEL SCHEDULE`.

The entry's key depends on the machine, so a lit test makes it where it runs, as `gnomon tune` would."""

import sys
from pathlib import Path

from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.dialects import kernel
from gnomon.passes.kernel_tuned_schedules.database import Entry, Trial, TuningDatabase, kernel_key

module_path, directory, name, schedule = sys.argv[1:]
module = Parser(gnomon_context(), Path(module_path).read_text()).parse_module()
(kernel_func,) = [op for op in module.ops if isinstance(op, kernel.FuncOp) and op.sym_name.data == name]
default = str(kernel_func.schedule)
trials = (Trial(default, 2e-6, 2e-6), Trial(schedule, 1e-6, 1e-6))
TuningDatabase(Path(directory)).store(kernel_key(kernel_func), Entry(name, schedule, default, 2e-6, 1e-6, trials))
