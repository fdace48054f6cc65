"""The error-rate limit (LoadSpec.max_error_rate): the run stops early with a clear RunIncomplete, and
everything that finished is on disk (summary.json says "incomplete", requests.jsonl holds every record).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.drive import attach_plan, conversations, only_config, run_plan
from fakeengine.server import FakeEngine
from specmeter.common.errors import RunIncomplete
from specmeter.load.stops import MIN_REQUESTS_FOR_ERROR_LIMIT
from specmeter.rundir.store import load_summary

pytestmark = pytest.mark.timeout(30)


def _disk_records(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "requests.jsonl").read_text().splitlines() if line.strip()]


def test_error_rate_stops_the_run_with_a_clear_message(fake_engine: FakeEngine, tmp_path: Path) -> None:
    fake_engine.default_fault = "http_500"
    fake_engine.schedule = {0: "none", 3: "none"}  # two successes among the failures
    root = tmp_path / "run"
    plan = attach_plan(fake_engine.url, conversations([f"Q{i}" for i in range(30)]), concurrency=[1],
                       max_error_rate=0.25)
    summary, error, reporter = run_plan(plan, root)

    assert summary is None and isinstance(error, RunIncomplete)
    msg = str(error)
    # what happened, how bad, the last error, where the results are, and what to do about it
    assert "stopped early" in msg
    assert f"6 of {MIN_REQUESTS_FOR_ERROR_LIMIT} requests failed" in msg
    assert "limit 25%" in msg
    assert "HTTP 500" in msg and "EngineCore encountered an issue" in msg
    assert str(root) in msg
    assert "--max-error-rate" in msg
    assert "\n" not in msg.strip()  # one line for the terminal

    # it stopped early: the server never saw most of the workload
    assert len(fake_engine.completion_requests()) == MIN_REQUESTS_FOR_ERROR_LIMIT

    on_disk = json.loads((root / "summary.json").read_text())
    assert on_disk["status"] == "incomplete"
    assert "6 of 8 requests failed" in on_disk["incomplete_reason"]
    assert on_disk["wall_s"] is not None

    disk = _disk_records(root)
    assert len(disk) == len(reporter.records) == MIN_REQUESTS_FOR_ERROR_LIMIT
    assert [r["conversation_id"] for r in disk] == [r.conversation_id for r in reporter.records]
    assert [r["ok"] for r in disk] == [True, False, False, True, False, False, False, False]
    assert all(r["error_kind"] == "http_5xx" for r in disk if not r["ok"])
    assert load_summary(root).status == "incomplete"  # specmeter can read it back


def test_error_rate_stop_under_concurrency_keeps_every_finished_request(fake_engine: FakeEngine,
                                                                        tmp_path: Path) -> None:
    """With several requests in flight, those cancelled by the stop are not 'finished'; all others are on disk."""
    fake_engine.default_fault = "stream_error"
    fake_engine.schedule = {i: "slow" for i in range(0, 40, 3)}
    root = tmp_path / "run"
    plan = attach_plan(fake_engine.url, conversations([f"Q{i}" for i in range(40)]), concurrency=[4],
                       max_error_rate=0.3)
    _, error, reporter = run_plan(plan, root)

    assert isinstance(error, RunIncomplete), repr(error)
    assert "server error in stream" in str(error)
    disk = _disk_records(root)
    assert len(disk) >= MIN_REQUESTS_FOR_ERROR_LIMIT
    assert sorted((r["conversation_id"], r["turn"]) for r in disk) == sorted(
        (r.conversation_id, r.turn) for r in reporter.records
    )
    assert len(disk) <= len(fake_engine.completion_requests()) < 40
    on_disk = json.loads((root / "summary.json").read_text())
    assert on_disk["status"] == "incomplete" and "requests failed" in on_disk["incomplete_reason"]


def test_error_rate_stop_in_a_later_level_keeps_the_finished_levels(fake_engine: FakeEngine, tmp_path: Path) -> None:
    # point 1 (concurrency 1): requests 0-9 fine; point 2: everything fails
    fake_engine.schedule = {i: "none" for i in range(10)}
    fake_engine.default_fault = "http_429"
    root = tmp_path / "run"
    plan = attach_plan(fake_engine.url, conversations([f"Q{i}" for i in range(10)]), concurrency=[1, 2],
                       max_error_rate=0.5)
    _, error, _ = run_plan(plan, root)
    assert isinstance(error, RunIncomplete) and "HTTP 429" in str(error)
    on_disk = json.loads((root / "summary.json").read_text())
    assert on_disk["status"] == "incomplete"
    (config,) = on_disk["configs"]
    points = config["points"]
    assert [p["point_id"] for p in points] == ["c1"]  # the finished point is kept, whole
    assert points[0]["latency"]["num_ok"] == 10
    disk = _disk_records(root)
    assert sum(1 for r in disk if r["point_id"] == "c1" and r["ok"]) == 10
    assert {r["point_id"] for r in disk} == {"c1", "c2"}
    assert all(r["error_kind"] == "http_429" for r in disk if r["point_id"] == "c2")


def test_below_the_limit_the_run_completes(fake_engine: FakeEngine, tmp_path: Path) -> None:
    fake_engine.schedule = {2: "http_500", 7: "reset"}
    plan = attach_plan(fake_engine.url, conversations([f"Q{i}" for i in range(12)]), concurrency=[2],
                       max_error_rate=0.25)
    summary, error, _ = run_plan(plan, tmp_path / "run")
    assert error is None, repr(error)
    assert summary.status == "complete" and summary.incomplete_reason is None
    assert only_config(summary).points[0].latency.errors_by_kind == {"http_5xx": 1, "connection": 1}


def test_few_early_failures_are_not_a_rate(fake_engine: FakeEngine, tmp_path: Path) -> None:
    """Below MIN_REQUESTS_FOR_ERROR_LIMIT finished requests the limit never trips, even at 100% errors."""
    fake_engine.default_fault = "http_400"
    n = MIN_REQUESTS_FOR_ERROR_LIMIT - 1
    plan = attach_plan(fake_engine.url, conversations([f"Q{i}" for i in range(n)]), concurrency=[1],
                       max_error_rate=0.0)
    summary, error, _ = run_plan(plan, tmp_path / "run")
    assert error is None, repr(error)
    assert only_config(summary).points[0].latency.errors_by_kind == {"http_4xx": n}


def test_cli_reports_the_stop_and_exits_with_the_incomplete_code(fake_engine: FakeEngine, tmp_path: Path) -> None:
    fake_engine.default_fault = "http_500"
    specmeter = Path(sys.executable).with_name("specmeter")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.run(
        [str(specmeter), "run", "--endpoint", fake_engine.url, "--no-baseline", "--dataset", "sample",
         "--num-prompts", "12", "--max-tokens", "8", "--warmup", "0", "--concurrency", "1",
         "--max-error-rate", "0.5", "--out", str(tmp_path), "--name", "r"],
        env=env, capture_output=True, text=True, timeout=50,
    )
    assert proc.returncode == RunIncomplete.exit_code, (proc.returncode, proc.stderr[-2000:])
    err = " ".join(proc.stderr.split())  # rich may wrap the line
    assert "stopped early" in err and "requests failed" in err and "HTTP 500" in err
    assert "Traceback" not in proc.stderr
    on_disk = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert on_disk["status"] == "incomplete"
    assert len(_disk_records(tmp_path / "r")) == MIN_REQUESTS_FOR_ERROR_LIMIT
