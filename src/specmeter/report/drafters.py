"""The drafters of a run side by side, one row per drafter and K: what each accepted (per position, and how far
its categories spread), what it costs per engine step by the step-cost model the sweep fitted (calibration.json),
and the KV cache its server held against the baseline's. The facts behind the drafter choice, next to each other;
the choice itself is analysis's (analysis/drafter_choice.py)."""

from __future__ import annotations

import statistics

from specmeter.analysis.families import drafter_label
from specmeter.metrics.sd import sum_counts
from specmeter.predict.observations import drafter_key
from specmeter.report.grid import Grid, fmt, grid
from specmeter.report.trees import NOT_A_CHAIN
from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.planner import Calibration
from specmeter.schemas.results import ConfigResult, RunSummary
from specmeter.schemas.sd import SDCounts


def _pooled(items: list[SDCounts]) -> SDCounts | None:
    """Counts pooled over steps (acceptance barely moves with load, so every point and repeat adds samples)."""
    return None if not items else items[0] if len(items) == 1 else sum_counts(items, source=items[0].source)


def _acceptance(res: ConfigResult) -> SDCounts | None:
    return _pooled([pr.sd.headline for pr in res.points if pr.sd.available and pr.sd.headline is not None])


def _category_spread(res: ConfigResult) -> str:
    """The lowest and the highest category AL, each pooled over the configuration's points."""
    by: dict[str, list[SDCounts]] = {}
    for pr in res.points:
        for row in pr.categories.categories if pr.categories is not None else ():
            by.setdefault(row.category, []).append(row.counts)
    als = {cat: al for cat, items in by.items()
           if (pooled := _pooled(items)) is not None and (al := pooled.acceptance_length) is not None}
    if not als:
        return "-"
    low, high = min(als, key=als.__getitem__), max(als, key=als.__getitem__)
    return f"{als[low]:.2f} {low}" if low == high else f"{als[low]:.2f} {low} .. {als[high]:.2f} {high}"


def _kv(res: ConfigResult, baseline: int | None) -> str:
    tokens = res.kv_capacity_tokens
    if tokens is None:
        return "-"
    return f"{tokens:,}" + (f" ({tokens / baseline - 1:+.0%})" if baseline else "")


def _drafting(cal: Calibration, cfg: PlannedConfig, batches: tuple[float, float]) -> tuple[str, str, str]:
    """(drafted tokens per request-step, fitted drafting ms per step at the smallest and the largest batch): the
    drafter's two terms at the K it drafted on average (an n-gram miss drafts nothing)."""
    cost = cal.drafter(drafter_key(cfg.spec))
    if cost is None:
        return "-", "-", "-"
    ks = [o.k for o in cal.observations if o.config_id == cfg.id and o.drafter is not None]
    k = statistics.fmean(ks) if ks else float(cfg.spec.num_speculative_tokens or 0)
    low, high = (cost.step_s(k, b) * 1e3 for b in batches)
    return f"{k:.2f}", f"{low:.2f}", f"{high:.2f}"


def _form(cal: Calibration) -> str:
    choice = cal.choice
    if choice is None:
        return cal.form.name
    how = f"chosen by {choice.scheme}" if choice.decided else "the default: too few points to choose"
    tied = f", tied with {len(choice.tied)} more" if choice.tied else ""
    return f"{cal.form.name}, {how}{tied}"


def drafter_table(summary: RunSummary, cal: Calibration | None) -> Grid | None:
    """Every speculative configuration of a real drafter, grouped by drafter (None: none measured)."""
    baseline = summary.plan.main_baseline
    base_res = summary.config(baseline.id) if baseline is not None else None
    base_kv = base_res.kv_capacity_tokens if base_res is not None else None
    observed = [o for o in cal.observations if o.used] if cal is not None else []
    batches = (min((o.batch for o in observed), default=1.0), max((o.batch for o in observed), default=1.0))
    base_steps = sorted((o.batch, o.step_s) for o in observed if o.drafter is None)
    where = (f"; the baseline's measured step: {base_steps[0][1] * 1e3:.1f} ms at batch {base_steps[0][0]:.1f}, "
             f"{base_steps[-1][1] * 1e3:.1f} ms at batch {base_steps[-1][0]:.1f}" if base_steps else "")
    fitted = ("drafting ms per step fitted by the step-cost model on this sweep (calibration.json: the drafter's "
              f"terms of its form, {_form(cal)}, at the K drafted and the batch){where}" if cal is not None else
              "no calibration.json: no drafting cost (`specmeter plan RUN_DIR` fits one)")
    costs = (("drafted/step", f"draft ms B={batches[0]:.1f}", f"draft ms B={batches[1]:.1f}")
             if cal is not None else ())
    cols = ("configuration", "AL", "per-position a_i", "category AL (low .. high)", *costs, "KV tokens (vs baseline)")
    t = grid(f"Drafters side by side, one drafter per section: acceptance pooled over every point and repeat; {fitted}",
             cols, left={"configuration", "per-position a_i", "category AL (low .. high)"},
             no_wrap={"configuration", "AL", *costs})
    configs = [c for c in summary.plan.configs if c.spec.enabled and not c.spec.synthetic and c.workload == "main"]
    last = None
    for cfg in sorted(configs, key=lambda c: (drafter_label(c.spec), c.spec.num_speculative_tokens or 0)):
        res = summary.config(cfg.id)
        if res is None or not res.points:
            continue
        label = drafter_label(cfg.spec)
        if last is not None and label != last:
            t.add_section()
        counts = _acceptance(res)
        rates = ("-" if counts is None or not counts.per_position_rate else NOT_A_CHAIN if counts.tree
                 else " ".join(f"{v:.2f}" for v in counts.per_position_rate))
        t.add_row(cfg.id, fmt(counts.acceptance_length if counts else None), rates,
                  _category_spread(res), *(_drafting(cal, cfg, batches) if cal is not None else ()), _kv(res, base_kv))
        last = label
    return t if t.row_count else None
