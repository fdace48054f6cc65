"""Verification of a dynamic table: the drafted-K check (analysis/verify.py) and the verify plan (plans/verify.py)."""

from __future__ import annotations

import pytest
from test_recommend import BATCHES, CLEAR, latency, sweep

from specmeter.analysis.recommend import recommend
from specmeter.analysis.sequential import futile_points
from specmeter.analysis.verify import drafted_check, ignored_table, recovery_check
from specmeter.common.errors import InputError
from specmeter.config.load_search import LoadSearch
from specmeter.config.models import ConcurrencyPoint, EngineSpec, SpecConfig, dynamic_k_at
from specmeter.execution.runner import schedule
from specmeter.plans.verify import VERIFY_ID, best_static, round_seconds, verify_plan, where_to_verify
from specmeter.report.decisions import verification_table
from specmeter.report.recommendation import status
from specmeter.schemas.analysis import VerifyPoint
from specmeter.schemas.metrics import RunningBatch
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import Analysis, PointResult, PointSampling, RunSummary
from specmeter.schemas.sd import SDSummary

TABLE = [(1, 1, 4), (2, 8, 2), (9, 64, 0)]
DYNAMIC = PlannedConfig(
    id=VERIFY_ID, role=Role.verification, server=VERIFY_ID, engine=EngineSpec(model="m"),
    spec=SpecConfig.model_validate({"method": "draft_model", "num_speculative_tokens": 4, "draft_model": "d",
                                    "num_speculative_tokens_per_batch_size": TABLE}))


def point(batch: float, largest: float) -> PointResult:
    return PointResult(point_id="c4", latency=latency(), sd=SDSummary(available=False),
                       running_batch=RunningBatch(gauge="g", interval_s=0.25, samples=10, mean=batch,
                                                  steady_mean=batch, max=largest))


def rec(drafted: list[int], accepted: list[int] | None = None, output_tokens: int | None = None) -> RequestRecord:
    accepted = accepted if accepted is not None else [1] * len(drafted)
    emitted = sum(a + 1 for a in accepted)
    return RequestRecord(config_id=VERIFY_ID, point_id="c4", conversation_id=f"q{len(drafted)}", ok=True,
                         output_tokens=output_tokens if output_tokens is not None else emitted + 1,
                         sd_raw={"per_step_drafted": drafted, "per_step_accepted": accepted})


def test_dynamic_k_at_follows_vllms_lookup() -> None:
    assert [dynamic_k_at(TABLE, b, 4) for b in (1, 2, 8, 9, 64, 500)] == [4, 2, 2, 0, 0, 0]
    assert dynamic_k_at([(1, 4, 6)], 2, 4) == 4  # capped at num_speculative_tokens, as vLLM does
    assert dynamic_k_at([(1, 4, 3)], 100, 4) == 3  # past the last range the last K carries on


def test_followed_when_the_modal_k_is_the_tables_at_the_batch_run() -> None:
    check = drafted_check(DYNAMIC, "c4", [point(4.0, 5.0)], [rec([2] * 30), rec([4, 4, 2, 2, 2])])
    assert check.expected_k == 2 and check.modal_k == 2 and check.followed
    assert check.allowed_k == [2, 4] and check.share_unexpected == 0
    assert check.drafted == {2: 33, 4: 2}


def test_not_followed_when_the_engine_drafts_another_k() -> None:
    check = drafted_check(DYNAMIC, "c4", [point(4.0, 5.0)], [rec([4] * 30)])
    assert check.followed is False and check.modal_k == 4 and "K=2" in check.note


def test_steps_that_drafted_nothing_are_counted_from_the_tokens() -> None:
    """At batch 12 the table says K = 0: the engine reports no step, yet the request decoded 40 tokens."""
    check = drafted_check(DYNAMIC, "c4", [point(12.0, 12.0)], [rec([2, 2], [1, 1], output_tokens=41)])
    assert check.expected_k == 0 and check.drafted == {0: 36, 2: 2} and check.followed


def test_a_k_outside_the_table_is_flagged_even_if_the_mode_is_right() -> None:
    check = drafted_check(DYNAMIC, "c4", [point(4.0, 4.0)], [rec([2] * 20 + [3] * 5)])
    assert check.modal_k == 2 and check.followed is False and "[3]" in check.note


def test_without_per_step_stats_nothing_is_claimed() -> None:
    bare = RequestRecord(config_id=VERIFY_ID, point_id="c4", conversation_id="q", ok=True, output_tokens=10,
                         sd_raw={"num_draft_tokens": 8})
    check = drafted_check(DYNAMIC, "c4", [point(4.0, 4.0)], [bare])
    assert check.followed is None and "detailed" in check.note


def test_verify_plan_runs_baseline_best_statics_and_the_dynamic_config() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    recommendation = recommend(summary, records)
    plan = verify_plan(summary, recommendation, "run", every_point=True)
    assert plan.kind == "verify" and plan.interleave and plan.points == summary.plan.points
    assert [c.role for c in plan.configs] == [Role.baseline, Role.candidate, Role.candidate, Role.verification]
    assert plan.best_static == {"c1": "draft_model-k4", "c4": "draft_model-k2", "c16": "draft_model-k2"}
    assert plan.configs[-1].spec == recommendation.drafters[0].spec
    assert best_static(recommendation.drafters[0], "baseline") == plan.best_static
    # A static config runs only where it is the best static: each point runs baseline, one static, dynamic.
    cells = [(c.config.id, c.point.id, c.repeat) for block in schedule(plan) for c in block.cells]
    assert plan.load.precision == "adaptive"  # rounds until the judgement of the table settles
    for p in plan.points:
        for r in range(plan.load.max_rounds):
            assert sorted(cid for cid, pid, rep in cells if pid == p.id and rep == r) == sorted(
                ["baseline", plan.best_static[p.id], VERIFY_ID])


def test_verify_of_a_searched_sweep_runs_the_points_it_measured_without_searching() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    summary.plan.load.search = [LoadSearch(axis="concurrency", min=1, max=16, start=[1, 16])]
    plan = verify_plan(summary, recommend(summary, records), "run", every_point=True)
    assert plan.points == summary.plan.points and plan.load.search == []


def test_verify_of_a_ramp_that_stopped_at_saturation_runs_only_what_the_sweep_measured() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    summary.plan.load.points.append(ConcurrencyPoint(concurrency=64))  # skipped by the sweep's ramp: never measured
    plan = verify_plan(summary, recommend(summary, records), "run", every_point=True)
    assert [p.id for p in plan.points] == ["c1", "c4", "c16"]
    assert not plan.load.stop_at_saturation  # verify checks the sweep's points; it runs no ramp of its own


# CLEAR with speculation clearly losing at c16: every decision at every point settled.
SETTLED = {"draft_model-k2": {**CLEAR["draft_model-k2"], "c16": (0.80, 0.75, 0.85)},
           "draft_model-k4": {**CLEAR["draft_model-k4"], "c16": (0.70, 0.65, 0.75)}}


def test_verify_runs_where_the_table_can_be_wrong_and_carries_the_sweeps_settled_evidence_elsewhere() -> None:
    """K = 4 against K = 2 at c4 straddles the threshold, K = 4 measured a little faster: the table's K there (the
    cheaper K = 2) rests on an open decision that K = 4 could still win, so verification runs c4 (with the static it
    is judged against there) and carries c1 and c16, which the sweep settled; no static best only at a carried
    point is started."""
    near = {"draft_model-k2": {**SETTLED["draft_model-k2"], "c4": (1.25, 1.20, 1.30)},
            "draft_model-k4": {**SETTLED["draft_model-k4"], "c4": (1.27, 1.18, 1.36)}}
    summary, records = sweep(near, BATCHES)
    recommendation = recommend(summary, records)
    c4 = next(s for s in recommendation.drafters[0].segments if s.point_ids == ["c4"])
    assert any(h.outcome == "unsettled" for h in c4.evidence) and c4.k == 2
    plan = verify_plan(summary, recommendation, "run")
    assert [p.id for p in plan.points] == ["c4"] and set(plan.carried) == {"c1", "c16"}
    assert not plan.proof and plan.load.precision == "adaptive"
    assert all("settled" in why for why in plan.carried.values())
    assert plan.best_static == {"c4": best_static(recommendation.drafters[0], "baseline")["c4"]}
    assert {c.id for c in plan.configs} == {"baseline", plan.best_static["c4"], VERIFY_ID}
    everything = verify_plan(summary, recommendation, "run", every_point=True)
    assert everything.points == summary.plan.points and not everything.carried


def test_a_point_where_the_table_runs_the_best_static_k_is_carried_though_a_decision_is_open() -> None:
    """K = 4 a little slower than K = 2 at c4, the comparison open: the table keeps K = 2, the best static K there,
    so the one comparison verification reads (the best static K against the table) does not exist at c4 and no
    round there could correct the table; c4 is carried, and the table settled elsewhere runs once as a proof."""
    near = {"draft_model-k2": {**SETTLED["draft_model-k2"], "c4": (1.25, 1.20, 1.30)},
            "draft_model-k4": {**SETTLED["draft_model-k4"], "c4": (1.24, 1.15, 1.33)}}
    recommendation = recommend(*sweep(near, BATCHES))
    assert recommendation.best is not None
    c4 = next(s for s in recommendation.best.segments if s.point_ids == ["c4"])
    assert any(h.outcome == "unsettled" for h in c4.evidence) and c4.k == 2
    run, carried, proof = where_to_verify(recommendation.best, "baseline", ["c1", "c4", "c16"])
    assert proof and run == ["c1"] and "measured best of the static Ks" in carried["c4"]


def test_a_point_whose_open_decision_stopped_for_futility_is_carried() -> None:
    """The same open decision at c4, where the runs that measured c4 stopped it for futility (no win likely by the
    budget: the cheaper K stays): verification carries c4 as it carries a settled point, and names why; a point a
    budget stopped anywhere stays open."""
    near = {"draft_model-k2": {**SETTLED["draft_model-k2"], "c4": (1.25, 1.20, 1.30)},
            "draft_model-k4": {**SETTLED["draft_model-k4"], "c4": (1.24, 1.15, 1.33)}}
    summary, records = sweep(near, BATCHES)
    recommendation = recommend(summary, records)

    def stopped(**stops: str) -> RunSummary:
        return summary.model_copy(update={"sampling": [
            PointSampling(point_id=pid, precision="adaptive", rounds=2, requests=8, confidence=0.9, stopped=how)
            for pid, how in stops.items()]})

    futile = futile_points([stopped(c1="settled", c4="settled", c16="settled"), stopped(c4="futile")])
    assert futile == {"c4"}
    plan = verify_plan(summary, recommendation, "run", futile=futile)
    assert plan.proof and len(plan.points) == 1  # c4 counts as settled: one point proves the table
    assert recommendation.best is not None
    _, carried, proof = where_to_verify(recommendation.best, "baseline", ["c1", "c4", "c16"], futile=futile)
    assert proof and "c4" in carried and "futility" in carried["c4"]
    assert futile_points([stopped(c4="futile"), stopped(c4="budget")]) == frozenset()
    assert futile_points([stopped(c4="settled")]) == frozenset()


def test_a_tie_settles_a_point_for_verification_too() -> None:
    """K = 4 at most 3% better than K = 2 at c4 (a tie: the cheaper K = 2 kept) rests on settled evidence, so c4 is
    carried like the points where a K won or lost outright; the verify plan reads ties in the recommendation's zone."""
    tied = {"draft_model-k2": {**SETTLED["draft_model-k2"], "c4": (1.25, 1.24, 1.26)},
            "draft_model-k4": {**SETTLED["draft_model-k4"], "c4": (1.26, 1.25, 1.27)}}
    summary, records = sweep(tied, BATCHES)
    recommendation = recommend(summary, records)
    c4 = next(s for s in recommendation.drafters[0].segments if s.point_ids == ["c4"])
    assert [h.outcome for h in c4.evidence if h.config_id == "draft_model-k4"] == ["tie"] and c4.k == 2
    plan = verify_plan(summary, recommendation, "run")
    assert plan.proof and len(plan.points) == 1  # c4 counts as settled
    assert recommendation.best is not None
    _, carried, _ = where_to_verify(recommendation.best, "baseline", ["c1", "c4", "c16"])
    assert "c4" in carried and "ties with" in carried["c4"]
    assert plan.indifference == recommendation.indifference == summary.plan.indifference


def test_a_table_settled_everywhere_still_runs_once_where_it_drafts() -> None:
    summary, records = sweep(SETTLED, BATCHES)
    recommendation = recommend(summary, records)
    plan = verify_plan(summary, recommendation, "run")
    proof = plan.points[0].id
    assert len(plan.points) == 1 and set(plan.carried) == {"c1", "c4", "c16"} - {proof}
    assert plan.proof and plan.load.precision == "fixed" and plan.repeats == 1  # one round: it proves, not judges
    segment = next(s for s in recommendation.drafters[0].segments if s.point_ids == [proof])
    assert segment.k > 0  # a point where the table drafts, and of those the one whose round the sweep ran quickest
    drafting = [pid for s in recommendation.drafters[0].segments if s.basis == "measured" and s.k > 0
                for pid in s.point_ids]
    base, statics = "baseline", best_static(recommendation.drafters[0], "baseline")
    seconds = {p: round_seconds(summary, p, [base, statics[p], statics[p]]) for p in drafting}
    assert len(set(seconds.values())) == len(seconds) and proof == min(drafting, key=lambda p: seconds[p] or 0.0)


def test_a_proof_runs_at_the_first_drafting_point_where_no_round_was_timed() -> None:
    recommendation = recommend(*sweep(SETTLED, BATCHES))
    assert recommendation.best is not None
    run, carried, proof = where_to_verify(recommendation.best, "baseline", ["c1", "c4", "c16"])
    assert proof and run == ["c1"] and set(carried) == {"c4", "c16"}
    run, _, _ = where_to_verify(recommendation.best, "baseline", ["c1", "c4", "c16"], cost={"c1": 9.0, "c4": 3.0}.get)
    assert run == ["c4"]


def test_verify_refuses_a_recommendation_that_keeps_speculation_off() -> None:
    losing = {"draft_model-k2": {"c1": (0.9, 0.85, 0.95)}}
    summary, records = sweep(losing, {"c1": 1.0})
    with pytest.raises(InputError, match="no dynamic config to verify"):
        verify_plan(summary, recommend(summary, records), "run")


def test_verify_of_an_attached_sweep_needs_an_endpoint() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    for c in summary.plan.configs:
        c.engine = EngineSpec(endpoint="http://127.0.0.1:1")
    with pytest.raises(InputError, match="--endpoint"):
        verify_plan(summary, recommend(summary, records), "run")
    plan = verify_plan(summary, recommend(summary, records), "run", endpoint="http://127.0.0.1:2")
    assert plan.configs[-1].engine.endpoint == "http://127.0.0.1:2"


def test_a_point_where_the_table_was_edited_away_from_the_sweeps_choice_runs() -> None:
    """The sweep settled K = 4 at c1; a table that drafts 2 there has no sweep evidence behind it at c1."""
    summary, records = sweep(SETTLED, BATCHES)
    recommendation = recommend(summary, records)
    best = recommendation.drafters[0]
    assert best.spec is not None
    edited = best.spec.model_copy(update={"num_speculative_tokens_per_batch_size": [(1, 8, 2), (9, 64, 0)]})
    plan = verify_plan(summary, recommendation.model_copy(update={"drafters": [best.model_copy(
        update={"spec": edited})]}), "run")
    assert "c1" in [p.id for p in plan.points] and "c1" not in plan.carried


def test_a_point_whose_segment_was_edited_with_the_table_runs_too() -> None:
    """An edited answer whose segments say the new K as well (as the refusal to load one that differs asks): the
    sweep's evidence at c1 is about the K it chose there, not the edited one, so c1 runs."""
    summary, records = sweep(SETTLED, BATCHES)
    recommendation = recommend(summary, records)
    best = recommendation.drafters[0]
    assert best.spec is not None
    c1 = next(s for s in best.segments if s.point_ids == ["c1"])
    ranges = best.spec.num_speculative_tokens_per_batch_size
    assert c1.k != 2 and ranges
    table = [(lo, hi, 2 if lo <= c1.start <= hi else k) for lo, hi, k in ranges]
    edited = best.model_copy(update={
        "spec": best.spec.model_copy(update={"num_speculative_tokens_per_batch_size": table}),
        "segments": [s.model_copy(update={"k": 2}) if s is c1 else s for s in best.segments]})
    run, carried, proof = where_to_verify(edited, "baseline", ["c1", "c4", "c16"])
    assert run == ["c1"] and not proof and set(carried) == {"c4", "c16"}  # judged there, not only a proof


def test_the_verification_table_lists_each_carried_point_with_the_evidence_it_rests_on() -> None:
    summary, records = sweep(SETTLED, BATCHES)
    plan = verify_plan(summary, recommend(summary, records), "run")
    shown = summary.model_copy(update={"plan": plan})
    table = verification_table(shown)
    assert table is not None
    carried = [row for row in table.rows if row[-1].startswith("holds: not run again")]
    assert [row[0] for row in carried] == list(plan.carried) and len(carried) == 2
    assert all(plan.carried[row[0]] in row[-1] for row in carried)


def _verified(*checks: tuple[str, float, list[int]]) -> RunSummary:
    """A verification run holding only what ignored_table reads: its dynamic config and each point's drafted
    check, from (point, engine batch, K drafted per step)."""
    points = []
    for point_id, batch, drafted in checks:
        record = rec(drafted).model_copy(update={"point_id": point_id})
        check = drafted_check(DYNAMIC, point_id, [point(batch, batch)], [record])
        points.append(VerifyPoint(point_id=point_id, config_id=VERIFY_ID, static_id=None, vs_baseline=None,
                                  vs_static=None, drafted=check))
    return RunSummary.model_construct(plan=Plan.model_construct(configs=[DYNAMIC]),
                                      analysis=Analysis(verification=points))


def test_a_table_the_engine_ran_as_its_largest_static_k_everywhere_fails_verification_in_one_line() -> None:
    """vLLM's V2 model runner is reported to ignore the per-batch table: every step drafts
    num_speculative_tokens. The table names K = 2 at batch 4 and 0 at 16; the engine drafted 4 at both."""
    ignored = ignored_table(_verified(("c1", 1.0, [4] * 30), ("c4", 4.0, [4] * 30), ("c16", 16.0, [4] * 30)))
    assert ignored is not None and "ignored the K table" in ignored and "K=4" in ignored
    assert "\n" not in ignored and "c4" in ignored
    # Where it followed the table at one point, or the table names the largest K everywhere it ran, no verdict.
    assert ignored_table(_verified(("c1", 1.0, [4] * 30), ("c4", 4.0, [2] * 30))) is None
    assert ignored_table(_verified(("c1", 1.0, [4] * 30))) is None
    # Nothing counted per step: nothing to claim.
    assert ignored_table(_verified()) is None


def test_an_ignored_table_reads_as_a_failed_verification() -> None:
    answer = recommend(*sweep(CLEAR, BATCHES)).model_copy(update={"verification": "ignored", "verified_in": "verify"})
    assert "FAILED" in status(answer) and "ignored this table" in status(answer)


def _request(config_id: str, conversation: str, accepted: list[int], zero_steps: int) -> RequestRecord:
    """A request whose reported steps accepted `accepted` drafts (K = 2 each) and which drafted nothing on
    `zero_steps` more decode steps."""
    emitted = sum(a + 1 for a in accepted)
    return RequestRecord(config_id=config_id, point_id="c4", conversation_id=conversation, ok=True,
                         output_tokens=1 + emitted + zero_steps,
                         sd_raw={"per_step_drafted": [2] * len(accepted), "per_step_accepted": accepted})


def test_acceptance_that_collapses_after_k0_fails_recovery_and_one_that_holds_recovers() -> None:
    """TensorRT-LLM #16888: after a K = 0 tier acceptance collapsed for the rest of each request. Twelve requests
    passed through K = 0 on the dynamic server; on the static one the same requests accept the first draft on 75%
    of their steps."""
    static = [_request("static", f"q{i}", [1, 2, 0, 1] * 3 if i % 2 else [2, 1, 1, 0] * 3, 0) for i in range(12)]
    collapsed = [_request(VERIFY_ID, f"q{i}", [0, 0, 0, 1] * 3, 6) for i in range(12)]
    held = [_request(VERIFY_ID, f"q{i}", [1, 1, 0, 2] * 3 if i % 3 else [2, 0, 1, 1] * 3, 6) for i in range(12)]
    bad = recovery_check(VERIFY_ID, "static", "c4", static + collapsed)
    assert bad.requests == 12 and bad.recovered is False and bad.high is not None and bad.high < 0
    assert "did not recover" in bad.note and "\n" not in bad.note
    good = recovery_check(VERIFY_ID, "static", "c4", static + held)
    assert good.recovered is True and good.low is not None and good.low > -0.1
    # Requests that never drafted nothing say nothing about recovery; too few pairs claim nothing.
    assert recovery_check(VERIFY_ID, "static", "c4", static + [
        _request(VERIFY_ID, f"q{i}", [0, 0, 0, 0], 0) for i in range(12)]).recovered is None
    assert recovery_check(VERIFY_ID, "static", "c4", static + collapsed[:3]).recovered is None
