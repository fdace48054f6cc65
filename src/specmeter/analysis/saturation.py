"""Has the server saturated? A point of a load ramp against the next lower load measured on its axis.

A server is saturated when more load no longer buys throughput, only waiting: its output tok/s did not rise by
more than `min_gain` (the interval of the higher / lower ratio reaches down to 1 + min_gain or below) while its
median E2E latency grew by more than `latency_rise` (the whole interval of that ratio above 1 + latency_rise). E2E,
not TPOT: an engine that caps its batch keeps TPOT flat and queues the rest, which only the E2E (through TTFT)
shows. The two points ran different requests at different loads, so nothing is paired: each point's requests are
resampled on their own; with repeats, the spread of the per-repeat ratios widens the interval as it does for
speedups.

The ramp stops when every configuration measured at both points has saturated, here or at an earlier step: past
that load every server only queues, so no speedup or choice the sweep reports could change except through waiting.
One configuration still rising (a drafter that gains capacity where the baseline ran out) keeps the ramp going.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from specmeter.analysis.headtohead import Side, decision_bounds
from specmeter.analysis.paired import expanded, fill_repeats, index_matrix, percentile_interval, resamples_for
from specmeter.config.models import LoadPoint, SaturationRule
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.ramp import RampStep, StepReading
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

CONFIDENCE = 0.95


def ramp_step(summary: RunSummary, records: Sequence[RequestRecord], lower: LoadPoint, point: LoadPoint,
              rule: SaturationRule, earlier: Sequence[RampStep] = ()) -> RampStep:
    """`point` against `lower` (the next lower load measured on its axis) for every configuration that measured
    both; `earlier`: the axis's steps judged before (a configuration saturated there stays saturated)."""
    pairs: dict[str, tuple[Side, Side]] = {}
    for result in summary.configs:
        if result.server_error is None and result.repeats(lower.id) and result.repeats(point.id):
            pairs[result.config_id] = (Side.of(result, records, lower.id), Side.of(result, records, point.id))
    return judge(lower.id, lower.load, point.id, point.load, pairs, rule, earlier)


def judge(lower_point: str, lower: float, point_id: str, load: float, pairs: Mapping[str, tuple[Side, Side]],
          rule: SaturationRule, earlier: Sequence[RampStep] = ()) -> RampStep:
    """The step from `lower_point` to `point_id` over each configuration's (lower, higher) sides."""
    before = {r.config_id for s in earlier for r in s.readings if r.saturated}
    readings = [reading(cid, lo, hi, rule, already=cid in before) for cid, (lo, hi) in pairs.items()]
    rising = [r for r in readings if not r.saturated]
    where = f"{point_id} against {lower_point}"
    if not readings:
        return RampStep(lower_point=lower_point, point_id=point_id, lower=lower, load=load, readings=[],
                        saturated=False, why=f"{where}: no configuration measured both")
    if rising:
        why = f"{where}: not saturated: " + "; ".join(r.why for r in rising)
    else:
        why = f"every configuration saturated by {where}: " + "; ".join(r.why for r in readings)
    return RampStep(lower_point=lower_point, point_id=point_id, lower=lower, load=load, readings=readings,
                    saturated=not rising, why=why)


def reading(config_id: str, lo: Side, hi: Side, rule: SaturationRule, *, already: bool = False) -> StepReading:
    """One configuration's throughput and latency from `lo` to `hi`, and whether it has saturated."""
    tput, lat = throughput_ratio(lo, hi), e2e_ratio(lo, hi)
    t_low, t_high = decision_bounds(tput)
    l_low, l_high = decision_bounds(lat)
    gain, rise = 1.0 + rule.min_gain, 1.0 + rule.latency_rise
    flat = tput.value is not None and (t_low if t_low is not None else tput.value) <= gain
    grows = l_low is not None and l_low > rise
    text = (f"{config_id}: throughput {_text(tput.value, t_low, t_high)} (rises only above {gain:.2f}), "
            f"E2E p50 {_text(lat.value, l_low, l_high)} (grows above {rise:.2f})")
    if already and not (flat and grows):
        text += ", saturated at an earlier step"
    return StepReading(config_id=config_id, throughput=tput, e2e_p50=lat, throughput_low=t_low,
                       throughput_high=t_high, latency_low=l_low, latency_high=l_high,
                       saturated=already or (flat and grows), why=text)


def throughput_ratio(lo: Side, hi: Side, confidence: float = CONFIDENCE) -> Ratio:
    """Output tok/s at `hi` / at `lo`: the value from the point totals (pooled over repeats), the interval's
    relative width from each point's per-request stream rates (tokens / E2E), resampled independently."""
    value = _ratio_or_none(_rate(hi.totals), _rate(lo.totals))
    a, b = _columns(lo), _columns(hi)
    out = Ratio(value=value, confidence=confidence)
    n = min(a[0].size, b[0].size)
    if value is not None and n >= 2:
        level = expanded(confidence, n)
        ia, ib = _indices(a[0].size, b[0].size, resamples_for(level))
        with np.errstate(divide="ignore", invalid="ignore"):
            stats = (b[0][ib].sum(1) / b[1][ib].sum(1)) / (a[0][ia].sum(1) / a[1][ia].sum(1))
            est = (b[0].sum() / b[1].sum()) / (a[0].sum() / a[1].sum())
        ci = percentile_interval(stats, level)
        if ci is not None and np.isfinite(est) and est > 0:
            out.ci95_low, out.ci95_high = value * ci[0] / est, value * ci[1] / est
    per_repeat = [_ratio_or_none(_rate({r: hi.totals[r]}), _rate({r: lo.totals[r]}))
                  for r in sorted(lo.totals.keys() & hi.totals.keys())]
    return fill_repeats(out, per_repeat)


def e2e_ratio(lo: Side, hi: Side, confidence: float = CONFIDENCE) -> Ratio:
    """Median E2E at `hi` / at `lo`, each point's requests resampled independently."""
    a, b = _columns(lo)[1], _columns(hi)[1]
    if a.size == 0 or b.size == 0:
        return Ratio(value=None, confidence=confidence)
    out = Ratio(value=_ratio_or_none(float(np.median(b)), float(np.median(a))), confidence=confidence)
    n = min(a.size, b.size)
    if out.value is not None and n >= 2:
        level = expanded(confidence, n)
        ia, ib = _indices(a.size, b.size, resamples_for(level))
        with np.errstate(divide="ignore", invalid="ignore"):
            ci = percentile_interval(np.median(b[ib], axis=1) / np.median(a[ia], axis=1), level)
        if ci is not None:
            out.ci95_low, out.ci95_high = ci
    per_repeat = [_ratio_or_none(_median(hi, r), _median(lo, r)) for r in sorted(lo.totals.keys() & hi.totals.keys())]
    return fill_repeats(out, per_repeat)


# ---- inside ---------------------------------------------------------------------------------------------------
def _columns(side: Side) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens and E2E of the side's finished requests that have both."""
    rows = [(float(r.output_tokens or 0), r.e2e_s) for r in side.requests.values()
            if r.e2e_s is not None and r.e2e_s > 0]
    return np.array([t for t, _ in rows], dtype=float), np.array([e for _, e in rows], dtype=float)


def _median(side: Side, repeat: int) -> float | None:
    e2e = [r.e2e_s for k, r in side.requests.items() if k[0] == repeat and r.e2e_s is not None]
    return float(np.median(e2e)) if e2e else None


def _rate(totals: Mapping[int, tuple[float, float]]) -> float | None:
    wall = sum(w for _, w in totals.values())
    return sum(t for t, _ in totals.values()) / wall if wall > 0 else None


def _ratio_or_none(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _indices(n_a: int, n_b: int, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """Independent resamples of two points' requests (seeded apart, so the two draws do not move together)."""
    return index_matrix(n_a, resamples, 0), index_matrix(n_b, resamples, 1)


def _text(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")
