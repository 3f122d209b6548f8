"""The memory timeline of a program: each tensor's lifetime as a band of a stacked area over the schedule, as
PyTorch's memory visualizer draws an allocation timeline. matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gnomon.errors import GnomonError
from gnomon.memory_profile import MemoryProfile

__all__ = ["check_plot_path", "plot_memory"]

_COLORS = {
    "weights": "#bbbbbb",
    "parameters": "#bbbbbb",
    "inputs": "#dddddd",
    "batch": "#dddddd",
    "buffers": "#999999",
    "optimizer state": "#8c6d31",
    "activations": "tab:blue",
    "outputs": "tab:green",
    "gradients": "tab:orange",
    "saved activations": "tab:blue",
    "temporaries": "tab:purple",
}


def check_plot_path(path: Path) -> None:
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise GnomonError(f"--plot {path}: the plot is written as .png, .svg or .pdf")


def plot_memory(
    profile: MemoryProfile, path: Path, title: str, before: tuple[MemoryProfile, str] | None = None
) -> None:
    """Bytes over the launches: what lives outside the arena at the bottom, then every arena tensor as its own
    band from the launch that writes it to the last that reads it, stacked in the order they are written and
    colored by category; the arena's size and peak marked, and a training step's loss. With `before` (a profile
    and its title: the step without recomputation), the two side by side on one scale. PNG, SVG or PDF by the
    file's extension."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_plot_path(path)
    panels = [(profile, title)] if before is None else [before, (profile, title)]
    figure, axes = plt.subplots(1, len(panels), figsize=(13 * len(panels), 6), sharey=True, squeeze=False)
    for column, (shown, name) in enumerate(panels):
        _draw(axes[0][column], shown, name)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _draw(axes: Any, profile: MemoryProfile, title: str) -> None:
    steps = len(profile.layers)
    mib = 2.0**-20
    xs = list(range(steps))
    base = [0.0] * steps
    for category, size in profile.outside.items():
        if size:
            top = [b + size * mib for b in base]
            axes.fill_between([*xs, steps], [*base, base[-1]], [*top, top[-1]], step="post",
                              color=_COLORS.get(category, "grey"), linewidth=0, label=category)  # fmt: skip
            base = top
    bottom = base[0] if base else 0.0
    # A band per tensor: a stacked area where each tensor's height is its size while it lives.
    shown: set[str] = set()
    for tensor in sorted(profile.tensors, key=lambda t: (t.first, -t.size)):
        span = range(tensor.first, min(tensor.last, steps - 1) + 1)
        if not span:
            continue
        lows = [base[s] for s in span]
        highs = [low + tensor.size * mib for low in lows]
        label = None if tensor.category in shown else tensor.category
        shown.add(tensor.category)
        # Live on launches first..last: the band covers [first, last + 1).
        axes.fill_between([*span, span[-1] + 1], [*lows, lows[-1]], [*highs, highs[-1]], step="post",
                          color=_COLORS.get(tensor.category, "grey"), alpha=0.85, linewidth=0.2, edgecolor="white",
                          label=label)  # fmt: skip
        for s, high in zip(span, highs, strict=True):
            base[s] = high
    axes.axhline(bottom + profile.arena * mib, color="black", linestyle="--", linewidth=0.8)
    axes.annotate(f"planned arena {profile.arena * mib:.1f} MiB", (0, bottom + profile.arena * mib),
                  textcoords="offset points", xytext=(4, 4))  # fmt: skip
    peak = profile.peak_step
    axes.axvline(peak, color="red", linewidth=0.8)
    axes.annotate(f"peak: {profile.layers[peak] if profile.layers else '-'}", (peak, 0), textcoords="offset points",
                  xytext=(4, 8), color="red")  # fmt: skip
    if profile.forward_end is not None:
        axes.axvline(profile.forward_end, color="grey", linestyle=":", linewidth=0.8)
        axes.annotate("loss", (profile.forward_end, bottom), textcoords="offset points", xytext=(4, -14))
    axes.set_xlim(0, max(steps, 1))
    axes.set_xlabel("launch (schedule order)")
    axes.set_ylabel("MiB")
    axes.set_title(title)
