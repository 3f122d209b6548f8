"""The roofline plot of a report: matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from pathlib import Path

from gnomon.cost.report import AnalysisError, Report


def plot_roofline(report: Report, path: Path) -> None:
    """The device's roofline (compute peak and every memory level's slope, the DRAM ridge point marked) with each
    kernel as a point at (intensity, FLOPs / predicted kernel time); PNG, SVG or PDF by the file's extension."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise AnalysisError(f"--plot {path}: the plot is written as .png, .svg or .pdf")
    device = report.device
    peak = device.peak("fp32")
    points = [r for r in report.records if r.flops > 0 and r.bytes > 0 and r.kernel_s > 0]
    lowest = min([r.intensity for r in points] + [0.01])
    highest = max([r.intensity for r in points] + [peak / device.dram.bandwidth_bytes_per_s * 100])
    xs = [lowest / 2 * (highest * 4 / lowest) ** (i / 200) for i in range(201)]
    figure, axes = plt.subplots(figsize=(9, 6))
    for level in device.memory:
        bandwidth = level.bandwidth_bytes_per_s
        style = "-" if level is device.dram else ":"
        axes.plot(xs, [min(peak, x * bandwidth) for x in xs], style, label=f"{level.name} {bandwidth / 1e9:.0f} GB/s")
    ridge = peak / device.dram.bandwidth_bytes_per_s
    axes.axvline(ridge, color="grey", linestyle="--", linewidth=0.8)
    axes.annotate(f"ridge {ridge:.1f} FLOP/B", (ridge, peak), textcoords="offset points", xytext=(5, -15))
    total = sum(r.kernel_s for r in points) or 1.0
    for bound, color in (("compute", "tab:red"), ("memory", "tab:blue")):
        chosen = [r for r in points if r.bound == bound]
        axes.scatter(
            [r.intensity for r in chosen],
            [r.flops / r.kernel_s for r in chosen],
            s=[10 + 400 * r.kernel_s / total for r in chosen],
            color=color,
            alpha=0.6,
            label=f"{bound}-bound kernels",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("attained FLOP/s (predicted)")
    source = "calibrated" if device.calibrated else "datasheet, analytical"
    axes.set_title(f"{Path(report.model).name}: {report.target} on {device.name} ({source}), fp32 peak {peak:.3g}")
    axes.legend(loc="lower right", fontsize="small")
    try:
        figure.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as error:
        raise AnalysisError(f"cannot write the plot {path}: {error.strerror or error}") from error
    finally:
        plt.close(figure)
