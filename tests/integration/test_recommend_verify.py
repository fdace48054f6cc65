"""From a sweep on the real engine to a dynamic-SD config the engine is seen to follow.

The sweep (baseline, draft_model K 2 and 4, at concurrency 1 and 6) attaches to the session's servers.
`specmeter recommend` must emit a table that vLLM's own validator accepts; `specmeter verify` then runs a
dynamic table whose K differs between the two points on a server launched with it, and the engine's
per-step stats must show the K the table names at the batch each point ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_helpers import ServerPool, attached_sweep_file

from specmeter.config.models import SpecConfig, SpecMethod, dynamic_k_at
from specmeter.rundir.store import load_summary
from specmeter.schemas.plan import Role
from specmeter.schemas.recommend import KRange, Recommendation

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
MAX_NUM_SEQS = 64
# Batch 1 drafts 4, anything larger drafts 2: concurrency 1 and 6 must show different K.
TABLE = [(1, 1, 4), (2, MAX_NUM_SEQS, 2)]


def _draft(models: Path, k: int) -> SpecConfig:
    return SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=k, draft_model=str(models / "demo-draft"))


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([*SPECMETER, *args], capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


@pytest.fixture(scope="module")
def sweep_dir(pool: ServerPool, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rec")
    # One round a point (fixed precision), and so one for the verification: what is checked here is the table's
    # form and the K the engine drafts, not a decision (adaptive rounds are test_verify_corrects.py's).
    attached_sweep_file(pool, models, [_draft(models, k) for k in (2, 4)], out, num_prompts=6, load={
        "concurrency": [1, 6], "max_tokens": 32, "temperature": 0, "warmup": 1, "precision": "fixed"})
    _run(["sweep", str(out / "sweep.yaml"), "--out", str(out), "--name", "sweep"])
    return out / "sweep"


@pytest.fixture(scope="module")
def recommendation(sweep_dir: Path) -> Recommendation:
    res = _run(["recommend", str(sweep_dir), "--max-num-seqs", str(MAX_NUM_SEQS)])
    assert "Evidence for draft_model demo-draft" in res.stdout and "static K=" in res.stdout
    return Recommendation.model_validate_json((sweep_dir / "recommendation.json").read_text(encoding="utf-8"))


def test_recommendation_is_a_table_vllm_accepts(recommendation: Recommendation) -> None:
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    best = recommendation.best
    assert best is not None and best.candidates == ["draft_model-k2", "draft_model-k4"]
    assert best.ranges[0].start == 1 and best.ranges[-1].end == MAX_NUM_SEQS
    assert {s.basis for s in best.segments} >= {"measured"}
    assert all(r.k in (0, 2, 4) for r in best.ranges)
    assert "disable_by_batch_size" not in json.dumps(recommendation.model_dump(exclude={"notes"}))
    if best.speculative_config is not None:  # every K may lose on a noisy machine: then there is no table
        cfg = best.speculative_config
        SpecConfig.model_validate(cfg)
        dense = build_dynamic_sd_schedule_lookup(cfg["num_speculative_tokens_per_batch_size"], MAX_NUM_SEQS,
                                                 cfg["num_speculative_tokens"])
        for r in best.ranges:
            assert dense[r.start] == dense[r.end] == r.k


def test_verify_shows_the_engine_drafting_the_tables_k(pool: ServerPool, models: Path, sweep_dir: Path,
                                                      recommendation: Recommendation, tmp_path: Path) -> None:
    spec = _draft(models, 4).model_copy(update={"num_speculative_tokens_per_batch_size": TABLE})
    best = recommendation.best
    assert best is not None
    ranges = [KRange(start=a, end=b, k=k, bases=["measured"]) for a, b, k in TABLE]  # the table, edited alike
    edited = best.model_copy(update={"spec": spec, "ranges": ranges, "speculative_config": None})
    rec_file = tmp_path / "edited.json"
    rec_file.write_text(recommendation.model_copy(update={"drafters": [edited]}).model_dump_json(), encoding="utf-8")
    res = _run(["verify", str(sweep_dir), "--recommendation", str(rec_file), "--endpoint", pool.get(spec).base_url,
                "--verify-dir", str(tmp_path / "verify"), "--every-point", "-v"])
    assert "The dynamic config, run" in res.stdout

    summary = load_summary(tmp_path / "verify")
    assert summary.status == "complete" and summary.plan.kind == "verify"
    roles = [c.role for c in summary.plan.configs]
    assert roles.count(Role.baseline) == 1 and roles.count(Role.verification) == 1
    rows = {v.point_id: v for v in summary.analysis.verification}
    assert set(rows) == {"c1", "c6"}
    for point_id, row in rows.items():
        d = row.drafted
        assert d.engine_batch is not None and d.steps > 0
        assert d.expected_k == dynamic_k_at(TABLE, max(1, round(d.engine_batch)), 4)
        assert d.followed, f"{point_id}: {d.note} ({d.drafted})"
        assert row.vs_baseline is not None and row.vs_baseline.output_throughput.ci95_low is not None
        assert row.static_id in ("draft_model-k2", "draft_model-k4")
        assert row.vs_static is not None and row.vs_static.same_work
    assert rows["c1"].drafted.expected_k == 4 and rows["c6"].drafted.expected_k == 2
