"""Verification that corrects the table (analysis/verify.py's challenge, analysis/correction.py): a static K
that beats the table head to head at the batch the engine ran rewrites it from the pooled evidence."""

from __future__ import annotations

from test_recommend import REQUESTS, TOKENS, latency, requests, spec, sweep

from specmeter.analysis.correction import REPEAT_OFFSET, changes, correct, disagreements, pooled, same_table
from specmeter.analysis.decide import analyze
from specmeter.analysis.recommend import recommend
from specmeter.analysis.sequential import distinct, point_walks, resting, settled
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.execution.rounds import Rounds
from specmeter.plans.run import BASELINE
from specmeter.plans.verify import VERIFY_ID
from specmeter.report.decisions import verification_table
from specmeter.schemas.metrics import RunningBatch
from specmeter.schemas.plan import Plan, PlannedConfig, Role, WorkloadSelection
from specmeter.schemas.recommend import KRange
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDSummary

K2, K4 = "draft_model-k2", "draft_model-k4"
# Two rounds of the sweep could not tell K = 4 from K = 2 at batch 1 (3% ahead, within its noise): the table
# says 2.
UNSURE = {K2: {"c1": [(1.50, 1.45, 1.55)] * 2}, K4: {"c1": [(1.545, 1.495, 1.595)] * 2}}


def verification(table: list[tuple[int, int, int]], dynamic: float, static: float, static_id: str = K4,
                 drafted_k: int = 2, batch: float = 1.0) -> tuple[RunSummary, list[RequestRecord]]:
    """A verify run at one point (engine batch `batch`): baseline, one static, and the dynamic table, which
    drafted `drafted_k` on every step; `dynamic` and `static` are their speedups over the baseline."""
    engine = EngineSpec(model="models/demo-target", max_num_seqs=64)
    table_spec = SpecConfig.model_validate({**spec(max(k for *_, k in table)).model_dump(),
                                            "num_speculative_tokens_per_batch_size": table})
    configs = [PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(), engine=engine, server=BASELINE),
               PlannedConfig(id=static_id, role=Role.candidate, spec=spec(int(static_id[-1])), engine=engine,
                             server=static_id),
               PlannedConfig(id=VERIFY_ID, role=Role.verification, spec=table_spec, engine=engine, server=VERIFY_ID)]
    plan = Plan(kind="verify", configs=configs, load=LoadSpec(concurrency=[1]), interleave=True,
                workload=WorkloadSelection(dataset="sample"), best_static={"c1": static_id})
    records: list[RequestRecord] = []
    results = []
    for cid, value in ((BASELINE, 1.0), (static_id, static), (VERIFY_ID, dynamic)):
        recs = requests(cid, "c1", 0, (value, value - 0.01, value + 0.01), 1)
        if cid == VERIFY_ID:
            steps = (TOKENS - 1) // (drafted_k + 1) if drafted_k else 0  # K = 0 steps are counted from tokens
            for r in recs:
                r.sd_raw = {"per_step_drafted": [drafted_k] * steps, "per_step_accepted": [drafted_k] * steps}
                if drafted_k:
                    r.output_tokens = steps * (drafted_k + 1) + 1
        records += recs
        results.append(ConfigResult(config_id=cid, role=next(c.role for c in configs if c.id == cid), spec_label=cid,
                                    points=[PointResult(point_id="c1", latency=latency(
                                        sum(r.e2e_s or 0.0 for r in recs), TOKENS * REQUESTS),
                                        sd=SDSummary(available=False), running_batch=RunningBatch(
                                            gauge="vllm:num_requests_running", interval_s=0.25, samples=40,
                                            mean=batch, steady_mean=batch, max=batch))]))
    summary = RunSummary(specmeter_version="0", created_utc="2026-01-01T00:00:00Z", status="complete", plan=plan,
                         configs=results)
    summary.analysis = analyze(summary, records)
    return summary, records


def test_a_static_k_that_beats_the_table_at_its_batch_is_a_disagreement() -> None:
    summary, _ = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.50, static=1.65)
    (vp,) = summary.analysis.verification
    assert vp.drafted.followed and vp.drafted.expected_k == 2
    assert vp.challenge is not None and vp.challenge.outcome == "beats" and vp.static_k == 4
    assert vp.disagrees and "K=4 beats its K=2" in vp.note
    assert disagreements(summary) == [vp.note]


def test_the_tables_own_k_winning_is_the_dynamic_modes_cost_not_a_wrong_table() -> None:
    summary, _ = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.40, static=1.55, static_id=K2)
    (vp,) = summary.analysis.verification
    assert vp.challenge is None and not vp.disagrees and "dynamic mode's overhead" in vp.note


def test_a_k0_range_is_wrong_only_where_a_static_k_beats_serving_without_speculation() -> None:
    """K = 0 in a dynamic table still runs the drafter: a static K beating that says nothing a table can fix;
    only one beating the baseline does."""
    table = [(1, 8, 2), (9, 64, 0)]
    summary, _ = verification(table, dynamic=0.89, static=0.95, static_id=K2, drafted_k=0, batch=13.0)
    (vp,) = summary.analysis.verification
    assert vp.drafted.expected_k == 0
    assert vp.challenge is not None and vp.challenge.against == BASELINE and not vp.disagrees
    summary, _ = verification(table, dynamic=0.89, static=1.20, static_id=K2, drafted_k=0, batch=13.0)
    (vp,) = summary.analysis.verification
    assert vp.disagrees and vp.challenge is not None and vp.challenge.against == BASELINE


def test_a_table_that_holds_is_no_disagreement() -> None:
    summary, _ = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.55, static=1.55)
    (vp,) = summary.analysis.verification
    assert vp.challenge is not None and vp.challenge.outcome == "does_not_beat" and not vp.disagrees


def test_a_static_k_that_ties_with_the_table_is_no_disagreement() -> None:
    """K = 4 is 1% ahead of the table's K = 2, at most 3% better: the table's K is within 3% of it, so the table
    holds."""
    summary, _ = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.55, static=1.565)
    (vp,) = summary.analysis.verification
    assert vp.challenge is not None and vp.challenge.outcome == "tie" and not vp.disagrees
    assert vp.note.startswith("the table holds here") and "at most 3% better" in vp.note
    assert disagreements(summary) == []
    table = verification_table(summary)
    assert table is not None and table.rows[-1][-1] == "holds (a tie, at most 3% better)"


def test_pooled_evidence_counts_the_dynamic_server_as_the_k_it_drafted() -> None:
    sweep_run = sweep(UNSURE, {"c1": 1.0})
    verify_run = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.45, static=1.65)
    summary, records = pooled(sweep_run, [verify_run], [K2, K4])
    k2 = summary.config(K2)
    assert k2 is not None and sorted(p.repeat for p in k2.points) == [0, 1, REPEAT_OFFSET]
    moved = [r for r in records if r.config_id == K2 and r.repeat == REPEAT_OFFSET]
    assert len(moved) == REQUESTS and not any(r.config_id == VERIFY_ID for r in records)
    assert sweep_run[0].config(K2) is not None and len(sweep_run[0].config(K2).points) == 2  # type: ignore[union-attr]
    not_followed = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.45, static=1.65, drafted_k=4)
    summary, _ = pooled(sweep_run, [not_followed], [K2, K4])
    assert [p.repeat for p in summary.config(K2).points] == [0, 1]  # type: ignore[union-attr]


def test_the_correction_decides_again_on_the_pooled_evidence_and_says_what_changed() -> None:
    # A second point whose rounds agree tells how little a round moves on this machine (analysis.noise): the
    # verification's round against the sweep's two is then evidence, not noise.
    steady = {K2: {**UNSURE[K2], "c4": [(1.20, 1.18, 1.22)] * 4}, K4: {**UNSURE[K4], "c4": [(1.10, 1.08, 1.12)] * 4}}
    sweep_run = sweep(steady, {"c1": 1.0, "c4": 4.0})
    first = recommend(*sweep_run)
    assert first.best is not None and first.best.ranges[0].k == 2  # the sweep alone cannot tell
    verify_run = verification([r.entry for r in first.best.ranges], dynamic=1.50, static=1.62)  # type: ignore[misc]
    corrected = correct(sweep_run, [verify_run], first, "recommendation-r1.json")
    assert corrected.best is not None and corrected.best.ranges[0].k == 4
    assert corrected.round == 2 and corrected.corrects == "recommendation-r1.json"
    assert corrected.changes[0].startswith("batch 1") and "K 2 -> 4" in corrected.changes[0]
    assert any("because the table is wrong" in c for c in corrected.changes)
    assert not same_table(corrected, first) and same_table(first, first)


def test_changes_name_each_stretch_of_batch_sizes_whose_k_moved() -> None:
    before = [KRange(start=1, end=16, k=2, bases=["measured"]), KRange(start=17, end=64, k=0, bases=["measured"])]
    after = [KRange(start=1, end=2, k=4, bases=["measured"]), KRange(start=3, end=30, k=2, bases=["measured"]),
             KRange(start=31, end=64, k=0, bases=["unmeasured"])]
    assert changes(before, after) == ["batch 1-2: K 2 -> 4", "batch 17-30: K 0 -> 2"]
    assert changes(before, before) == []


def test_verification_waits_only_on_the_comparison_that_can_correct_the_table() -> None:
    """Where the best static K is the table's own, nothing measured there can correct the table: the point reads
    no comparison, so it has settled after its first round, min_rounds or not (the table's speedup over the
    baseline is reported from it, not waited on). Where another static K is best, its challenge is the one
    comparison read, and whatever that reads not rests: the baseline, while K = 4 against the table is open, and
    before min_rounds too, after the first round that shows its speedups."""
    same, same_records = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.50, static=1.52, static_id=K2)
    walks = point_walks(same, same_records, "c1", 0.95)
    assert walks == [[]] and settled(distinct(walks))
    same.plan.load = same.plan.load.model_copy(update={"precision": "adaptive"})
    rounds, c1 = Rounds(same, lambda: same_records, lambda _: REQUESTS), same.plan.points[0]
    assert same.plan.load.min_rounds == 2
    assert rounds.start(c1, 0, BASELINE) and not rounds.start(c1, 1, BASELINE) and not rounds.start(c1, 1, VERIFY_ID)
    entry = same.sampled("c1")
    assert entry is not None and entry.stopped == "settled" and "nothing to decide" in entry.why
    other, other_records = verification([(1, 16, 2), (17, 64, 0)], dynamic=1.50, static=1.60)
    (walk,) = point_walks(other, other_records, "c1", 0.95)
    assert [(h.config_id, h.against) for h in walk] == [(K4, VERIFY_ID)]
    walk[0] = walk[0].model_copy(update={"outcome": "unsettled"})
    assert resting(other, [walk], "c1") == {BASELINE}
    other.plan.load = other.plan.load.model_copy(update={"precision": "adaptive"})
    rounds = Rounds(other, lambda: other_records, lambda _: REQUESTS)
    assert all(rounds.start(c1, 0, c) for c in (BASELINE, K4, VERIFY_ID))
    assert not rounds.start(c1, 1, BASELINE) and rounds.start(c1, 1, K4) and rounds.start(c1, 1, VERIFY_ID)
    entry = other.sampled("c1")  # nothing stops before min_rounds, but the rest is on record
    assert entry is not None and entry.stopped is None and entry.rested_from() == {BASELINE: 2}
