"""The deploy answer from a sweep, engine-neutral: a K per engine batch size (for vLLM's dynamic speculative
decoding) and one static K per drafter; `engines.deploy` renders them as the flags of the engine the sweep ran.

vLLM picks K each step from `num_speculative_tokens_per_batch_size` by the number of requests it schedules,
so the table is keyed on the batch the engine actually ran at each point (its running-requests gauge), not
on the client's concurrency. Per drafter and point, the choice is the one `analysis.choice` makes, head to
head from the baseline (K = 0) up: a larger K replaces a smaller one only when it beats it on the same
requests by more than the minimum gain, so a point where no K clearly beats the baseline turns drafting
off. Between measured batch sizes a batch takes the K of the nearer point (in log scale, as loads are
geometric) and is marked interpolated; below the smallest measured batch the smallest point's K holds
(speculation pays at least as much on smaller batches); the largest point's K holds up to the largest batch
the engine ran under it (its running batch swings around the mean); beyond that nothing was measured, so
nothing is claimed and drafting is off there (what the engine does without speculation) until a sweep
measures it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from specmeter.analysis import identity
from specmeter.analysis.drafter_choice import choose_drafter
from specmeter.analysis.families import deploy_specs, drafter_label, families
from specmeter.analysis.objective import Scorer
from specmeter.analysis.trace_answer import trace_gains
from specmeter.common.errors import InputError
from specmeter.config.models import LoadPoint
from specmeter.load.kinds import kind_of
from specmeter.schemas.analysis import PointChoice
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.recommend import (
    SLO,
    DrafterRecommendation,
    KRange,
    Objective,
    Recommendation,
    Score,
    Segment,
)
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

# vLLM's largest default max_num_seqs: a table written to it covers any engine (vLLM clips the table
# to its own max_num_seqs) when the run does not say what the engine used.
FALLBACK_MAX_NUM_SEQS = 1024
DEAD_FLAGS = ("disable_by_batch_size", "speculative_disable_by_batch_size")
DEAD_FLAG_NOTE = (
    "vLLM no longer has speculative_disable_by_batch_size (it did nothing since 0.10 and was removed); the "
    "K = 0 range of the table replaces it, so no such flag is emitted"
)
# vLLM's drafter (llm_base_proposer) still runs its forward pass on a K = 0 step, to keep its KV cache in
# sync: a K = 0 range saves the draft tokens' verification, not the drafter.
K0_COST_NOTE = (
    "K = 0 is not speculation off: on those steps vLLM still runs the drafter's forward pass to keep its KV "
    "cache in sync, so a server with this table is slower there than one without speculation; `specmeter "
    "verify` measures by how much. If most traffic runs at K = 0 batch sizes, serving without speculation "
    "may be the better deploy"
)
STATIC_NOTE = (
    "static K: for engines without dynamic SD. With data parallel > 1 vLLM drops the table and runs the "
    "table's largest K at every batch size, so launch those with the static config instead"
)


@dataclass(frozen=True)
class _Measured:
    """One measured point (or several that ran at the same integer batch size) on the batch axis."""

    batch: int
    batch_mean: float
    top: int  # the largest batch the engine ran at these points: the last point's measurement reaches it
    point_ids: list[str]
    k: int
    choice: PointChoice
    scores: list[Score]


MakeScorer = Callable[[PlannedConfig, float, float | None], Scorer]


def recommend(summary: RunSummary, records: Sequence[RequestRecord], *, objective: Objective = "throughput",
              slo: SLO | None = None, max_num_seqs: int | None = None, source_run: str = "",
              min_gain: float | None = None, indifference: float | None = None,
              scorer: MakeScorer | None = None) -> Recommendation:
    """The K-per-batch table of every drafter the sweep measured, the best drafter first. `min_gain`: what a
    costlier configuration must win by head to head; `indifference`: within how much two configurations are a
    tie (defaults: the run's plan, the zone widened to `min_gain` where that is larger). The zone only names
    ties (the cheaper is kept either way), so it changes the evidence, never the table. `scorer`: where the
    comparisons come from, given the baseline, the minimum gain and the zone (default: this run's requests;
    analysis.pool: several runs' speedups)."""
    if objective == "goodput" and slo is None:
        slo = summary.plan.load.slo  # the SLO the sweep reported goodput against
    if objective == "goodput" and slo is None:
        raise InputError("--objective goodput counts requests that meet an SLO: give --slo, e.g. "
                         "--slo ttft_ms=500,tpot_ms=50 (or sweep with load.slo)")
    if objective != "goodput" and slo is not None:
        raise InputError(f"--slo applies to --objective goodput, not {objective}; add --objective goodput")
    plan = summary.plan
    base = plan.main_baseline
    if base is None or summary.config(base.id) is None:
        raise InputError(f"{source_run or 'this run'} has no speculation-off baseline: a recommendation compares "
                         "every K against it; run a sweep (it always includes the baseline)")
    check_known_specs(summary, source_run)
    notes: list[str] = [DEAD_FLAG_NOTE]
    limit, limit_source = _max_num_seqs(summary, base, max_num_seqs)
    if limit_source.startswith("unknown"):
        notes.append(f"max_num_seqs: {limit_source}")
    gain = plan.min_gain if min_gain is None else min_gain
    # Not given: the run's zone, widened to a larger minimum gain as the plan's default is.
    zone = max(plan.indifference, gain) if indifference is None else indifference
    make = scorer or (lambda own, gain_, zone_: Scorer(summary, records, objective, slo, own, gain_, zone_))
    chooser = make(base, gain, zone)
    batches = _engine_batches(summary, notes)
    drafters = []
    groups = {c.node_group for c in plan.configs}
    if len(groups) > 1:
        notes.append(f"the drafters ran on {len(groups)} nodes (Slurm job groups), each beside its own baseline: each "
                     "drafter's K are decided on its node, and drafters are ranked by their gain over their own "
                     "node's baseline, never head to head")
    for family in families(plan.configs, notes):
        own = plan.baseline_for(family[0]) or base  # a drafter's baseline on its own node
        rec = _drafter(family, chooser if own.id == base.id else make(own, chooser.min_gain, chooser.indifference),
                       batches, limit, notes)
        if rec is not None:
            drafters.append(rec)
    if not drafters:
        only_synthetic = " (synthetic acceptance is a measurement, never recommended)" if any(
            c.spec.synthetic for c in plan.configs) else ""
        raise InputError(f"{source_run or 'this run'}: no speculative configuration has a measured point against "
                         f"the baseline{only_synthetic}, so there is nothing to recommend; run a sweep first")
    drafters.sort(key=lambda d: -(d.score or 0.0))
    # Head to head only where every drafter ran beside the one baseline (one node); else ranked by score.
    choice = choose_drafter(drafters, plan.configs, chooser) if len(groups) == 1 else None
    if choice is not None:
        drafters.sort(key=lambda d: d.drafter != choice.chosen)  # stable: the others stay by score
    best = drafters[0]
    if best.spec is not None and any(r.k == 0 for r in best.ranges):
        notes.append(K0_COST_NOTE)
    notes.append(STATIC_NOTE)
    own = plan.baseline_for(next(c for c in plan.configs if c.id == best.candidates[0])) or base
    return Recommendation(source_run=source_run, objective=objective, slo=slo, min_gain=chooser.min_gain,
                          indifference=chooser.indifference, max_num_seqs=limit,
                          max_num_seqs_source=limit_source, drafters=drafters, drafter_choice=choice, notes=notes,
                          instances=instances_run(summary), on_trace=trace_gains(summary, best, own.id))


def instances_run(summary: RunSummary) -> int:
    """The fewest server instances any candidate's rounds ran on (1 where a server was attached, or one round)."""
    counts = [len({p.instance for p in c.points}) for c in summary.configs if c.role is Role.candidate and c.points]
    return min(counts, default=1)


def check_known_specs(summary: RunSummary, source_run: str) -> None:
    """Refuse a run whose candidate is an attached server it was not told the config of (`run --endpoint`
    without --spec): a table needs the drafter and its K, and the flags need the method. The refusal names
    what the server's counters say it drafted, so the --spec to give is one copy away."""
    for planned in summary.plan.configs:
        if planned.role is not Role.candidate:
            continue
        res = summary.config(planned.id)
        per_step = [pr.sd.headline.mean_draft_length for pr in (res.points if res else [])
                    if pr.sd.headline is not None and pr.sd.headline.mean_draft_length is not None]
        if planned.spec.enabled:
            _check_drafted_k(planned, per_step, source_run)
            continue
        drafted = (f"its counters show {float(np.median(per_step)):.2g} tokens drafted per step" if per_step
                   else "its counters show no drafting")
        k = max(1, round(float(np.median(per_step)))) if per_step else "K"
        raise InputError(
            f"{source_run or 'this run'}: {planned.id} is a server attached without --spec, so the run does not "
            f"know its drafter or K to put in a table ({drafted}); measure it again with `specmeter run --endpoint "
            f"URL --baseline-endpoint URL2 --spec '{{\"method\": \"...\", \"num_speculative_tokens\": {k}}}'` "
            "naming what the server runs (`specmeter report` shows what this run measured)")


def _check_drafted_k(planned: PlannedConfig, per_step: Sequence[float], source_run: str) -> None:
    """An attached server given with --spec drafts what the spec says, over the run (analysis.identity); a round
    that drafted otherwise while the run's others did not is marked at its point, whose verdict is withheld."""
    if not per_step or not identity.read(planned):
        return
    drafted = float(np.median(per_step))
    if (why := identity.mismatch(planned, drafted)) is not None:
        spec = planned.spec
        raise InputError(
            f"{source_run or 'this run'}: {planned.id} was given as {spec.method.value} K = {spec.k} (--spec), but "
            f"{why}: the table would name a K the server does not run; measure it again with --spec "
            f"'{{\"method\": \"{spec.method.value}\", \"num_speculative_tokens\": {max(1, round(drafted))}}}', or "
            "point --endpoint at the server that runs the K given")


# -- inputs ------------------------------------------------------------------------------------------------
def _max_num_seqs(summary: RunSummary, base: PlannedConfig, given: int | None) -> tuple[int, str]:
    if given is not None:
        return given, "given (--max-num-seqs)"
    if base.engine.max_num_seqs is not None:
        return base.engine.max_num_seqs, "the engine spec of the run"
    for res in summary.configs:
        if res.batch_limit is not None:
            return res.batch_limit, "the launched server's command"
    return FALLBACK_MAX_NUM_SEQS, (f"unknown (the run does not record it); the last range is written to "
                                   f"{FALLBACK_MAX_NUM_SEQS} and vLLM clips it to its own; pass --max-num-seqs "
                                   "to end it at the engine's")


@dataclass(frozen=True)
class _Batch:
    """The engine's running batch at a point: its typical size, and the largest it reached there."""

    mean: float
    top: float


def _engine_batches(summary: RunSummary, notes: list[str]) -> dict[str, _Batch]:
    """Per point, the engine's running batch: the median over every configuration and repeat measured there
    (mean within the steady window where there is one), and the median of their maxima. Without the gauge, a
    closed loop's N stands in for both."""
    out: dict[str, _Batch] = {}
    for point in summary.plan.points:
        gauges = [p.running_batch for res in summary.configs if res.workload == "main"
                  for p in res.repeats(point.id) if p.running_batch is not None]
        means = [v for g in gauges if (v := g.steady_mean if g.steady_mean is not None else g.mean) is not None
                 and v > 0]
        tops = [g.max for g in gauges if g.max is not None and g.max > 0]
        if means:
            mean = float(np.median(means))
            out[point.id] = _Batch(mean=mean, top=max(mean, float(np.median(tops))) if tops else mean)
        else:
            size, why = kind_of(point).batch_stand_in()
            if size is not None:
                out[point.id] = _Batch(mean=size, top=size)
            notes.append(f"{point.id}: the engine's running batch was not recorded"
                         + (f"; {why}" if size is not None else f" and {why}"))
    return out


# -- one drafter -------------------------------------------------------------------------------------------
def _drafter(family: list[PlannedConfig], scorer: Scorer, batches: dict[str, _Batch], limit: int,
             notes: list[str]) -> DrafterRecommendation | None:
    plan = scorer.summary.plan
    measured: list[tuple[_Batch, LoadPoint, PointChoice, list[Score]]] = []
    withheld: set[str] = set()  # configurations whose server drafted another K at some point: not static there
    for point in plan.points:
        if point.id not in batches:
            continue
        here = []
        for c in family:
            if (why := identity.point_mismatch(scorer.summary, c.id, point.id)) is None:
                here.append(c)
            else:
                withheld.add(c.id)
                notes.append(f"{c.id} at {point.id}: {why}: left out of the table there")
        found = scorer.choose(here, point)
        if found is not None:
            measured.append((batches[point.id], point, *found))
    if not measured:
        return None
    points = _on_batch_axis(measured, limit)
    segments = _segments(points, limit)
    for seg in segments:
        if seg.basis == "measured" and seg.chosen is not None:
            _on_each_instance(seg, scorer)
    ranges = merge_segments(segments)
    label = drafter_label(family[-1].spec)
    # A static K runs at every batch size, so it is judged over every point its drafter was measured at: a
    # configuration measured at fewer (a proposed K, run only where it could win) is judged per point alone.
    everywhere = [c for c in family if c.id not in withheld
                  and all(c.id in scorer.arena(p).sides for _, p, _, _ in measured)]
    static_k, static_cfg, static_reason, _ = scorer.static(everywhere, [p for _, p, _, _ in measured])
    # Engine-neutral: the caller renders them for the engine the sweep ran (engines.deploy).
    spec, static_spec = deploy_specs(family, ranges, static_cfg, label, DEAD_FLAGS, notes)
    return DrafterRecommendation(
        drafter=label, candidates=[c.id for c in family], ranges=ranges, segments=segments, spec=spec,
        static_k=static_k, static_config_id=static_cfg.id if static_cfg else None, static_spec=static_spec,
        static_reason=static_reason, score=_geomean([_relative(m, scorer) for m in points]),
    )


def _on_each_instance(seg: Segment, scorer: Scorer) -> None:
    """Whether the measured stretch's choice held on each server instance its points ran on: a restart's effect
    that one run's pooled decision averages over."""
    assert seg.chosen is not None
    others = [s.config_id for s in seg.scores]
    for pid in seg.point_ids:
        arena = scorer.arena(scorer.summary.plan.point(pid))
        seg.instances = max(seg.instances, len(arena.instances()))
        seg.beaten_on += [f"instance {i + 1} at {pid}: {duel.summary()}"
                          for i, duel in arena.beaten_on_instances(seg.chosen, others)]


def _on_batch_axis(measured: list[tuple[_Batch, LoadPoint, PointChoice, list[Score]]],
                   limit: int) -> list[_Measured]:
    """Measured points by integer engine batch; points that ran at the same batch size share it and take the
    smaller of their Ks (the data cannot tell that batch size's two answers apart)."""
    by_batch: dict[int, list[tuple[_Batch, LoadPoint, PointChoice, list[Score]]]] = {}
    for m in measured:
        by_batch.setdefault(min(max(1, round(m[0].mean)), limit), []).append(m)
    out = []
    for batch in sorted(by_batch):
        group = by_batch[batch]
        pick = min(group, key=lambda m: (m[2].best_k, -m[1].load))
        top = min(max(batch, math.floor(max(m[0].top for m in group))), limit)
        out.append(_Measured(batch=batch, batch_mean=float(np.mean([m[0].mean for m in group])), top=top,
                             point_ids=[m[1].id for m in group], k=pick[2].best_k, choice=pick[2], scores=pick[3]))
    return out


def _segments(points: list[_Measured], limit: int) -> list[Segment]:
    segs: list[Segment] = []
    first, last = points[0], points[-1]
    if first.batch > 1:
        segs.append(Segment(start=1, end=first.batch - 1, k=first.k, basis="below_measured",
                            point_ids=first.point_ids, engine_batch=[first.batch_mean],
                            reason=f"below the smallest measured engine batch ({first.batch_mean:.1f} at "
                                   f"{'/'.join(first.point_ids)}): its K, as speculation pays at least as much on "
                                   "smaller batches"))
    for i, m in enumerate(points):
        # The last point's measurement also covers the larger batches the engine ran under it; between
        # points, interpolation speaks for the batches in between.
        end = m.top if m is last else m.batch
        reached = f" (the engine ran batches up to {end} at {'/'.join(m.point_ids)})" if end > m.batch else ""
        segs.append(Segment(start=m.batch, end=end, k=m.k, basis="measured", point_ids=m.point_ids,
                            engine_batch=[m.batch_mean], scores=m.scores, chosen=m.choice.best_config_id,
                            evidence=m.choice.evidence,
                            reason=m.choice.reason + reached))
        if i + 1 < len(points) and points[i + 1].batch > m.batch + 1:
            nxt = points[i + 1]
            split = min(max(math.floor(math.sqrt(m.batch * nxt.batch)), m.batch), nxt.batch - 1)
            between = f"between {'/'.join(m.point_ids)} (batch {m.batch_mean:.1f}) and " \
                      f"{'/'.join(nxt.point_ids)} (batch {nxt.batch_mean:.1f})"
            for lo, hi, near in ((m.batch + 1, split, m), (split + 1, nxt.batch - 1, nxt)):
                if lo <= hi:
                    segs.append(Segment(start=lo, end=hi, k=near.k, basis="interpolated",
                                        point_ids=[*m.point_ids, *nxt.point_ids],
                                        engine_batch=[m.batch_mean, nxt.batch_mean],
                                        reason=f"interpolated {between}: the K of the nearer, "
                                               f"{'/'.join(near.point_ids)}"))
    if last.top < limit:
        segs.append(Segment(start=last.top + 1, end=limit, k=0, basis="unmeasured", point_ids=last.point_ids,
                            engine_batch=[last.batch_mean],
                            reason=f"beyond the largest engine batch measured ({last.top} at "
                                   f"{'/'.join(last.point_ids)}): nothing is claimed, so drafting is off (the "
                                   "engine without speculation); sweep a higher load to extend the table"))
    return segs


def merge_segments(segments: list[Segment]) -> list[KRange]:
    ranges: list[KRange] = []
    for s in segments:
        if ranges and ranges[-1].k == s.k:
            prev = ranges[-1]
            prev.end = s.end
            if s.basis not in prev.bases:
                prev.bases.append(s.basis)
        else:
            ranges.append(KRange(start=s.start, end=s.end, k=s.k, bases=[s.basis]))
    return ranges


# -- ranking ---------------------------------------------------------------------------
def _relative(m: _Measured, scorer: Scorer) -> float | None:
    """The chosen configuration's objective relative to the baseline at a measured point (1 where K = 0)."""
    by_id = {s.config_id: s for s in m.scores}
    chosen, base = by_id.get(m.choice.best_config_id), by_id.get(scorer.base.id)
    if chosen is None or chosen.value is None or base is None or not base.value:
        return None
    return chosen.value / base.value


def _geomean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in kept) / len(kept)) if kept else None
