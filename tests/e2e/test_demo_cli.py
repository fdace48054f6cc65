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
    for heading in ("Speculative decoding", "Acceptance per category", "Throughput", "Latency", "Speedup",
                    "Where speculation stops paying", "Lossless check"):
        assert heading in res.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    assert summary.plan.kind == "demo" and summary.plan.interleave
    assert [c.config_id for c in summary.configs] == ["draft_model-k4", "baseline"]
    assert summary.configs[1].spec_label == "off"
    (speedup,) = summary.analysis.speedups
    assert speedup.point_id == "c1" and speedup.same_work
    assert speedup.output_throughput.value and speedup.output_throughput.value > 0
    assert speedup.verdict is not None
    (check,) = summary.analysis.lossless
    assert check.compared == speedup.paired_requests
    for server in ("draft_model-k4", "baseline"):
        assert (run_dir / f"server-{server}.log").exists()
    assert (run_dir / "requests.jsonl").exists()
    assert summary.models["target"]["sha256"]
