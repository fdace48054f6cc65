"""`verify RUN --endpoint URL`, the whole flow against fake vLLM servers: a sweep attached to a baseline and a
draft-model K = 2 server, recommended, names K = 2; a server started with a static K = 4 is not running that
table, so its verification ends in one line (exit 2), what it measured kept in its directory and no round of the
answer written; a server that runs the table verifies it."""

from __future__ import annotations

import json
from pathlib import Path

from in_process import specmeter

from fakeengine.server import FakeEngine
from specmeter.rundir.answer import read_answer
from specmeter.rundir.store import RunStore, load_summary

K2 = {"method": "draft_model", "num_speculative_tokens": 2, "draft_model": "fake/draft"}


def _sweep_file(tmp_path: Path, baseline: str, k2: str) -> Path:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({
        "workload": {"dataset": "sample", "num_prompts": 3}, "engine": {"endpoint": k2},
        "baseline_endpoint": baseline, "candidates": [{**K2, "endpoint": k2}],
        "load": {"concurrency": [1], "max_tokens": 12, "warmup": 0, "precision": "fixed"}, "interleave": True,
    }), encoding="utf-8")
    return path


def test_a_server_not_running_the_table_verifies_nothing_and_one_running_it_does(tmp_path: Path) -> None:
    # Every step takes 10 ms: the baseline emits one token a step, the drafters more (K = 2 pays).
    with FakeEngine(speculative=False, k=1, alpha=0.0, step_s=0.01) as base, \
            FakeEngine(k=2, alpha=0.9, step_s=0.01) as k2, FakeEngine(k=4, alpha=0.9, step_s=0.01) as k4:
        swept = specmeter("sweep", str(_sweep_file(tmp_path, base.url, k2.url)), "--out", str(tmp_path),
                          "--name", "s", cwd=tmp_path)
        assert swept.returncode == 0, swept.stderr[-2000:]
        run_dir = tmp_path / "s"
        decided = specmeter("recommend", str(run_dir), cwd=tmp_path)
        assert decided.returncode == 0, decided.stderr[-2000:]
        answer = read_answer(run_dir)
        assert answer is not None and answer.recommendation is not None
        best = answer.recommendation.best
        assert best is not None and best.spec is not None and best.static_k == 2
        rounds = [(r.number, r.stage) for r in answer.rounds]

        refused = specmeter("verify", str(run_dir), "--endpoint", k4.url, "--verify-dir", str(tmp_path / "v4"),
                            cwd=tmp_path)
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
        assert lines[-1].startswith("error:") and k4.url in lines[-1] and "drafted K=4" in lines[-1]
        assert "does not run the table" in lines[-1] and str(tmp_path / "v4") in lines[-1]
        assert load_summary(tmp_path / "v4").status == "complete"  # what it measured is kept
        assert any(r.ok for r in RunStore(tmp_path / "v4").read_records())
        after = read_answer(run_dir)
        assert after is not None and [(r.number, r.stage) for r in after.rounds] == rounds  # no round written

        held = specmeter("verify", str(run_dir), "--endpoint", k2.url, "--verify-dir", str(tmp_path / "v2"),
                         cwd=tmp_path)
        assert held.returncode == 0 and "Traceback" not in held.stderr, held.stderr[-2000:]
    verified = read_answer(run_dir)
    assert verified is not None and verified.recommendation is not None
    assert verified.recommendation.verification in ("held", "kept")
