"""PyTorch eager's training step of one `bench/training_cases.py` case, timed in a process of its own
(`training_cases.EagerProcess`, for `bench/predict_accuracy.py --train`).

It runs on glibc's malloc as gnomon's process does (`gnomon.runtime.malloc.keep_freed_memory`: freed memory kept
for reuse below 32 MiB, as jemalloc or tcmalloc would): on glibc's own adaptive thresholds, a 2-layer LSTM's eager
step faulted in 6,260 fresh pages a step (30 ms against 22), depending on the order of its allocations.

Usage: eager_step_worker.py NAME BATCH OPTIMIZER_JSON THREADS, then one request a line on stdin: `time RUNS BUDGET_S`
answers the step's medians (seconds, as JSON), `profile` answers [top-level ATen ops, their CPU seconds]; end of
input ends it.
"""

from __future__ import annotations

import json
import sys

import torch
from predict_accuracy import aten_profile, runs_for, timed_medians
from training_cases import eager_step

from gnomon.optimizers import optimizer_from_spec
from gnomon.runtime.malloc import keep_freed_memory


def main() -> None:
    name, size, spec, threads = sys.argv[1:5]
    torch.set_num_threads(int(threads))
    keep_freed_memory()
    step = eager_step(name, int(size), optimizer_from_spec(spec))
    step()  # the optimizer's state is made in the first step
    for line in sys.stdin:
        request = line.split()
        if request[0] == "time":
            runs, budget_s = int(request[1]), float(request[2])
            step()
            answer: object = timed_medians(step, runs_for(step, runs, budget_s))
        elif request[0] == "profile":
            answer = list(aten_profile(step))
        else:
            raise SystemExit(f"eager_step_worker: unknown request {line.strip()!r}")
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
