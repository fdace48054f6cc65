"""Comparisons whose two sides had different KV cache capacity: the engines' reported token counts more than 1%
apart. A draft model's own KV cache comes out of the same memory, so a draft-model configuration holds fewer
tokens than the baseline even with an equal memory share; servers that share a GPU get equal shares (placement),
servers on different GPUs the engine's default. The gap matters where the batches fill the smaller cache:
the note says how full the busiest compared point could make it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specmeter.schemas.analysis import CapacityGap, PointChoice, Speedup
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

TOLERANCE = 0.01  # capacities this close count as equal (engines round to blocks)
FILLS = 0.5  # a point whose peak reaches this share of the smaller cache can be moved by the gap


def capacity_gaps(summary: RunSummary, speedups: Sequence[Speedup], choices: Sequence[PointChoice],
                  records: Sequence[RequestRecord]) -> list[CapacityGap]:
    """One gap per compared pair of configurations (speedups and head-to-heads) whose capacities differ."""
    tokens = {c.config_id: c.kv_capacity_tokens for c in summary.configs}
    pairs: dict[tuple[str, str], set[str]] = {}
    for s in speedups:
        pairs.setdefault((s.config_id, s.baseline_id), set()).add(s.point_id)
    for choice in choices:
        for h in choice.evidence:
            pairs.setdefault((h.config_id, h.against), set()).add(h.point_id)
    longest: dict[str, int] = {}
    for r in records:
        if r.ok and not r.warmup:
            longest[r.point_id] = max(longest.get(r.point_id, 0), (r.prompt_tokens or 0) + (r.output_tokens or 0))
    out: list[CapacityGap] = []
    for (config, against), points in pairs.items():
        a, b = tokens.get(config), tokens.get(against)
        if a is None or b is None or abs(a - b) <= TOLERANCE * max(a, b):
            continue
        peaks = {p: _peak(summary, p, longest) for p in sorted(points)}
        point = max(peaks, key=lambda p: math.inf if (peak := peaks[p]) is None else peak)
        peak, smaller = peaks[point], min(a, b)
        fills = peak is None or peak >= FILLS * smaller
        reach = ("has no bound on requests in flight" if peak is None
                 else f"has at most {peak:,} tokens in flight ({peak / smaller:.0%} of the smaller cache)")
        effect = ("where the batches fill the smaller cache, the comparison measures memory too"
                  if fills else "too few to fill either cache: the gap does not move these numbers")
        out.append(CapacityGap(
            config_id=config, against=against, tokens=a, against_tokens=b, point_id=point, peak_tokens=peak,
            fills=fills, note=f"{config} held {a:,} KV cache tokens, {against} {b:,} ({abs(a - b) / max(a, b):.0%} "
                              f"apart); the busiest point compared, {point}, {reach}: {effect}"))
    return out


def _peak(summary: RunSummary, point_id: str, longest: dict[str, int]) -> int | None:
    """Tokens in flight at most at a point: its slots (capped by the engine's max_num_seqs) x its longest request."""
    slots = summary.plan.point(point_id).slots
    seqs = summary.plan.configs[0].engine.max_num_seqs
    bounds = [s for s in (slots, seqs) if s is not None]
    return min(bounds) * longest.get(point_id, 0) if bounds else None
