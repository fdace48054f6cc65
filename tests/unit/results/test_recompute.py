"""Capture, then summarize: a point's results are a pure function of its stored capture and records, so
`specmeter report RUN --recompute` derives them again from the files alone; a run without captures (specmeter
0.1.0) keeps its results and says so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.drive import attach_plan, conversations, only_config, run_plan
from fakeengine.server import FakeEngine
from specmeter.rundir.store import CAPTURES, RunStore, load_summary
from specmeter.schemas.capture import PointCapture
from specmeter.schemas.results import RunSummary
from specmeter.workflows.recompute import recompute

pytestmark = pytest.mark.timeout(120)
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def test_a_run_recomputed_from_its_captures_gives_the_results_it_stored(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with FakeEngine(k=4) as server:
        plan = attach_plan(server.url, conversations([f"Question {i}: explain caching." for i in range(6)]),
                           concurrency=[1, 2], warmup=1)
        summary, error, _ = run_plan(plan, root)
    assert error is None and summary.status == "complete", repr(error)
    stored = only_config(summary)
    store = RunStore(root)
    for point in stored.points:
        capture = store.read_capture(stored.config_id, point.point_id, point.repeat)
        assert capture is not None and capture.finished and len(capture.attempts) == 1
        attempt = capture.attempts[0]
        # the raw telemetry is there to audit: both scrapes as text, taken before and after the point
        assert attempt.before is not None and attempt.before.text and attempt.after is not None and attempt.after.text
        assert attempt.before.at_s <= 0.0 < attempt.after.at_s and attempt.wall_s is not None
        assert attempt.engine == "vllm" and attempt.metrics_path == "/metrics"
    # the stored records are raw: the engine's per-request fields as sent, parsed only when summarized
    raw = [r for r in store.read_records() if not r.warmup]
    assert raw and all(r.final_payload is not None and r.sd is None for r in raw)

    # wipe what was derived: recompute brings back exactly what the run wrote
    damaged = json.loads((root / "summary.json").read_text())
    for point in damaged["configs"][0]["points"]:
        point["latency"]["num_requests"], point["sd"] = -1, {"available": False, "reason": "wiped"}
    damaged["analysis"]["speedups"] = []
    (root / "summary.json").write_text(json.dumps(damaged))
    (done,) = recompute(root)
    assert done.points == len(stored.points) and not done.kept
    again = load_summary(root)
    assert again.configs == summary.configs
    assert again.analysis == summary.analysis


def test_a_capture_that_is_not_one_is_named(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.write_capture(PointCapture(config_id="a", point_id="c1"))
    store.capture_path("a", "c1", 0).write_text("{not json")
    with pytest.raises(Exception, match=r"c1-r0\.json: not a point capture"):
        store.read_capture("a", "c1", 0)


def test_a_run_of_specmeter_0_1_0_keeps_its_results(tmp_path: Path) -> None:
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    before = load_summary(run)
    assert not (run / CAPTURES).exists()
    done = recompute(run)
    assert [d.run_dir for d in done] == [run, run / "verify"]
    assert all(d.points == 0 and d.kept for d in done)
    assert "kept as stored" in done[0].line()
    after = load_summary(run)
    assert after.configs == before.configs


def test_report_recompute_on_the_command_line(tmp_path: Path) -> None:
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    specmeter = Path(sys.executable).with_name("specmeter")
    done = subprocess.run([str(specmeter), "report", str(run), "--recompute", "--json"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert RunSummary.model_validate_json(done.stdout).plan == load_summary(FIXTURE).plan
    assert "kept as stored" in done.stderr
