"""`gnomon memory MODEL [--train]`: a compiled program's memory, and PyTorch's measured peak for the same work.

The report gives each category's bytes (outside the arena, and live at the arena's peak), what is live at the peak
by layer, and PyTorch's peak on this CPU as its memory profiler measures it (torch models only: eager inference
under `no_grad`, or one eager training step with the same optimizer). `--plot` draws the timeline
(`gnomon.memory_plot`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gnomon.errors import GnomonError
from gnomon.files import check_readable, check_writable
from gnomon.memory_profile import MemoryProfile
from gnomon.optimizers import Optimizer, optimizer_label
from gnomon.recompute import RecomputeOptions, RecomputeReport

__all__ = ["memory_command", "memory_json", "render_memory", "render_recompute"]

TOP_LAYERS = 10


def memory_command(
    model: Path,
    *,
    train: bool,
    input_shapes: Mapping[str, Sequence[int]] | None,
    batch: int | None,
    loss: str | None,
    optimizer: Optimizer,
    plot: Path | None,
    as_json: bool,
    seed: int,
    keep_gradients: bool = True,
    recompute: RecomputeOptions | None = None,
) -> None:
    """Compile `model` (its training step with `train`, within `recompute`'s budget if given) and print its memory
    (and the recomputation plan)."""
    check_readable(model)
    if plot is not None:
        from gnomon.memory_plot import check_plot_path

        check_plot_path(plot)
        check_writable(plot, "--plot")
    if batch is not None and batch < 1:
        raise GnomonError(f"--batch {batch}: a batch holds at least one sample")
    torch_peak: int | None = None
    plan: RecomputeReport | None = None
    before: tuple[MemoryProfile, str] | None = None
    if recompute is not None and (not train or model.suffix == ".mlir"):
        raise GnomonError("--budget recomputes a training step's forward values: give a model file and --train")
    if model.suffix == ".mlir":
        profile, what = _compiled_memory(model, train)
    elif train:
        from gnomon.pytorch_memory import eager_training_peak
        from gnomon.training_command import compile_training_file

        step, arrays, module = compile_training_file(
            model, input_shapes=input_shapes, batch=batch, loss=loss, optimizer=optimizer, seed=seed,
            keep_gradients=keep_gradients, recompute=recompute,
        )  # fmt: skip
        profile = step.memory()
        plan = step.recompute
        baseline = step.memory_without_recompute()
        if baseline is not None:  # the timeline without recomputation, beside the new one
            before = (baseline, "without recomputation")
        torch_peak = _pytorch_peak(model, lambda: eager_training_peak(module, arrays, optimizer))
        what = f"the training step of {model.name} ({optimizer_label(optimizer)})"
    else:
        from gnomon.memory_profile import memory_profile
        from gnomon.run_report import compile_model, random_inputs

        shapes = _with_batch(model, input_shapes, batch)
        executable = compile_model(model, input_shapes=shapes, backend="native")
        profile = memory_profile(executable.module)
        if model.suffix.lower() in (".pt", ".pth", ".pt2"):
            from gnomon.pytorch_memory import eager_inference_peak

            inputs = random_inputs(executable, seed)
            torch_peak = _pytorch_peak(model, lambda: eager_inference_peak(model, inputs))
        what = f"inference of {model.name}"
    if plot is not None:
        from gnomon.memory_plot import plot_memory

        title = f"{what}: memory over the schedule" + (f", within {plan.budget_bytes} bytes" if plan else "")
        plot_memory(profile, plot, title, before)
    if as_json:
        extra = plan.as_json() if plan is not None else {}
        print(json.dumps({"model": str(model), **memory_json(profile, torch_peak), **extra}, indent=2))
        return
    print(render_memory(profile, what, torch_peak))
    if plan is not None:
        print()
        print(render_recompute(plan))
    if plot is not None:
        print(f"\ntimeline written to {plot}")


def _compiled_memory(model: Path, train: bool) -> tuple[MemoryProfile, str]:
    """The memory of a file `gnomon compile` wrote, as compiled (no torch model here: PyTorch's peak is not
    measured), and what it is of."""
    from gnomon.executable import load_compiled
    from gnomon.memory_profile import memory_profile
    from gnomon.training_file import is_training_step, load_training_step

    if train:
        step, _ = load_training_step(model)
        return step.memory(), f"the training step of {model.name} ({optimizer_label(step.optimizer)})"
    executable = load_compiled(model)
    if is_training_step(executable.module):
        raise GnomonError(f"{model} is a compiled training step: add --train")
    return memory_profile(executable.module), f"inference of {model.name}"


def _pytorch_peak(model: Path, measure: Callable[[], int]) -> int | None:
    """PyTorch's measured peak, or None (with a warning) where the model fails eagerly on gnomon's random batch,
    which breaks the data checks of some models (embedding-bag offsets)."""
    try:
        return measure()
    except Exception as e:  # whatever the model raises on data it rejects
        from gnomon.frontends.torch import reason

        print(f"gnomon: warning: PyTorch's peak not measured: {model.name} fails eagerly on a random batch: "
              f"{reason(e)}", file=sys.stderr)  # fmt: skip
        return None


def _with_batch(model: Path, input_shapes: Mapping[str, Sequence[int]] | None,
                batch: int | None) -> Mapping[str, Sequence[int]] | None:  # fmt: skip
    """`--input-shape`, with `--batch` as the leading dim of every input: of the shapes `--input-shape` gives
    (TorchScript), or of the ONNX file's own, as `gnomon analyze --batch` binds them."""
    if batch is None:
        return input_shapes
    if input_shapes:
        return {name: [batch, *dims[1:]] for name, dims in input_shapes.items()}
    if model.suffix.lower() == ".onnx":
        from gnomon.analysis import onnx_batch_shapes

        return onnx_batch_shapes(model, batch)
    if model.suffix.lower() == ".pt2":
        raise GnomonError(f"--batch does not apply to {model}: a torch.export program's shapes are fixed at export")
    raise GnomonError(f"--batch: give the shape of each input of {model} with --input-shape")


def memory_json(profile: MemoryProfile, torch_peak: int | None = None) -> dict[str, Any]:
    """The report as JSON: bytes by category outside the arena and live at its peak, the arena and its bound, the
    peak's launch and layers, the total, and PyTorch's measured peak (null where not measured)."""
    peak = profile.peak_step
    return {
        **{_key(category): size for category, size in profile.outside.items()},
        "peak_bytes": profile.arena,
        "arena_bytes": profile.arena,
        "arena_lower_bound_bytes": profile.arena_lower_bound,
        "at_arena_peak": {_key(category): size for category, size in profile.at_peak.items()},
        "peak_launch": peak,
        "peak_layer": profile.layers[peak] if profile.layers else None,
        "launches": len(profile.layers),
        "at_peak_by_layer": [
            {"layer": layer, "category": category, "bytes": size}
            for layer, category, size in profile.at_peak_by_layer()
        ],
        "total_bytes": profile.total,
        "pytorch_peak_bytes": torch_peak,
    }


def _key(category: str) -> str:
    return category.replace(" ", "_").replace("-", "_") + "_bytes"


def render_memory(profile: MemoryProfile, what: str = "the program", torch_peak: int | None = None) -> str:
    peak = profile.peak_step
    layer = profile.layers[peak] if profile.layers else "-"
    rows = [
        *((f"{category}", size) for category, size in profile.outside.items()),
        (f"arena ({profile.arena / max(profile.arena_lower_bound, 1):.3f}x its lower bound)", profile.arena),
        *((f"  at its peak: {category}", size) for category, size in profile.at_peak.items()),
        ("total", profile.total),
    ]
    if torch_peak is not None:
        rows.append(("PyTorch eager's measured peak", torch_peak))
    width = max(len(name) for name, _ in rows)
    lines = [f"memory of {what}", *(f"{name:<{width}}  {_mib(size):>12}" for name, size in rows)]
    lines += ["", f"live at the arena's peak (launch {peak + 1} of {len(profile.layers)}, {layer}), by layer:"]
    by_layer = profile.at_peak_by_layer()
    shown = by_layer[:TOP_LAYERS]
    layer_width = max([len("layer"), *(len(name) for name, _, _ in shown)])
    category_width = max(len(c) for c in profile.categories)
    lines.append(f"  {'layer':<{layer_width}}  {'category':<{category_width}}  {'size':>12}")
    lines += [
        f"  {name:<{layer_width}}  {category:<{category_width}}  {_mib(size):>12}" for name, category, size in shown
    ]
    if len(by_layer) > len(shown):
        rest = sum(size for _, _, size in by_layer[len(shown) :])
        others = f"({len(by_layer) - len(shown)} more)"
        lines.append(f"  {others:<{layer_width}}  {'':<{category_width}}  {_mib(rest):>12}")
    return "\n".join(lines)


def render_recompute(plan: RecomputeReport) -> str:
    """The recomputation plan: the budget, both arenas, the predicted overhead, and the kernels that run again."""
    lines = [
        f"recomputation ({plan.solver}: {plan.status}), budget {_mib(plan.budget_bytes)}",
        f"  arena {_mib(plan.peak_bytes)}, {_mib(plan.peak_bytes_without_recompute)} without "
        f"({plan.peak_bytes_without_recompute / max(plan.peak_bytes, 1):.2f}x less); predicted "
        f"{_mib(plan.predicted_peak_bytes)}",
    ]
    share = f" ({plan.predicted_overhead:.1%} of the step's predicted {plan.predicted_step_s * 1e3:.3f} ms)" if (
        plan.predicted_overhead is not None and plan.predicted_step_s is not None) else ""  # fmt: skip
    gap = f", gap {plan.gap:.1%}" if plan.gap is not None else ""
    lines.append(f"  predicted overhead {plan.predicted_overhead_s * 1e3:.3f} ms{share}; solved in "
                 f"{plan.solve_s:.2f} s{gap}")  # fmt: skip
    lines.append(f"  {len(plan.recomputed)} kernels run again in the backward pass:")
    width = max([0, *(len(name) for name, _ in plan.recomputed)])
    lines += [f"    {name:<{width}}  {seconds * 1e3:8.3f} ms" for name, seconds in plan.recomputed]
    return "\n".join(lines)


def _mib(size: int) -> str:
    return f"{size / 2**20:.3f} MiB"
