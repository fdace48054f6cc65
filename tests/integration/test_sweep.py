"""A sweep on the real engine: baseline, n-gram and draft_model K in {2, 4}, at one concurrency and one
request rate, attached to the session's servers. It completes with paired speedups, a crossover answer,
a best configuration per point and the lossless check; killed mid-way, it resumes without running any
finished point again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from vllm_helpers import ServerPool

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.plan import Role
from specmeter.schemas.results import RunSummary

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
CONCURRENCY, RATE = 2, 4.0


def _candidates(models: Path) -> list[SpecConfig]:
    draft = str(models / "demo-draft")
    return [SpecConfig(method=SpecMethod.ngram, num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=4),
            SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=2, draft_model=draft),
            SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=4, draft_model=draft)]


@pytest.fixture(scope="module")
def sweep_file(pool: ServerPool, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    candidates = []
    for spec in _candidates(models):
        entry = spec.model_dump(mode="json", exclude_none=True, exclude={"extra"})
        candidates.append({**entry, "endpoint": pool.get(spec).base_url})
    sweep = {
        "workload": {"dataset": "sample", "num_prompts": 8},
        "engine": {"model": str(models / "demo-target")},
        "baseline_endpoint": pool.get(SpecConfig()).base_url,
        "candidates": candidates,
        # The fixed design: one pass a point, so the kill below lands mid-sweep (adaptive rounds are tested in
        # test_verify_corrects.py).
        "load": {"concurrency": [CONCURRENCY], "request_rate": [RATE], "max_concurrency": 4, "max_tokens": 24,
                 "temperature": 0, "warmup": 1, "precision": "fixed"},
        "interleave": True,
    }
    path = tmp_path_factory.mktemp("sweep") / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    return path


def _sweep(sweep_file: Path, out: Path, name: str) -> list[str]:
    return [*SPECMETER, "sweep", str(sweep_file), "--out", str(out), "--name", name]


@pytest.fixture(scope="module")
def finished(sweep_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path]:
    out = tmp_path_factory.mktemp("runs")
    res = subprocess.run([*_sweep(sweep_file, out, "whole"), "-v"], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for heading in ("Speedup over the baseline", "Where speculation stops paying", "Lossless check"):
        assert heading in res.stdout
    return load_summary(out / "whole"), out / "whole"


def test_sweep_completes_every_cell(finished: tuple[RunSummary, Path]) -> None:
    summary, _ = finished
    assert summary.status == "complete"
    plan = summary.plan
    assert [c.role for c in plan.configs].count(Role.baseline) == 1
    assert len(plan.configs) == 4 and {p.id for p in plan.points} == {f"c{CONCURRENCY}", "r4-cap4"}
    for config in plan.configs:
        result = summary.config(config.id)
        assert result is not None and result.server_error is None
        assert sorted(p.point_id for p in result.points) == sorted(p.id for p in plan.points)
        for point in result.points:
            assert point.latency.num_ok == point.latency.num_requests > 0
            assert point.running_batch is not None and point.running_batch.samples > 0
            # The engine never ran more requests than the client had in flight.
            assert point.running_batch.max is not None and point.running_batch.max <= 4
            if config.role is Role.candidate:
                assert point.sd.available and point.sd.agree is True, point.sd.agreement


def test_speedups_are_paired_with_intervals(finished: tuple[RunSummary, Path]) -> None:
    summary, _ = finished
    speedups = summary.analysis.speedups
    candidates = [c.id for c in summary.plan.configs if c.role is Role.candidate]
    assert {(s.config_id, s.point_id) for s in speedups} == {(c, p.id) for c in candidates for p in summary.plan.points}
    for s in speedups:
        assert s.same_work and s.paired_requests > 0
        for ratio in (s.output_throughput, s.tpot):
            assert ratio.value is not None and ratio.ci95_low is not None and ratio.ci95_high is not None
            assert ratio.ci95_low <= ratio.value <= ratio.ci95_high
        assert s.verdict in {"pays", "slows", "unclear"}
        assert s.decided_on == ("output_throughput" if s.point_id.startswith("c") else "tpot")
    assert {c.config_id for c in summary.analysis.crossovers} >= set(candidates)
    assert {c.point_id for c in summary.analysis.choices} == {p.id for p in summary.plan.points}
    for choice in summary.analysis.choices:
        assert choice.best_config_id in {"baseline", *candidates}


def test_same_requests_and_arrivals_for_every_config(finished: tuple[RunSummary, Path]) -> None:
    _, run_dir = finished
    records = [r for r in RunStore(run_dir).read_records() if not r.warmup]
    by_config: dict[str, dict[tuple[str, str, int], float | None]] = {}
    for r in records:
        by_config.setdefault(r.config_id, {})[(r.point_id, r.conversation_id, r.turn)] = r.scheduled_s
    (first, *others) = by_config.values()
    for other in others:
        assert other == first  # same requests, and at the rate point the same planned send times
    assert any(t is not None for (point, _, turn), t in first.items() if point.startswith("r") and turn == 0)


def test_lossless_check_names_every_mismatch(finished: tuple[RunSummary, Path]) -> None:
    summary, _ = finished
    checks = {c.config_id: c for c in summary.analysis.lossless}
    assert set(checks) == {c.id for c in summary.plan.configs if c.role is Role.candidate}
    for check in checks.values():
        assert check.basis == "token ids" and check.compared > 0
        assert check.match_rate == 1.0 or len(check.mismatches) == min(check.compared - check.matched, 50)
        for m in check.mismatches:
            assert m.first_diff <= min(m.candidate_len, m.baseline_len)


def _finished_points(run_dir: Path) -> set[tuple[str, str, int]]:
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return set()
    return {(c["config_id"], p["point_id"], p["repeat"]) for c in summary["configs"] for p in c["points"]}


def test_killed_sweep_resumes_without_rerunning_a_point(sweep_file: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    proc = subprocess.Popen(_sweep(sweep_file, tmp_path, "killed"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while len(_finished_points(run_dir)) < 3:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "no point finished in time"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)  # specmeter itself dies, mid-point, with no chance to clean up
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = _finished_points(run_dir)
    records_before = RunStore(run_dir).read_records()
    assert 3 <= len(done_before) < 8

    res = subprocess.run([*SPECMETER, "resume", str(run_dir)], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    cells = [(c.config_id, p.point_id, p.repeat) for c in summary.configs for p in c.points]
    assert len(cells) == len(set(cells)) == 8  # every cell once
    # No finished point was sent again: its records are exactly those written before the kill.
    after = RunStore(run_dir).read_records()
    for cell in done_before:
        count = sum(1 for r in records_before if (r.config_id, r.point_id, r.repeat) == cell)
        assert sum(1 for r in after if (r.config_id, r.point_id, r.repeat) == cell) == count
    assert {(c.config_id, c.point_id) for c in summary.analysis.speedups}
