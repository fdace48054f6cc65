"""A proposal plan: each K the step-cost model proposed (predict.proposals), measured head to head at the points it
could win, interleaved with what its drafter's decision there reads, in adaptive rounds until those decisions
settle.

The walk that decides a point (analysis.choice) compares each K with the one it held just before it, from the
cheapest up. So at each point the proposed K runs beside the baseline, the incumbent (the K the sweep chose there)
and, where it differs, the configuration the sweep's walk held when it reached the proposed K's place: on the
sweep and this run pooled, the walk then meets the proposed K with paired evidence on both of its sides, as if
the sweep had run it. Each other drafter's pick there runs too, since drafters are chosen by their tables on the
same requests (analysis.drafter_choice). Nothing else runs again: the sweep's other configurations are judged
where they were. The proposal decides its walk from the proposed K on; the part before it repeats what the sweep
settled, so what only that part reads (the baseline, where the walk meets the proposed K past it) runs the first
round, for the speedups it shows, and rests after it (analysis.sequential.outside_decisions).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.config.models import SpecConfig
from specmeter.data.workload import reload_conversations
from specmeter.execution.runner import Execution
from specmeter.plans.run import config_id
from specmeter.predict.proposals import Proposal
from specmeter.schemas.analysis import indifference_for
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.proposal import ProposedK
from specmeter.schemas.recommend import DrafterRecommendation, Recommendation, Segment
from specmeter.schemas.results import RunSummary


def held_before(seg: Segment, k: int) -> str | None:
    """The configuration the sweep's walk at a measured stretch held when it reached K: the incumbent of the first
    comparison with a costlier challenger, else what it chose."""
    ks = {s.config_id: s.k for s in seg.scores}
    return next((h.against for h in seg.evidence if ks.get(h.config_id, 0) > k), seg.chosen)


def proposed_config(family: Sequence[PlannedConfig], k: int, taken: set[str]) -> PlannedConfig:
    """The drafter at K: its largest K's configuration (a table runs that one's extras at every K) with K set,
    named as the sweep names its configurations."""
    top = max(family, key=lambda c: c.k)
    spec = SpecConfig.model_validate({**top.spec.model_dump(), "num_speculative_tokens": k})
    own = config_id(top.spec)
    cid = config_id(spec) + top.id[len(own):] if top.id.startswith(own) else f"{top.id}-k{k}"
    while cid in taken:
        cid += "-proposed"
    return PlannedConfig(id=cid, role=Role.candidate, spec=spec, engine=top.engine, server=cid)


def propose_plan(source: RunSummary, rec: Recommendation, found: Sequence[Proposal], where: str, *,
                 repeats: int | None = None) -> Plan:
    plan = source.plan
    base = plan.main_baseline
    if base is None:
        raise InputError(f"{where}: the sweep has no speculation-off baseline to measure a proposed K against")
    if not found:
        raise InputError(f"{where}: no proposed K to measure")
    runs_at: dict[str, list[str]] = {}
    added: list[PlannedConfig] = []
    proposed: list[ProposedK] = []
    for p in found:
        drafter = _drafter(rec, p.drafter, where)
        family = [plan.config(cid) for cid in drafter.candidates]
        config = proposed_config(family, p.k, {c.id for c in [*plan.configs, *added]})
        added.append(config)
        proposed.append(ProposedK(config_id=config.id, drafter=p.drafter, k=p.k, contests=list(p.contests)))
        for contest in p.contests:
            seg = next(s for s in drafter.segments if s.basis == "measured" and s.point_ids == contest.point_ids)
            others = [s.chosen for d in rec.drafters if d is not drafter for s in d.segments
                      if s.basis == "measured" and set(s.point_ids) & set(contest.point_ids)]
            for cid in (config.id, held_before(seg, p.k), contest.incumbent, *others):
                if cid is not None and cid != base.id:
                    at = runs_at.setdefault(cid, [])
                    at += [pid for pid in contest.point_ids if pid not in at]
    wanted = {pid for at in runs_at.values() for pid in at}
    reps = repeats or plan.repeats
    load = plan.load.measuring_again([p for p in plan.points if p.id in wanted])
    load = load.with_precision(interleave=True, repeats=reps, default="adaptive")
    configs = [base, *(c for c in plan.configs if c.id in runs_at), *added]
    return Plan(kind="propose", configs=configs, load=load, repeats=reps, interleave=True, workload=plan.workload,
                min_gain=rec.min_gain, indifference=indifference_for(rec.min_gain, rec.indifference), runs_at=runs_at,
                proposed=proposed)


def _drafter(rec: Recommendation, label: str, where: str) -> DrafterRecommendation:
    found = next((d for d in rec.drafters if d.drafter == label), None)
    if found is None:
        raise InputError(f"{where}: the recommendation has no drafter {label!r} to propose a K for")
    return found


def propose_execution(source_dir: Path, source: RunSummary, rec: Recommendation, found: Sequence[Proposal], *,
                      repeats: int | None = None, api_key: str | None = None,
                      command: list[str] | None = None) -> Execution:
    plan = propose_plan(source, rec, found, str(source_dir), repeats=repeats)
    convs = reload_conversations(plan.workload, plan.load, str(source_dir))
    return Execution(plan=plan, conversations=convs, api_key=api_key, command=command or [])
