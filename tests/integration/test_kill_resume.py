"""The server dies mid-run: finished requests are on disk, the run says it is incomplete and why,
the exit code says so, and `specmeter resume` finishes the run against a new server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specmeter.common.errors import RunIncomplete
from specmeter.rundir.store import RunStore, load_summary

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]


def _ok_lines(path: Path) -> int:
    if not path.exists():
        return 0
    n = 0
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        n += rec.get("ok") and not rec.get("warmup")
    return n


def test_server_killed_then_resumed(models: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    spec = json.dumps({"method": "draft_model", "model": str(models / "demo-draft"), "num_speculative_tokens": 4})
    cmd = [*SPECMETER, "run", "--model", str(models / "demo-target"), "--spec", spec, "--dtype", "float32",
           "--engine-env", "VLLM_CPU_KVCACHE_SPACE=2", "--engine-arg=--enforce-eager",  # starts twice: no compile
           "--no-baseline", "--num-prompts", "11",
           "--concurrency", "1", "--max-tokens", "64", "--out", str(tmp_path), "--name", "killed"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 400
        while _ok_lines(run_dir / "requests.jsonl") < 4:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "no requests finished in time"
            time.sleep(0.5)
        pid = load_summary(run_dir).configs[0].server_pid
        assert pid
        os.killpg(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.terminate()  # specmeter stops its own server on SIGTERM
            proc.wait(timeout=60)
    assert proc.returncode == RunIncomplete.exit_code, out
    assert f"specmeter resume {run_dir}" in out
    summary = load_summary(run_dir)
    assert summary.status == "incomplete"
    assert summary.incomplete_reason
    before = [r for r in RunStore(run_dir).read_records() if r.ok and not r.warmup]
    assert len(before) >= 4

    res = subprocess.run([*SPECMETER, "resume", str(run_dir)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    level = summary.configs[0].points[0]
    assert level.resumed
    records = RunStore(run_dir).read_records()
    ok_keys = {(r.conversation_id, r.turn) for r in records if r.ok and not r.warmup}
    # Nothing measured before the kill was lost, and every request of the workload now succeeded.
    assert {(r.conversation_id, r.turn) for r in before} <= ok_keys
    assert len(ok_keys) == summary.plan.workload.requests
    assert level.latency.num_ok == summary.plan.workload.requests
    assert level.sd.available and level.sd.reference == "per_request"
