"""Did acceptance or speedup drop from a reference run to this one? (`specmeter check RUN --against REF_RUN`)

Two runs of the same workload (another engine version, drafter checkpoint or machine) sent the same requests, so
every change is paired by request across the runs, as `compare` pairs them: the same conversation, turn and repeat.

- AL: this run's over the reference's, on the requests both completed, from the per-request steps and accepted
  tokens (a paired bootstrap over those requests). Where an engine keeps no per-request step count (llama.cpp,
  TensorRT-LLM), from each run's counters: the steps taken as independent draws of the accepted count (its spread
  from the acceptance histogram or the per-position counts, else binomial over the drafted tokens). Steps of one
  request move together, so that interval is narrower than the truth; the basis says which was used.
- Speedup: the ratio of the two runs' speedups, each over its own baseline, on the ratio each run's verdict reads
  (throughput under concurrency, TPOT at a request rate); all four sides are resampled together by request, and
  the spread of each run's speedup across its repeats widens the interval as it widens each speedup's.

A metric regressed when the whole interval lies below 1 - its bound; it held when the whole interval lies at or
above; otherwise it is unsettled (more requests or rounds would tell). Runs whose workloads differ are refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from specmeter.analysis.compare import line_up, match_points, run_names, workload_differences
from specmeter.analysis.headline import headline
from specmeter.analysis.headtohead import MAD_TO_SIGMA, Side
from specmeter.analysis.paired import expanded, index_matrix, paired_ratio_of_sums, percentile_interval, resamples_for
from specmeter.common.errors import InputError
from specmeter.metrics.sd import sum_counts
from specmeter.rundir.run_data import RunData
from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.check import CheckedMetric, CheckOutcome, RegressionCheck
from specmeter.schemas.compare import ComparedPoint, ComparedRun, WorkloadDifference
from specmeter.schemas.plan import Plan, Role
from specmeter.schemas.results import ConfigResult
from specmeter.schemas.sd import SDCounts

HOW = ("every change is this run over the reference, paired by request across the runs (the same conversation, "
       "turn and repeat, served by different servers); a metric regressed where the whole interval lies below 1 - "
       "its bound, held where it lies at or above, and is unsettled where it straddles it")


def check_runs(run: RunData, reference: RunData, *, max_al_drop: float, max_speedup_drop: float,
               confidence: float = 0.95) -> RegressionCheck:
    """Every configuration with speculation at every load point both runs measured, AL and speedup."""
    runs = [reference, run]
    names = run_names(runs)
    diffs = workload_differences(runs, names) + point_differences(reference.summary.plan, run.summary.plan, names[1])
    if diffs:
        raise InputError(refusal(names[1], names[0], diffs))
    points, unmatched, arrivals = match_points(runs, names)
    checks: list[CheckedMetric] = []
    for cp in points:
        for ref_c, run_c in line_up(runs, cp):  # one slot per configuration, lined up across the two runs
            if ref_c is None or run_c is None:
                only = ref_c or run_c
                assert only is not None
                if only.role is not Role.baseline:
                    unmatched.append(f"{cp.label}: {only.config_id} only in {names[0] if run_c is None else names[1]}"
                                     ", so not checked")
                continue
            if ref_c.role is Role.baseline:
                continue
            at = Where(cp, ref_c, run_c)
            checks += [c for c in (al_change(reference, run, at, max_al_drop, confidence),
                                   speedup_change(reference, run, at, max_speedup_drop, confidence)) if c is not None]
    if not checks:
        raise InputError(f"check: {names[1]} and {names[0]} share no load point where both measured a configuration "
                         "with speculation, so there is nothing to check; run both with the same load points and "
                         "speculative configurations")
    return RegressionCheck(
        run=_run(run, names[1]), reference=_run(reference, names[0]), max_al_drop=max_al_drop,
        max_speedup_drop=max_speedup_drop, confidence=confidence, checks=checks,
        regressions=[c.line() for c in checks if c.outcome == "regressed"], unmatched=unmatched,
        warnings=arrivals + _warnings(reference, run, names), notes=[HOW])


# ---- same workload? -------------------------------------------------------------------------------------------
def point_differences(ref: Plan, plan: Plan, name: str) -> list[WorkloadDifference]:
    """The load points asked for: listed points must be the same; a searched axis must search alike (the points a
    search chose from what it measured may differ, and only the points both measured are checked)."""
    searched = {s.axis for s in (*ref.load.search, *plan.load.search)}
    out: list[WorkloadDifference] = []

    def listed(p: Plan) -> list[str]:
        return [pt.id for pt in p.points if pt.axis not in searched]

    if listed(ref) != listed(plan):
        out.append(WorkloadDifference(run=name, field="load.points", reference=", ".join(listed(ref)) or "-",
                                      value=", ".join(listed(plan)) or "-"))
    for axis in sorted(searched):
        a, b = ref.load.search, plan.load.search
        sa, sb = (next((s.model_dump() for s in x if s.axis == axis), None) for x in (a, b))
        if sa != sb:
            out.append(WorkloadDifference(run=name, field=f"load.search.{axis}", reference=str(sa), value=str(sb)))
    return out


def refusal(name: str, ref: str, diffs: Sequence[WorkloadDifference]) -> str:
    """One line: what differs, and the fix."""
    what = "; ".join(f"{d.field} {d.value} vs {d.reference}" for d in diffs)
    return (f"check: {name} and {ref} did not run the same workload ({what}; this run's value first), so a change "
            "in acceptance or speedup would mix what changed with the workload; run both on the same dataset, "
            "conversations, sampling settings, max_tokens and load points")


# ---- one configuration at one point ---------------------------------------------------------------------------
class Where:
    """A configuration lined up across the two runs at a shared point."""

    def __init__(self, cp: ComparedPoint, ref: ConfigResult, run: ConfigResult) -> None:
        self.cp, self.ref, self.run = cp, ref, run
        self.ref_point, self.point_id = cp.point_ids[0], cp.point_ids[1]

    def metric(self, **kw: Any) -> CheckedMetric:
        return CheckedMetric(point=self.cp.label, point_id=self.point_id, reference_point_id=self.ref_point,
                             config_id=self.run.config_id, reference_config_id=self.ref.config_id, **kw)


def al_change(reference: RunData, run: RunData, at: Where, max_drop: float, confidence: float) -> CheckedMetric | None:
    """AL of this run over the reference's: per request where both runs counted each request's steps."""
    mine, theirs = Side.of(at.run, run.records, at.point_id), Side.of(at.ref, reference.records, at.ref_point)
    both = [(a, b) for k in sorted(mine.requests.keys() & theirs.requests.keys())
            if (a := mine.requests[k].sd) is not None and a.num_steps is not None
            and (b := theirs.requests[k].sd) is not None and b.num_steps is not None]
    bound = 1.0 - max_drop
    steps_a, steps_b = [float(a.num_steps or 0) for a, _ in both], [float(b.num_steps or 0) for _, b in both]
    if len(both) >= 2 and sum(steps_a) > 0 and sum(steps_b) > 0:
        emitted_a = [s + a.num_accepted_tokens for s, (a, _) in zip(steps_a, both)]
        emitted_b = [s + b.num_accepted_tokens for s, (_, b) in zip(steps_b, both)]
        value, ci = paired_ratio_of_sums(emitted_a, steps_a, emitted_b, steps_b, confidence=confidence)
        change = Ratio(value=value, ci95_low=ci[0] if ci else None, ci95_high=ci[1] if ci else None,
                       confidence=confidence)
        return at.metric(metric="acceptance_length", reference=sum(emitted_b) / sum(steps_b),
                         value=sum(emitted_a) / sum(steps_a), change=change, low=change.ci95_low,
                         high=change.ci95_high, bound=bound, paired_requests=len(both),
                         basis="per-request steps, a paired bootstrap over the requests both runs completed",
                         outcome=outcome(change.ci95_low, change.ci95_high, bound))
    ref_counts, run_counts = _pooled(at.ref, at.ref_point), _pooled(at.run, at.point_id)
    if ref_counts is None or run_counts is None:
        return None
    ref_al, run_al = ref_counts.acceptance_length, run_counts.acceptance_length
    se_ref, how_ref = _al_se(ref_counts)
    se_run, how_run = _al_se(run_counts)
    if ref_al is None or run_al is None:
        return None
    change = Ratio(value=run_al / ref_al, confidence=confidence)
    if se_ref is not None and se_run is not None:
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        spread = z * math.sqrt((se_ref / ref_al) ** 2 + (se_run / run_al) ** 2)
        change.ci95_low, change.ci95_high = run_al / ref_al * math.exp(-spread), run_al / ref_al * math.exp(spread)
    how = how_run if how_run == how_ref else f"{how_run} (this run), {how_ref} (the reference)"
    return at.metric(metric="acceptance_length", reference=ref_al, value=run_al, change=change,
                     low=change.ci95_low, high=change.ci95_high, bound=bound,
                     basis=f"counters: steps as independent draws, {how} (no per-request step count; a request's "
                     "steps move together, so this interval is narrower than the truth)",
                     outcome=outcome(change.ci95_low, change.ci95_high, bound))


def speedup_change(reference: RunData, run: RunData, at: Where, max_drop: float,
                   confidence: float) -> CheckedMetric | None:
    """This run's speedup over the reference's, both sides of both runs paired by request."""
    s_run, s_ref = _speedup(run, at.run, at.point_id), _speedup(reference, at.ref, at.ref_point)
    if s_run is None or s_ref is None:
        return None
    point = run.summary.plan.point(at.point_id)
    r_run, r_ref = headline(s_run, point), headline(s_ref, reference.summary.plan.point(at.ref_point))
    bound = 1.0 - max_drop
    if r_run.value is None or r_ref.value is None or r_ref.value <= 0:
        return None
    value = r_run.value / r_ref.value
    sides = [Side.of(at.run, run.records, at.point_id), _side(run, s_run.baseline_id, at.point_id),
             Side.of(at.ref, reference.records, at.ref_point), _side(reference, s_ref.baseline_id, at.ref_point)]
    keys = sorted(set.intersection(*(set(s.requests) for s in sides)))
    change = Ratio(value=value, confidence=confidence)
    low, high = _paired_interval(sides, keys, s_run.decided_on, confidence)
    if low is not None and high is not None:
        change.ci95_low, change.ci95_high = value * low, value * high
    w_low, w_high = _with_repeats(change, r_run, r_ref, confidence)
    return at.metric(metric="speedup", decided_on=s_run.decided_on, reference=r_ref.value, value=r_run.value,
                     change=change, low=w_low, high=w_high, bound=bound, paired_requests=len(keys),
                     basis=f"each run's speedup over its own baseline ({_METRIC[s_run.decided_on]}), a bootstrap "
                     "over the requests all four sides completed"
                     + (", widened by the spread across repeats" if (w_low, w_high) != (change.ci95_low,
                                                                                         change.ci95_high) else ""),
                     outcome=outcome(w_low, w_high, bound),
                     note=_speedup_note(len(keys), s_run, s_ref))


def _speedup_note(paired: int, s_run: Speedup, s_ref: Speedup) -> str | None:
    notes = []
    if paired < 2:
        notes.append(f"{paired} request(s) completed by both configurations of both runs: no interval")
    if s_run.decided_on != s_ref.decided_on:
        notes.append("the two runs' verdicts read different ratios")
    return "; ".join(notes) or None


def outcome(low: float | None, high: float | None, bound: float) -> CheckOutcome:
    if high is not None and high < bound:
        return "regressed"
    if low is not None and low >= bound:
        return "held"
    return "unsettled"


# ---- inside ---------------------------------------------------------------------------------------------------
_METRIC = {"output_throughput": "output tok/s", "tpot": "TPOT"}


def _pooled(c: ConfigResult, point_id: str) -> SDCounts | None:
    heads = [h for p in c.repeats(point_id) if (h := p.sd.headline) is not None]
    if not heads:
        return None
    return heads[0] if len(heads) == 1 else sum_counts(heads, source=heads[0].source)


def _al_se(c: SDCounts) -> tuple[float | None, str]:
    """The standard error of AL over the steps counted, and what it came from."""
    steps = c.num_steps
    if not steps:
        return None, "no steps counted"
    if c.histogram and sum(c.histogram) == steps:
        mean = sum(j * h for j, h in enumerate(c.histogram)) / steps
        var = sum(j * j * h for j, h in enumerate(c.histogram)) / steps - mean * mean
        return math.sqrt(max(var, 0.0) / steps), "accepted-count spread from the acceptance histogram"
    if c.accepted_per_pos:
        # Accepting position j implies accepting every position before it, so E[I_i I_j] = a_j for i < j.
        a = [x / steps for x in c.accepted_per_pos]
        var = sum(x * (1 - x) for x in a) + 2 * sum(a[j] - a[i] * a[j] for i in range(len(a))
                                                      for j in range(i + 1, len(a)))
        return math.sqrt(max(var, 0.0) / steps), "accepted-count spread from the per-position counts"
    if c.tree:
        return None, "tree drafts without a histogram or per-depth counts (its nodes are no independent draws)"
    if c.num_draft_tokens:
        ar = c.num_accepted_tokens / c.num_draft_tokens
        return math.sqrt(c.num_draft_tokens * ar * (1 - ar)) / steps, "binomial over the drafted tokens"
    return None, "nothing drafted"


def _speedup(run: RunData, c: ConfigResult, point_id: str) -> Speedup | None:
    return next((s for s in run.summary.analysis.speedups if s.config_id == c.config_id and s.point_id == point_id),
                None)


def _side(run: RunData, config_id: str, point_id: str) -> Side:
    found = run.summary.config(config_id)
    assert found is not None  # a stored speedup names a configuration of its run
    return Side.of(found, run.records, point_id)


def _paired_interval(sides: Sequence[Side], keys: Sequence[tuple[int, str, int]], metric: str,
                     confidence: float) -> tuple[float | None, float | None]:
    """The bootstrap interval of (candidate / baseline in this run) / (the same in the reference), relative to its
    estimate on the requests all four sides completed (the value itself comes from the stored speedups)."""
    n = len(keys)
    if n < 2:
        return None, None
    if metric == "output_throughput":  # per-request stream rates track a closed loop's throughput
        tokens = [np.array([float(s.requests[k].output_tokens or 0) for k in keys]) for s in sides]
        e2e = [np.array([s.requests[k].e2e_s or math.nan for k in keys]) for s in sides]

        def side_over_side(num: int, den: int, idx: np.ndarray) -> np.ndarray:
            """Side `num`'s stream rate over side `den`'s: a candidate over its baseline."""
            result: np.ndarray = (tokens[num][idx].sum(-1) / e2e[num][idx].sum(-1)) / (
                tokens[den][idx].sum(-1) / e2e[den][idx].sum(-1))
            return result
    else:  # TPOT: the baseline's mean over the candidate's, in each run
        tpot = [np.array([s.requests[k].tpot_s or math.nan for k in keys]) for s in sides]

        def side_over_side(num: int, den: int, idx: np.ndarray) -> np.ndarray:
            result: np.ndarray = tpot[den][idx].sum(-1) / tpot[num][idx].sum(-1)
            return result

    def stat(idx: np.ndarray) -> np.ndarray:
        result: np.ndarray = side_over_side(0, 1, idx) / side_over_side(2, 3, idx)
        return result

    level = expanded(confidence, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = float(stat(np.arange(n)))
        ci = percentile_interval(stat(index_matrix(n, resamples_for(level), 0)), level)
    if ci is None or not np.isfinite(est) or est <= 0:
        return None, None
    return ci[0] / est, ci[1] / est


def _with_repeats(change: Ratio, a: Ratio, b: Ratio, confidence: float) -> tuple[float | None, float | None]:
    """The interval widened to where the two runs' repeat centres could put the ratio: each run's speedup varies
    across its rounds and server instances (drift, restarts), which one bootstrap over requests does not see. Each
    run's error is what its own decisions read (analysis.noise: its rounds' interval), so two runs of identical
    servers differ by what the runs say they may; a run analysed before that has its rounds' MAD."""
    low, high = change.ci95_low, change.ci95_high
    terms = [se**2 for r in (a, b) if (se := _log_se(r)) is not None]
    if not terms or change.value is None:
        return low, high
    spread = NormalDist().inv_cdf(0.5 + confidence / 2) * math.sqrt(sum(terms))
    r_low, r_high = change.value * math.exp(-spread), change.value * math.exp(spread)
    return (r_low if low is None else min(low, r_low)), (r_high if high is None else max(high, r_high))


def _log_se(r: Ratio) -> float | None:
    """The standard error of log(r) over its rounds: from its rounds' interval, else its rounds' MAD."""
    if r.rounds_low and r.rounds_high:
        return math.log(r.rounds_high / r.rounds_low) / (2 * NormalDist().inv_cdf(0.5 + r.confidence / 2))
    if r.median and r.mad is not None and len(r.repeat_values) >= 2:
        return r.mad * MAD_TO_SIGMA / math.sqrt(len(r.repeat_values)) / r.median
    return None


def _run(run: RunData, name: str) -> ComparedRun:
    s = run.summary
    return ComparedRun(name=name, run_dir=str(run.run_dir), engine_version=run.engine_version,
                       label=f"{name} ({run.engine_version or 'engine ?'})", plan_kind=s.plan.kind, status=s.status,
                       created_utc=s.created_utc, target=run.target_hash)


def _warnings(reference: RunData, run: RunData, names: Sequence[str]) -> list[str]:
    out = []
    if run.target_hash and reference.target_hash and run.target_hash != reference.target_hash:
        out.append(f"the target weights differ ({run.target_hash[:10]} vs {reference.target_hash[:10]}): outputs, and "
                   "so acceptance, change with them")
    for r, name in ((reference, names[0]), (run, names[1])):
        if r.summary.status != "complete":
            out.append(f"{name}: run {r.summary.status}: what it did not measure is not checked")
    return out
