"""The report's figures, drawn from a stored run (RunData): the numbers come out of summary.json,
recommendation.json and verify/summary.json as analysis stored them; nothing here re-analyses anything.

Each plot function takes a RunData and returns a matplotlib Figure, or None when the run lacks what it shows.
A run measured at concurrency points and at request-rate points gets one panel per kind of load (never one x
axis for both); with repeats a point shows the median over repeats and their range as error bars.
The figures live by subject: plots_load (against load), plots_acceptance, plots_decisions (recommendation,
synthetic contrast, verification) and plots_compare (several runs); this module lists them and writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from matplotlib.figure import Figure

from specmeter.report.outputs import Output
from specmeter.report.plot_style import save, svg_text
from specmeter.report.plots_acceptance import acceptance_position, al_histogram, category_al
from specmeter.report.plots_compare import compare_figures
from specmeter.report.plots_decisions import recommended_k, synthetic_vs_real, verify
from specmeter.report.plots_load import pareto, speedup, speedup_heatmap, throughput, tpot
from specmeter.rundir.run_data import RunData

__all__ = ["PLOTS", "PlotsOutput", "compare_figures", "figures", "svg_text"]


PLOTS: dict[str, Callable[[RunData], Figure | None]] = {
    "throughput": throughput,
    "tpot": tpot,
    "speedup": speedup,
    "speedup_heatmap": speedup_heatmap,
    "pareto": pareto,
    "acceptance_position": acceptance_position,
    "al_histogram": al_histogram,
    "category_al": category_al,
    "recommended_k": recommended_k,
    "synthetic_vs_real": synthetic_vs_real,
    "verify": verify,
}


def figures(run: RunData) -> dict[str, Figure]:
    """Every figure the run has data for, by file stem, in PLOTS order."""
    out: dict[str, Figure] = {}
    for name, plot in PLOTS.items():
        fig = plot(run)
        if fig is not None:
            out[name] = fig
    return out


class PlotsOutput(Output):
    """Every figure of the run as PNG and SVG in a directory (default ./plots)."""

    kind: ClassVar[str] = "plots"

    def write(self, run: RunData) -> list[Path]:
        directory = self.dest if self.dest is not None else Path("plots")
        directory.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for name, plot in PLOTS.items():  # one figure at a time: each is freed once saved
            fig = plot(run)
            if fig is not None:
                written += save(fig, directory, name)
        return written
