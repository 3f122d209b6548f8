"""Multi-device training predicted against measured (issue 20): data-parallel steps on this machine's ranks, and the
reproducibility of the collective calibration they are predicted from.

Data parallel (acceptance 1, its data-parallel half): each case of `multidevice_cases.DATA_PARALLEL` (an MLP and
transformer blocks, two per-rank batch sizes each) runs as PyTorch DDP on 2 gloo ranks of one thread each
(`ddp_ranks.measure_data_parallel`): the DDP step, and the same step without DDP run on both ranks at once (the
compute alone under the same load). gnomon predicts both (`gnomon.cost.data_parallel` on the `2xlocal` system:
this machine's calibrated device shared by the ranks, and the collectives `gnomon calibrate --collectives`
measured). The table prints each case's predicted and measured step, the communication the step adds beyond the
compute (predicted, and measured as DDP's step less the local step), and the errors; the geomean absolute
percentage error of the step is the figure to meet (target 10%). Then the same cases predicted on datasheet
systems (8xh100, 4xa100), marked as such.

Sharded DLRM (acceptance 1, its sharded half, and 2): each case of `sharded_cases.SHARDED` (tables of mixed sizes, 128
to 1024 samples per rank, uniform or hot ids) trained by TorchRec's DistributedModelParallel on the same ranks
(`gnomon.torchrec_steps.measure_sharded`) under several plans: gnomon's best three, TorchRec's planner's choice, all
row-wise, all column-wise, table-wise balanced by bytes and everything on one device. Each plan's step predicted
(`gnomon.shard`) and measured, the plans' rounds interleaved in the same ranks; a plan's measured step is the mean of
the faster half of its steps (40 rounds of 10: single steps here range over 1.5-2x; that figure moved by 0.7-6% between
two runs of one case, median 1.4%, where the smallest of five rounds' medians of gnomon's chosen plans had moved by
1-24%), then up to 80 more rounds for the plans not yet told apart from the fastest (chosen again every ten rounds), so
that the fastest is found where the host lets it be; all this in two fresh sets of ranks, their rounds pooled (a plan's
instance in one set keeps an offset that all its rounds share). Plans that differ only by swapping tables of one shape
or the devices are measured once. The measured rank of gnomon's chosen plan and of TorchRec's among them (target:
gnomon's fastest in 80% of cases), and each plan's time over the fastest's with its 90% interval over resampled rounds:
a plan whose interval reaches 1 is not told apart from the fastest by this measurement; and in how many cases the two
sets of ranks, each alone, found the same plan fastest (what a chooser that knew one set's order could score against
the other). `bench/sharded_phases.py` times the plans' embedding kernels inside their steps. Then the DLRM benchmark's
configurations (Criteo Kaggle, Terabyte, multi-hot) on the datasheet systems, the chosen plan's step broken into
compute, all-to-all, all-reduce and sync (acceptance 3).

Reproducibility (acceptance 4, `--reproducibility`): the collective calibration twice in a row, and how far each
measured point moved (target: within 10%).

    python bench/multidevice.py [--cases mlp,transformer] [--sharded dlrm_mixed,...] [--repeats 5] [--steps 10]
                                [--sharded-repeats 40] [--until-apart 80] [--sessions 2]
    python bench/multidevice.py --reproducibility

Needs `gnomon calibrate` and `gnomon calibrate --collectives` first. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
from pathlib import Path

import torch

import gnomon
from gnomon.analysis import eager_training_graph
from gnomon.cost.data_parallel import DataParallelStep, data_parallel_step
from gnomon.cost.topology import System, load_system

sys.path.insert(0, str(Path(__file__).parent))
from ddp_ranks import measure_data_parallel
from multidevice_cases import DATA_PARALLEL, OPTIMIZER
from multidevice_sharded import benchmark_configs, sharded
from sharded_cases import SHARDED

DATASHEET_SYSTEMS = ("8xh100", "4xa100")


def predict(case_name: str, batch: int, system: System, ranks: int) -> DataParallelStep:
    """The DDP step of `case_name` at a per-rank `batch` on `ranks` of `system`'s devices."""
    case = DATA_PARALLEL[case_name]
    torch.manual_seed(0)
    model = case.build().train()
    inputs = case.batch(model, batch)
    graph = eager_training_graph(gnomon.with_loss(copy.deepcopy(model), case.loss), inputs, None, None, OPTIMIZER)
    return data_parallel_step(graph.module, graph.report(system.device), graph.parameters, system, ranks)


def ape(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(max(v, 1e-4)) for v in values))


def data_parallel(cases: list[str], ranks: int, repeats: int, steps: int) -> list[float]:
    system = load_system(f"{ranks}xlocal")
    print(f"data-parallel steps, {ranks} gloo ranks of 1 thread, predicted on {system.provenance}")
    print(f"  device per rank: {system.device.source[:100]}...")
    header = (
        f"  {'case':<18} {'batch':>5} | {'compute ms':>10} {'measured':>9} {'err':>6} | {'comm ms':>8} {'measured':>9}"
        f" | {'step ms':>8} {'measured':>9} {'spread':>6} {'err':>6} | buckets (predicted / DDP's)"
    )
    print(header)
    errors, compute_errors = [], []
    for name in cases:
        for batch in DATA_PARALLEL[name].batches:
            predicted = predict(name, batch, system, ranks)
            measured = measure_data_parallel(name, batch, ranks=ranks, steps=steps, repeats=repeats)
            step_error = ape(predicted.step_s, measured.ddp_step_s)
            compute_error = ape(predicted.compute_s, measured.local_step_s)
            errors.append(step_error)
            compute_errors.append(compute_error)
            comm = predicted.step_s - predicted.compute_s
            measured_comm = measured.ddp_step_s - measured.local_step_s
            print(
                f"  {name:<18} {batch:>5} | {predicted.compute_s * 1e3:>10.2f} {measured.local_step_s * 1e3:>9.2f}"
                f" {compute_error:>6.1%} | {comm * 1e3:>8.2f} {measured_comm * 1e3:>9.2f}"
                f" | {predicted.step_s * 1e3:>8.2f} {measured.ddp_step_s * 1e3:>9.2f} {measured.ddp_spread:>6.0%}"
                f" {step_error:>6.1%} | {len(predicted.buckets)} / {len(measured.buckets) or '?'}"
            )
    print(
        f"  geomean absolute error over {len(errors)} cases: step {geomean(errors):.1%} (target <= 10%),"
        f" compute alone {geomean(compute_errors):.1%}"
    )
    return errors


def datasheet(cases: list[str]) -> None:
    for system_name in DATASHEET_SYSTEMS:
        system = load_system(system_name)
        print(f"\npredicted on {system.provenance}")
        print(f"  {'case':<18} {'batch':>5} {'compute ms':>11} {'all-reduce ms':>14} {'exposed ms':>11} {'step ms':>9}")
        for name in cases:
            for batch in DATA_PARALLEL[name].batches:
                p = predict(name, batch, system, system.ranks)
                print(
                    f"  {name:<18} {batch:>5} {p.compute_s * 1e3:>11.3f} {p.all_reduce_s * 1e3:>14.3f}"
                    f" {p.exposed_s * 1e3:>11.3f} {p.step_s * 1e3:>9.3f}"
                )


def reproducibility(ranks: int) -> None:
    from gnomon.calibrate_collectives import calibrate_collectives

    first, second = calibrate_collectives(ranks), calibrate_collectives(ranks)
    print(f"collective calibration twice, {ranks} ranks: second / first at each size")
    moved = []
    for collective, points in first.points.items():
        ratios = [b[1] / a[1] for a, b in zip(points, second.points[collective], strict=True)]
        moved += [abs(r - 1) for r in ratios]
        print(f"  {collective:<15} " + " ".join(f"{r:.2f}" for r in ratios))
    within = sum(m <= 0.10 for m in moved)
    print(
        f"  {within} of {len(moved)} points within 10%; largest move {max(moved):.0%},"
        f" median {statistics.median(moved):.1%} (target: within 10%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(DATA_PARALLEL), help="data-parallel cases ('' for none)")
    parser.add_argument("--sharded", default=",".join(SHARDED), help="sharded DLRM cases ('' for none)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sharded-repeats", type=int, default=40, help="rounds of --steps steps per sharded plan")
    parser.add_argument(
        "--until-apart", type=int, default=80, help="more rounds at most for the plans not told apart from the fastest"
    )
    parser.add_argument("--sessions", type=int, default=2, help="fresh sets of ranks per sharded case, rounds pooled")
    parser.add_argument("--reproducibility", action="store_true")
    args = parser.parse_args()
    if args.sessions < 1:
        parser.error(f"--sessions must be at least 1, got {args.sessions}")
    if args.reproducibility:
        reproducibility(args.ranks)
        return
    cases = [c for c in args.cases.split(",") if c]
    sharded_cases = [c for c in args.sharded.split(",") if c]
    errors = data_parallel(cases, args.ranks, args.repeats, args.steps) if cases else []
    errors += (
        sharded(sharded_cases, args.ranks, args.sharded_repeats, args.steps, args.until_apart, args.sessions)
        if sharded_cases
        else []
    )
    print(f"\ngeomean absolute error over all {len(errors)} measured steps: {geomean(errors):.1%} (target <= 10%)")
    datasheet(cases)
    benchmark_configs(DATASHEET_SYSTEMS)


if __name__ == "__main__":
    main()
