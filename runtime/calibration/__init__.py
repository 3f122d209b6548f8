"""What `gnomon calibrate` measures on this machine, through the runtime: the measurements, not the fit.

- `host`: cores, data cache levels, memory size, CPU name and load (Linux's files).
- `probe`: peak FLOP/s and the streaming bandwidth of each memory level.
- `overheads`: micro-benchmarks of the runtime's launch, PyTorch eager's dispatch and the thread handoff.
- `programs` and `suite`: the graph programs the calibration runs, built with op builders, and the suite of
  kernels whose times the fit matches.
- `profile`: lowering such a program and timing its launches.
- `rounds`: the figures a shared host disturbs, measured in rounds spread over the calibration.

`gnomon.cost.fit` turns these measurements into a device file's figures; `gnomon.calibrate` runs both.
"""

from gnomon.errors import GnomonError

__all__ = ["CalibrationError"]


class CalibrationError(GnomonError):
    """The machine could not be measured (a suite that ran other launches, an output file that cannot be written)."""
