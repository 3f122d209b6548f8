"""`gnomon run`: inputs from an .npz (or random, seeded), outputs summarized, saved, profiled."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gnomon.cost.trace import KERNEL, TraceEvent, trace_json, write_json
from gnomon.dialects.graph import nn
from gnomon.dialects.graph.layout import channels_last
from gnomon.errors import GnomonError
from gnomon.executable import Executable, InputError, compile_model, load_compiled
from gnomon.files import check_readable, check_writable, writing

_WRITE_NPZ = "write one with numpy.savez(path, <input name>=array, ...)"


def random_inputs(executable: Executable, seed: int) -> list[np.ndarray]:
    """One array per input: standard normal floats; integers and booleans in {0, 1}, valid as indices into any table.
    A dynamic dim takes the largest size of its declared range."""
    rng = np.random.default_rng(seed)
    arrays: list[np.ndarray] = []
    for shape, dtype in zip(executable.largest_input_shapes(), executable.input_dtypes, strict=True):
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 2, size=shape).astype(dtype))
    return arrays


class Named(Protocol):
    """What has named inputs: an executable, a training step."""

    input_names: list[str]


def read_inputs(executable: Named, path: Path) -> list[np.ndarray]:
    """The arrays of an .npz, in input order, keyed by input name."""
    check_readable(path, "inputs file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        # NumPy's own message misleads here: a text file "contains pickled data".
        raise InputError(f"{path} is not an .npz file: {_WRITE_NPZ}") from error
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        # np.load reads an .npy too; its one array has no name to match an input by.
        raise InputError(f"{path} is an .npy file, not an .npz: {_WRITE_NPZ}")
    arrays: dict[str, np.ndarray] = {}
    with loaded as archive:
        for key in archive.files:
            try:
                arrays[key] = archive[key]
            except (OSError, ValueError, zipfile.BadZipFile) as error:  # object arrays, a damaged member
                raise InputError(f"{path}: cannot read array '{key}': {error}") from error
    missing = [name for name in executable.input_names if name not in arrays]
    if missing:
        names = ", ".join(executable.input_names)
        raise InputError(f"{path} has no array '{missing[0]}' (the model's inputs: {names})")
    unknown = sorted(set(arrays) - set(executable.input_names))
    if unknown:
        names = ", ".join(executable.input_names)
        raise InputError(f"{path} has an array '{unknown[0]}' that is not an input ({names})")
    return [arrays[name] for name in executable.input_names]


def output_summary(names: Sequence[str], outputs: Sequence[np.ndarray]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, value in zip(names, outputs, strict=True):
        row: dict[str, Any] = {"name": name, "shape": list(value.shape), "dtype": str(value.dtype)}
        if value.size and (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
            numbers = value.astype(np.float64)
            row |= {"mean": float(numbers.mean()), "std": float(numbers.std()), "min": float(numbers.min())}
            row |= {"max": float(numbers.max())}
        rows.append(row)
    return rows


def profile_summary(executable: Executable) -> dict[str, Any]:
    """The per-kernel table of the last profiled run, with the plan and compile statistics."""
    profile = executable.profile()
    total = sum(t.seconds for t in profile.timings) or 1e-12
    kernels = [
        {
            "kernel": t.kernel,
            "kind": t.kind,
            "ops": [op.removeprefix("graph.") for op in t.source_ops],
            "location": t.location,
            "ms": t.seconds * 1e3,
            "share": t.seconds / total,
        }
        for t in profile.timings
    ]
    windowed = [op for op in executable.module.walk() if isinstance(op, nn.ConvOp | nn.MaxPoolOp | nn.AvgPoolOp)]
    return {
        "kernels": kernels,
        "channels_last": sum(channels_last(op) for op in windowed),
        "convolutions_and_pools": len(windowed),
        "run_ms": profile.run_seconds * 1e3,
        "arena_bytes": profile.arena_bytes,
        "arena_lower_bound_bytes": profile.arena_lower_bound,
        "generated_kernels_compiled": profile.kernels_compiled,
        "generated_kernels_from_cache": profile.kernels_from_cache,
        "compile_seconds": profile.compile_seconds,
        "generated_kernels": profile.kernels_generated,
        "generated_kernels_tuned": profile.kernels_tuned,
    }


def render_outputs(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["output                 shape                 dtype       mean          std           min           max"]
    for row in rows:
        stats = "".join(f"{row[k]:<14.6g}" for k in ("mean", "std", "min", "max") if k in row)
        lines.append(f"{row['name']:<22} {'x'.join(map(str, row['shape'])) or 'scalar':<21} {row['dtype']:<11} {stats}")
    return "\n".join(lines)


def render_profile(summary: Mapping[str, Any]) -> str:
    lines = [f"{'kernel':<30} {'kind':<40} {'ops':<30} {'location':<20} {'ms':>9} {'share':>7}"]
    for k in summary["kernels"]:
        ops = "+".join(k["ops"])
        lines.append(
            f"{k['kernel'][:30]:<30} {k['kind'][:40]:<40} {ops[:30]:<30} {k['location'][:20]:<20} "
            f"{k['ms']:>9.3f} {k['share']:>6.1%}"
        )
    mib = 1 << 20
    lines.append(f"total: {len(summary['kernels'])} launches, {summary['run_ms']:.3f} ms")
    lines.append(
        f"memory plan: arena {summary['arena_bytes'] / mib:.2f} MiB, "
        f"liveness lower bound {summary['arena_lower_bound_bytes'] / mib:.2f} MiB"
    )
    lines.append(
        f"generated kernels: {summary['generated_kernels_compiled']} compiled, "
        f"{summary['generated_kernels_from_cache']} from the disk cache ({summary['compile_seconds']:.2f} s)"
    )
    lines.append(
        f"layout: {summary['channels_last']} of {summary['convolutions_and_pools']} convolutions and pools run "
        "channels-last (graph-layout's choice; `gnomon compile --explain` prints its predictions)"
    )
    # `gnomon run` never tunes; it says how many kernels run what `gnomon tune` chose for them.
    lines.append(
        f"schedules: {summary['generated_kernels_tuned']} of {summary['generated_kernels']} generated kernels tuned "
        "(from the tuning database), none tuned in this run"
    )
    return "\n".join(lines)


def measured_trace(executable: Executable, model: str) -> dict[str, Any]:
    """The last profiled run as Chrome trace-event JSON (`gnomon.cost.trace`), one `kernel` event per launch.

    The profile records each launch's duration, not its start: launches are laid end to end, in order, on the
    track of stream 0, where `gnomon analyze --trace` puts its predicted kernels. On a CPU each measured launch
    is the runtime's launch overhead and the kernel together.
    """
    events: list[TraceEvent] = []
    start = 0.0
    for timing in executable.profile().timings:
        ops = "+".join(op.removeprefix("graph.") for op in timing.source_ops)
        args = {"op": ops, "kind": timing.kind, "location": timing.location}
        events.append(TraceEvent(timing.kernel, KERNEL, "stream 0", start, timing.seconds, args))
        start += timing.seconds
    metadata = {"run_seconds": executable.profile().run_seconds}
    return trace_json(f"measured: {model}, gnomon runtime (profiled run)", events, metadata)


def run_command(
    model: Path,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    inputs: Path | None,
    save_outputs: Path | None,
    backend: str,
    profile: bool,
    as_json: bool,
    seed: int,
    trace: Path | None = None,
    verify_each: bool = False,
    dump_ir: Path | None = None,
    predicate: str = "auto",
    dim_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> None:
    if trace is not None and not (profile and backend == "native"):
        raise GnomonError("--trace writes the measured timeline of a profiled run: add --profile (native backend)")
    if seed < 0:
        raise GnomonError(f"--seed {seed}: a seed is a non-negative integer")
    for path, flag in ((save_outputs, "--save-outputs"), (trace, "--trace")):
        if path is not None:
            check_writable(path, flag)
    if model.suffix == ".mlir":
        if backend != "native":
            raise GnomonError(f"{model} is a compiled program; it runs on the native backend only")
        if input_shapes:
            raise GnomonError(
                f"--input-shape does not apply to {model}: a compiled program's shapes are fixed "
                "(compile the model again with --input-shape)"
            )
        if dump_ir is not None:
            raise GnomonError(f"--dump-ir does not apply to {model}: a compiled program runs no passes")
        from gnomon.training_file import is_training_step

        executable = load_compiled(model)
        if is_training_step(executable.module):
            raise GnomonError(f"{model} is a compiled training step: run it with `gnomon run --train`")
    else:
        executable = compile_model(
            model, input_shapes=input_shapes, backend=backend, verify_each=verify_each, dump_ir=dump_ir,
            predicate=predicate, dim_ranges=dim_ranges,
        )  # fmt: skip
    arrays = read_inputs(executable, inputs) if inputs is not None else random_inputs(executable, seed)
    if profile and backend == "native":
        executable.run(arrays)  # warm caches and threads; the profiled run is the second
    outputs = executable.run(arrays, profile=profile and backend == "native")
    if save_outputs is not None:
        named: dict[str, Any] = dict(zip(executable.output_names, outputs, strict=True))
        # Through a stream: given a path, np.savez would add `.npz` to a name without it.
        with writing(save_outputs, "--save-outputs", "wb") as stream:
            np.savez(stream, **named)
    rows = output_summary(executable.output_names, outputs)
    report: dict[str, Any] = {"model": str(model), "backend": backend, "outputs": rows}
    if profile and backend == "native":
        report["profile"] = profile_summary(executable)
    if trace is not None:
        write_json(trace, measured_trace(executable, str(model)))
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(render_outputs(rows))
    if "profile" in report:
        print()
        print(render_profile(report["profile"]))
