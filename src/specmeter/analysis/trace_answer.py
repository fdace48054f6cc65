"""The answer for a trace's traffic: what the recommended K table buys on it, each batch size's speedup weighted by
the share of the replay's time the engine spent at that batch size.

A K table's gain depends on the traffic: a table that pays 1.5x at batch 1 and nothing at 16 buys a lot on a quiet
service and little on a busy one. A trace replay measures both sides on the real traffic, and the engine's
running-batch gauge (sampled at a fixed interval) says how long it ran each batch size; so the gain on the trace
is those times, each shortened by its batch size's speedup.

The weights are the baseline's time at each batch size: it is the traffic as the engine without speculation
serves it (what runs before the table is deployed), the same for every drafter, measured on the identical replay.
Each batch size's time is divided by its speedup, so the gain is the baseline's serving time over the time the
table would take, a harmonic mean; it equals the arithmetic mean weighted by the time the sped-up engine spends at
each batch size, where the arithmetic mean over the baseline's weights would overstate it. Idle time (no request
running) takes no step, so it weighs nothing. A batch size's speedup is the chosen configuration's at the measured
point its K comes from (the nearest measured stretch with the same K, in log batch size, as the table is
interpolated); K = 0 counts as 1x. The bounds are the same mean of the bounds, every range at its bound at once:
conservative, wider than an interval whose ranges err independently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from specmeter.config.models import TracePoint
from specmeter.schemas.recommend import BatchShare, DrafterRecommendation, Segment, TraceGain
from specmeter.schemas.results import RunSummary


@dataclass(frozen=True)
class Speed:
    """A batch size's speedup over no speculation, its bounds (None: no interval) and whether it was measured at
    that batch size."""

    value: float
    low: float | None
    high: float | None
    measured: bool


def trace_gains(summary: RunSummary, drafter: DrafterRecommendation, baseline_id: str) -> list[TraceGain]:
    """Per trace point of the plan, what the drafter's table buys there ([]: no trace points)."""
    return [trace_gain(summary, point.id, drafter, baseline_id) for point in summary.plan.points
            if isinstance(point, TracePoint)]


def pooled_histogram(summary: RunSummary, point_id: str, config_id: str) -> dict[int, int]:
    """A configuration's running-batch samples at a point, batch size -> samples, pooled over its repeats."""
    res = summary.config(config_id)
    pooled: dict[int, int] = {}
    for pr in res.repeats(point_id) if res is not None else []:
        for size, n in (pr.running_batch.histogram if pr.running_batch is not None else {}).items():
            pooled[size] = pooled.get(size, 0) + n
    return pooled


def trace_gain(summary: RunSummary, point_id: str, drafter: DrafterRecommendation, baseline_id: str) -> TraceGain:
    """What the table buys on one trace point's traffic, or why that is not known."""
    samples = pooled_histogram(summary, point_id, baseline_id)
    total = sum(samples.values())
    out = TraceGain(point_id=point_id, weighed_by=baseline_id, samples=total)
    if not total:
        return out.model_copy(update={"reason": f"{baseline_id}'s running batch was not sampled at {point_id}, so "
                                                "the time at each batch size, and what the table buys on this "
                                                "traffic, are not known"})
    busy = {size: n for size, n in samples.items() if size > 0}
    out.idle_share = 1 - sum(busy.values()) / total
    if not busy:
        return out.model_copy(update={"reason": f"the engine ran no request in any of {baseline_id}'s {total} "
                                                f"running-batch samples at {point_id}"})
    weights = {size: n / sum(busy.values()) for size, n in busy.items()}
    out.time = table_shares(drafter, weights)
    speeds = batch_speeds(drafter, weights)
    if isinstance(speeds, str):
        return out.model_copy(update={"reason": speeds})
    out.gain = weighted_gain(weights, {b: s.value for b, s in speeds.items()})
    out.low = weighted_gain(weights, {b: s.low for b, s in speeds.items()})
    out.high = weighted_gain(weights, {b: s.high for b, s in speeds.items()})
    out.measured_share = sum(w for b, w in weights.items() if speeds[b].measured)
    return out


def weighted_gain(weights: Mapping[int, float], speeds: Mapping[int, float | None]) -> float | None:
    """1 / sum(w_b / s_b): the serving time (shares w_b summing to 1) over the time with each batch size's share
    divided by its speedup s_b (None: some s_b is unknown or not positive)."""
    pairs = [(w, speeds[b]) for b, w in weights.items()]
    if any(s is None or s <= 0 for _, s in pairs):
        return None
    return 1.0 / sum(w / s for w, s in pairs if s is not None)


def segment_at(drafter: DrafterRecommendation, batch: int) -> Segment:
    """The table's stretch that runs a batch size; one beyond the table runs as its last (the engine's cap)."""
    return next((s for s in drafter.segments if s.start <= batch <= s.end), drafter.segments[-1])


def table_shares(drafter: DrafterRecommendation, weights: dict[int, float]) -> list[BatchShare]:
    """The table's ranges the engine ran in, each with its share of the serving time."""
    last = drafter.ranges[-1].end
    shares = [BatchShare(start=r.start, end=r.end, k=r.k,
                         share=min(1.0, sum(w for b, w in weights.items() if r.start <= min(b, last) <= r.end)))
              for r in drafter.ranges]
    return [s for s in shares if s.share > 0]


def batch_speeds(drafter: DrafterRecommendation, weights: dict[int, float]) -> dict[int, Speed] | str:
    """Each sampled batch size's speedup under the table, or the line saying which stretch has none."""
    out: dict[int, Speed] = {}
    for batch in weights:
        seg = segment_at(drafter, batch)
        speed = segment_speed(drafter, seg)
        if speed is None:
            span = str(seg.start) if seg.start == seg.end else f"{seg.start}-{seg.end}"
            return (f"batch {span} runs K={seg.k}, which no measured point of {drafter.drafter} gives a speedup "
                    "for, so what the table buys on this traffic is not known")
        out[batch] = speed
    return out


def segment_speed(drafter: DrafterRecommendation, seg: Segment) -> Speed | None:
    """A stretch's speedup: K = 0's 1x, a measured stretch's chosen configuration's, else that of the nearest
    measured stretch (log batch size) with its K (None: there is none)."""
    if seg.k == 0:
        return Speed(1.0, 1.0, 1.0, measured=seg.basis == "measured")
    if seg.basis == "measured":
        return measured_speed(seg)
    centre = math.log(seg.start * seg.end) / 2
    same = [s for s in drafter.segments if s.basis == "measured" and s.k == seg.k]
    if not same:
        return None
    near = min(same, key=lambda s: abs(math.log(s.start) - centre))
    speed = measured_speed(near)
    return None if speed is None else Speed(speed.value, speed.low, speed.high, measured=False)


def measured_speed(seg: Segment) -> Speed | None:
    """The chosen configuration's score over the baseline's at a measured stretch (a goodput's bounds only where
    the baseline's score is exact, as a speedup's is)."""
    chosen = next((s for s in seg.scores if s.config_id == seg.chosen), None)
    base = next((s for s in seg.scores if s.k == 0), None)
    if chosen is None or chosen.value is None or base is None or not base.value:
        return None
    exact = base.low == base.high == base.value
    low = chosen.low / base.value if exact and chosen.low is not None else None
    high = chosen.high / base.value if exact and chosen.high is not None else None
    return Speed(chosen.value / base.value, low, high, measured=True)
