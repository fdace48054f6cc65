"""Several runs of one plan (another day, another box, another server start) pooled into one verdict per cell and
one answer.

One run's interval covers what its requests and rounds vary by; a rerun also restarts every server and lands on
another machine state, and the runs here have disagreed beyond their own intervals (on the CPU and on the GPU). So
each run is one observation of the deployment: per cell, the runs' estimates are pooled in log space by a
random-effects model (DerSimonian-Laird between-run variance, then the modified Hartung-Knapp interval with n - 1
degrees of freedom, which holds its level with few runs), and the interval is never narrower than the runs' own
spread: a verdict about the deployment does not exclude what a run of it measured. Head to head between two
configurations, a run's estimate is the ratio of their speedups over the run's own baseline (the same requests),
its error both speedups' (their shared baseline left in: the conservative side).

Only summaries are read (a run's analysis.speedups), so runs whose requests were not kept (the GPU check's) pool
as well. A cell a run measured while other work disturbed it is left out where other runs measured it clean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from statistics import NormalDist

from specmeter.analysis.decide import verdict
from specmeter.analysis.headtohead import Arena, Side, decision_bounds, outcome_of
from specmeter.analysis.objective import Scorer
from specmeter.analysis.recommend import recommend
from specmeter.analysis.student import t_quantile
from specmeter.common.errors import InputError
from specmeter.config.models import LoadPoint
from specmeter.schemas.analysis import HeadToHead, Metric, Ratio, Speedup
from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.pool import Pooled, PooledCell, RangeHeld, RunCell
from specmeter.schemas.recommend import Objective, Recommendation, Segment
from specmeter.schemas.results import RunSummary

Z95 = NormalDist().inv_cdf(0.975)


@dataclass(frozen=True)
class Estimate:
    """One run's estimate of a ratio: the value and the standard error of its log (None: unknown)."""

    value: float
    log_se: float | None


def log_se(ratio: Ratio) -> float | None:
    """The standard error of log(ratio) its decision bounds imply (the requests' interval, or the rounds' and
    instances' where wider: headtohead.decision_bounds)."""
    low, high = decision_bounds(ratio)
    if low is None or high is None or low <= 0 or high <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + ratio.confidence / 2)
    return (math.log(high) - math.log(low)) / (2 * z)


def random_effects(estimates: Sequence[Estimate], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """The pooled ratio and its interval over the runs (no interval from one run alone: it is that run's).

    Known errors: DerSimonian-Laird's between-run variance, weights 1 / (se^2 + tau^2), and the modified
    Hartung-Knapp variance max(1, q) / sum(w) with Student's t at n - 1 degrees of freedom. Unknown errors: equal
    weights, the runs' own scatter (a t interval). Either way widened to hold every run's estimate."""
    logs = [math.log(e.value) for e in estimates if e.value > 0]
    if not logs:
        raise ValueError("no positive estimate to pool")
    n = len(logs)
    if n == 1:
        return estimates[0].value, None, None
    ses = [e.log_se for e in estimates if e.value > 0]
    if all(s is not None and s > 0 for s in ses):
        var = [float(s) ** 2 for s in ses if s is not None]
        w = [1 / v for v in var]
        fixed = sum(wi * y for wi, y in zip(w, logs)) / sum(w)
        q = sum(wi * (y - fixed) ** 2 for wi, y in zip(w, logs))
        tau2 = max(0.0, (q - (n - 1)) / (sum(w) - sum(wi * wi for wi in w) / sum(w)))
        w = [1 / (v + tau2) for v in var]
        mean = sum(wi * y for wi, y in zip(w, logs)) / sum(w)
        hk = sum(wi * (y - mean) ** 2 for wi, y in zip(w, logs)) / (n - 1)
        se = math.sqrt(max(1.0, hk) / sum(w))
    else:
        mean = statistics.fmean(logs)
        se = statistics.stdev(logs) / math.sqrt(n)
    half = t_quantile(confidence, n - 1) * se
    low, high = min(mean - half, min(logs)), max(mean + half, max(logs))
    return math.exp(mean), math.exp(low), math.exp(high)


def check_same_plan(runs: Sequence[tuple[str, RunSummary]]) -> None:
    """Runs pool only as runs of one plan: the same configurations (ids and drafters) and the same points."""
    if len(runs) < 2:
        raise InputError("pool: give two runs of the same plan or more, e.g. `specmeter compare runs/a runs/b "
                         "runs/c --pool`")
    name0, first = runs[0]

    def shape(summary: RunSummary) -> tuple[dict[str, str], list[str]]:
        # A draft model is named by its folder: another box keeps the same model at another path.
        specs = {c.id: c.spec.model_copy(update={"draft_model": PurePath(c.spec.draft_model).name
                                                 if c.spec.draft_model else None}).model_dump_json()
                 for c in summary.plan.configs}
        return specs, [p.id for p in summary.plan.points]
    configs0, points0 = shape(first)
    for name, summary in runs[1:]:
        configs, points = shape(summary)
        if configs.keys() != configs0.keys():
            extra = sorted(configs.keys() ^ configs0.keys())
            raise InputError(f"pool: {name} and {name0} ran different configurations ({', '.join(extra)} in one "
                             "only); pool runs of one plan (the same sweep file or demo)")
        if (cid := next((c for c in configs if configs[c] != configs0[c]), None)) is not None:
            raise InputError(f"pool: {cid} is another drafter in {name} than in {name0}; pool runs of one plan")
        if set(points) != set(points0):
            only = ", ".join(sorted(set(points) ^ set(points0)))
            raise InputError(f"pool: {name} and {name0} measured different points ({only} in one only); pool runs "
                             "of one plan")


def _ratio(s: Speedup, metric: Metric) -> Ratio:
    return s.tpot if metric == "tpot" else s.output_throughput


def _speedups(summary: RunSummary, point_id: str) -> dict[str, Speedup]:
    return {s.config_id: s for s in summary.analysis.speedups if s.point_id == point_id}


def _metric(summary: RunSummary, point_id: str) -> Metric:
    found = next((s for s in summary.analysis.speedups if s.point_id == point_id), None)
    return found.decided_on if found is not None else "output_throughput"


def pooled_cells(runs: Sequence[tuple[str, RunSummary]]) -> list[PooledCell]:
    """Every (configuration, point) with a speedup in some run, pooled over the runs that measured it."""
    first = runs[0][1]
    out = []
    for point in first.plan.points:
        metric = _metric(first, point.id)
        for config in first.plan.configs:
            per_run = [(name, found) for name, summary in runs
                       if (found := _speedups(summary, point.id).get(config.id)) is not None]
            measured = [(name, s) for name, s in per_run if _ratio(s, metric).value is not None]
            if not measured:
                continue
            clean = [(name, s) for name, s in measured if not _ratio(s, metric).disturbed]
            used = clean or measured
            value, low, high = random_effects([Estimate(_ratio(s, metric).value or 0.0, log_se(_ratio(s, metric)))
                                               for _, s in used])
            ratio = Ratio(value=value, ci95_low=low, ci95_high=high,
                          repeat_values=[_ratio(s, metric).value or 0.0 for _, s in used],
                          disturbed=not clean)
            cells = [RunCell(run=name, value=_ratio(s, metric).value, low=_ratio(s, metric).ci95_low,
                             high=_ratio(s, metric).ci95_high, verdict=s.verdict) for name, s in measured]
            bounds = [(c.low, c.high) for c in cells if c.low is not None and c.high is not None]
            overlap = None if len(bounds) < 2 else max(lo for lo, _ in bounds) <= min(hi for _, hi in bounds)
            out.append(PooledCell(config_id=config.id, point_id=point.id, metric=metric, runs=cells, pooled=ratio,
                                  verdict=verdict(ratio) if len(used) > 1 else used[0][1].verdict,
                                  verdicts_agree=len({c.verdict for c in cells}) == 1, intervals_overlap=overlap,
                                  left_out=[name for name, _ in measured if name not in dict(used)]))
    return out


class PooledArena(Arena):
    """An Arena over several runs' stored speedups at one point: the duels analysis.choice walks, each pooled over
    the runs (no requests: its sides only say who was measured there in every run)."""

    def __init__(self, runs: Sequence[tuple[str, RunSummary]], point_id: str, metric: Metric, baseline: str, *,
                 min_gain: float, indifference: float | None) -> None:
        per_run = [_speedups(summary, point_id) for _, summary in runs]
        ids = set.intersection(*(set(found) for found in per_run)) if per_run else set()
        super().__init__({cid: Side(cid, {}, {}) for cid in [baseline, *sorted(ids)]}, point_id, metric,
                         min_gain=min_gain, indifference=indifference)
        self.baseline = baseline
        self.per_run = [{cid: _ratio(found[cid], metric) for cid in ids} for found in per_run]
        self.paired = [{cid: found[cid].paired_requests for cid in ids} for found in per_run]

    def _estimate(self, run: dict[str, Ratio], challenger: str, incumbent: str) -> Estimate | None:
        one = Ratio(value=1.0, ci95_low=1.0, ci95_high=1.0)  # the baseline against itself, exactly
        a, b = run.get(challenger, one if challenger == self.baseline else None), \
            run.get(incumbent, one if incumbent == self.baseline else None)
        if a is None or b is None or not a.value or not b.value:
            return None
        ses = [log_se(r) for r in (a, b)]
        se = math.sqrt(sum(s * s for s in ses if s is not None)) if all(s is not None for s in ses) else None
        return Estimate(a.value / b.value, se)

    def duel(self, challenger: str, incumbent: str) -> HeadToHead:
        clean = [run for run in self.per_run if not any(r.disturbed for r in run.values())] or self.per_run
        found = [e for run in clean if (e := self._estimate(run, challenger, incumbent)) is not None]
        value = low = high = None
        if found:
            value, low, high = random_effects(found)
        threshold = 1.0 + self.min_gain
        ratio = Ratio(value=value, ci95_low=low, ci95_high=high, repeat_values=[e.value for e in found])
        paired = sum(min(counts.get(c, 0) for c in (challenger, incumbent) if c != self.baseline) if
                     {challenger, incumbent} - {self.baseline} else 0 for counts in self.paired)
        return HeadToHead(point_id=self.point_id, config_id=challenger, against=incumbent, metric=self.metric,
                          ratio=ratio, low=low, high=high, threshold=threshold, indifference=self.indifference,
                          outcome=outcome_of(low, high, threshold, self.indifference), paired_requests=paired)


class PooledScorer(Scorer):
    """The recommendation's scorer on several runs: every comparison a PooledArena's."""

    def __init__(self, runs: Sequence[tuple[str, RunSummary]], objective: Objective, base: PlannedConfig,
                 min_gain: float, indifference: float | None) -> None:
        if objective == "goodput":
            raise InputError("pool: --objective goodput counts each run's requests, which pooled speedups do not "
                             "carry; pool on throughput or tpot")
        super().__init__(runs[0][1], [], objective, None, base, min_gain, indifference)
        self.runs = runs

    def arena(self, point: LoadPoint) -> Arena:
        if point.id not in self._arenas:
            self._arenas[point.id] = PooledArena(self.runs, point.id, self.metric(point), self.base.id,
                                                 min_gain=self.min_gain, indifference=self.indifference)
        return self._arenas[point.id]


def pool(runs: Sequence[tuple[str, RunSummary]], *, objective: Objective = "throughput",
         max_num_seqs: int | None = None, min_gain: float | None = None,
         indifference: float | None = None) -> Pooled:
    """Several runs of one plan as one verdict per cell and one answer, each measured range of it set against
    the K every run chose there. The table's batch axis is the first run's (its engine batches)."""
    check_same_plan(runs)
    cells = pooled_cells(runs)
    names = [name for name, _ in runs]
    first = runs[0][1]
    try:
        rec = recommend(first, [], objective=objective, max_num_seqs=max_num_seqs, source_run=" + ".join(names),
                        min_gain=min_gain, indifference=indifference,
                        scorer=lambda base, gain, zone: PooledScorer(runs, objective, base, gain, zone))
    except InputError as exc:
        return Pooled(runs=names, cells=cells, no_answer=str(exc))
    rec.runs = len(runs)
    return Pooled(runs=names, cells=cells, recommendation=rec, held=held_ranges(rec, runs))


def held_ranges(rec: Recommendation, runs: Sequence[tuple[str, RunSummary]]) -> list[RangeHeld]:
    """Each measured stretch of the best drafter's pooled table against the K each run chose at its point; where
    they differ, whether the pooled evidence calls the two Ks a tie (then either is right)."""
    best = rec.best
    if best is None:
        return []
    out = []
    for g in (g for g in best.segments if g.basis == "measured"):
        chosen = [next((c.best_k for c in summary.analysis.choices if c.point_id in g.point_ids), None)
                  for _, summary in runs]
        others = sorted({k for k in chosen if k is not None and k != g.k})
        agree = sum(k == g.k for k in chosen)
        if not others:
            held = f"held in every run ({agree} of {len(runs)})"
        else:
            named = ", ".join(f"{name} K={k}" for (name, _), k in zip(runs, chosen) if k is not None and k != g.k)
            outcomes = {_pooled_outcome([g], g.k, k) for k in others}
            verdict_ = ("either K is right: the pooled evidence ties them" if outcomes == {"tie"} else
                        "the pooled evidence cannot tell them apart yet; more runs settle it" if "unsettled" in
                        outcomes else "the pooled evidence decides it")
            held = f"held in {agree} of {len(runs)} runs ({named}): {verdict_}"
        out.append(RangeHeld(start=g.start, end=g.end, k=g.k, point_ids=g.point_ids, chosen_by=chosen, held=held))
    return out


def _pooled_outcome(segments: Sequence[Segment], k: int, other: int) -> str | None:
    """How the pooled evidence at the segments decided between K and `other` (None: it did not compare them)."""
    for g in segments:
        ks = {s.config_id: s.k for s in g.scores}
        for h in g.evidence:
            if {ks.get(h.config_id), ks.get(h.against)} == {k, other}:
                return h.outcome
    return None
