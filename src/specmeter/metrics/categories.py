"""Per-category acceptance from per-request SD stats, the way SPEED-Bench results are read.

For each category: AL step-weighted (pooled over the category's steps) and the per-request mean AL,
AR, per-position and conditional rates (per-depth rates instead, for tree drafts), request count. Across
categories: the macro average (each category weighs the same) and the pooled value (each step weighs the
same), which must equal the run-level numbers the engine's counters give. The step-weighted AL carries a
95% bootstrap interval over the category's requests (a category of a handful of prompts says little, and the
interval shows how little).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specmeter.metrics.sd import sum_counts
from specmeter.schemas.metrics import CategoryBreakdown, CategorySD
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts

AL_RESAMPLES = 2000
AL_SEED = 0
_CELLS_PER_CHUNK = 2_000_000  # resampled indices held at once: bounds memory on runs of many requests


def al_interval(items: Sequence[SDCounts], *, n_resamples: int = AL_RESAMPLES, confidence: float = 0.95,
                seed: int = AL_SEED) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the step-weighted AL, 1 + Σaccepted / Σsteps, resampling requests
    (the unit that varies: the steps of one prompt are not independent), with a fixed seed as in
    analysis.paired. Only requests with steps take part; None when fewer than 2 have any."""
    with_steps = [c for c in items if c.num_steps]
    n = len(with_steps)
    if n < 2:
        return None
    accepted = np.array([c.num_accepted_tokens for c in with_steps], dtype=float)
    steps = np.array([c.num_steps or 0 for c in with_steps], dtype=float)
    rng = np.random.default_rng(seed)
    rows = max(1, _CELLS_PER_CHUNK // n)
    stats = np.empty(n_resamples)
    for start in range(0, n_resamples, rows):
        idx = rng.integers(0, n, size=(min(rows, n_resamples - start), n))
        stats[start:start + idx.shape[0]] = 1.0 + accepted[idx].sum(axis=1) / steps[idx].sum(axis=1)
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


def acceptance_row(name: str, items: Sequence[SDCounts]) -> CategorySD:
    """One group of requests' acceptance: pooled counts, step-weighted AL with its interval, request-mean AL."""
    pooled = sum_counts(items)
    als = [a for c in items if (a := c.acceptance_length) is not None]
    ci = al_interval(items)
    return CategorySD(
        category=name,
        requests=len(items),
        counts=pooled,
        al_step_weighted=pooled.acceptance_length,
        al_ci95_low=ci[0] if ci else None,
        al_ci95_high=ci[1] if ci else None,
        al_request_mean=sum(als) / len(als) if als else None,
        acceptance_rate=pooled.acceptance_rate,
        per_position_rate=pooled.per_position_rate,
        conditional_rate=pooled.conditional_rate,
        per_depth_rate=pooled.per_depth_rate,
    )


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def category_breakdown(records: Sequence[RequestRecord]) -> CategoryBreakdown | None:
    """None when no measured request carries per-request SD stats."""
    by_cat: dict[str, list[SDCounts]] = {}
    for r in records:
        if r.warmup or r.sd is None:
            continue
        by_cat.setdefault(r.category, []).append(r.sd)
    if not by_cat:
        return None
    rows = [acceptance_row(cat, items) for cat, items in sorted(by_cat.items())]
    return CategoryBreakdown(
        categories=rows,
        macro_al=_mean([r.al_step_weighted for r in rows]),
        macro_ar=_mean([r.acceptance_rate for r in rows]),
        pooled=acceptance_row("all", [c for items in by_cat.values() for c in items]),
    )
