"""Proof that a dynamic-SD config does what the recommendation promised, on the real engine.

Per point: the dynamic config's throughput and TPOT against the baseline and against the sweep's best static
configuration there (paired, on the same requests, measured interleaved in the same run), and whether the
engine drafted the K its table names for the batch it ran, read from the per-request `per_step_drafted`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from specmeter.analysis.headline import decision_confidence, headline_metric
from specmeter.analysis.headtohead import Arena
from specmeter.analysis.speedup import point_speedup
from specmeter.analysis.student import t_quantile
from specmeter.config.dynamic_k import dynamic_k_at
from specmeter.schemas.analysis import DraftedCheck, HeadToHead, RecoveryCheck, Speedup, VerifyPoint
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import PointResult, RunSummary

# The most drafted K is what the check reads; a K outside the table's on more than this share of steps is
# flagged even when the mode is right.
UNEXPECTED_SHARE = 0.05


def verification(summary: RunSummary, records: Sequence[RequestRecord],
                 speedups: Sequence[Speedup]) -> list[VerifyPoint]:
    plan = summary.plan
    out: list[VerifyPoint] = []
    for config in plan.configs:
        res = summary.config(config.id)
        if config.role is not Role.verification or res is None:
            continue
        for point in plan.points:
            reps = res.repeats(point.id)
            if not reps:
                continue
            static_id = plan.best_static.get(point.id)
            vs_static = None
            static_res = summary.config(static_id) if static_id else None
            if static_id and static_res is not None and static_res.repeats(point.id):
                vs_static = point_speedup(config, plan.config(static_id), res, static_res, point.id, records)
            vp = VerifyPoint(
                point_id=point.id, config_id=config.id, static_id=static_id,
                vs_baseline=next((s for s in speedups if s.config_id == config.id and s.point_id == point.id), None),
                vs_static=vs_static,
                drafted=drafted_check(config, point.id, at_point(summary, point.id), records),
            )
            if static_id and any(k == 0 for *_, k in config.spec.num_speculative_tokens_per_batch_size or []):
                vp.recovery = recovery_check(config.id, static_id, point.id, records)
            static_k = plan.config(static_id).k if vs_static is not None and static_id is not None else None
            if static_k is not None or point.id in plan.adaptive:
                _challenge(vp, summary, records, static_k)
            out.append(vp)
    return out


COLLAPSE = 0.1  # a fall of the first position's acceptance by more than this after K = 0 is a collapse
MIN_PAIRED = 5  # fewer paired requests than this say nothing about recovery


def _first_accepted(r: RequestRecord) -> tuple[float, int] | None:
    """(a_0, the K = 0 steps) of a request: the share of its reported speculative steps that accepted the first
    draft, and the decode steps that drafted nothing (output tokens - 1 - what the reported steps emitted, and any
    step listed with nothing drafted: vLLM lists only the steps it scheduled drafts for, vllm/v1/core/sched/
    scheduler.py, an engine may list the others too)."""
    if r.sd_raw is None:
        return None
    drafted, accepted = r.sd_raw.get("per_step_drafted"), r.sd_raw.get("per_step_accepted")
    if not isinstance(drafted, list) or not isinstance(accepted, list) or len(drafted) != len(accepted):
        return None
    steps = [int(a) for a, d in zip(accepted, drafted) if int(d) > 0]
    if not steps:
        return None
    zero = len(accepted) - len(steps) + max(0, (r.output_tokens or 0) - 1 - sum(int(a) + 1 for a in accepted))
    return sum(1 for a in steps if a >= 1) / len(steps), zero


def recovery_check(dynamic_id: str, static_id: str, point_id: str,
                   records: Sequence[RequestRecord]) -> RecoveryCheck:
    """The dynamic server's requests that drafted nothing on some steps at the point, paired with the same requests
    on the static server: does their first-position acceptance hold (see RecoveryCheck)?"""
    def at(config_id: str) -> dict[tuple[int, str, int], RequestRecord]:
        return {(r.repeat, r.conversation_id, r.turn): r for r in records
                if r.config_id == config_id and r.point_id == point_id and r.ok and not r.warmup}

    static = at(static_id)
    pairs: list[tuple[float, float]] = []
    for key, r in at(dynamic_id).items():
        mine, theirs = _first_accepted(r), static.get(key)
        other = _first_accepted(theirs) if theirs is not None else None
        if mine is not None and other is not None and mine[1] > 0:
            pairs.append((mine[0], other[0]))
    check = RecoveryCheck(requests=len(pairs))
    if len(pairs) < MIN_PAIRED:
        check.note = (f"{len(pairs)} requests drafted nothing on some steps and ran on both servers: too few to say "
                      "whether acceptance recovers after K = 0")
        return check
    diffs = [a - b for a, b in pairs]
    mean = float(np.mean(diffs))
    half = t_quantile(0.95, len(diffs) - 1) * float(np.std(diffs, ddof=1)) / len(diffs) ** 0.5
    check.after_zero, check.static = float(np.mean([a for a, _ in pairs])), float(np.mean([b for _, b in pairs]))
    check.low, check.high = mean - half, mean + half
    check.recovered = False if check.high < -COLLAPSE else True if check.low > -COLLAPSE else None
    said = {False: "did not recover", True: "recovered", None: "may not have recovered (unsettled)"}[check.recovered]
    check.note = (f"acceptance after K = 0 {said}: the first draft accepted on {check.after_zero:.0%} of steps of "
                  f"{len(pairs)} requests that drafted nothing for a while, {check.static:.0%} on the static server "
                  f"(difference {mean:+.2f} [{check.low:+.2f}, {check.high:+.2f}])")
    return check


IGNORED_SHARE = 0.95  # a point whose steps drafted the static K this often ran it, whatever its table said


def ignored_table(verify: RunSummary) -> str | None:
    """One line where the engine ran the table's largest K as a static K: at every verified point with per-step
    counts, at least IGNORED_SHARE of the steps drafted it, and at one point at least the table names another K
    for the batch the engine ran (vLLM #51510: on the V2 model runner the per-batch table has no effect). None where
    the engine followed the table anywhere, or where nothing could be checked."""
    checked = [vp for vp in verify.analysis.verification if vp.drafted.followed is not None]
    config = next((c for c in verify.plan.configs if c.role is Role.verification), None)
    if not checked or config is None:
        return None
    static = config.spec.k
    if any(vp.drafted.drafted.get(static, 0) < IGNORED_SHARE * vp.drafted.steps for vp in checked):
        return None
    other = next((vp for vp in checked if vp.drafted.expected_k != static), None)
    if other is None:
        return None
    batch = "-" if other.drafted.engine_batch is None else f"{other.drafted.engine_batch:.1f}"
    return (f"the engine ignored the K table: every verified point drafted K={static} on at least "
            f"{IGNORED_SHARE:.0%} of its steps, where the table names K={other.drafted.expected_k} at "
            f"{other.point_id} (engine batch {batch}); serve the static K, or an engine build that honours "
            "num_speculative_tokens_per_batch_size (vLLM's V1 model runner), and verify again")


def collapsed_table(verify: RunSummary) -> str | None:
    """One line where acceptance did not come back after the table's K = 0 steps at some verified point (the
    engine's schedule broke the requests it paused, TensorRT-LLM #16888): what the table would buy is then not what
    the sweep's static Ks measured, whatever its speed here. None where it recovered, or where nothing could say."""
    fell = [(vp.point_id, vp.recovery) for vp in verify.analysis.verification
            if vp.recovery is not None and vp.recovery.recovered is False]
    if not fell:
        return None
    return (f"at {', '.join(p for p, _ in fell)} {fell[0][1].note}; serve the static K, or an engine build whose "
            "schedule resumes drafting intact after K = 0, and verify again")


def table_challenge(plan: Plan, arena: Arena, point_id: str, table_k: int | None) -> HeadToHead | None:
    """The duel that says whether the table is wrong at a point: the best static K against what the table runs
    there (_table_side). None where the best static is the table's own K: the two differ only by the dynamic
    mode's overhead, not by a K."""
    static_id = plan.best_static.get(point_id)
    if static_id is None or static_id not in arena.sides or plan.config(static_id).k == table_k:
        return None
    against = _table_side(plan, arena, table_k)
    return arena.duel(static_id, against) if against is not None else None


def adaptive_challenge(plan: Plan, arena: Arena, point_id: str, table_k: int | None) -> HeadToHead | None:
    """The duel that says whether the engine's own adaptive speculation beats the table at a point: the adaptive
    configuration the sweep measured best there against what the table runs there, as the drafter choice set the
    two drafters' picks against each other. None where the plan judges the table against none there."""
    adaptive_id = plan.adaptive.get(point_id)
    if adaptive_id is None or adaptive_id not in arena.sides:
        return None
    against = _table_side(plan, arena, table_k)
    return arena.duel(adaptive_id, against) if against is not None else None


def _table_side(plan: Plan, arena: Arena, table_k: int | None) -> str | None:
    """What a challenger to the table is set against at a point: the dynamic server where the table drafts a K,
    the baseline where it drafts none (a K = 0 range still pays the drafter's pass, so beating it says nothing a
    table can act on: only beating serving without speculation does)."""
    dynamic = next((c for c in plan.configs if c.role is Role.verification), None)
    base = plan.main_baseline
    if dynamic is None or base is None:
        return None
    against = base.id if table_k == 0 else dynamic.id
    return against if against in arena.sides else None


def _challenge(vp: VerifyPoint, summary: RunSummary, records: Sequence[RequestRecord],
               static_k: int | None) -> None:
    """Is the table wrong where the engine ran? Notes what the best static K, and the engine's own adaptive
    speculation where the sweep measured it, did against the table either way."""
    plan = summary.plan
    point = plan.point(vp.point_id)
    arena = Arena.of(summary.configs, records, vp.point_id, headline_metric(point),
                     min_gain=plan.min_gain, indifference=plan.indifference,
                     confidence=decision_confidence(summary, vp.point_id))
    table_k = vp.drafted.expected_k
    notes: list[str] = []
    if static_k is not None:
        vp.static_k = static_k
        vp.challenge = table_challenge(plan, arena, vp.point_id, table_k)
        notes.append(_static_note(vp, arena, static_k, table_k))
    vp.adaptive_id = plan.adaptive.get(vp.point_id)
    vp.vs_adaptive = adaptive_challenge(plan, arena, vp.point_id, table_k)
    if vp.vs_adaptive is not None:
        if vp.vs_adaptive.outcome == "beats":
            vp.disagrees = True
            notes.append(f"the engine's adaptive speculation beats the table here: {vp.vs_adaptive.summary()}")
        else:
            notes.append(f"against the engine's adaptive speculation the table holds: {vp.vs_adaptive.summary()}")
    vp.note = "; ".join(notes)


def _static_note(vp: VerifyPoint, arena: Arena, static_k: int, table_k: int | None) -> str:
    """What the best static K did against the table (setting `disagrees` where it is the table's error)."""
    if vp.challenge is None:
        same = arena.duel(vp.static_id or "", vp.config_id)
        return (f"the best static is the table's own K (K={static_k}): {same.summary()}; a difference is the "
                "dynamic mode's overhead, not a wrong K")
    if vp.challenge.outcome != "beats":
        return f"the table holds here: {vp.challenge.summary()}"
    if table_k is None:
        return f"{vp.challenge.summary()}, but the engine's batch was not recorded, so the table's K there is unknown"
    vp.disagrees = True
    at = f"batch {vp.drafted.engine_batch:.1f}" if vp.drafted.engine_batch is not None else "this point"
    return f"the table is wrong at {at}: K={static_k} beats its K={table_k} ({vp.challenge.summary()})"


def at_point(summary: RunSummary, point_id: str) -> list[PointResult]:
    """Every configuration's results at a point: they ran the same requests at the same load, so the engine
    batch is read over all of them (as the recommendation keys its table), not from one server's gauge, which
    read far below the client's concurrency on a busy machine."""
    return [p for res in summary.configs for p in res.repeats(point_id)]


def drafted_check(config: PlannedConfig, point_id: str, results: Sequence[PointResult],
                  records: Sequence[RequestRecord]) -> DraftedCheck:
    """`results`: the point's results whose running batch gives the batch the table is read at."""
    table = config.spec.num_speculative_tokens_per_batch_size
    k_max = config.spec.k
    batches = [p.running_batch.steady_mean if p.running_batch.steady_mean is not None else p.running_batch.mean
               for p in results if p.running_batch is not None]
    seen = [b for b in batches if b is not None]
    batch = float(np.median(seen)) if seen else None
    largest = max((p.running_batch.max or 0 for p in results if p.running_batch is not None), default=0.0)
    expected = allowed = None
    if table:
        if batch is not None:
            expected = dynamic_k_at(table, max(1, round(batch)), k_max)
        allowed = sorted({dynamic_k_at(table, b, k_max) for b in range(1, max(1, round(largest)) + 1)})
    drafted: Counter[int] = Counter()
    with_steps = 0
    for r in records:
        if r.config_id != config.id or r.point_id != point_id or r.warmup or not r.ok or r.sd_raw is None:
            continue
        per_step, accepted = r.sd_raw.get("per_step_drafted"), r.sd_raw.get("per_step_accepted")
        if not isinstance(per_step, list) or not isinstance(accepted, list):
            continue
        with_steps += 1
        drafted.update(int(k) for k in per_step)
        # Decode steps that drafted nothing are not in per_step_drafted: the tokens they emitted are.
        emitted = sum(int(a) + 1 for a in accepted)
        drafted[0] += max(0, (r.output_tokens or 0) - 1 - emitted)
    drafted = Counter({k: n for k, n in drafted.items() if n > 0})
    steps = sum(drafted.values())
    check = DraftedCheck(point_id=point_id, engine_batch=batch, expected_k=expected, allowed_k=allowed or [],
                         drafted=dict(sorted(drafted.items())), steps=steps)
    if not table:
        check.note = "the configuration has no dynamic table"
        return check
    if with_steps == 0 or steps == 0:
        check.note = ("the engine returned no per-step drafted counts (vLLM needs "
                      "--per-request-spec-decode-metrics detailed), so the table cannot be checked")
        return check
    if expected is None:
        check.note = "the engine's running batch was not recorded at this point, so no K is expected"
        return check
    check.modal_k = max(drafted, key=lambda k: (drafted[k], -k))
    check.share_expected = drafted.get(expected, 0) / steps
    check.share_unexpected = sum(n for k, n in drafted.items() if k not in (allowed or [])) / steps
    check.followed = check.modal_k == expected and check.share_unexpected <= UNEXPECTED_SHARE
    at = f"batch {batch:.1f}" if batch is not None else "the batch it ran"
    if check.followed:
        check.note = f"drafted K={expected} on {check.share_expected:.0%} of steps at {at}, as the table says"
    elif check.modal_k != expected:
        check.note = (f"the table names K={expected} at {at}, but the engine drafted K={check.modal_k} most "
                      f"({drafted[check.modal_k] / steps:.0%} of steps)")
    else:
        check.note = (f"{check.share_unexpected:.0%} of steps drafted a K the table gives no batch size up to "
                      f"{largest:.0f} ({sorted(k for k in drafted if k not in (allowed or []))})")
    return check
