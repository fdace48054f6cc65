"""Which drafter to deploy, decided head to head: one per server (vLLM's table, like every engine's speculative
config, holds one drafter), so the answer names one drafter with its table and its static fallback.

Each drafter's table picks one configuration at every measured point (one of its K, or the baseline where
drafting does not pay). Two drafters are compared by those picks, on the same requests, at every measured point
where the picks differ (where both tables turn drafting off they are the same server's work), and the per-point
duels are pooled as the static K's are (analysis.objective.pooled: the geometric mean of the ratios, its interval
from theirs). The rule is the one K follows: walk the drafters from the cheapest per step (lookup, then heads,
then a separate draft model; DRAFTER_COST), and a costlier drafter replaces the current choice only when its table
beats the choice's by more than the minimum gain, the whole pooled interval above it. The chosen drafter is then
measured against the runner-up (the best of the others), which says by how much it won, or that it did not
clearly win and is chosen as the cheaper.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.choice import DRAFTER_COST, Contender, choose
from specmeter.analysis.objective import Scorer, pooled
from specmeter.config.models import SpecMethod
from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.recommend import DrafterChoice, DrafterRecommendation

ACROSS = "the measured points where the tables differ"


def _picks(d: DrafterRecommendation) -> dict[str, str]:
    """Per measured point, the configuration the drafter's table runs there."""
    return {pid: seg.chosen for seg in d.segments if seg.basis == "measured" and seg.chosen is not None
            for pid in seg.point_ids}


def choose_drafter(drafters: Sequence[DrafterRecommendation], configs: Sequence[PlannedConfig],
                   scorer: Scorer) -> DrafterChoice | None:
    """The drafter to deploy among two or more, with the duels the walk read and the margin over the runner-up
    (None: one drafter, or two that only engine extras tell apart, which share a label and are ranked by score)."""
    by_label = {d.drafter: d for d in drafters}
    if len(drafters) < 2 or len(by_label) < len(drafters):
        return None
    picks = {d.drafter: _picks(d) for d in drafters}
    methods = {c.id: c.spec.method for c in configs}
    points = {p.id: p for p in scorer.summary.plan.points}

    def duel(challenger: str, incumbent: str) -> HeadToHead:
        a, b = picks[challenger], picks[incumbent]
        per_point = [scorer.arena(points[pid]).duel(a[pid], b[pid]) for pid in points
                     if pid in a and pid in b and a[pid] != b[pid]]
        metric = scorer.metric(next(iter(points.values())))
        h = pooled(per_point, challenger, incumbent, metric, scorer.min_gain, scorer.indifference)
        return h.model_copy(update={"point_id": ACROSS})

    def method(d: DrafterRecommendation) -> SpecMethod:
        return next((methods[c] for c in d.candidates if c in methods), SpecMethod.draft_model)

    # Cheapest first; among drafters of one cost, the higher score first (the order the walk meets them in).
    order = sorted(drafters, key=lambda d: (DRAFTER_COST[method(d)], -(d.score or 0.0)))
    walk = [Contender(d.drafter, 0, d.score or 0.0, (DRAFTER_COST[method(d)], i, 0)) for i, d in enumerate(order)]
    walked = choose(ACROSS, walk, duel, min_gain=scorer.min_gain)
    chosen = by_label[walked.best_config_id]
    others = [d for d in drafters if d is not chosen]
    runner_up = max(others, key=lambda d: d.score or 0.0)
    margin = duel(chosen.drafter, runner_up.drafter)
    reason = _reason(chosen, runner_up, margin, order[0], walked.evidence)
    mode = {d.drafter: engine_adaptive(d, configs) for d in (chosen, runner_up)}
    if mode[chosen.drafter]:
        reason = f"deploy the engine's adaptive mode ({mode[chosen.drafter]}): {reason}"
    elif mode[runner_up.drafter]:
        reason = f"a table of static Ks, over the engine's adaptive mode ({mode[runner_up.drafter]}): {reason}"
    return DrafterChoice(chosen=chosen.drafter, runner_up=runner_up.drafter, margin=margin,
                         evidence=walked.evidence, reason=reason)


def engine_adaptive(d: DrafterRecommendation, configs: Sequence[PlannedConfig]) -> str | None:
    """How the engine varies this drafter's K at run time itself, where it does: its adaptive mode, or a draft
    model's confidence floor (llama.cpp's --spec-draft-p-min); None for static Ks."""
    specs = [c.spec for c in configs if c.id in d.candidates]
    if any(s.adaptive for s in specs):
        return "the engine sizes each step's draft itself"
    floors = sorted({s.draft_p_min for s in specs if s.draft_p_min is not None})
    return f"drafting stops below confidence {floors[0]:g}" if floors else None


def _reason(chosen: DrafterRecommendation, runner_up: DrafterRecommendation, margin: HeadToHead,
            cheapest: DrafterRecommendation, evidence: Sequence[HeadToHead]) -> str:
    if margin.paired_requests == 0:
        return (f"{chosen.drafter}: its table and {runner_up.drafter}'s run the same configuration at every measured "
                "point (drafting off), so the cheaper per step is named")
    said = margin.summary()
    if margin.outcome == "beats":
        return f"{chosen.drafter} beats the runner-up head to head: {said}"
    if chosen is cheapest:
        return (f"{chosen.drafter}, the cheapest per step, stays: no costlier drafter's table beats it by more than "
                f"the minimum gain ({said})")
    # It replaced the choice the walk held when it reached it; a cheaper drafter it met before need not be beaten
    # (that one did not beat the choice either), and the runner-up may be such a drafter.
    won = next(h for h in evidence if h.config_id == chosen.drafter and h.outcome == "beats")
    return (f"{chosen.drafter} beat {won.against}, the choice when the walk reached it ({won.summary()}), and no "
            f"costlier drafter beat it; against the runner-up: {said}")
