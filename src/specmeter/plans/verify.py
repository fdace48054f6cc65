"""`specmeter verify`: run a sweep's recommended dynamic-SD config on the sweep's own load points,
interleaved with the baseline and the best static configuration of each point, so the table is judged on
identical requests measured at the same time, not against numbers taken minutes earlier. Where the sweep also
measured the engine's own adaptive speculation (an adaptive mode, a confidence floor), the best of it at each point
runs beside them: the table must beat that too, or the answer is to turn the engine's adaptive mode on.

Verification runs where the table can be wrong: at the points whose decisions the sweep left unsettled. Where
every head-to-head comparison behind a point's K was settled, more rounds could not change that K at the stated
confidence, so the sweep's paired evidence stands there (the plan names such points `carried`, with why); so too
where the open ones stopped for futility (no win was likely by the budget, so what the point keeps stands as
firmly), and where the table's K measured best of the static Ks, open decisions or not: the one comparison
verification reads there, the best static K against the table, sets a K against itself, so no round could correct
the table. A table carried everywhere still runs once, so that the config is proven to start and to draft the K it
names: one round (the plan's `proof`), since adaptive rounds would only look again at decisions already made;
`every_point` runs all of the sweep's points as before. Any point that drafts proves that, so it is the one whose
round the sweep measured quickest: on the demo a round at concurrency 1 takes about 2.5 times as long as at 4, since
each request there decodes alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from specmeter.analysis.drafter_choice import engine_adaptive
from specmeter.common.errors import InputError
from specmeter.config.dynamic_k import dynamic_k_at
from specmeter.data.workload import reload_conversations
from specmeter.engines.registry import get_engine
from specmeter.execution.runner import Execution
from specmeter.schemas.analysis import indifference_for
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.recommend import DrafterRecommendation, Recommendation, Score, Segment
from specmeter.schemas.results import RunSummary

VERIFY_ID = "dynamic"


def top_static(seg: Segment, baseline_id: str) -> Score | None:
    """The static configuration with the highest objective at a measured stretch (baseline excluded)."""
    statics = [s for s in seg.scores if s.config_id != baseline_id and s.value is not None]
    return max(statics, key=lambda s: s.value or 0.0) if seg.basis == "measured" and statics else None


def best_static(rec: DrafterRecommendation, baseline_id: str) -> dict[str, str]:
    """Per measured point, the static configuration with the highest objective there (baseline excluded)."""
    return {pid: top.config_id for seg in rec.segments if (top := top_static(seg, baseline_id)) is not None
            for pid in seg.point_ids}


def best_adaptive(rec: Recommendation, configs: Sequence[PlannedConfig], baseline_id: str) -> dict[str, str]:
    """Per measured point, the engine's own adaptive speculation the table is judged against too: of the drafters
    whose K the engine varies itself (an adaptive mode, a confidence floor), the configuration with the highest
    objective there. Empty where the answer's drafter is one of them (there is no table of static Ks to judge)."""
    best = rec.best
    if best is None or engine_adaptive(best, configs):
        return {}
    found: dict[str, Score] = {}
    for d in rec.drafters[1:]:
        if not engine_adaptive(d, configs):
            continue
        for seg in d.segments:
            if (top := top_static(seg, baseline_id)) is None or top.config_id not in d.candidates:
                continue
            for pid in seg.point_ids:
                if pid not in found or (top.value or 0.0) > (found[pid].value or 0.0):
                    found[pid] = top
    return {pid: score.config_id for pid, score in found.items()}


def round_seconds(source: RunSummary, point_id: str, config_ids: Sequence[str]) -> float | None:
    """Seconds one round of the point takes with these configurations (one may be named twice): the sum of each
    one's median wall time over the source's rounds there; None where one was not measured there."""
    total = 0.0
    for cid in config_ids:
        res = source.config(cid)
        walls = [p.latency.wall_s for p in res.repeats(point_id)] if res is not None else []
        if not walls:
            return None
        total += statistics.median(walls)
    return total


def where_to_verify(rec: DrafterRecommendation, baseline_id: str, point_ids: list[str], every_point: bool = False,
                    futile: Collection[str] = (), cost: Callable[[str], float | None] = lambda _: None,
                    ) -> tuple[list[str], dict[str, str], bool]:
    """The points to run (in plan order), the points carried from the sweep, each with why, and whether the one
    point run is only the proof that the config runs (every point carried); `futile`: the points whose runs
    stopped for futility (sequential.futile_points); `cost`: the seconds a round at a point would take (None:
    unknown), so a proof runs where it is quickest."""
    spec = rec.spec
    table = spec.num_speculative_tokens_per_batch_size if spec is not None else None

    def table_k(batch: int) -> int | None:
        k = spec.num_speculative_tokens if spec is not None else None
        return dynamic_k_at(table, batch, k) if table and k is not None else k

    carried: dict[str, str] = {}
    for seg in rec.segments:
        # A table edited after the sweep decided (a K other than the segment's, or a segment edited away from the
        # configuration the sweep chose there) has no sweep evidence there.
        if seg.basis != "measured" or len(seg.point_ids) != 1 or table_k(seg.start) != seg.k or not _as_chosen(seg):
            continue
        open_ = [h for h in seg.evidence if h.outcome == "unsettled"]
        why = "; ".join(h.summary() for h in seg.evidence) or "the only contender measured"
        if not open_:
            carried[seg.point_ids[0]] = f"K = {seg.k} rests on decisions the sweep settled: {why}"
        elif seg.point_ids[0] in futile:
            carried[seg.point_ids[0]] = (f"K = {seg.k} rests on decisions settled or stopped for futility (no win "
                                         f"was likely by the budget, so the cheaper stays): {why}")
        elif seg.k > 0 and (top := top_static(seg, baseline_id)) is not None and top.k == seg.k:
            carried[seg.point_ids[0]] = (f"K = {seg.k} measured best of the static Ks here, so none can correct "
                                         f"the table here (its open decisions are what the table keeps): {why}")
    run = [p for p in point_ids if every_point or p not in carried]
    proof = not run and bool(point_ids)
    if proof:  # carried everywhere: one point still proves the config runs what it names
        drafting = [pid for seg in rec.segments if seg.basis == "measured" and seg.k > 0 for pid in seg.point_ids]
        where = [p for p in point_ids if p in drafting] or point_ids[:1]
        known = {p: c for p in where if (c := cost(p)) is not None}
        run = [min(known, key=lambda p: known[p]) if known else where[0]]  # ties: the first in plan order
    return run, {p: carried[p] for p in point_ids if p not in run}, proof


def _as_chosen(seg: Segment) -> bool:
    """The segment's K is the K of the configuration the sweep chose at its point (its evidence is about that
    configuration); one edited to another K is not (a chosen configuration the scores do not name: trusted)."""
    chosen = next((s.k for s in seg.scores if s.config_id == seg.chosen), None)
    return chosen is None or chosen == seg.k


def check_verifiable(kind: str | None, where: str) -> None:
    """Verify runs a table; an engine without a per-batch K has none (its static K is a measured sweep
    configuration already)."""
    if kind is not None and not get_engine(kind).launcher.per_batch_k:
        raise InputError(f"{where}: {kind} has no per-batch K, so there is no dynamic table to verify; deploy the "
                         "static K the recommendation shows (the sweep measured it at every point)")


def verify_plan(source: RunSummary, rec: Recommendation, where: str, *, endpoint: str | None = None,
                repeats: int | None = None, every_point: bool = False, futile: Collection[str] = ()) -> Plan:
    plan = source.plan
    base = plan.main_baseline
    if base is None:
        raise InputError(f"{where}: the sweep has no speculation-off baseline to verify the table against")
    check_verifiable(base.engine.kind, where)
    if plan.workload.lengths:
        raise InputError(f"{where}: the sweep has an input-length axis, with a table per length; verifying one table "
                         "across lengths is not supported yet: sweep one length (workload.input_len: N) to verify")
    drafter = rec.best
    if drafter is None or drafter.spec is None:
        reason = drafter.static_reason if drafter else "no drafter was measured"
        raise InputError(f"{where}: the recommendation keeps speculation off at every batch size ({reason}); there "
                         "is no dynamic config to verify")
    measured = [p for p in plan.points if any(c.repeats(p.id) for c in source.configs)] or plan.points
    statics_at = best_static(drafter, base.id)

    def cost(pid: str) -> float | None:  # a round runs the baseline, the best static K and the table (timed as it)
        static = statics_at.get(pid)
        return round_seconds(source, pid, [base.id, static, static]) if static is not None else None

    run, carried, proof = where_to_verify(drafter, base.id, [p.id for p in measured], every_point, futile, cost)
    # Each static runs where it is judged against the table: a static best only at carried points never starts;
    # so does the engine's adaptive mode the sweep measured best at each point run.
    against = {p: c for p, c in statics_at.items() if p in run}
    adaptive = {p: c for p, c in best_adaptive(rec, plan.configs, base.id).items() if p in run}
    judged = {*against.values(), *adaptive.values()}
    statics = [c for c in plan.configs if c.id in judged]
    if endpoint is None and not base.engine.launch:
        raise InputError(f"{where}: the sweep attached to running servers, so specmeter cannot launch the dynamic "
                         "config; start a server with the recommended --speculative-config and pass --endpoint URL")
    for config in [base, *statics]:
        if config.engine.launch and config.engine.has_redacted_secret:
            raise InputError(f"{where}: configuration {config.id} was launched with a secret engine argument that "
                             "specmeter never stores, so it cannot be relaunched; run the sweep again")
    engine = base.engine if endpoint is None else base.engine.model_copy(update={"endpoint": endpoint})
    dynamic = PlannedConfig(id=VERIFY_ID, role=Role.verification, spec=drafter.spec, engine=engine, server=VERIFY_ID)
    reps = repeats or plan.repeats
    # Adaptive unless repeats were asked for: a verified point runs until its judgement of the table settles; the
    # proof point, whose judgement the sweep settled, runs one round (or the repeats asked for).
    # Of the sweep's points as measured (the points its load ramp skipped at saturation stay skipped, and verify
    # runs no ramp of its own: it checks points, not capacity), those to run.
    load = plan.load.measuring_again([p for p in measured if p.id in run])
    load = load.with_precision(interleave=True, repeats=reps, default="fixed" if proof else "adaptive")
    return Plan(kind="verify", configs=[base, *statics, dynamic], load=load, repeats=reps, interleave=True,
                workload=plan.workload, best_static=against, adaptive=adaptive, carried=carried, proof=proof,
                min_gain=rec.min_gain, indifference=indifference_for(rec.min_gain, rec.indifference))


def verify_execution(source_dir: Path, source: RunSummary, rec: Recommendation, *, endpoint: str | None = None,
                     repeats: int | None = None, api_key: str | None = None, every_point: bool = False,
                     futile: Collection[str] = (), command: list[str] | None = None) -> Execution:
    plan = verify_plan(source, rec, str(source_dir), endpoint=endpoint, repeats=repeats, every_point=every_point,
                       futile=futile)
    convs = reload_conversations(plan.workload, plan.load, str(source_dir))
    return Execution(plan=plan, conversations=convs, api_key=api_key, command=command or [])
