"""A phase-shift sweep, the whole flow against fake vLLM servers: every request is marked with its phase, each
configuration's phases come out in the order sent with the switch after the first phase's requests, each
candidate's speedup is also read per phase on the phase's own requests, and the report shows the table."""

from __future__ import annotations

import json
from pathlib import Path

from in_process import specmeter

from fakeengine.server import FakeEngine
from specmeter.rundir.store import RunStore, load_summary

K2 = {"method": "draft_model", "num_speculative_tokens": 2, "draft_model": "fake/draft"}
PHASES = [{"name": "code", "categories": ["coding"], "conversations": 3},
          {"name": "chat", "categories": ["roleplay"], "conversations": 3}]


def test_a_phase_shift_sweep_reports_each_phase_in_order(tmp_path: Path) -> None:
    with FakeEngine(speculative=False, k=1, alpha=0.0, step_s=0.005) as base, \
            FakeEngine(k=2, alpha=0.8, step_s=0.005) as k2:
        path = tmp_path / "sweep.json"
        path.write_text(json.dumps({
            "workload": {"dataset": "sample", "phases": PHASES}, "engine": {"endpoint": k2.url},
            "baseline_endpoint": base.url, "candidates": [{**K2, "endpoint": k2.url}],
            "load": {"concurrency": [1], "max_tokens": 12, "warmup": 0, "precision": "fixed"}, "interleave": True,
        }), encoding="utf-8")
        swept = specmeter("sweep", str(path), "--out", str(tmp_path), "--name", "s", cwd=tmp_path)
        assert swept.returncode == 0, swept.stderr[-2000:]
    run_dir = tmp_path / "s"
    records = [r for r in RunStore(run_dir).read_records() if not r.warmup]
    assert records and {r.phase for r in records} == {"code", "chat"}
    assert {r.category for r in records if r.phase == "code"} == {"coding"}
    summary = load_summary(run_dir)
    found = summary.analysis.phases
    assert {(b.config_id, b.point_id) for b in found} == {(c.config_id, "c1") for c in summary.configs}
    for breakdown in found:
        code, chat = breakdown.phases
        assert (code.phase, chat.phase) == ("code", "chat") and chat.started_s > code.started_s
        sent = [r for r in records if r.config_id == breakdown.config_id]
        assert code.requests + chat.requests == len(sent)
        last_code = max(r.start_s for r in sent if r.phase == "code")
        assert chat.started_s >= last_code  # at c1 the switch comes after every code request was sent
    speedup = next(s for s in summary.analysis.speedups if s.point_id == "c1")
    assert [p.phase for p in speedup.phases] == ["code", "chat"]
    assert all(p.paired_requests > 0 and p.tpot.value is not None for p in speedup.phases)
    k2_phases = next(b for b in found if b.config_id == speedup.config_id).phases
    assert all(p.drafted_per_step == 2 for p in k2_phases)  # every step of the fake drafts its K
    report = specmeter("report", str(run_dir), cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "Per phase" in report.stdout
