"""Acceptance figures at the lowest-load point with SD: per draft position, the accepted-tokens histogram,
and acceptance length per category. All pooled over repeats from the stored SD counts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from matplotlib.figure import Figure

from specmeter.config.models import LoadPoint
from specmeter.report.plot_style import (
    config_colors,
    grid,
    legend,
    new_figure,
    panels,
)
from specmeter.report.pooled import pooled_histogram, pooled_sd
from specmeter.rundir.run_data import RunData
from specmeter.schemas.metrics import CategoryBreakdown
from specmeter.schemas.results import ConfigResult, RunSummary


# ---- what the figures read --------------------------------------------------------------------------------------
def _sd_configs(summary: RunSummary) -> list[ConfigResult]:
    return [c for c in summary.configs if any(pr.sd.available for pr in c.points)]


def _lowest_point(summary: RunSummary, has: Callable[[ConfigResult, str], bool]) -> LoadPoint | None:
    """The lowest-load point (first kind of load first) where some configuration has what `has` looks for."""
    for panel in panels(summary):
        for p in panel.points:
            if any(has(c, p.id) for c in summary.configs):
                return p
    return None


def acceptance_position(run: RunData) -> Figure | None:
    """Per-position acceptance a_i and conditional c_i per SD configuration, pooled over repeats, at the
    lowest-load point with SD (acceptance barely moves with load). Tree drafts have no per-position rates (a
    depth holds several candidates): they are left out, and the figure says so."""
    s = run.summary
    point = _lowest_point(s, lambda c, pid: bool((found := pooled_sd(c, pid)[0]) and found.per_position_rate))
    if point is None:
        return None
    trees = [c.config_id for c in _sd_configs(s) if (found := pooled_sd(c, point.id)[0]) is not None and found.tree]
    col = config_colors(s)
    fig, (ax_a, ax_c) = new_figure("acceptance_position", f"Acceptance per draft position at {point.label()} "
                                   "(lowest load; pooled over repeats)", run.identity(), 2)
    k_max = 0
    for c in _sd_configs(s):
        counts, _ = pooled_sd(c, point.id)
        if counts is None or not counts.per_position_rate:
            continue
        positions = list(range(1, len(counts.per_position_rate) + 1))
        k_max = max(k_max, len(positions))
        color = col.get(c.config_id, "0.5")
        ax_a.plot(positions, counts.per_position_rate, marker="o", color=color, label=c.config_id)
        ax_c.plot(positions, counts.conditional_rate, marker="o", color=color, label=c.config_id)
    for ax, ylabel, title in ((ax_a, "a_i = P(step accepts ≥ i tokens)", "per-position acceptance a_i"),
                              (ax_c, "c_i = a_i / a_(i-1)", "conditional acceptance c_i")):
        ax.set_xlabel("draft position i")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 1.05)
        ax.set_xticks(range(1, k_max + 1))
        grid(ax)
    if trees:
        ax_a.text(0.99, 0.02, f"not shown: {', '.join(trees)} (tree drafts: see the accepted-tokens histogram)",
                  transform=ax_a.transAxes, ha="right", va="bottom", fontsize=7, color="0.4")
    legend(fig, [ax_a, ax_c])
    return fig


def al_histogram(run: RunData) -> Figure | None:
    """Share of verify steps that accepted j draft tokens, per SD configuration, at the lowest-load point."""
    s = run.summary
    point = _lowest_point(s, lambda c, pid: pooled_histogram(c, pid) is not None)
    if point is None:
        return None
    col = config_colors(s)
    hists = [(c, h) for c in s.configs if (h := pooled_histogram(c, point.id)) is not None]
    fig, (ax,) = new_figure("al_histogram", f"Accepted tokens per verify step at {point.label()} (lowest load)",
                            run.identity())
    width = 0.8 / len(hists)
    j_max = 0
    for i, (c, h) in enumerate(hists):
        fractions = h.histogram_fraction or []
        j_max = max(j_max, len(fractions) - 1)
        xs = np.arange(len(fractions)) - 0.4 + width * (i + 0.5)
        ax.bar(xs, fractions, width, color=col.get(c.config_id, "0.5"), label=c.config_id)
    ax.set_xticks(range(j_max + 1))
    ax.set_xlabel("accepted draft tokens per step (AL = 1 + accepted)")
    ax.set_ylabel("share of verify steps")
    ax.set_ylim(0, 1)
    grid(ax)
    legend(fig, [ax])
    return fig


def _categories(config: ConfigResult, point_id: str) -> CategoryBreakdown | None:
    return next((pr.categories for pr in config.repeats(point_id) if pr.categories is not None), None)


POOLED = "all (pooled)"


def category_al(run: RunData) -> Figure | None:
    """Step-weighted acceptance length per category with its stored 95% interval, per SD configuration."""
    s = run.summary
    point = _lowest_point(s, lambda c, pid: _categories(c, pid) is not None)
    if point is None:
        return None
    col = config_colors(s)
    found = [(c, cb) for c in s.configs if (cb := _categories(c, point.id)) is not None]
    names = [*sorted({row.category for _, cb in found for row in cb.categories}), POOLED]
    first = " (first repeat)" if s.plan.repeats > 1 else ""
    fig, (ax,) = new_figure("category_al", f"Acceptance length per category at {point.label()}{first} "
                            "(95% bootstrap CI over requests)", run.identity(),
                            size=(max(5.6, 0.55 * len(names) + 1.5), 4.2))
    width = 0.7 / len(found)
    intervals = 0
    for i, (c, cb) in enumerate(found):
        rows = {r.category: r for r in cb.categories} | {POOLED: cb.pooled}
        xs, ys, lo, hi = [], [], [], []
        for j, name in enumerate(names):
            row = rows.get(name)
            if row is None or row.al_step_weighted is None:
                continue
            al = row.al_step_weighted
            xs.append(j - 0.35 + width * (i + 0.5))
            ys.append(al)
            has = row.al_ci95_low is not None and row.al_ci95_high is not None
            intervals += has
            lo.append(al - row.al_ci95_low if row.al_ci95_low is not None and has else 0.0)
            hi.append(row.al_ci95_high - al if row.al_ci95_high is not None and has else 0.0)
        yerr = np.array([lo, hi]) if any(lo) or any(hi) else None
        ax.errorbar(xs, ys, yerr=yerr, fmt="o", color=col.get(c.config_id, "0.5"), capsize=3, markersize=5,
                    label=c.config_id)
    ax.axvline(len(names) - 1.5, color="0.75", linewidth=0.8)
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_xlabel("category")
    ax.set_ylabel("acceptance length (tokens per step)")
    if not intervals:
        ax.text(0.99, 0.02, "no intervals stored (fewer than 2 requests, or a run that predates them)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="0.4")
    grid(ax)
    legend(fig, [ax])
    return fig
