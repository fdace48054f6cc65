"""Per-category acceptance from per-request SD stats, the way SPEED-Bench results are read.

For each category: AL step-weighted (pooled over the category's steps) and the per-request mean AL,
AR, per-position and conditional rates, request count. Across categories: the macro average (each
category weighs the same) and the pooled value (each step weighs the same), which must equal the
run-level numbers the engine's counters give.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.metrics.sd import sum_counts
from specmeter.schemas.metrics import CategoryBreakdown, CategorySD
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts


def _row(name: str, items: Sequence[SDCounts]) -> CategorySD:
    pooled = sum_counts(items)
    als = [a for c in items if (a := c.acceptance_length) is not None]
    return CategorySD(
        category=name,
        requests=len(items),
        counts=pooled,
        al_step_weighted=pooled.acceptance_length,
        al_request_mean=sum(als) / len(als) if als else None,
        acceptance_rate=pooled.acceptance_rate,
        per_position_rate=pooled.per_position_rate,
        conditional_rate=pooled.conditional_rate,
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
    rows = [_row(cat, items) for cat, items in sorted(by_cat.items())]
    return CategoryBreakdown(
        categories=rows,
        macro_al=_mean([r.al_step_weighted for r in rows]),
        macro_ar=_mean([r.acceptance_rate for r in rows]),
        pooled=_row("all", [c for items in by_cat.values() for c in items]),
    )
