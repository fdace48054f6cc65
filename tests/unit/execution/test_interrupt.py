"""Ctrl-C or SIGTERM during a run: in-flight requests are cancelled, everything finished is on disk,
the summary says the run was interrupted, and the process exits promptly with the 'incomplete' code."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakeengine.server import FakeEngine
from specmeter.common.errors import RunIncomplete
from specmeter.rundir.store import RunStore, load_summary

pytestmark = pytest.mark.timeout(60)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _finished(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.strip())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_run_promptly_and_keeps_results(sig: signal.Signals, tmp_path: Path) -> None:
    with FakeEngine(output_tokens=40, slow_chunk_s=0.05, default_fault="slow") as server:
        data = tmp_path / "prompts.jsonl"
        data.write_text("".join(json.dumps({"prompt": f"question {i}", "category": "qa"}) + "\n" for i in range(40)))
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmeter.cli", "run", "--endpoint", server.url, "--dataset", "jsonl",
             "--dataset-path", str(data), "--concurrency", "2", "--warmup", "0", "--max-tokens", "40",
             "--out", str(tmp_path), "--name", "run"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            # A shell that starts the suite in the background (`cmd &` without job control) hands it
            # SIGINT ignored, and Python then keeps ignoring Ctrl-C (nohup semantics). Give the run
            # the default disposition a terminal user has.
            preexec_fn=_default_sigint,
        )
        run_dir = tmp_path / "run"
        deadline = time.monotonic() + 30
        while _finished(run_dir / "requests.jsonl") < 3:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=20)
        elapsed = time.monotonic() - sent
    assert proc.returncode == RunIncomplete.exit_code, out
    assert elapsed < 10, f"took {elapsed:.1f} s to stop"
    summary = load_summary(run_dir)
    assert summary.status == "incomplete"
    assert "interrupted" in (summary.incomplete_reason or "")
    records = RunStore(run_dir).read_records()
    assert sum(r.ok for r in records) >= 3
    # Requests in flight at the signal were cancelled, not left half-written or counted as served.
    assert all(r.ok or r.error_kind == "cancelled" for r in records)
    assert len(records) < 40
