"""Acceptance per phase of a phase-shift workload (data/phases.py), read as acceptance per category is
(metrics/categories.py), with what shows how a configuration followed the switch: each phase's start, its counts
over its first and its second half of requests, and the K drafted per step. A static table drafts the same K in
both halves; an engine that adapts drafts less where acceptance falls, and its second half shows where it settled.
Halves are taken in each round by send time, then pooled over the rounds."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean, median

from specmeter.metrics.categories import acceptance_row
from specmeter.metrics.sd import sum_counts
from specmeter.schemas.metrics import PhaseAcceptance, PhaseBreakdown
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts


def phase_breakdown(config_id: str, point_id: str, records: Iterable[RequestRecord]) -> PhaseBreakdown | None:
    """One configuration's phases at one point from its measured requests (any rounds); None when none was sent
    in a phase."""
    rounds: dict[str, dict[int, list[RequestRecord]]] = {}
    for r in sorted(records, key=lambda r: (r.repeat, r.start_s)):
        if not r.warmup and r.phase is not None:
            rounds.setdefault(r.phase, {}).setdefault(r.repeat, []).append(r)
    if not rounds:
        return None
    order = sorted(rounds, key=lambda name: median(rs[0].start_s for rs in rounds[name].values()))
    return PhaseBreakdown(config_id=config_id, point_id=point_id, phases=[_phase(n, rounds[n]) for n in order])


def _phase(name: str, by_round: dict[int, list[RequestRecord]]) -> PhaseAcceptance:
    """`by_round`: the phase's requests of each round, in send order."""
    first: list[SDCounts] = []
    second: list[SDCounts] = []
    for recs in by_round.values():
        counts = [r.sd for r in recs if r.sd is not None]
        first += counts[:len(counts) // 2]
        second += counts[len(counts) // 2:]
    every = [r for recs in by_round.values() for r in recs]
    tpots = [t for r in every if (t := r.tpot_s) is not None]
    return PhaseAcceptance(
        phase=name, requests=len(every), started_s=median(recs[0].start_s for recs in by_round.values()),
        acceptance=acceptance_row(name, [r.sd for r in every if r.sd is not None]),
        first_half=sum_counts(first) if first else None, second_half=sum_counts(second) if second else None,
        tpot_mean_s=fmean(tpots) if tpots else None,
    )
