"""The report's figures, drawn from a stored run (RunData): the numbers come out of summary.json,
recommendation.json and verify/summary.json as analysis stored them; nothing here re-analyses anything.

Each plot function takes a RunData and returns a matplotlib Figure, or None when the run lacks what it shows.
A run measured at concurrency points and at request-rate points gets one panel per kind of load (never one x
axis for both); with repeats a point shows the median over repeats and their range as error bars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from specmeter.metrics.sd import sum_counts
from specmeter.report.outputs import Output
from specmeter.report.plot_style import (
    PALETTE,
    Panel,
    Point,
    Value,
    config_colors,
    draw_series,
    grid,
    is_baseline,
    legend,
    load_axis,
    new_figure,
    panels,
    point_label,
    ratio_series,
    repeats_note,
    save,
    series_over_repeats,
    svg_text,
    unity,
)
from specmeter.report.tables import pooled_sd
from specmeter.run_data import RunData
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.metrics import CategoryBreakdown
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDCounts

__all__ = ["PLOTS", "PlotsOutput", "compare_figures", "figures", "svg_text"]


# ---- what the figures read --------------------------------------------------------------------------------------
def _sd_configs(summary: RunSummary) -> list[ConfigResult]:
    return [c for c in summary.configs if any(pr.sd.available for pr in c.points)]


def _lowest_point(summary: RunSummary, has: Callable[[ConfigResult, str], bool]) -> Point | None:
    """The lowest-load point (first kind of load first) where some configuration has what `has` looks for."""
    for panel in panels(summary):
        for p in panel.points:
            if any(has(c, p.id) for c in summary.configs):
                return p
    return None


def _speedups(summary: RunSummary) -> dict[str, dict[str, Ratio]]:
    """Stored throughput speedup per candidate (plan order) and point."""
    order = {c.id: i for i, c in enumerate(summary.plan.configs)}
    out: dict[str, dict[str, Ratio]] = {}
    for sp in sorted(summary.analysis.speedups, key=lambda x: order.get(x.config_id, len(order))):
        out.setdefault(sp.config_id, {})[sp.point_id] = sp.output_throughput
    return out


# ---- one line per configuration against load --------------------------------------------------------------------
def _per_config(run: RunData, name: str, title: str, ylabel: str, value: Value) -> Figure | None:
    s = run.summary
    configs = [c for c in s.configs if c.points]
    ps = panels(s)
    if not configs or not ps:
        return None
    col = config_colors(s)
    fig, axes = new_figure(name, title + repeats_note(s), run.identity(), len(ps))
    drawn = 0
    for ax, panel in zip(axes, ps):
        for c in configs:
            series = series_over_repeats(c, panel, value)
            if series.xs:
                draw_series(ax, series, col.get(c.config_id, "0.5"), c.config_id, is_baseline(c))
                drawn += 1
        load_axis(ax, panel.loads, panel.xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(panel.title, fontsize=9)
        ax.set_ylim(bottom=0)
        grid(ax)
    if not drawn:
        return None
    legend(fig, axes)
    return fig


def throughput(run: RunData) -> Figure | None:
    """Output tokens/s against load, one line per configuration (the baseline dashed)."""
    return _per_config(run, "throughput", "Output throughput against load", "output tokens/s",
                       lambda pr: pr.latency.output_tokens_per_s)


def tpot(run: RunData) -> Figure | None:
    """Mean time per output token against load, one line per configuration."""
    def ms(pr: PointResult) -> float | None:
        mean = pr.latency.tpot_s.mean
        return None if mean is None else mean * 1000.0
    return _per_config(run, "tpot", "Mean time per output token (TPOT) against load", "mean TPOT (ms)", ms)


def speedup(run: RunData) -> Figure | None:
    """Stored throughput speedup per candidate with its 95% interval, the line at 1 and the stored crossovers."""
    s = run.summary
    by_config = _speedups(s)
    if not by_config:
        return None
    col = config_colors(s)
    ps = panels(s)
    fig, axes = new_figure("speedup", "Throughput speedup over the baseline (95% paired-bootstrap CI)",
                           run.identity(), len(ps))
    drawn = 0
    for ax, panel in zip(axes, ps):
        for config_id, ratios in by_config.items():
            series = ratio_series(ratios, panel)
            if series.xs:
                draw_series(ax, series, col.get(config_id, "0.5"), config_id)
                drawn += 1
        unity(ax)
        load_axis(ax, panel.loads, panel.xlabel)
        for cr in s.analysis.crossovers:
            if cr.axis != panel.axis or cr.status != "crosses" or cr.load is None:
                continue
            color = col.get(cr.config_id, "0.5")
            ax.axvline(cr.load, color=color, linestyle="--", linewidth=1.1,
                       label=f"crossover {cr.config_id} ≈ {cr.load:.3g}")
            if cr.low is not None:
                ax.axvspan(cr.low, cr.high if cr.high is not None else max(panel.loads), color=color, alpha=0.1,
                           linewidth=0)
        ax.set_ylabel("output tok/s speedup (× baseline)")
        ax.set_title(panel.title, fontsize=9)
        grid(ax)
    if not drawn:
        return None
    legend(fig, axes)
    return fig


def _drafter_label(c: PlannedConfig) -> str:
    model = f" {Path(c.spec.draft_model).name}" if c.spec.draft_model else ""
    return f"{c.spec.method.value}{model}" + (" (random tokens)" if c.workload == "random" else "")


def drafters(summary: RunSummary) -> dict[str, list[PlannedConfig]]:
    """Static candidates grouped by drafter: same method, draft model, options and workload; K differs."""
    groups: dict[str, list[PlannedConfig]] = {}
    keys: dict[str, str] = {}
    for c in summary.plan.configs:
        if c.role is Role.baseline or not c.spec.enabled or c.spec.num_speculative_tokens_per_batch_size:
            continue
        key = c.spec.model_dump_json(exclude={"num_speculative_tokens"}) + c.workload
        label = keys.get(key)
        if label is None:
            label = _drafter_label(c)
            if label in groups:
                label += f" #{len(keys) + 1}"
            keys[key] = label
        groups.setdefault(label, []).append(c)
    return groups


def speedup_heatmap(run: RunData) -> Figure | None:
    """Throughput speedup over K (rows) and load (columns), one map per drafter and kind of load."""
    s = run.summary
    by_config = _speedups(s)
    groups = {name: cs for name, cs in drafters(s).items() if any(c.id in by_config for c in cs)}
    ps = panels(s)
    if not groups:
        return None
    maps: list[tuple[str, Panel, list[int], np.ndarray]] = []
    for name, cs in groups.items():
        ks = sorted({c.k for c in cs})
        for panel in ps:
            data = np.full((len(ks), len(panel.points)), np.nan)
            for c in cs:
                for j, p in enumerate(panel.points):
                    r = by_config.get(c.id, {}).get(p.id)
                    if r is not None and r.value is not None:
                        data[ks.index(c.k), j] = r.value
            maps.append((name, panel, ks, data))
    values = np.concatenate([m[3].ravel() for m in maps])
    if not np.isfinite(values).any():
        return None
    spread = float(np.nanmax(np.abs(values - 1.0)))
    top = 1.0 + max(spread, 0.05)
    norm = Normalize(2.0 - top, top)
    cmap = colormaps["RdBu"].with_extremes(bad="0.92")
    rows, cols = len(groups), len(ps)
    fig, axes = new_figure("speedup_heatmap", "Throughput speedup by K and load (blue: SD pays, red: SD slows)",
                           run.identity(), rows * cols, rows=rows,
                           size=(max(4.6, 1.1 * max(len(p.points) for p in ps) + 2.2),
                                 0.45 * max(len(m[2]) for m in maps) + 2.2))
    image = None
    for ax, (name, panel, ks, data) in zip(axes, maps):
        image = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto", origin="lower")
        for (i, j), v in np.ndenumerate(data):
            text = "–" if np.isnan(v) else f"{v:.2f}"
            dark = not np.isnan(v) and abs(v - 1.0) > 0.6 * (top - 1.0)
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(len(panel.points)), [f"{x:g}" for x in panel.loads])
        ax.set_yticks(range(len(ks)), [str(k) for k in ks])
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel("K (speculative tokens)")
        ax.set_title(name + (f", {panel.title}" if cols > 1 else ""), fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=axes, label="speedup (× baseline)", shrink=0.9)
    return fig


def pareto(run: RunData) -> Figure | None:
    """Throughput against per-user speed, as `vllm bench sweep plot_pareto` draws it: one line per configuration
    across its load points, each point labelled with its load."""
    s = run.summary
    configs = [c for c in s.configs if c.points]
    ps = panels(s)
    if not configs:
        return None
    col = config_colors(s)
    fig, axes = new_figure("pareto", "Throughput-latency trade-off (points labelled with their load)"
                           + repeats_note(s, bars=False), run.identity(), len(ps))
    drawn = 0
    for ax, panel in zip(axes, ps):
        for c in configs:
            user = series_over_repeats(c, panel,
                                       lambda pr: 1.0 / pr.latency.tpot_s.mean if pr.latency.tpot_s.mean else None)
            total = series_over_repeats(c, panel, lambda pr: pr.latency.output_tokens_per_s)
            both = sorted(set(user.xs) & set(total.xs))
            if not both:
                continue
            xs = [user.ys[user.xs.index(x)] for x in both]
            ys = [total.ys[total.xs.index(x)] for x in both]
            color = col.get(c.config_id, "0.5")
            ax.plot(xs, ys, color=color, label=c.config_id, marker="s" if is_baseline(c) else "o", markersize=5,
                    linestyle="--" if is_baseline(c) else "-", linewidth=1.6)
            for x, y, load in zip(xs, ys, both):
                ax.annotate(f"{load:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
            drawn += 1
        ax.set_xlabel("tokens/s per user (1 / mean TPOT)")
        ax.set_ylabel("output tokens/s (all users)")
        ax.set_title(f"{panel.title}; labels: {panel.xlabel}", fontsize=9)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.margins(0.12)
        grid(ax)
    if not drawn:
        return None
    legend(fig, axes)
    return fig


# ---- acceptance -------------------------------------------------------------------------------------------------
def acceptance_position(run: RunData) -> Figure | None:
    """Per-position acceptance a_i and conditional c_i per SD configuration, pooled over repeats, at the
    lowest-load point with SD (acceptance barely moves with load)."""
    s = run.summary
    point = _lowest_point(s, lambda c, pid: pooled_sd(c, pid)[0] is not None)
    if point is None:
        return None
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
    legend(fig, [ax_a, ax_c])
    return fig


def _histogram(config: ConfigResult, point_id: str) -> SDCounts | None:
    """The point's SD counts pooled over repeats, from the headline source when it has an acceptance histogram,
    else from the per-request stats (engine counters carry no histogram)."""
    items: list[SDCounts] = []
    for pr in config.repeats(point_id):
        found = next((c for c in (pr.sd.headline, pr.sd.per_request) if c is not None and c.histogram), None)
        if found is not None:
            items.append(found)
    if not items:
        return None
    pooled = items[0] if len(items) == 1 else sum_counts(items, source=items[0].source)
    return pooled if pooled.histogram_fraction else None


def al_histogram(run: RunData) -> Figure | None:
    """Share of verify steps that accepted j draft tokens, per SD configuration, at the lowest-load point."""
    s = run.summary
    point = _lowest_point(s, lambda c, pid: _histogram(c, pid) is not None)
    if point is None:
        return None
    col = config_colors(s)
    hists = [(c, h) for c in s.configs if (h := _histogram(c, point.id)) is not None]
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


# ---- decisions --------------------------------------------------------------------------------------------------
BASIS_SHADE = {"interpolated": ("#dde8f5", "interpolated between measured batches"),
               "below_measured": ("#f5ecd0", "below the smallest measured batch"),
               "unmeasured": ("#e4e4e4", "beyond the measured batches (unmeasured)")}


def recommended_k(run: RunData) -> Figure | None:
    """The stored recommendation's K per engine batch size (a step line per drafter, shaded where it is not
    measured) and the measured best K at each point's engine batch."""
    rec = run.recommendation
    if rec is None or not rec.drafters:
        return None
    s = run.summary
    fig, (ax,) = new_figure("recommended_k", f"Recommended K per engine batch size (objective: {rec.objective})",
                            run.identity(), size=(6.4, 3.8))
    best = rec.drafters[0]
    shaded: set[str] = set()
    for seg in best.segments:
        if seg.basis in BASIS_SHADE:
            color, label = BASIS_SHADE[seg.basis]
            ax.axvspan(max(seg.start - 0.5, 0.5), seg.end + 0.5, color=color, linewidth=0,
                       label=label if seg.basis not in shaded else None)
            shaded.add(seg.basis)
    k_max = 0
    for i, d in enumerate(rec.drafters):
        if not d.ranges:
            continue
        edges = [max(r.start - 0.5, 0.5) for r in d.ranges] + [d.ranges[-1].end + 0.5]
        ks = [r.k for r in d.ranges]
        k_max = max(k_max, *ks)
        ax.stairs(ks, edges, baseline=None, color=PALETTE[i % len(PALETTE)], linewidth=2.2,
                  label=f"{d.drafter} (recommended)")
    batch = {pid: seg.engine_batch[0] for seg in best.segments if seg.basis == "measured" and seg.engine_batch
             for pid in seg.point_ids[:1]}
    xs, ys, names = [], [], []
    for ch in s.analysis.choices:
        x = batch.get(ch.point_id) or _engine_batch(s, ch.best_config_id, ch.point_id)
        if x is not None and x > 0:
            xs.append(x)
            ys.append(ch.best_k)
            names.append(ch.point_id)
            k_max = max(k_max, ch.best_k)
    if xs:
        ax.scatter(xs, ys, marker="D", s=36, color="black", zorder=3, label="measured best K at the point")
        for x, y, name in zip(xs, ys, names):
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=7)
    ax.set_xscale("log", base=2)
    ticks = [2 ** i for i in range(int(math.log2(rec.max_num_seqs)) + 1)]
    ticks += [rec.max_num_seqs] if ticks[-1] != rec.max_num_seqs else []
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min([0.5, *[x * 0.8 for x in xs]]), rec.max_num_seqs + 0.5)
    ax.set_ylim(-0.4, k_max + 0.6)
    ax.set_yticks(range(k_max + 1))
    ax.set_xlabel(f"engine batch size (running requests; max_num_seqs {rec.max_num_seqs})")
    ax.set_ylabel("K (speculative tokens per step)")
    grid(ax)
    legend(fig, [ax])
    return fig


def _engine_batch(summary: RunSummary, config_id: str, point_id: str) -> float | None:
    config = summary.config(config_id)
    pr = config.point(point_id) if config else None
    rb = pr.running_batch if pr else None
    if rb is None:
        return None
    return rb.steady_mean if rb.steady_mean is not None else rb.mean


def _pairs(summary: RunSummary) -> list[tuple[PlannedConfig, PlannedConfig]]:
    """(real, random) candidates of a compare-workloads plan: a random one pairs with its matched source, else
    the real one of the same speculation, else the only real one."""
    plan = summary.plan
    cands = [c for c in plan.configs if c.role is Role.candidate]
    mains = [c for c in cands if c.workload == "main"]
    out = []
    for rnd in (c for c in cands if c.workload == "random"):
        source = rnd.matched_random.source_config if rnd.matched_random else None
        real = (next((m for m in mains if m.id == source), None) or next((m for m in mains if m.spec == rnd.spec),
                None) or (mains[0] if len(mains) == 1 else None))
        if real is not None:
            out.append((real, rnd))
    return out


def synthetic_vs_real(run: RunData) -> Figure | None:
    """compare-workloads: acceptance length and throughput speedup on real data against random tokens of matched
    lengths, per load point (grouped bars)."""
    s = run.summary
    pairs = _pairs(s)
    if not pairs:
        return None
    col = config_colors(s)
    speed = _speedups(s)
    points = [p for panel in panels(s) for p in panel.points]
    fig, (ax_al, ax_sp) = new_figure("synthetic_vs_real", "Real data vs random tokens of matched lengths",
                                     run.identity(), 2, size=(max(4.6, 1.3 * len(points) + 2.0), 3.8))
    n = 2 * len(pairs)
    width = 0.8 / n
    x0 = np.arange(len(points))
    for i, (real, rnd) in enumerate(pairs):
        color = col.get(real.id, PALETTE[0])
        for side, cfg in enumerate((real, rnd)):
            result = s.config(cfg.id)
            al = [np.nan] * len(points)
            ratios = speed.get(cfg.id, {})
            sp, lo, hi = [np.nan] * len(points), [0.0] * len(points), [0.0] * len(points)
            for j, p in enumerate(points):
                counts = pooled_sd(result, p.id)[0] if result is not None else None
                if counts is not None and counts.acceptance_length is not None:
                    al[j] = counts.acceptance_length
                r = ratios.get(p.id)
                if r is not None and r.value is not None:
                    sp[j] = r.value
                    lo[j] = r.value - r.ci95_low if r.ci95_low is not None else 0.0
                    hi[j] = r.ci95_high - r.value if r.ci95_high is not None else 0.0
            xs = x0 - 0.4 + width * (2 * i + side + 0.5)
            style = {"color": color, "alpha": 1.0 if side == 0 else 0.45, "hatch": None if side == 0 else "//",
                     "edgecolor": color, "label": f"{'real' if side == 0 else 'random'}: {cfg.id}"}
            ax_al.bar(xs, al, width, **style)  # type: ignore[arg-type]
            ax_sp.bar(xs, sp, width, yerr=np.array([lo, hi]), capsize=3, **style)  # type: ignore[arg-type]
    unity(ax_sp)
    for ax, ylabel, title in ((ax_al, "acceptance length (tokens per step)", "acceptance length"),
                              (ax_sp, "output tok/s speedup (× baseline)", "throughput speedup, 95% CI")):
        ax.set_xticks(x0, [point_label(p) for p in points])
        ax.set_xlabel("load point")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        grid(ax)
    legend(fig, [ax_al, ax_sp])
    return fig


def verify(run: RunData) -> Figure | None:
    """verify runs: the dynamic config's throughput against the baseline and against the sweep's best static
    config at each point, with 95% intervals and the line at 1."""
    source = run.verification if run.verification is not None else run
    rows = {v.point_id: v for v in source.summary.analysis.verification}
    if not rows:
        return None
    footer = [run.identity()] + ([f"verification: {source.identity()}"] if source is not run else [])
    ps = panels(source.summary)
    fig, axes = new_figure("verify", "The recommended dynamic config, run: throughput ratio (95% CI)", footer,
                           len(ps))
    for ax, panel in zip(axes, ps):
        for label, side, color, shift in (("dynamic / baseline", "baseline", "black", 0.96),
                                          ("dynamic / best static", "static", PALETTE[0], 1.04)):
            ratios = {}
            for pid, v in rows.items():
                sp = v.vs_baseline if side == "baseline" else v.vs_static
                if sp is not None:
                    ratios[pid] = sp.output_throughput
            series = ratio_series(ratios, panel)
            if not series.xs:
                continue
            series.xs = [x * shift for x in series.xs]
            ax.errorbar(series.xs, series.ys, yerr=series.yerr(), color=color, label=label, capsize=3,
                        marker="o" if side == "baseline" else "D", markersize=5, linewidth=1.4)
            if side == "static":
                for p in panel.points:
                    row = rows.get(p.id)
                    if row is not None and row.static_id and row.vs_static and row.vs_static.output_throughput.value:
                        ax.annotate(row.static_id, (p.load * shift, row.vs_static.output_throughput.value),
                                    textcoords="offset points", xytext=(5, -10), fontsize=7, color=color)
        unity(ax)
        load_axis(ax, panel.loads, panel.xlabel)
        ax.set_ylabel("output tok/s ratio (dynamic / other)")
        ax.set_title(panel.title, fontsize=9)
        grid(ax)
    legend(fig, axes)
    return fig


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


# ---- several runs -----------------------------------------------------------------------------------------------
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
            for config_id, ratios in _speedups(run.summary).items():
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
