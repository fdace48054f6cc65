"""Two configurations compared with each other at one load point, paired on the requests both ran.

One function serves every paired comparison specmeter makes: a candidate against the baseline (the speedup),
two candidates against each other (the choice), a dynamic table against a static K (verify), a run against
another run (compare), and goodput under an SLO. Request i of one side is resampled together with request i
of the other, so prompt difficulty, which moves both sides alike, stays out of the interval; with repeats the
pairing unit is (repeat, request), and the spread of the ratio across repeats is kept beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from specmeter.analysis.host import disturbed
from specmeter.analysis.noise import RoundNoise, with_spread
from specmeter.analysis.paired import fill_repeats, paired_ratio_of_means, paired_ratio_of_sums
from specmeter.schemas.analysis import HeadToHead, Metric, Outcome, Ratio
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult

RequestKey = tuple[int, str, int]  # (repeat, conversation id, turn)
MAD_TO_SIGMA = 1.4826  # MAD of a normal sample x this = its standard deviation
DEFAULT_MIN_GAIN = 0.01
Good = Callable[[RequestRecord], bool]


@dataclass(frozen=True)
class Side:
    """One configuration at one point: its finished requests by key and, per repeat, the point's totals
    (output tokens, wall seconds) that throughput is measured on. Repeats that other work on the machine
    disturbed (analysis.host) are set aside where the point has clean ones; where every one was disturbed they
    are kept, and the side says so (`disturbed`), so nothing built on it reads as a clean verdict."""

    config_id: str
    requests: dict[RequestKey, RequestRecord]
    totals: dict[int, tuple[float, float]]
    set_aside: tuple[int, ...] = ()
    disturbed: bool = False
    point_id: str = ""
    instance_of: dict[int, int] = field(default_factory=dict)  # repeat -> the server instance that ran it

    @classmethod
    def of(cls, result: ConfigResult, records: Sequence[RequestRecord], point_id: str) -> Side:
        measured = [p for p in result.repeats(point_id) if p.measured]  # all failed: nothing to compare
        clean = [p for p in measured if not disturbed(p)]
        kept = {p.repeat for p in (clean or measured)}
        reqs = {(r.repeat, r.conversation_id, r.turn): r for r in records
                if r.config_id == result.config_id and r.point_id == point_id and r.ok and not r.warmup
                and r.repeat in kept}
        totals = {p.repeat: (float(p.latency.output_tokens), p.latency.wall_s) for p in measured if p.repeat in kept}
        return cls(result.config_id, reqs, totals, set_aside=tuple(sorted({p.repeat for p in measured} - kept)),
                   disturbed=bool(measured) and not clean, point_id=point_id,
                   instance_of={p.repeat: p.instance for p in measured if p.repeat in kept})

    def on_instance(self, instance: int) -> Side:
        """This side on one server instance's rounds alone."""
        keep = {r for r, i in self.instance_of.items() if i == instance}
        return Side(self.config_id, {k: v for k, v in self.requests.items() if k[0] in keep},
                    {r: t for r, t in self.totals.items() if r in keep}, self.set_aside, self.disturbed,
                    self.point_id, {r: self.instance_of[r] for r in keep})

    def only(self, keep: Callable[[RequestRecord], bool]) -> Side:
        """This side on the requests `keep` takes (its point totals unchanged: compare them on a latency)."""
        return replace(self, requests={k: r for k, r in self.requests.items() if keep(r)})

    def merged(self, other: Side) -> Side:
        """This side and more of the same configuration (another run's repeats, numbered apart from these)."""
        return Side(self.config_id, {**self.requests, **other.requests}, {**self.totals, **other.totals},
                    tuple(sorted({*self.set_aside, *other.set_aside})), self.disturbed and other.disturbed,
                    self.point_id, {**self.instance_of, **other.instance_of})


@dataclass(frozen=True)
class Paired:
    """What two sides have in common: the repeats both ran, the keys both completed, and how many of those
    repeats' requests only one completed. A repeat only one side ran (a configuration resting from a round on) is
    left out of the comparison, not counted as unequal work; two sides with no repeat in common share no work."""

    keys: list[RequestKey]
    repeats: list[int]
    unmatched: int

    @classmethod
    def of(cls, a: Side, b: Side) -> Paired:
        repeats = a.totals.keys() & b.totals.keys()
        keys = sorted(a.requests.keys() & b.requests.keys())
        only_one = {k for k in a.requests.keys() ^ b.requests.keys() if k[0] in repeats or not repeats}
        return cls(keys, sorted(repeats), len(only_one))


def compare(a: Side, b: Side, metric: Metric | str, *, confidence: float = 0.95, good: Good | None = None,
            noise: RoundNoise | None = None) -> Ratio:
    """`a` over `b` on `metric` (> 1: `a` is better), paired by request, with per-repeat values and, given the
    run's round noise, the intervals over rounds and instances and for a rerun (analysis.noise).

    output_throughput: point tokens / wall, pooled over the repeats both ran; the interval's relative width comes
    from the paired per-request stream rates (tokens / E2E), which track it in a closed loop. tpot, ttft, e2e:
    b's mean / a's mean. goodput: requests meeting the SLO (`good`) per second of the point."""
    pairs = Paired.of(a, b)
    if metric == "output_throughput":
        ratio, per_repeat = _rate_ratio(a, b, pairs, lambda r: float(r.output_tokens or 0), confidence)
    elif metric == "goodput":
        if good is None:
            raise ValueError("a goodput comparison needs the SLO's test of a request")
        ratio, per_repeat = _rate_ratio(a, b, pairs, lambda r: 1.0 if good(r) else 0.0, confidence, counted=good)
    else:
        ratio, per_repeat = _mean_ratio(a, b, pairs, metric, confidence)
    ratio = fill_repeats(ratio, list(per_repeat.values()))
    if noise is not None:
        ratio = with_spread(ratio, per_repeat, a.instance_of, noise, [(a.config_id, a.point_id),
                                                                       (b.config_id, b.point_id)])
    ratio.disturbed = a.disturbed or b.disturbed
    ratio.set_aside = sorted({*a.set_aside, *b.set_aside})
    return ratio


def head_to_head(challenger: Side, incumbent: Side, point_id: str, metric: Metric, *,
                 min_gain: float = DEFAULT_MIN_GAIN, indifference: float | None = None, confidence: float = 0.95,
                 good: Good | None = None, noise: RoundNoise | None = None) -> HeadToHead:
    """Does the costlier `challenger` beat the cheaper `incumbent` by more than `min_gain`, or are the two
    within `indifference` of each other (None: no ties)?"""
    ratio = compare(challenger, incumbent, metric, confidence=confidence, good=good, noise=noise)
    low, high = decision_bounds(ratio)
    threshold = 1.0 + min_gain
    return HeadToHead(point_id=point_id, config_id=challenger.config_id, against=incumbent.config_id, metric=metric,
                      ratio=ratio, low=low, high=high, threshold=threshold, indifference=indifference,
                      outcome=outcome_of(low, high, threshold, indifference),
                      paired_requests=len(Paired.of(challenger, incumbent).keys))


class Arena:
    """The configurations measured at one point, each side built once, and the duels between them."""

    def __init__(self, sides: dict[str, Side], point_id: str, metric: Metric, *, min_gain: float = DEFAULT_MIN_GAIN,
                 indifference: float | None = None, confidence: float = 0.95, good: Good | None = None,
                 noise: RoundNoise | None = None) -> None:
        self.sides, self.point_id, self.metric = sides, point_id, metric
        self.min_gain, self.indifference, self.confidence, self.good = min_gain, indifference, confidence, good
        self.noise = noise
        self._seen: dict[tuple[str, str], HeadToHead] = {}

    @classmethod
    def of(cls, results: Sequence[ConfigResult], records: Sequence[RequestRecord], point_id: str, metric: Metric,
           **kw: Any) -> Arena:
        """The point's sides, and the run's round noise (from every cell of `results`) their duels read."""
        sides = {r.config_id: Side.of(r, records, point_id) for r in results if r.repeats(point_id)}
        return cls(sides, point_id, metric, noise=RoundNoise.of(results), **kw)

    def duel(self, challenger: str, incumbent: str) -> HeadToHead:
        key = (challenger, incumbent)
        if key not in self._seen:
            self._seen[key] = head_to_head(self.sides[challenger], self.sides[incumbent], self.point_id, self.metric,
                                           min_gain=self.min_gain, indifference=self.indifference,
                                           confidence=self.confidence, good=self.good, noise=self.noise)
        return self._seen[key]

    def instances(self) -> list[int]:
        """The server instances the point's rounds ran on."""
        return sorted({i for side in self.sides.values() for i in side.instance_of.values()})

    def beaten_on_instances(self, chosen: str, others: Sequence[str]) -> list[tuple[int, HeadToHead]]:
        """Where, on one server instance's rounds alone (paired by request, no round spread: within one instance
        there is none to read), another of `others` beat `chosen` by more than the minimum gain: what a restart
        can change that the point's pooled decision does not show. Nothing with fewer than two instances."""
        found = self.instances()
        if len(found) < 2 or chosen not in self.sides:
            return []
        out = []
        for instance in found:
            one = Arena({cid: side.on_instance(instance) for cid, side in self.sides.items()}, self.point_id,
                        self.metric, min_gain=self.min_gain, indifference=self.indifference,
                        confidence=self.confidence, good=self.good)
            out += [(instance, duel) for other in others if other != chosen and other in one.sides
                    if (duel := one.duel(other, chosen)).outcome == "beats"]
        return out


def outcome_of(low: float | None, high: float | None, threshold: float,
               indifference: float | None = None) -> Outcome:
    """beats: the whole interval above the threshold; does_not_beat: wholly below; tie: it straddles the
    threshold but ends below 1 + indifference, so the challenger is at most that much better and the incumbent
    (the cheaper), which a tie keeps, is within it of the better of the two; else unsettled (it reaches past
    1 + indifference, or there is no interval, under two paired requests: no evidence either way).

    A tie is read only where beats and does_not_beat are not: every decision the threshold alone settles stays
    as it was, and the zone settles only what would otherwise run on to the budget. Only the upper end counts:
    the cheaper is kept whatever the lower end says, so how much worse the challenger might be cannot change the
    answer, and a challenger that measures a little slower settles as soon as it is shown not to be much faster."""
    if low is not None and low > threshold:
        return "beats"
    if high is not None and high < threshold:
        return "does_not_beat"
    if indifference is not None and low is not None and high is not None and high < 1.0 + indifference:
        return "tie"
    return "unsettled"


def decision_bounds(ratio: Ratio) -> tuple[float | None, float | None]:
    """The paired interval, widened to cover where the mean over rounds lies: drift between rounds and what a
    server restart changes (which one run's interval over requests does not see) count as doubt. Compared within
    a run's arena, that is the interval over rounds and instances (analysis.noise: this cell's spread moderated by
    the run's other cells'), so more rounds narrow it, as sequential sampling needs, while two rounds that agree
    by chance do not make it narrower than the run's rounds are. A ratio built outside one (no run's noise to
    read) takes the standard error of its rounds' median (1.4826 x MAD / sqrt(repeats))."""
    low, high = ratio.ci95_low, ratio.ci95_high
    if ratio.rounds_low is not None and ratio.rounds_high is not None:
        r_low, r_high = ratio.rounds_low, ratio.rounds_high
        return (r_low if low is None else min(low, r_low)), (r_high if high is None else max(high, r_high))
    n = len(ratio.repeat_values)
    if ratio.median is None or ratio.mad is None or n < 2:
        return low, high
    z = NormalDist().inv_cdf(0.5 + ratio.confidence / 2)
    spread = z * MAD_TO_SIGMA * ratio.mad / math.sqrt(n)
    r_low, r_high = ratio.median - spread, ratio.median + spread
    return (r_low if low is None else min(low, r_low)), (r_high if high is None else max(high, r_high))


def _rate_ratio(a: Side, b: Side, pairs: Paired, amount: Callable[[RequestRecord], float], confidence: float,
                counted: Good | None = None) -> tuple[Ratio, dict[int, float | None]]:
    """(Σ amount / wall of a) / (the same of b): throughput (amount = tokens) or goodput (amount = 1 per request
    meeting the SLO). Point totals of the repeats both ran give the value (pooled runs: never one run's against
    another's); the paired per-request rates give the interval's width."""

    def total(side: Side, repeat: int | None) -> tuple[float, float]:
        reps = [r for r in side.totals if (r in pairs.repeats if repeat is None else r == repeat)]
        wall = sum(side.totals[r][1] for r in reps)
        if counted is None:
            return sum(side.totals[r][0] for r in reps), wall
        return float(sum(1 for k, rec in side.requests.items() if k[0] in reps and counted(rec))), wall

    def ratio_at(repeat: int | None) -> float | None:
        (an, aw), (bn, bw) = total(a, repeat), total(b, repeat)
        return (an / aw) / (bn / bw) if aw > 0 and bw > 0 and bn > 0 else None

    value = ratio_at(None)
    ra = [a.requests[k] for k in pairs.keys]
    rb = [b.requests[k] for k in pairs.keys]
    est, ci = paired_ratio_of_sums([amount(r) for r in ra], [r.e2e_s for r in ra],
                                   [amount(r) for r in rb], [r.e2e_s for r in rb], confidence=confidence)
    out = Ratio(value=value, confidence=confidence)
    if value is not None and est and ci and np.isfinite(ci[0]) and np.isfinite(ci[1]):
        out.ci95_low, out.ci95_high = value * ci[0] / est, value * ci[1] / est
    return out, {r: ratio_at(r) for r in pairs.repeats}


def _mean_ratio(a: Side, b: Side, pairs: Paired, field: str,
                confidence: float) -> tuple[Ratio, dict[int, float | None]]:
    """b's mean / a's mean of a latency (> 1: a is faster), paired, with the same ratio per repeat."""
    va = [getattr(a.requests[k], f"{field}_s") for k in pairs.keys]
    vb = [getattr(b.requests[k], f"{field}_s") for k in pairs.keys]
    value, ci = paired_ratio_of_means(vb, va, confidence=confidence)
    out = Ratio(value=value, ci95_low=ci[0] if ci else None, ci95_high=ci[1] if ci else None, confidence=confidence)
    return out, {rep: _sum_ratio([(y, x) for k, x, y in zip(pairs.keys, va, vb) if k[0] == rep])
                 for rep in pairs.repeats}


def _sum_ratio(pairs: Sequence[tuple[float | None, float | None]]) -> float | None:
    """mean(first) / mean(second) over the pairs where both are known."""
    both = [(x, y) for x, y in pairs if x is not None and y is not None]
    den = sum(y for _, y in both)
    return sum(x for x, _ in both) / den if both and den > 0 else None
