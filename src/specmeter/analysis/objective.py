"""What a recommendation maximises, measured for each contender and decided head to head.

Throughput (TPOT at request-rate points), TPOT, or goodput (requests per second that meet an SLO). Scores are
each contender against the baseline, for people to read; the choices read only paired comparisons between
contenders (analysis.choice): per point, and for the static K pooled over every measured point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from specmeter.analysis.choice import choose, contenders
from specmeter.analysis.headline import decision_confidence, headline_metric
from specmeter.analysis.headtohead import Arena, Side, decision_bounds, outcome_of
from specmeter.analysis.paired import fill_repeats, paired_bootstrap_ci
from specmeter.config.models import LoadPoint
from specmeter.metrics.goodput import meets as meets  # re-exported: goodput's test of a request
from specmeter.schemas.analysis import HeadToHead, Metric, PointChoice, Ratio
from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.recommend import SLO, Objective, Score
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

ALL_POINTS = "all points"


class Scorer:
    """Each contender's objective at a point, and the head-to-head choices over a family of them."""

    def __init__(self, summary: RunSummary, records: Sequence[RequestRecord], objective: Objective,
                 slo: SLO | None, base: PlannedConfig, min_gain: float, indifference: float | None) -> None:
        self.summary, self.records, self.objective, self.slo, self.base = summary, records, objective, slo, base
        self.min_gain, self.indifference = min_gain, indifference
        self._arenas: dict[str, Arena] = {}

    def metric(self, point: LoadPoint) -> Metric:
        if self.objective == "goodput":
            return "goodput"
        return headline_metric(point) if self.objective == "throughput" else "tpot"

    def arena(self, point: LoadPoint) -> Arena:
        if point.id not in self._arenas:
            good = None if self.slo is None else (lambda r, slo=self.slo: meets(r, slo))
            self._arenas[point.id] = Arena.of(
                self.summary.configs, self.records, point.id, self.metric(point), min_gain=self.min_gain,
                indifference=self.indifference, confidence=decision_confidence(self.summary, point.id), good=good)
        return self._arenas[point.id]

    def score(self, config: PlannedConfig, point: LoadPoint) -> Score | None:
        """Speedup over the baseline (throughput, tpot; the baseline scores 1), or goodput in requests/s."""
        arena = self.arena(point)
        if config.id not in arena.sides or self.base.id not in arena.sides:
            return None
        if self.objective == "goodput":
            return self._goodput(config, arena.sides[config.id], point)
        if config.id == self.base.id:
            return Score(config_id=config.id, k=0, value=1.0, low=1.0, high=1.0)
        ratio = arena.duel(config.id, self.base.id).ratio
        low, high = decision_bounds(ratio)
        return Score(config_id=config.id, k=config.k, value=ratio.value, low=low, high=high)

    def choose(self, family: Sequence[PlannedConfig], point: LoadPoint) -> tuple[PointChoice, list[Score]] | None:
        """The family's choice at the point against the baseline, and every contender's score."""
        base = self.score(self.base, point)
        scored = [(c, s) for c in family if (s := self.score(c, point)) is not None and s.value is not None]
        if base is None or base.value is None or not scored:
            return None
        walk = contenders(self.base.id, [(c, s.value) for c, s in scored], base.value)
        choice = choose(point.id, walk, self.arena(point).duel, min_gain=self.min_gain)
        return choice, [base, *(s for _, s in scored)]

    def static(self, family: Sequence[PlannedConfig], points: Sequence[LoadPoint]
               ) -> tuple[int, PlannedConfig | None, str, list[HeadToHead]]:
        """One K for every batch size: the same walk from the baseline, each duel pooled over the measured
        points (the geometric mean of the per-point ratios)."""
        def duel(challenger: str, incumbent: str) -> HeadToHead:
            per_point = [a.duel(challenger, incumbent) for p in points
                         if challenger in (a := self.arena(p)).sides and incumbent in a.sides]
            return pooled(per_point, challenger, incumbent, self.metric(points[0]), self.min_gain, self.indifference)

        choice = choose(ALL_POINTS, contenders(self.base.id, [(c, 1.0) for c in family]), duel,
                        min_gain=self.min_gain)
        if choice.best_config_id == self.base.id:
            return 0, None, f"no static K beats the baseline over the measured points: {choice.reason}", \
                choice.evidence
        best = next(c for c in family if c.id == choice.best_config_id)
        return best.k, best, choice.reason, choice.evidence

    def _goodput(self, config: PlannedConfig, side: Side, point: LoadPoint) -> Score | None:
        """Requests per second that met the SLO (failed requests never do), with a bootstrap interval over
        the requests and, with repeats, their spread (shown; the choice reads the paired goodput ratio)."""
        assert self.slo is not None
        wall = sum(w for _, w in side.totals.values())
        if not side.totals or wall <= 0:
            return None
        recs = [r for r in self.records if r.config_id == config.id and r.point_id == point.id and not r.warmup]
        good = np.array([1.0 if meets(r, self.slo) else 0.0 for r in recs])
        value = float(good.sum()) / wall
        ci = paired_bootstrap_ci(lambda idx: float(good[idx].sum()) / wall, len(good))
        per_repeat = [sum(1 for r in recs if r.repeat == rep and meets(r, self.slo)) / w if w > 0 else None
                      for rep, (_, w) in sorted(side.totals.items())]
        ratio = fill_repeats(Ratio(value=value, ci95_low=ci[0] if ci else None, ci95_high=ci[1] if ci else None),
                             per_repeat)
        low, high = decision_bounds(ratio)
        return Score(config_id=config.id, k=config.k, value=value, low=low, high=high)


def pooled(duels: Sequence[HeadToHead], challenger: str, incumbent: str, metric: Metric,
           min_gain: float, indifference: float | None = None) -> HeadToHead:
    """Per-point duels as one: the geometric mean of their ratios, its interval from theirs in log space
    (points are independent samples; each point's bounds already hold its repeats' spread)."""
    logs, variances, n = [], [], 0
    for d in duels:
        if d.ratio.value is None or d.ratio.value <= 0:
            continue
        logs.append(math.log(d.ratio.value))
        n += d.paired_requests
        if d.low is not None and d.high is not None and d.low > 0:
            z = NormalDist().inv_cdf(0.5 + d.ratio.confidence / 2)
            variances.append(((math.log(d.high) - math.log(d.low)) / (2 * z)) ** 2)
    threshold = 1.0 + min_gain
    value = low = high = None
    if logs:
        mean = sum(logs) / len(logs)
        value = math.exp(mean)
        if len(variances) == len(logs):
            half = NormalDist().inv_cdf(0.975) * math.sqrt(sum(variances)) / len(logs)
            low, high = math.exp(mean - half), math.exp(mean + half)
    return HeadToHead(point_id=ALL_POINTS, config_id=challenger, against=incumbent, metric=metric,
                      ratio=Ratio(value=value, ci95_low=low, ci95_high=high), low=low, high=high,
                      threshold=threshold, indifference=indifference,
                      outcome=outcome_of(low, high, threshold, indifference), paired_requests=n)
