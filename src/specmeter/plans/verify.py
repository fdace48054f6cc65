"""`specmeter verify`: run a sweep's recommended dynamic-SD config on the sweep's own load points,
interleaved with the baseline and the best static configuration of each point, so the table is judged on
identical requests measured at the same time, not against numbers taken minutes earlier."""

from __future__ import annotations

from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data.workload import reload_conversations
from specmeter.engines.registry import get_engine
from specmeter.execution.runner import Execution
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.recommend import DrafterRecommendation, Recommendation
from specmeter.schemas.results import RunSummary

VERIFY_ID = "dynamic"


def best_static(rec: DrafterRecommendation, baseline_id: str) -> dict[str, str]:
    """Per measured point, the static configuration with the highest objective there (baseline excluded)."""
    out: dict[str, str] = {}
    for seg in rec.segments:
        statics = [s for s in seg.scores if s.config_id != baseline_id and s.value is not None]
        if seg.basis == "measured" and statics:
            top = max(statics, key=lambda s: s.value or 0.0)
            out.update({pid: top.config_id for pid in seg.point_ids})
    return out


def check_verifiable(kind: str | None, where: str) -> None:
    """Verify runs a table; an engine without a per-batch K has none (its static K is a measured sweep
    configuration already)."""
    if kind is not None and not get_engine(kind).launcher.per_batch_k:
        raise InputError(f"{where}: {kind} has no per-batch K, so there is no dynamic table to verify; deploy the "
                         "static K the recommendation shows (the sweep measured it at every point)")


def verify_plan(source: RunSummary, rec: Recommendation, where: str, *, endpoint: str | None = None,
                repeats: int | None = None) -> Plan:
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
    against = best_static(drafter, base.id)
    statics = [plan.config(cid) for cid in drafter.candidates if cid in set(against.values())]
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
    # Adaptive unless repeats were asked for: a verified point runs until its judgement of the table settles.
    # The sweep's points as measured: a load search chose them there, verify runs them all; the points its load ramp
    # skipped at saturation stay skipped, and verify runs no ramp of its own (it checks points, not capacity).
    measured = [p for p in plan.points if any(c.repeats(p.id) for c in source.configs)]
    load = plan.load.model_copy(update={"precision": None, "search": [], "points": measured or plan.points,
                                        "stop_at_saturation": False})
    load = load.with_precision(interleave=True, repeats=reps, default="adaptive")
    return Plan(kind="verify", configs=[base, *statics, dynamic], load=load, repeats=reps, interleave=True,
                workload=plan.workload, best_static=against, min_gain=rec.min_gain)


def verify_execution(source_dir: Path, source: RunSummary, rec: Recommendation, *, endpoint: str | None = None,
                     repeats: int | None = None, api_key: str | None = None,
                     command: list[str] | None = None) -> Execution:
    plan = verify_plan(source, rec, str(source_dir), endpoint=endpoint, repeats=repeats)
    convs = reload_conversations(plan.workload, plan.load, str(source_dir))
    return Execution(plan=plan, conversations=convs, api_key=api_key, command=command or [])
