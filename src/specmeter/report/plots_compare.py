"""Overlays of several runs (`specmeter compare --plots`): throughput and speedup per run x configuration.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from specmeter.report.plot_style import (
    config_colors,
    draw_series,
    grid,
    legend,
    load_axis,
    new_figure,
    panels,
    ratio_series,
    series_over_repeats,
    unity,
)
from specmeter.report.plots_load import stored_speedups
from specmeter.rundir.run_data import RunData


def _compare_colors(runs: Sequence[RunData]) -> dict[str, str]:
    return config_colors(*(r.summary for r in runs))


def _compare_throughput(runs: Sequence[RunData]) -> Figure | None:
    ps = panels(*(r.summary for r in runs))
    if not ps:
        return None
    col = _compare_colors(runs)
    fig, axes = new_figure("compare_throughput", "Output throughput against load, by run", [r.identity()
                           for r in runs], len(ps))
    drawn = 0
    for ax, panel in zip(axes, ps):
        for i, run in enumerate(runs):
            for c in run.summary.configs:
                series = series_over_repeats(c, panel, lambda pr: pr.latency.output_tokens_per_s)
                if series.xs:
                    draw_series(ax, series, col.get(c.config_id, "0.5"), f"{run.run_id}: {c.config_id}", style=i)
                    drawn += 1
        load_axis(ax, panel.loads, panel.xlabel)
        ax.set_ylabel("output tokens/s")
        ax.set_title(panel.title, fontsize=9)
        ax.set_ylim(bottom=0)
        grid(ax)
    if not drawn:
        return None
    legend(fig, axes)
    return fig


def _compare_speedup(runs: Sequence[RunData]) -> Figure | None:
    if not any(r.summary.analysis.speedups for r in runs):
        return None
    ps = panels(*(r.summary for r in runs))
    col = _compare_colors(runs)
    fig, axes = new_figure("compare_speedup", "Throughput speedup over each run's baseline, by run (95% CI)",
                           [r.identity() for r in runs], len(ps))
    for ax, panel in zip(axes, ps):
        for i, run in enumerate(runs):
            for config_id, ratios in stored_speedups(run.summary).items():
                series = ratio_series(ratios, panel)
                if series.xs:
                    draw_series(ax, series, col.get(config_id, "0.5"), f"{run.run_id}: {config_id}", style=i)
        unity(ax)
        load_axis(ax, panel.loads, panel.xlabel)
        ax.set_ylabel("output tok/s speedup (× baseline)")
        ax.set_title(panel.title, fontsize=9)
        grid(ax)
    legend(fig, axes)
    return fig


def compare_figures(runs: Sequence[RunData]) -> dict[str, Figure]:
    """Overlays of several runs: `compare_throughput` (one line per run x configuration, labelled by run id) and
    `compare_speedup` (per run x candidate, with intervals and the line at 1). A configuration id keeps its
    colour across runs; each run has its own line style and marker."""
    out: dict[str, Figure] = {}
    for name, plot in (("compare_throughput", _compare_throughput), ("compare_speedup", _compare_speedup)):
        fig = plot(runs)
        if fig is not None:
            out[name] = fig
    return out
