"""A made-up Mooncake trace replayed on the real vLLM CPU server: 20 rows (lengths from a lognormal spread, shared
512-token prefixes for some, Poisson arrivals), each filled with the sample set's chat questions, at time scales 1
and 2, the baseline and draft_model K = 2 attached to the session's servers. Every row is sent once per scale and
configuration, the schedule error is reported at every point, acceptance per category is there for K = 2, and
`recommend` answers with a table for that traffic (its values are not asserted: they are what the replay measured)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from vllm_helpers import ServerPool

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.data.traces.synthetic import TraceShape, mooncake_rows, write_mooncake
from specmeter.rundir.store import RunStore, load_summary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
ROWS, SCALES = 20, (1, 2)


def test_a_mooncake_trace_replays_at_two_scales_and_recommend_answers_for_it(
        pool: ServerPool, models: Path, tmp_path: Path) -> None:
    draft = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=2, draft_model=str(models / "demo-draft"))
    trace = tmp_path / "trace.jsonl"
    # Short answers and a brisk rate keep the replay to a few seconds a point; the lengths keep their spread.
    write_mooncake(trace, mooncake_rows(TraceShape(rows=ROWS, rate=4.0, output_median=20, output_range=(8, 32)),
                                        seed=1))
    entry = draft.model_dump(mode="json", exclude_none=True, exclude={"extra"})
    sweep = {
        "workload": {"dataset": "sample", "trace": {"path": str(trace)}},
        "engine": {"model": str(models / "demo-target"), "max_model_len": 2048},
        "baseline_endpoint": pool.get(SpecConfig()).base_url,
        "candidates": [{**entry, "endpoint": pool.get(draft).base_url}],
        "load": {"trace_scale": list(SCALES), "ignore_eos": True, "temperature": 0, "warmup": 1,
                 "precision": "fixed"},
        "interleave": True,
    }
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    res = subprocess.run([*SPECMETER, "sweep", str(file), "--out", str(tmp_path), "--name", "trace", "-v"],
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run_dir = tmp_path / "trace"
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    points = sorted(p.id for p in summary.plan.points)
    assert points == sorted(f"t{s}x" for s in SCALES)
    config_ids = [c.id for c in summary.plan.configs]
    records = [r for r in RunStore(run_dir).read_records() if not r.warmup]
    for point_id in points:
        for config_id in config_ids:
            sent = [r.conversation_id for r in records if r.point_id == point_id and r.config_id == config_id]
            assert len(sent) == ROWS and len(set(sent)) == ROWS, (point_id, config_id, sent)
            assert all(r.ok for r in records if r.point_id == point_id and r.config_id == config_id)
            result = summary.config(config_id).point(point_id)  # type: ignore[union-attr]
            assert result is not None and result.schedule_error is not None
            assert result.schedule_error.count == ROWS and result.schedule_error.p99 is not None
    k2 = next(c for c in summary.plan.configs if c.id != "baseline").id
    for point_id in points:
        categories = summary.config(k2).point(point_id).categories  # type: ignore[union-attr]
        assert categories is not None and categories.categories
        assert all(c.al_step_weighted is not None and c.al_step_weighted >= 1 for c in categories.categories
                   if c.requests)
    rec = subprocess.run([*SPECMETER, "recommend", str(run_dir)], capture_output=True, text=True, timeout=600)
    assert rec.returncode == 0, rec.stdout[-3000:] + rec.stderr[-3000:]
    assert "On this trace at t1x" in rec.stdout
    doc = subprocess.run([*SPECMETER, "recommend", str(run_dir), "--json"], capture_output=True, text=True,
                         timeout=600)
    assert doc.returncode == 0, doc.stdout[-3000:] + doc.stderr[-3000:]
    answer = json.loads(doc.stdout)
    assert answer["drafters"] and answer["drafters"][0]["ranges"]  # the table
    assert sorted(g["point_id"] for g in answer["on_trace"]) == points  # what it buys on each scale's traffic
