"""Figures against load: throughput, TPOT and speedup per configuration, the speedup map over K and load,
and the throughput-latency trade-off. The numbers are the ones analysis stored in summary.json.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from specmeter.config.synthetic import CEILING_NOTE
from specmeter.report.plot_style import (
    Panel,
    Value,
    config_colors,
    draw_series,
    grid,
    is_baseline,
    legend,
    length_panels,
    load_axis,
    new_figure,
    panels,
    ratio_series,
    repeats_note,
    series_over_repeats,
    unity,
)
from specmeter.rundir.run_data import RunData
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.results import PointResult, RunSummary


# ---- what the figures read --------------------------------------------------------------------------------------
def stored_speedups(summary: RunSummary) -> dict[str, dict[str, Ratio]]:
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


def _ceiling_of(summary: RunSummary) -> dict[str, str]:
    """Ceiling configuration id -> the id of the verified configuration it bounds (same drafter and K), or itself
    when the sweep has none: the ceiling is drawn in that configuration's colour."""
    configs = summary.plan.configs
    def drafter(c: PlannedConfig) -> str:
        return c.spec.model_dump_json(exclude={"synthetic_acceptance"}) + c.workload
    verified = {drafter(c): c.id for c in configs if c.spec.enabled and not c.spec.synthetic}
    return {c.id: verified.get(drafter(c), c.id) for c in configs
            if c.spec.synthetic_acceptance is not None and c.spec.synthetic_acceptance.is_ceiling(c.k)}


def speedup(run: RunData) -> Figure | None:
    """Stored throughput speedup per candidate with its 95% interval, the line at 1 and the stored crossovers;
    a ceiling (the same drafter and K at 100% synthetic acceptance) dashed in its configuration's colour."""
    s = run.summary
    by_config = stored_speedups(s)
    if not by_config:
        return None
    col = config_colors(s)
    ceilings = _ceiling_of(s)
    ks = {c.id: c.k for c in s.plan.configs}
    ps = panels(s, split_lengths=False)  # an input-length axis: one line per configuration and length
    title = "Throughput speedup over the baseline (95% paired-bootstrap CI)"
    fig, axes = new_figure("speedup", title + ("; dashed: the ceiling, every draft accepted" if ceilings else ""),
                           run.identity(), len(ps))
    drawn = 0
    for ax, panel in zip(axes, ps):
        for (config_id, ratios), (style, (length, part)) in itertools.product(
                by_config.items(), enumerate(length_panels(panel))):
            series = ratio_series(ratios, part)
            if not series.xs:
                continue
            at = "" if length is None else f" @ {length} in"
            if config_id in ceilings:
                draw_series(ax, series, col.get(ceilings[config_id], "0.5"),
                            f"ceiling K={ks.get(config_id)} ({CEILING_NOTE}): {config_id}{at}", style=style + 1)
            else:
                draw_series(ax, series, col.get(config_id, "0.5"), config_id + at, style=style)
            drawn += 1
        unity(ax)
        load_axis(ax, panel.loads, panel.xlabel)
        for cr in s.analysis.crossovers:
            if cr.axis != panel.axis or cr.status != "crosses" or cr.load is None:
                continue
            color = col.get(cr.config_id, "0.5")
            at = "" if cr.input_len is None else f" @ {cr.input_len} in"
            ax.axvline(cr.load, color=color, linestyle="--", linewidth=1.1,
                       label=f"crossover {cr.config_id}{at} ≈ {cr.load:.3g}")
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
    synth = c.spec.synthetic_acceptance
    kind = ("" if synth is None else f" ceiling ({CEILING_NOTE})" if synth.is_ceiling(c.k)
            else f" {synth.label(c.k)}")
    return f"{c.spec.method.value}{model}{kind}" + (" (random tokens)" if c.workload == "random" else "")


def drafters(summary: RunSummary) -> dict[str, list[PlannedConfig]]:
    """Static candidates grouped by drafter: same method, draft model, options, synthetic acceptance and workload;
    K differs (a drafter's ceilings, each at its own K + 1, are one group)."""
    groups: dict[str, list[PlannedConfig]] = {}
    keys: dict[str, str] = {}
    for c in summary.plan.configs:
        if c.role is Role.baseline or not c.spec.enabled or c.spec.num_speculative_tokens_per_batch_size:
            continue
        synth = c.spec.synthetic_acceptance
        ceiling = synth is not None and synth.is_ceiling(c.k)
        key = (c.spec.model_dump_json(exclude={"num_speculative_tokens", "synthetic_acceptance"})
               + ("ceiling" if ceiling else synth.model_dump_json() if synth else "") + c.workload)
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
    by_config = stored_speedups(s)
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
