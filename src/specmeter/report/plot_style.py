"""What every figure of the report shares: its frame (title, the run's identity as a footer, room for a legend),
the colour of each configuration, the load axis with one panel per kind of load, a series per configuration as
the median over repeats, and how a figure becomes PNG or SVG.

Figures are matplotlib `Figure` objects made without pyplot: no global state, no GUI backend, and a figure is
freed as soon as nothing refers to it.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import NullLocator

from specmeter.config.models import LoadPoint
from specmeter.load.kinds import kind_of
from specmeter.report.load_labels import labels
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.plan import Role
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary

PNG_DPI = 110
PANEL_SIZE = (5.6, 3.8)  # inches per panel
TITLE_CHAR_IN = 0.085  # inches per character of an 11 pt title (wraps wider ones)
FOOTER_LINE_IN = 0.17  # inches of footer per identity line
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")
BASELINE_COLORS = ("#000000", "#555555", "#999999")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")


def colors(ids: Iterable[tuple[str, bool]]) -> dict[str, str]:
    """A colour per configuration id, stable within a figure: baselines (flag True) grey to black, the others
    from the palette in the order given."""
    out: dict[str, str] = {}
    n_base = n_other = 0
    for config_id, baseline in ids:
        if config_id in out:
            continue
        if baseline:
            out[config_id] = BASELINE_COLORS[n_base % len(BASELINE_COLORS)]
            n_base += 1
        else:
            out[config_id] = PALETTE[n_other % len(PALETTE)]
            n_other += 1
    return out


def new_figure(name: str, title: str, footer: str | Sequence[str], panels: int = 1, *, rows: int = 1,
               size: tuple[float, float] = PANEL_SIZE) -> tuple[Figure, list[Axes]]:
    """A figure of `rows` x ceil(panels / rows) axes with a title and the identity footer (one line per entry)
    kept clear of the axes. The figure's label is `name` (it salts the SVG ids, so inlined figures differ)."""
    lines = [footer] if isinstance(footer, str) else list(footer)
    cols = -(-panels // rows)
    fig = Figure(figsize=(size[0] * cols, size[1] * rows + FOOTER_LINE_IN * len(lines) + 0.5),
                 layout=ConstrainedLayoutEngine())
    fig.set_label(name)
    fig.suptitle(textwrap.fill(title, width=int(fig.get_size_inches()[0] / TITLE_CHAR_IN)), fontsize=11)
    for i, line in enumerate(reversed(lines)):  # anchored in inches from the bottom: resizing keeps it there
        fig.text(0.06, 0.05 + i * FOOTER_LINE_IN, line, transform=fig.dpi_scale_trans, fontsize=6.5, color="0.4",
                 ha="left", va="bottom", gid="footer")
    _keep_footer_clear(fig)
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(panels)]
    return fig, axes


def _keep_footer_clear(fig: Figure) -> None:
    """Lay the axes out above the footer lines (the layout rectangle is a fraction of the current height)."""
    lines = sum(1 for t in fig.texts if t.get_gid() == "footer")
    bottom = (FOOTER_LINE_IN * lines + 0.1) / fig.get_size_inches()[1]
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(0.0, bottom, 1.0, 1.0 - bottom))


def legend(fig: Figure, axes: Sequence[Axes]) -> None:
    """One legend for the figure, right of its last axes (clear of the title), from the labelled artists of
    every axes (each label once); none when there is a single series. The figure widens by the legend's
    width, so the axes keep theirs."""
    handles: dict[str, Artist] = {}
    for ax in axes:
        hs, labels = ax.get_legend_handles_labels()
        for h, label in zip(hs, labels):
            handles.setdefault(label, h)
    if len(handles) <= 1:
        return
    axes[-1].legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    borderaxespad=0.0, fontsize=8, frameon=False)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + min(4.0, 0.7 + 0.065 * max(len(label) for label in handles)), height)


def load_axis(ax: Axes, loads: Sequence[float], label: str) -> None:
    """The load axis: ticks at the measured loads, log2 scale once they span a factor of 4 or more."""
    ax.set_xlabel(label)
    values = sorted(set(loads))
    if not values:
        return
    if values[0] > 0 and values[-1] / values[0] >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.xaxis.set_minor_locator(NullLocator())
    if len(values) == 1:
        ax.set_xlim(values[0] * 0.5, values[0] * 1.5)


def grid(ax: Axes) -> None:
    ax.grid(True, color="0.9", linewidth=0.8)
    ax.set_axisbelow(True)


def unity(ax: Axes) -> None:
    """The horizontal line at 1: no change against what a ratio compares with."""
    ax.axhline(1.0, color="0.35", linewidth=1.0, linestyle=":", zorder=1)


def _svg_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": fig.get_label() or "specmeter", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def svg_text(fig: Figure) -> str:
    """The figure as SVG markup to inline in HTML: no XML prologue or doctype, text kept as text, ids salted
    with the figure's label so several figures can share one page."""
    text = _svg_bytes(fig).decode("utf-8")
    # The RDF metadata block names remote vocabularies; a page that must work offline carries none of it.
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.DOTALL)


def save(fig: Figure, directory: Path, stem: str) -> list[Path]:
    """Write the figure as `stem`.png and `stem`.svg into `directory`."""
    png, svg = directory / f"{stem}.png", directory / f"{stem}.svg"
    fig.savefig(png, format="png", dpi=PNG_DPI)
    svg.write_bytes(_svg_bytes(fig))
    return [png, svg]


# ---- panels by kind of load, series over repeats ------------------------------------------------------------------
Value = Callable[[PointResult], float | None]  # what a series reads from one repeat at one point


@dataclass(frozen=True)
class Panel:
    """The points of one kind of load (closed-loop concurrency, or request rates of one arrival shape), by load."""

    key: str
    axis: Literal["concurrency", "rate"]
    title: str
    xlabel: str
    points: tuple[LoadPoint, ...]

    @property
    def loads(self) -> list[float]:
        return [p.load for p in self.points]


def _panel(key: str, points: Sequence[LoadPoint]) -> Panel:
    pts = tuple(sorted(points, key=lambda p: p.load))
    named = labels(pts[0])
    lengths = {p.input_len for p in pts}
    length = next(iter(lengths)) if len(lengths) == 1 else None
    title = named.panel_title(pts[0]) + ("" if length is None else f", {length} input tokens")
    return Panel(key, kind_of(pts[0]).axis, title, named.xlabel, pts)


def panels(*summaries: RunSummary, split_lengths: bool = True) -> list[Panel]:
    """One panel per kind of load in the plans (in plan order), each with the union of their points; on an
    input-length axis one per kind and length (split_lengths=False: lengths share a panel, for a plot that draws
    a line per length)."""
    groups: dict[str, dict[str, LoadPoint]] = {}
    for s in summaries:
        for p in s.plan.points:
            key = labels(p).panel_key(p) + (f" in{p.input_len}" if split_lengths and p.input_len else "")
            groups.setdefault(key, {}).setdefault(p.id, p)
    return [_panel(key, list(pts.values())) for key, pts in groups.items()]


def length_panels(panel: Panel) -> list[tuple[int | None, Panel]]:
    """A panel's points split by input length, in order (one (None, panel) without an input-length axis)."""
    lengths = list(dict.fromkeys(p.input_len for p in panel.points))
    return [(n, replace(panel, points=tuple(p for p in panel.points if p.input_len == n))) for n in lengths]


def point_label(p: LoadPoint) -> str:
    """A short label of a point for a categorical axis."""
    return labels(p).short_label(p)


@dataclass
class Series:
    xs: list[float]
    ys: list[float]
    lows: list[float]
    highs: list[float]

    def yerr(self) -> np.ndarray | None:
        """Asymmetric error bars, None when no point has any spread."""
        if all(lo == y == hi for y, lo, hi in zip(self.ys, self.lows, self.highs)):
            return None
        return np.array([[y - lo for y, lo in zip(self.ys, self.lows)],
                         [hi - y for y, hi in zip(self.ys, self.highs)]])


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def series_over_repeats(config: ConfigResult, panel: Panel, value: Value) -> Series:
    """Per point of the panel: the median of `value` over the repeats, and their range."""
    s = Series([], [], [], [])
    for p in panel.points:
        vals = _finite([value(pr) for pr in config.repeats(p.id)])
        if vals:
            s.xs.append(p.load)
            s.ys.append(float(np.median(vals)))
            s.lows.append(min(vals))
            s.highs.append(max(vals))
    return s


def ratio_series(ratios: dict[str, Ratio], panel: Panel) -> Series:
    """A stored ratio per point of the panel, with its 95% interval (none: no bar)."""
    s = Series([], [], [], [])
    for p in panel.points:
        r = ratios.get(p.id)
        if r is None or r.value is None:
            continue
        s.xs.append(p.load)
        s.ys.append(r.value)
        s.lows.append(r.ci95_low if r.ci95_low is not None else r.value)
        s.highs.append(r.ci95_high if r.ci95_high is not None else r.value)
    return s


def config_colors(*summaries: RunSummary) -> dict[str, str]:
    """A colour per configuration id of the plans (the same id keeps its colour across runs)."""
    return colors((c.id, c.role is Role.baseline) for s in summaries for c in s.plan.configs)


def is_baseline(config: ConfigResult) -> bool:
    return config.role is Role.baseline


def draw_series(ax: Axes, s: Series, color: str, label: str, baseline: bool = False, style: int = 0) -> None:
    """One series as a line with markers and error bars (when it has any spread): the baseline dashed with
    squares; `style` picks line style and marker (one per run when runs are overlaid)."""
    ax.errorbar(s.xs, s.ys, yerr=s.yerr(), color=color, label=label, capsize=3, markersize=5, linewidth=1.6,
                linestyle="--" if baseline else LINESTYLES[style % len(LINESTYLES)],
                marker="s" if baseline else MARKERS[style % len(MARKERS)])


def repeats_note(summary: RunSummary, bars: bool = True) -> str:
    """What a title says about repeats: each point is their median (and the bars their range)."""
    if summary.plan.repeats <= 1:
        return ""
    return f" (median of {summary.plan.repeats} repeats{', bars: range' if bars else ''})"
