"""The figures a shared host disturbs, measured in rounds spread over the calibration.

A shared host lends this machine its cores, its shared cache and its memory bus unevenly, and the share changes
every few seconds. Peak FLOP/s, DRAM bandwidth and the fitting suite are therefore measured in rounds between the
other measurements and over `SPAN_S` seconds; `gnomon.cost.fit` says how each figure is taken from its rounds.
The suite's rounds keep each kernel's median time within the round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gnomon.cost.fit import Measured
from gnomon.runtime.calibration.probe import peak_flops, stream_bandwidth
from gnomon.runtime.calibration.profile import Loaded, profile_suite
from gnomon.runtime.calibration.suite import Suite, fitted_launches, probe_launches

__all__ = ["SPAN_S", "Rounds"]

SPAN_S = 20.0
"""Seconds over which DRAM and peak rounds are spread (the calibration's length); 0 for a quick one."""


@dataclass
class Rounds:
    """The rounds taken so far, and how to take one."""

    cores: int
    peak_n: int
    """The fp32 peak's problem: an n x n x n torch.mm."""
    peak_trials: int
    dram_working_set: int
    """Bytes over all cores, well beyond the last cache level."""
    suite: Suite
    program: Loaded | None
    """The suite, lowered; None when nothing is fitted."""
    suite_runs: int
    """Profiled runs of the suite per round."""
    peak: list[float] = field(default_factory=list[float])
    dram: list[float] = field(default_factory=list[float])
    suite_rounds: list[list[Measured]] = field(default_factory=list[list[Measured]])
    probe_rounds: list[list[Measured]] = field(default_factory=list[list[Measured]])
    """The call probes' warm runs (`suite.probe_launches`), round by round."""

    def take(self, with_suite: bool = True) -> None:
        """Two DRAM and two peak rounds, then a round of the suite."""
        for _ in range(2):
            # Eight passes per call: a single pass (a copy) runs below the steady add loop, and less reproducibly.
            per_thread = self.dram_working_set // self.cores
            self.dram.append(stream_bandwidth(per_thread, self.cores, 3, 8 * self.dram_working_set))
            self.peak.append(peak_flops(self.peak_n, "fp32", self.peak_trials))
        if with_suite and self.program is not None:
            measured = profile_suite(self.program, self.suite_runs, self.suite.warm)
            self.suite_rounds.append(fitted_launches(self.suite, measured))
            self.probe_rounds.append(probe_launches(self.suite, measured))

    def spread(self, began: float, span: float) -> None:
        """Rounds until two thirds of `span` seconds after `began` with a suite round then, and again until `span`:
        the suite's last two rounds spread over the whole calibration as the DRAM and peak rounds do."""
        for until in (span * 2 / 3, span):
            while time.perf_counter() - began < until:
                self.take(with_suite=False)
            self.take()
