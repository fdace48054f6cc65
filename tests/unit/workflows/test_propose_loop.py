"""A proposed K measured and decided (plans/propose.py, analysis/correction.py's pooling, analysis/proposed.py,
workflows/propose.py and the run's answer): the plan runs it beside what its drafter's walk reads there; on the sweep
and the proposal pooled, the walk lets it into the table only where it beats what it meets head to head; every
command decides on the same pooled evidence, and the answer says what each proposal's measurement said."""

from __future__ import annotations

from contextlib import nullcontext
from io import StringIO
from pathlib import Path
from typing import Any, cast

import pytest
from rich.console import Console
from test_recommend import CLEAR, Interval, recommend, sweep

from specmeter.analysis.correction import REPEAT_OFFSET, pooled
from specmeter.analysis.proposed import judged
from specmeter.config.criteria import Criteria
from specmeter.config.models import SpecConfig
from specmeter.data.workload import load_conversations
from specmeter.execution.rounds import Rounds
from specmeter.execution.runner import Execution, schedule
from specmeter.execution.servers import ServerPool
from specmeter.plans.propose import held_before, propose_plan
from specmeter.plans.run import BASELINE
from specmeter.plans.verify import best_static, verify_plan
from specmeter.predict.proposals import Proposal
from specmeter.report.recommendation import deploy_lines, evidence_table
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.plan import Role
from specmeter.schemas.planner import Calibration
from specmeter.schemas.progress import Reporter
from specmeter.schemas.proposal import Contest, ProposedK
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.workflows import propose as workflow
from specmeter.workflows.evidence import answer_evidence
from specmeter.workflows.recommend import decide
from specmeter.workflows.terminal import Terminal

K2, K3, K4, K5 = "draft_model-k2", "draft_model-k3", "draft_model-k4", "draft_model-k5"
BATCHES = {"c1": 1.0, "c4": 3.9, "c16": 13.2}
# What the proposal run at c1 measured (each against the baseline): K = 3 beats both neighbours, or loses to K = 4.
WINS = {K2: (1.30, 1.25, 1.35), K3: (1.75, 1.70, 1.80), K4: (1.60, 1.55, 1.65)}
LOSES = {K2: (1.30, 1.25, 1.35), K3: (1.45, 1.40, 1.50), K4: (1.60, 1.55, 1.65)}


def the_sweep() -> tuple[RunSummary, list[RequestRecord], Recommendation]:
    summary, records = sweep(CLEAR, BATCHES)
    return summary, records, recommend(summary, records)


def proposal(k: int, point: str, rec: Recommendation, drafter: str | None = None) -> Proposal:
    """K proposed at one measured point (of the best drafter, or the one named), with a prediction that clears the
    chosen K there."""
    of = next(d for d in rec.drafters if drafter is None or d.drafter == drafter)
    seg = next(s for s in of.segments if s.basis == "measured" and s.point_ids == [point])
    assert seg.chosen is not None
    return Proposal(drafter=of.drafter, k=k, contests=(Contest(
        point_ids=[point], batch=seg.engine_batch[0], incumbent=seg.chosen, incumbent_k=seg.k, predicted=1.7,
        predicted_incumbent=1.6),))


def proposal_run(values: dict[str, Interval], plan_from: tuple[RunSummary, Recommendation, list[Proposal]] | None
                 = None, point: str = "c1") -> tuple[RunSummary, list[RequestRecord]]:
    """A proposal run at `point` that measured `values` (with the plan that ran it, where given)."""
    summary, records = sweep({cid: {point: v} for cid, v in values.items()}, {point: BATCHES[point]})
    if plan_from is not None:
        summary.plan = propose_plan(plan_from[0], plan_from[1], plan_from[2], "run")
    return summary, records


def measured_k(rec: Recommendation, point: str) -> int:
    best = rec.best
    assert best is not None
    return next(s.k for s in best.segments if s.basis == "measured" and point in s.point_ids)


# -- the plan ---------------------------------------------------------------------------------------------------
def test_a_proposed_k_runs_beside_the_baseline_the_incumbent_and_what_the_walk_held_before_it() -> None:
    """At c1 the sweep walked baseline -> K = 2 -> K = 4. K = 3's place in that walk is after K = 2: it runs with
    K = 2 (the walk meets it there) and K = 4 (the incumbent), at c1 only, in adaptive interleaved rounds."""
    summary, _, rec = the_sweep()
    c1 = next(s for s in rec.drafters[0].segments if s.point_ids == ["c1"] and s.basis == "measured")
    assert c1.chosen == K4 and held_before(c1, 3) == K2 and held_before(c1, 5) == K4
    plan = propose_plan(summary, rec, [proposal(3, "c1", rec)], "run")
    assert plan.kind == "propose" and plan.interleave and plan.load.precision == "adaptive"
    assert [p.id for p in plan.points] == ["c1"]
    assert [c.id for c in plan.configs] == [BASELINE, K2, K4, K3]
    proposed = plan.config(K3)
    assert proposed.role is Role.candidate and proposed.spec == SpecConfig.model_validate(
        {**summary.plan.config(K4).spec.model_dump(), "num_speculative_tokens": 3})
    (entry,) = plan.proposed
    assert entry.config_id == K3 and entry.k == 3 and entry.contests[0].incumbent == K4 and entry.run is None
    cells = [(c.config.id, c.point.id) for block in schedule(plan) for c in block.cells]
    assert {cid for cid, _ in cells} == {BASELINE, K2, K3, K4} and {pid for _, pid in cells} == {"c1"}


def test_a_costlier_proposal_meets_the_incumbent_alone_and_one_past_speculation_off_the_baseline() -> None:
    summary, _, rec = the_sweep()
    above = propose_plan(summary, rec, [proposal(5, "c1", rec)], "run")
    assert [c.id for c in above.configs] == [BASELINE, K4, K5] and above.runs_at == {K4: ["c1"], K5: ["c1"]}
    off = propose_plan(summary, rec, [proposal(1, "c16", rec)], "run")  # the sweep kept speculation off at c16
    assert [c.id for c in off.configs] == [BASELINE, "draft_model-k1"] and [p.id for p in off.points] == ["c16"]


def test_two_proposals_run_each_where_it_could_win() -> None:
    summary, _, rec = the_sweep()
    plan = propose_plan(summary, rec, [proposal(3, "c1", rec), proposal(1, "c16", rec)], "run")
    assert [p.id for p in plan.points] == ["c1", "c16"]
    assert plan.runs_at[K3] == ["c1"] and plan.runs_at["draft_model-k1"] == ["c16"]
    assert all(plan.runs(plan.config(BASELINE), p.id) for p in plan.points)


def test_each_other_drafters_pick_runs_beside_a_proposal_so_drafters_stay_compared_on_the_same_requests() -> None:
    ngram = SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})
    rows = {**CLEAR, "ngram-k3": {"c1": (1.20, 1.15, 1.25), "c4": (1.10, 1.05, 1.15), "c16": (1.00, 0.95, 1.05)}}
    summary, records = sweep(rows, BATCHES, ks={K2: 2, K4: 4, "ngram-k3": 3}, extra_specs={"ngram-k3": ngram})
    rec = recommend(summary, records)
    draft = next(d.drafter for d in rec.drafters if d.drafter.startswith("draft_model"))
    ngram_at_c1 = next(s.chosen for d in rec.drafters if d.drafter != draft for s in d.segments
                       if s.basis == "measured" and s.point_ids == ["c1"])
    assert ngram_at_c1 == "ngram-k3"
    plan = propose_plan(summary, rec, [proposal(3, "c1", rec, draft)], "run")
    assert plan.runs_at["ngram-k3"] == ["c1"] and {K2, K3, K4} <= set(plan.runs_at)


def test_a_proposals_baseline_runs_one_round_where_the_walk_meets_the_proposed_k_past_it() -> None:
    """Before min_rounds every configuration a decision reads runs; the proposal decides its walk from the proposed
    K on. Past the baseline (K = 5 after K = 4, K = 3 after K = 2 at c1) the baseline only repeats what the sweep
    settled, so after the round that shows its speedups it rests; where the proposed K meets the baseline itself
    (K = 1 at c16, where the sweep kept speculation off) it runs on."""
    summary, _, rec = the_sweep()
    cases = [(5, "c1", {K4: (1.60, 1.55, 1.65), K5: (1.62, 1.57, 1.67)}, False),
             (3, "c1", WINS, False),
             (1, "c16", {"draft_model-k1": (0.97, 0.92, 1.02)}, True)]
    for k, at, values, baseline_runs in cases:
        run, records = proposal_run(values, (summary, rec, [proposal(k, at, rec)]), point=at)
        assert run.plan.load.precision == "adaptive" and run.plan.load.min_rounds == 2
        rounds, point = Rounds(run, lambda records=records: records, lambda _: 20), run.plan.points[0]
        ran = [c.id for c in run.plan.configs if run.plan.runs(c, at)]
        assert all(rounds.start(point, 0, cid) for cid in ran)
        assert rounds.start(point, 1, BASELINE) is baseline_runs, k
        assert all(rounds.start(point, 1, cid) for cid in ran if cid != BASELINE)
        entry = run.sampled(at)
        assert (entry.rested_from() if entry is not None else {}) == ({} if baseline_runs else {BASELINE: 2})


# -- pooling and the decision -------------------------------------------------------------------------------------
def test_a_configuration_the_sweep_did_not_have_joins_the_pooled_evidence_as_its_own() -> None:
    summary, records, _ = the_sweep()
    run = proposal_run(WINS)
    pooled_summary, pooled_records = pooled((summary, records), [run], [])
    joined = pooled_summary.config(K3)
    assert joined is not None and [p.repeat for p in joined.points] == [REPEAT_OFFSET]
    assert pooled_summary.plan.config(K3).role is Role.candidate
    k2 = pooled_summary.config(K2)
    assert k2 is not None and sorted(p.repeat for p in k2.points if p.point_id == "c1") == [0, REPEAT_OFFSET]
    assert {r.repeat for r in pooled_records if r.config_id == K3} == {REPEAT_OFFSET}
    assert summary.config(K3) is None and K3 not in {c.id for c in summary.plan.configs}  # the sweep is untouched
    # A second run pooled after it numbers its repeats past the first's: nothing pairs across runs.
    again, _ = pooled((pooled_summary, pooled_records), [run], [])
    assert sorted(p.repeat for p in again.config(K3).points) == [REPEAT_OFFSET, 2 * REPEAT_OFFSET]  # type: ignore[union-attr]


@pytest.mark.parametrize(("measured", "outcome"), [(WINS, "won"), (LOSES, "lost")])
def test_a_proposed_k_enters_the_table_only_where_it_won_head_to_head(measured: dict[str, Interval],
                                                                      outcome: str) -> None:
    summary, records, before = the_sweep()
    found = [proposal(3, "c1", before)]
    run = proposal_run(measured, (summary, before, found))
    after = recommend(*pooled((summary, records), [run], []))
    (entry,) = [judged(p, after) for p in run[0].plan.proposed]
    (contest,) = entry.contests
    assert contest.outcome == outcome
    assert contest.evidence and all(K3 in (h.config_id, h.against) for h in contest.evidence)
    assert measured_k(after, "c1") == (3 if outcome == "won" else 4)
    if outcome == "won":  # it beat what the walk held before it, and the incumbent did not beat it
        assert any(h.config_id == K3 and h.against == K2 and h.outcome == "beats" for h in contest.evidence)
        assert any(h.config_id == K4 and h.against == K3 and h.outcome != "beats" for h in contest.evidence)
    else:
        assert contest.evidence[-1].config_id == K4 and contest.evidence[-1].outcome == "beats"
    for point in ("c4", "c16"):  # where nothing was proposed, the table is the sweep's
        assert measured_k(after, point) == measured_k(before, point)
    # A K measured only where it could win is no static K (that runs at every batch size): the sweep's stands.
    assert after.best is not None and before.best is not None and after.best.static_k == before.best.static_k


def test_a_proposal_the_walk_could_not_tell_from_the_incumbent_is_unsettled_and_stays_out() -> None:
    summary, records, before = the_sweep()
    found = [proposal(5, "c1", before)]
    close = {K4: (1.60, 1.50, 1.70), K5: (1.61, 1.51, 1.71)}
    run = proposal_run(close, (summary, before, found))
    after = recommend(*pooled((summary, records), [run], []))
    (contest,) = judged(run[0].plan.proposed[0], after).contests
    assert contest.outcome == "unsettled" and contest.evidence[-1].outcome == "unsettled"
    assert measured_k(after, "c1") == 4


def test_a_proposal_within_the_zone_of_the_incumbent_is_tied_and_stays_out() -> None:
    """K = 5 about 1% ahead of K = 4 on every request, at most 3% better: a tie, so the cheaper K = 4 is kept; the
    proposal run decides in the recommendation's zone."""
    summary, records, before = the_sweep()
    found = [proposal(5, "c1", before)]
    close = {K4: (1.60, 1.59, 1.61), K5: (1.615, 1.605, 1.625)}
    run = proposal_run(close, (summary, before, found))
    assert run[0].plan.indifference == before.indifference
    after = recommend(*pooled((summary, records), [run], []))
    (contest,) = judged(run[0].plan.proposed[0], after).contests
    assert contest.outcome == "tied" and contest.evidence[-1].outcome == "tie"
    assert measured_k(after, "c1") == 4


# -- the run directory: one pooled reading for every command ------------------------------------------------------
def store(run_dir: Path, summary: RunSummary, records: list[RequestRecord]) -> None:
    st = RunStore(run_dir)
    for r in records:
        st.append(r)
    st.write_summary(summary)
    st.close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    summary, records, _ = the_sweep()
    # The workload a plan reloads (the sample's conversations), as a real sweep stores it.
    summary.plan.workload = load_conversations("sample", None, summary.plan.load)[1]
    store(tmp_path / "sweep", summary, records)
    return tmp_path / "sweep"


def terminal() -> tuple[Terminal, StringIO]:
    out = StringIO()
    return Terminal(out=Console(file=out, width=400), err=Console(file=StringIO(), width=400),
                    progress=lambda _console: nullcontext(Reporter())), out


def test_recommend_and_verify_decide_on_the_sweep_and_its_proposals_pooled(run_dir: Path) -> None:
    before = decide(run_dir, Criteria())
    assert before.proposed == [] and measured_k(before, "c1") == 4
    summary = load_summary(run_dir)
    run, records = proposal_run(WINS, (summary, before, [proposal(3, "c1", before)]))
    store(run_dir / "propose", run, records)
    evidence = answer_evidence(run_dir)
    assert evidence.summary.config(K3) is not None and [p.run for p in evidence.proposed] == ["propose"]
    rec = decide(run_dir, Criteria())
    assert measured_k(rec, "c1") == 3
    (entry,) = rec.proposed
    assert entry.run == "propose" and [c.outcome for c in entry.contests] == ["won"]
    # Verification of that answer finds the proposed K's configuration in the evidence it judges the table on.
    plan = verify_plan(evidence.summary, rec, str(run_dir), every_point=True)
    assert plan.best_static["c1"] == K3 and K3 in {c.id for c in plan.configs}
    # The answer says which K the model proposed and what its measurement said, briefly and with the evidence.
    brief = [line.text for line in deploy_lines(rec, full=False)]
    assert any("proposed by the step-cost model" in t and "K=3" in t and "won" in t for t in brief)
    full = [line.text for line in deploy_lines(rec)]
    assert sum(K3 in t and "beats" in t for t in full) >= 1
    assert any(f"{K3} (proposed)" in row[4] for row in evidence_table(rec, rec.drafters[0]).rows)


class Pool:
    """The servers a proposal step stops (the sweep's servers stay up for verification)."""

    def __init__(self) -> None:
        self.stopped: list[str] = []

    def stop(self, config: Any) -> None:
        self.stopped.append(config.id)


@pytest.mark.parametrize(("measured", "outcome", "keeps_server"), [(WINS, "won", True), (LOSES, "lost", False)])
def test_the_tune_loops_proposal_step_measures_the_best_proposal_and_says_what_it_said(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch, measured: dict[str, Interval], outcome: str,
        keeps_server: bool) -> None:
    """The model's proposals (given here) over the budget are named, not run; the one within it is planned,
    measured into propose/ (a synthetic measurement stands in for the servers), decided on the pooled evidence
    and reported; a proposal that won nowhere has its server stopped, unless verification will run it as a point's
    best static K; one that won keeps it for verification."""
    rec = decide(run_dir, Criteria())
    found = [proposal(3, "c1", rec), proposal(1, "c16", rec)]
    monkeypatch.setattr(workflow, "found_proposals", lambda *_: (found, [], ""))
    ran: list[Execution] = []

    def measure(ex: Execution, target: Path, _term: Terminal, keep: Any, _pool: Any, *, show: bool) -> RunSummary:
        ran.append(ex)
        summary, records = proposal_run(measured)
        summary.plan = ex.plan
        store(target, summary, records)
        keep(summary)
        return summary

    monkeypatch.setattr(workflow, "measure_and_keep", measure)
    term, out = terminal()
    pool, kept = Pool(), []
    workflow.propose(run_dir, cast(Calibration, Calibration.model_construct()), workflow.ProposeRequest(budget=1),
                     term, cast(ServerPool, pool), kept.append)
    (ex,) = ran
    assert [p.k for p in ex.plan.proposed] == [3] and len(kept) == 1  # the budget: one
    assert load_summary(run_dir / "propose").plan.kind == "propose"
    said = out.getvalue()
    assert "K=1" in said and "over the budget" in said
    assert f"proposed by the step-cost model: draft_model demo-draft K=3 ({K3}, measured in propose): {outcome}" \
        in said
    assert pool.stopped == ([] if keeps_server else [K3])
    decided = decide(run_dir, Criteria())
    assert measured_k(decided, "c1") == (3 if outcome == "won" else 4)
    assert decided.best is not None
    assert (best_static(decided.best, BASELINE).get("c1") == K3) is keeps_server


def test_a_proposal_that_lost_but_is_a_points_best_static_k_keeps_its_server_for_verification(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 5 measures a hair above K = 4 at c1, less than the min gain a costlier K must win by: it wins nothing, yet
    verification runs it there as the best static K against the table, so its server stays up."""
    k5 = "draft_model-k5"
    found = [proposal(5, "c1", decide(run_dir, Criteria()))]
    monkeypatch.setattr(workflow, "found_proposals", lambda *_: (found, [], ""))

    def measure(ex: Execution, target: Path, _term: Terminal, keep: Any, _pool: Any, *, show: bool) -> RunSummary:
        summary, records = proposal_run({K4: (1.60, 1.55, 1.65), k5: (1.605, 1.555, 1.655)})
        summary.plan = ex.plan
        store(target, summary, records)
        return summary

    monkeypatch.setattr(workflow, "measure_and_keep", measure)
    term, out = terminal()
    pool = Pool()
    workflow.propose(run_dir, cast(Calibration, Calibration.model_construct()), workflow.ProposeRequest(budget=1),
                     term, cast(ServerPool, pool))
    assert f"K=5 ({k5}, measured in propose): unsettled" in out.getvalue()
    decided = decide(run_dir, Criteria())
    assert decided.best is not None and measured_k(decided, "c1") == 4
    assert best_static(decided.best, BASELINE)["c1"] == k5
    assert pool.stopped == []


def test_a_later_proposal_run_takes_the_next_free_directory_and_pools_with_the_earlier(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    term, _ = terminal()
    cal = cast(Calibration, Calibration.model_construct())
    for k, point, measured in ((3, "c1", WINS), (1, "c16", {"draft_model-k1": (1.20, 1.15, 1.25)})):
        found = [proposal(k, point, decide(run_dir, Criteria()))]
        monkeypatch.setattr(workflow, "found_proposals", lambda *_, found=found: (found, [], ""))

        def measure(ex: Execution, target: Path, _term: Terminal, keep: Any, _pool: Any, *, show: bool,
                    measured: dict[str, Interval] = measured, point: str = point) -> RunSummary:
            summary, records = proposal_run(measured, point=point)
            summary.plan = ex.plan
            store(target, summary, records)
            return summary

        monkeypatch.setattr(workflow, "measure_and_keep", measure)
        workflow.propose(run_dir, cal, workflow.ProposeRequest(), term, None)
    assert (run_dir / "propose-2" / "summary.json").exists()
    rec = decide(run_dir, Criteria())
    assert [(p.k, p.run) for p in rec.proposed] == [(3, "propose"), (1, "propose-2")]
    assert measured_k(rec, "c1") == 3 and measured_k(rec, "c16") == 1


def test_proposals_inside_the_indifference_zone_are_named_and_not_measured(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's only proposal is predicted inside the indifference zone: the terminal names it and why, and
    nothing is measured (no propose/ directory, no server)."""
    ties = [proposal(5, "c1", decide(run_dir, Criteria()))]
    monkeypatch.setattr(workflow, "found_proposals", lambda *_: ([], ties, "no unmeasured K"))
    monkeypatch.setattr(workflow, "measure_and_keep", lambda *_, **__: pytest.fail("nothing is measured"))
    term, out = terminal()
    workflow.propose(run_dir, cast(Calibration, Calibration.model_construct()), workflow.ProposeRequest(), term, None)
    said = " ".join(out.getvalue().split())
    assert "inside the 3% indifference zone, not measured: draft_model demo-draft K=5 at c1" in said
    assert "--indifference" in said and "proposals: none" not in said
    assert not (run_dir / "propose").exists()


def test_no_budget_or_no_calibration_measures_nothing(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workflow, "found_proposals", lambda *_: pytest.fail("nothing is proposed"))
    term, _ = terminal()
    workflow.propose(run_dir, cast(Calibration, Calibration.model_construct()), workflow.ProposeRequest(budget=0),
                     term, None)
    workflow.propose(run_dir, None, workflow.ProposeRequest(), term, None)
    assert not (run_dir / "propose").exists()


def test_a_proposal_recorded_in_an_answer_reads_back() -> None:
    entry = ProposedK(config_id=K3, drafter="d", k=3, contests=[Contest(
        point_ids=["c1"], batch=1.0, incumbent=K4, incumbent_k=4, predicted=1.5, predicted_incumbent=1.4,
        outcome="won")], run="propose")
    _, _, rec = the_sweep()
    rec.proposed = [entry]
    again = Recommendation.model_validate_json(rec.model_dump_json())
    assert again.proposed == [entry] and again.proposed[0].edge == pytest.approx(1.5 / 1.4)
    old = rec.model_dump(exclude={"proposed"})  # a recommendation.json written before proposals
    assert Recommendation.model_validate(old).proposed == []


@pytest.mark.parametrize(("given", "expected"), [(None, (1, 6)), ((3, 5), (3, 5))])
def test_proposals_take_the_sweep_files_k_range_unless_propose_k_is_given(
        monkeypatch: pytest.MonkeyPatch, given: tuple[int, int] | None, expected: tuple[int, int]) -> None:
    """A drafter swept as `num_speculative_tokens: 1-6` is proposed over 1-6, not over its measured span widened by
    one; --propose-k stands over the file. (The step-cost model is stood in for: only the range is at stake.)"""
    summary, _, rec = the_sweep()
    for c in summary.plan.configs:
        if c.role is Role.candidate:
            c.k_range = (1, 6)
    asked: list[tuple[int, int] | None] = []

    drafters = {workflow.drafter_key(summary.plan.configs[1].spec)}
    model = type("Model", (), {"drafters": drafters})
    monkeypatch.setattr(workflow.Predictor, "calibrated", lambda cal, mix: type("P", (), {"model": model})())
    monkeypatch.setattr(workflow, "drafter_profiles", lambda *_: dict.fromkeys(drafters))
    monkeypatch.setattr(workflow, "proposals", lambda *_, k_range, **__: asked.append(k_range) or [])
    workflow.found_proposals(summary, "run", cast(Calibration, Calibration.model_construct()), rec, given)
    assert asked == [expected]
