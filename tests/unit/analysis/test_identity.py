"""An attached server that drafts another K than its --spec at one point of the run (a server swapped mid-run):
the point is marked, its verdict withheld, and the table is decided without it there; over the whole run the same
rule refuses the table (tests/unit/predict/test_observations_attached.py)."""

from __future__ import annotations

from pathlib import Path

from specmeter.analysis.decide import analyze
from specmeter.analysis.identity import point_mismatch, table_mismatch
from specmeter.analysis.recommend import recommend
from specmeter.rundir.store import RunStore, latest_records, load_summary
from specmeter.schemas.plan import Role
from specmeter.schemas.results import RunSummary

DEMO_RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def _swapped_at(point_id: str) -> tuple[RunSummary, str]:
    """The demo with its K = 4 candidate attached (given as K = 4), whose server drafted 2 a step in one round of
    `point_id`."""
    summary = load_summary(DEMO_RUN)
    cand = next(c for c in summary.plan.configs if c.role is Role.candidate and c.k == 4)
    cand.engine = cand.engine.model_copy(update={"endpoint": "http://127.0.0.1:8001"})
    res = summary.config(cand.id)
    assert res is not None
    swapped = next(p for p in res.points if p.point_id == point_id and p.sd.headline is not None)
    assert swapped.sd.headline is not None
    swapped.sd.headline.num_draft_tokens = 2 * swapped.sd.headline.num_steps  # 2 drafted a step
    return summary, cand.id


def test_a_round_that_drafted_another_k_withholds_its_points_verdict_and_only_that() -> None:
    summary = load_summary(DEMO_RUN)
    first, *rest = [p.id for p in summary.plan.points]
    summary, cid = _swapped_at(first)
    why = point_mismatch(summary, cid, first)
    assert why is not None and "drafted 2 tokens a step where draft_model K = 4 was given" in why
    assert all(point_mismatch(summary, cid, p) is None for p in rest)
    analysis = analyze(summary, latest_records(RunStore(DEMO_RUN).read_records()))
    marked = [s for s in analysis.speedups if s.verdict == "withheld"]
    assert [(s.config_id, s.point_id) for s in marked] == [(cid, first)]
    assert marked[0].note is not None and why in marked[0].note
    choice = next(c for c in analysis.choices if c.point_id == first)
    assert cid not in (choice.best_config_id, choice.leader_config_id)
    assert all(cid not in (h.config_id, h.against) for h in choice.evidence)


def test_the_table_is_decided_without_the_withheld_point_and_says_so() -> None:
    summary = load_summary(DEMO_RUN)
    first = summary.plan.points[0].id
    summary, cid = _swapped_at(first)
    rec = recommend(summary, latest_records(RunStore(DEMO_RUN).read_records()), source_run="runs/x")
    assert any(n.startswith(f"{cid} at {first}: round") and "left out of the table there" in n for n in rec.notes)
    for drafter in rec.drafters:
        for seg in drafter.segments:
            if seg.basis == "measured" and first in seg.point_ids:
                assert seg.chosen != cid
        assert drafter.static_config_id != cid  # a static K runs at every batch: not one its server did not run


def test_a_server_verified_with_endpoint_that_drafts_what_its_table_never_names_does_not_run_the_table() -> None:
    """verify --endpoint against a server drafting a static K = 4 where the table names K = 2: most of its steps
    at the point drafted a K the table gives no batch the engine ran. Following the table, or launched by
    specmeter (which gave it the table), nothing is said."""
    verify = load_summary(DEMO_RUN / "verify")
    dynamic = next(c for c in verify.plan.configs if c.role is Role.verification)
    assert table_mismatch(verify) is None  # launched
    dynamic.engine = dynamic.engine.model_copy(update={"endpoint": "http://127.0.0.1:8002"})
    assert table_mismatch(verify) is None  # attached, and it drafted the table's K at every point
    row = verify.analysis.verification[0]
    row.drafted.share_unexpected, row.drafted.followed = 1.0, False
    row.drafted.note = "the table names K=2 at batch 0.9, but the engine drafted K=4 most (100% of steps)"
    why = table_mismatch(verify)
    assert why is not None and "http://127.0.0.1:8002" in why and row.point_id in why and "drafted K=4" in why
