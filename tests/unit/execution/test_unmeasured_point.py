"""A point is finished only when it measured: one whose requests all failed (HTTP 503), or whose usage said 0 tokens
while text streamed, leaves the run incomplete, shows no 0.00x, and `resume` runs it again once the server is
fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakeengine.drive import attach_pair, run_plan
from fakeengine.server import FakeEngine
from specmeter.config.models import LoadSpec
from specmeter.data.workload import load_conversations
from specmeter.plans.resume import resume_execution
from specmeter.rundir.store import RunStore

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("fault", ["http_500", "zero_usage"])
def test_a_point_that_measured_nothing_is_run_again_by_resume(tmp_path: Path, fault: str) -> None:
    root, data = tmp_path / "run", tmp_path / "work.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}: explain caching."}) + "\n"
                            for i in range(4)))
    load = LoadSpec(concurrency=[2], warmup=0, max_tokens=16, max_error_rate=1.0)
    convs, selection = load_conversations("jsonl", str(data), load)  # a workload resume can load again
    with FakeEngine(seed=1) as sd, FakeEngine(seed=2, speculative=False) as base:
        sd.default_fault = fault  # the candidate's server fails every request
        ex = attach_pair(sd.url, base.url, convs, workload=selection, concurrency=[2], warmup=0, max_tokens=16,
                         max_error_rate=1.0)
        summary, error, _ = run_plan(ex, root)
        assert summary.status == "incomplete" and "measured nothing" in (summary.incomplete_reason or "")
        assert error is None  # an incomplete status, which the command ends with exit 4 (workflows/execute.py)
        assert summary.analysis.speedups == []  # no 0.00x shown as a measurement
        sd.default_fault = None  # the server fixed
        again, error, _ = run_plan(resume_execution(root, api_key=None), root)
    assert error is None, repr(error)
    assert again.status == "complete"
    (cand,) = [c for c in again.configs if c.config_id != "baseline"]
    assert [p.repeat for p in cand.points] == [0] and cand.points[0].measured  # replaced, not added beside it
    (s,) = again.analysis.speedups
    assert s.output_throughput.value is not None and s.output_throughput.value > 0
    records = RunStore(root).read_records()
    ok = [r for r in records if r.config_id == cand.config_id and r.ok and not r.warmup]
    assert ok and all((r.output_tokens or 0) > 0 for r in ok)
