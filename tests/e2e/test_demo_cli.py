"""The README's main job, as a user runs it (smaller): the demo prints the SD report and the speedup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.store import load_summary

pytestmark = pytest.mark.e2e


def test_demo_end_to_end(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "specmeter.cli", "demo", "--concurrency", "1", "--num-prompts", "6",
         "--max-tokens", "32", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for heading in ("Speculative decoding", "Acceptance per category", "Throughput", "Latency", "Speedup"):
        assert heading in res.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    assert [p.name for p in summary.phases] == ["sd", "baseline"]
    assert summary.phases[1].spec_label == "off"
    (speedup,) = summary.speedup
    assert speedup.concurrency == 1 and speedup.same_work
    assert speedup.output_throughput.value and speedup.output_throughput.value > 0
    assert (run_dir / "requests.jsonl").exists() and (run_dir / "server-sd.log").exists()
    assert summary.models["target"]["sha256"]
