"""Figures of what the run decided: the recommended K per engine batch size, real data against random tokens
(compare-workloads), and the verification of the recommended dynamic config.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from specmeter.report.plot_style import (
    PALETTE,
    config_colors,
    grid,
    legend,
    load_axis,
    new_figure,
    panels,
    point_label,
    ratio_series,
    unity,
)
from specmeter.report.plots_load import stored_speedups
from specmeter.report.tables import pooled_sd
from specmeter.rundir.run_data import RunData
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.results import RunSummary

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
    speed = stored_speedups(s)
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
