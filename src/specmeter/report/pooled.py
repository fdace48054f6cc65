"""A point's SD counts pooled over its repeats, as the tables and the plots read them."""

from __future__ import annotations

from specmeter.metrics.sd import sum_counts
from specmeter.schemas.results import ConfigResult
from specmeter.schemas.sd import SDCounts


def pooled_sd(config: ConfigResult, point_id: str) -> tuple[SDCounts | None, str]:
    """SD of a point pooled over its repeats (counts add up exactly), and where the numbers came from."""
    heads = [(pr.sd.headline, pr.sd.reference) for pr in config.repeats(point_id) if pr.sd.available]
    counts = [h for h, _ in heads if h is not None]
    if not counts:
        return None, "-"
    pooled = counts[0] if len(counts) == 1 else sum_counts(counts, source=counts[0].source)
    return pooled, "/".join(sorted({ref or "-" for _, ref in heads}))


def pooled_histogram(config: ConfigResult, point_id: str) -> SDCounts | None:
    """The point's SD counts pooled over repeats, from the headline source when it has an acceptance histogram,
    else from the per-request stats (engine counters carry no histogram); None when no repeat has one."""
    items: list[SDCounts] = []
    for pr in config.repeats(point_id):
        found = next((c for c in (pr.sd.headline, pr.sd.per_request) if c is not None and c.histogram), None)
        if found is not None:
            items.append(found)
    if not items:
        return None
    pooled = items[0] if len(items) == 1 else sum_counts(items, source=items[0].source)
    return pooled if pooled.histogram_fraction else None
