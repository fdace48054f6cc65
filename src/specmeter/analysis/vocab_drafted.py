"""A drafted run beside a vocabulary's ceiling: per position, what the drafter accepted against what a perfect
drafter with that vocabulary would (at the same K), and the share of its rejections the vocabulary alone forces.

The measured rates are the configuration's own a_i over every point it ran (at temperature 0 the load does not
change which tokens are accepted), from the requests' SD stats where the engine gives them per request (then per
category too), else from the run's counters (overall only)."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.vocab import explained_share
from specmeter.metrics.sd import sum_counts
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.schemas.sd import SDCounts, Source
from specmeter.schemas.vocab import DraftedComparison, DraftedShare, PositionShare, VocabCoverage


def drafted_configs(summary: RunSummary) -> list[PlannedConfig]:
    """The configurations of a run whose acceptance a drafter earned: speculation on, on the main workload, not
    synthetic acceptance (set, not measured)."""
    return [c for c in summary.plan.configs
            if c.role in (Role.candidate, Role.verification) and c.workload == "main" and c.spec.enabled
            and not c.spec.synthetic]


def measured(summary: RunSummary, records: Sequence[RequestRecord],
             config: PlannedConfig) -> tuple[Source, SDCounts | None, dict[str, SDCounts]]:
    """The configuration's pooled SD counts, and per category where the requests carry their own."""
    mine = [r for r in records if r.config_id == config.id and r.ok and not r.warmup and r.sd is not None]
    if mine and all(r.sd is not None and r.sd.num_steps is not None for r in mine):
        by_cat: dict[str, list[SDCounts]] = {}
        for r in mine:
            assert r.sd is not None
            by_cat.setdefault(r.category, []).append(r.sd)
        return ("per_request", sum_counts([c for items in by_cat.values() for c in items]),
                {cat: sum_counts(items) for cat, items in sorted(by_cat.items())})
    result = summary.config(config.id)
    heads = [h for p in (result.points if result else []) if (h := p.sd.headline) is not None]
    return "counters", sum_counts(heads, source="counters") if heads else None, {}


def share(category: str, counts: SDCounts | None, cover: VocabCoverage, k: int) -> DraftedShare:
    """Positions 0 .. k-1 of one category: measured a_i, the vocabulary's ceiling, the share it explains."""
    rates = counts.per_position_rate if counts is not None else []
    positions = []
    for i in range(k):
        m = rates[i] if i < len(rates) else None
        c = cover.ceiling[i].value if i < len(cover.ceiling) else None
        positions.append(PositionShare(position=i, measured=m, ceiling=c, explained=explained_share(c, m)))
    ceilings = [p.ceiling for p in positions]
    al_ceiling = None if any(c is None for c in ceilings) else 1.0 + sum(c for c in ceilings if c is not None)
    al_measured = counts.acceptance_length if counts is not None else None
    return DraftedShare(
        category=category, steps=counts.num_steps if counts is not None else None, positions=positions,
        al_measured=al_measured, al_ceiling=al_ceiling,
        # Σ(1 - ceiling_i) / Σ(1 - a_i): the positions' rejections pooled, as AL pools their acceptances.
        al_explained=None if al_ceiling is None or al_measured is None
        else explained_share(al_ceiling - k, al_measured - k),
    )


def compare(run: str, summary: RunSummary, records: Sequence[RequestRecord], config: PlannedConfig,
            overall: VocabCoverage, categories: Sequence[VocabCoverage]) -> DraftedComparison:
    """One drafted configuration against one vocabulary's ceilings (overall, and per category it shares)."""
    source, pooled, by_cat = measured(summary, records, config)
    k = config.k
    cover = {c.category: c for c in categories}
    whole = share(overall.category, pooled, overall, k)
    return DraftedComparison(
        run=run, config_id=config.id, label=config.label, k=k, source=source, overall=whole,
        categories=[share(cat, counts, cover[cat], k) for cat, counts in by_cat.items() if cat in cover],
        notes=_above(whole),
    )


def _above(whole: DraftedShare) -> list[str]:
    """An AL above the ceiling can only mean the drafter does not draft from this vocabulary (or, by a hair,
    sampling error): then the ceiling is what restricting the drafter to it would cap it at, not an explanation.
    (Per position, a drafter's a_i may pass the perfect drafter's: their steps start at different places.)"""
    if whole.al_explained is None or whole.al_explained <= 1.0:
        return []
    return [f"measured AL {whole.al_measured:.2f} is above this vocabulary's ceiling of {whole.al_ceiling:.2f}: this "
            "drafter does not draft from it; the ceiling is what restricting it to the vocabulary would cap it at"]
