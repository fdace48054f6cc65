"""Resume of a killed multi-configuration plan against fake engines (plans/resume.py + runner.execute).

A full run gives real records; the run directory is then cut back to what a run killed (SIGKILL) in the
middle of one cell leaves: the summary with the cells finished before it (status still "running"), the
records up to the kill, a torn last line. Resuming it must run only what is missing: no finished point
runs again, a half-finished point re-sends only the conversations that did not fully succeed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakeengine.drive import attach_pair, run_plan
from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError
from specmeter.config.models import LoadSpec
from specmeter.data.workload import load_conversations
from specmeter.execution.runner import completed_conversations, schedule
from specmeter.load.point import count_requests, point_conversations
from specmeter.plans.resume import resume_execution
from specmeter.rundir.store import REQUESTS, SUMMARY, RunStore, latest_records, load_summary
from specmeter.schemas.results import Analysis
from specmeter.workflows.recompute import recompute

pytestmark = pytest.mark.timeout(60)
KILLED_AT = 2  # the third cell of the schedule was running when the run was killed

# 5 single-turn conversations and a two-turn one: 7 requests, so the c2 point cycles (floor 8)
ROWS = [{"id": f"q{i}", "prompt": f"Question {i}: explain caching.", "category": "qa"} for i in range(5)]
ROWS.append({"id": "chat", "turns": ["First turn.", "Second turn."], "category": "chat"})


def _cell_key(cell) -> tuple[str, str, int]:  # type: ignore[no-untyped-def]
    return cell.config.id, cell.point.id, cell.repeat


@pytest.mark.parametrize("interleave", [False, True])
def test_resume_of_a_killed_plan_runs_only_what_is_missing(tmp_path: Path, interleave: bool) -> None:
    data = tmp_path / "work.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    load = LoadSpec(concurrency=[1, 2], warmup=0, max_tokens=16)
    convs, selection = load_conversations("jsonl", str(data), load)

    with FakeEngine(seed=1) as sd, FakeEngine(seed=2, speculative=False) as base:
        # -- a complete run, to get real records --------------------------------------------------------
        full = tmp_path / "full"
        ex = attach_pair(sd.url, base.url, convs, workload=selection, interleave=interleave,
                         concurrency=[1, 2], warmup=0, max_tokens=16)
        summary, error, _ = run_plan(ex, full)
        assert error is None and summary.status == "complete", repr(error)
        plan = summary.plan
        cells = [cell for block in schedule(plan) for cell in block.cells]
        assert len(cells) == 4
        finished, killed, pending = cells[:KILLED_AT], cells[KILLED_AT], cells[KILLED_AT + 1:]
        records = RunStore(full).read_records()

        # -- what the kill leaves ----------------------------------------------------------------------
        killed_convs = point_conversations(convs, killed.point, plan.load_for(killed.config))
        if killed.point.id == "c2":  # the premise: this point cycles the workload, so a resume meets '#2' ids
            assert "q0#2" in {c.id for c in killed_convs}
        done_ids = {killed_convs[0].id, killed_convs[1].id}  # fully answered before the kill
        kept = [r for r in records if (r.config_id, r.point_id, r.repeat) in {_cell_key(c) for c in finished}]
        kept += [r for r in records if (r.config_id, r.point_id, r.repeat) == _cell_key(killed)
                 and (r.conversation_id in done_ids or (r.conversation_id == "chat" and r.turn == 0))]
        prior = summary.model_copy(deep=True)
        prior.status, prior.analysis = "running", Analysis()
        for res in prior.configs:
            res.points = [p for p in res.points if (res.config_id, p.point_id, p.repeat) in
                          {_cell_key(c) for c in finished}]
        run_dir = tmp_path / "killed"
        run_dir.mkdir()
        (run_dir / SUMMARY).write_text(prior.model_dump_json(indent=2))
        torn = kept[-1].model_dump_json(exclude_computed_fields=True)[:40]  # the write the kill cut short
        (run_dir / REQUESTS).write_text("".join(r.model_dump_json(exclude_computed_fields=True) + "\n" for r in kept)
                                        + torn)
        assert len(RunStore(run_dir).read_records()) == len(kept)
        # the captures: whole for the finished cells; the killed cell's first attempt has its clock and the scrape
        # before the point, never the one after
        store, full_store = RunStore(run_dir), RunStore(full)
        for cell in finished:
            store.write_capture(full_store.read_capture(*_cell_key(cell)))  # type: ignore[arg-type]
        cut = full_store.read_capture(*_cell_key(killed))
        assert cut is not None and len(cut.attempts) == 1
        cut.attempts[0] = cut.attempts[0].model_copy(update={"after": None, "wall_s": None, "feed": None})
        store.write_capture(cut)

        # -- resume -------------------------------------------------------------------------------------
        seen = {"sd": len(sd.log), "base": len(base.log)}
        sent_before = {"sd": len(sd.completion_requests()), "base": len(base.completion_requests())}
        resumed = resume_execution(run_dir, api_key=None)
        assert resumed.plan == plan and [c.id for c in resumed.conversations] == [c.id for c in convs]
        after, error, reporter = run_plan(resumed, run_dir)
        assert error is None, repr(error)
        assert not sd.problems and not base.problems

    assert after.status == "complete" and after.incomplete_reason is None
    # only the unfinished cells ran, in schedule order
    assert [(c, p, r) for c, p, r, _ in reporter.started] == [_cell_key(c) for c in [killed, *pending]]
    # finished points are kept exactly as they were measured
    for cell in finished:
        res = after.config(cell.config.id)
        assert res is not None
        assert res.repeats(cell.point.id) == [prior.config(cell.config.id).point(cell.point.id)]  # type: ignore[union-attr]
    # every cell has exactly one result
    for cell in cells:
        assert len(after.config(cell.config.id).repeats(cell.point.id)) == 1  # type: ignore[union-attr]

    # the servers saw only what was missing
    resent = {c.id for c in killed_convs} - completed_conversations(
        [r for r in kept if (r.config_id, r.point_id, r.repeat) == _cell_key(killed)], killed_convs)
    assert "chat" in resent and not resent & done_ids  # a half-answered conversation is re-sent whole
    expected = {"sd": 0, "base": 0}
    which = {plan.configs[0].id: "sd", plan.configs[1].id: "base"}
    expected[which[killed.config.id]] += count_requests([c for c in killed_convs if c.id in resent])
    for cell in pending:
        expected[which[cell.config.id]] += count_requests(point_conversations(convs, cell.point, plan.load))
    got = {"sd": len(sd.completion_requests()) - sent_before["sd"],
           "base": len(base.completion_requests()) - sent_before["base"]}
    assert got == expected
    for name, server in (("sd", sd), ("base", base)):
        if not any(which[c.config.id] == name for c in [killed, *pending]):
            # The resume checks every attached server is what the run measured (a GET of /v1/models and
            # /metrics each), and sends one with nothing left to run nothing else.
            extra = [(r.method, r.path) for r in server.log[seen[name]:]]
            assert set(extra) <= {("GET", "/v1/models"), ("GET", "/metrics")} and len(extra) <= 2, (
                f"{name}: a server with nothing left to run was sent {extra}")

    # the half-finished point: marked resumed, and it covers every request of the point once
    point = after.config(killed.config.id).point(killed.point.id)  # type: ignore[union-attr]
    assert point is not None and point.resumed
    assert point.latency.num_requests == count_requests(killed_convs) == point.latency.num_ok
    on_disk = RunStore(run_dir).read_records()
    latest = [r for r in latest_records(on_disk) if (r.config_id, r.point_id, r.repeat) == _cell_key(killed)]
    assert sorted((r.conversation_id, r.turn) for r in latest) == sorted(
        (c.id, t) for c in killed_convs for t in range(len(c.turns)))
    # records of finished points were not written again
    for cell in finished:
        key = _cell_key(cell)
        assert sum(1 for r in on_disk if (r.config_id, r.point_id, r.repeat) == key) == sum(
            1 for r in kept if (r.config_id, r.point_id, r.repeat) == key)
    assert load_summary(run_dir).status == "complete"
    # the analysis covers the whole plan again
    assert {s.point_id for s in after.analysis.speedups} == {"c1", "c2"}

    # the resumed point's capture holds both attempts; recomputing from the stored files gives the same results
    capture = RunStore(run_dir).read_capture(*_cell_key(killed))
    assert capture is not None and [a.index for a in capture.attempts] == [0, 1] and capture.finished
    assert {r.attempt for r in latest} == {0, 1}
    (done,) = recompute(run_dir)
    assert done.points == len(cells) and not done.kept
    assert load_summary(run_dir).configs == after.configs

    # and a complete run has nothing to resume
    with pytest.raises(InputError, match="already complete"):
        resume_execution(run_dir, api_key=None)
