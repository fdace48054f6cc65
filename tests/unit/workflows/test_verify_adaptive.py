"""`verify RUN --endpoint URL` where the sweep also measured the engine's own adaptive speculation, the whole flow
against fake vLLM servers: the verification runs the adaptive configuration beside the table and judges the table
against it; where the adaptive mode now beats the table, the verification disagrees and the answer, decided again
on the pooled evidence, names the adaptive mode."""

from __future__ import annotations

import json
from pathlib import Path

from in_process import specmeter

from fakeengine.server import FakeEngine
from specmeter.rundir.answer import read_answer
from specmeter.rundir.store import load_summary
from specmeter.schemas.recommend import Recommendation

K2 = {"method": "draft_model", "num_speculative_tokens": 2, "draft_model": "fake/draft"}


def _answer(run_dir: Path) -> Recommendation:
    answer = read_answer(run_dir)
    assert answer is not None and answer.recommendation is not None
    return answer.recommendation


def test_the_table_is_verified_against_the_engines_adaptive_mode_and_yields_to_it_where_it_wins(
        tmp_path: Path) -> None:
    # At concurrency 1 a step costs 12 ms without drafts; the table's server drafts K = 2 at 20 ms a step and
    # accepts most; the adaptive server accepts as much at 22 ms a step, so in the sweep the table wins.
    with FakeEngine(speculative=False, k=1, alpha=0.0, step_s=0.01, batch_step_s=0.002) as base, \
            FakeEngine(k=2, alpha=0.9, step_s=0.005, batch_step_s=0.015, no_draft_prob=0.0) as table, \
            FakeEngine(k=2, alpha=0.9, step_s=0.007, batch_step_s=0.015, no_draft_prob=0.0) as adaptive:
        path = tmp_path / "sweep.json"
        path.write_text(json.dumps({
            "workload": {"dataset": "sample", "num_prompts": 8}, "engine": {"endpoint": table.url},
            "baseline_endpoint": base.url,
            "candidates": [{**K2, "endpoint": table.url}, {**K2, "adaptive": True, "endpoint": adaptive.url}],
            "load": {"concurrency": [1], "max_tokens": 16, "warmup": 0, "precision": "fixed"},
            "interleave": True,
        }), encoding="utf-8")
        swept = specmeter("sweep", str(path), "--out", str(tmp_path), "--name", "s", cwd=tmp_path)
        assert swept.returncode == 0, swept.stderr[-2000:]
        run_dir = tmp_path / "s"
        decided = specmeter("recommend", str(run_dir), cwd=tmp_path)
        assert decided.returncode == 0, decided.stderr[-2000:]
        first = _answer(run_dir)
        assert first.best is not None and first.best.spec is not None and not first.best.spec.adaptive
        adaptive_id = next(c.id for c in load_summary(run_dir).plan.configs if c.spec.adaptive)

        held = specmeter("verify", str(run_dir), "--endpoint", table.url, "--verify-dir", str(tmp_path / "v1"),
                         cwd=tmp_path)
        assert held.returncode == 0 and "Traceback" not in held.stderr, held.stderr[-2000:]
        v1 = load_summary(tmp_path / "v1")
        assert v1.plan.adaptive == {"c1": adaptive_id}
        point = v1.analysis.verification[0]
        assert point.adaptive_id == adaptive_id and point.vs_adaptive is not None
        assert point.vs_adaptive.config_id == adaptive_id and point.vs_adaptive.outcome != "beats"
        assert _answer(run_dir).verification == "held", held.stdout[-2000:]

        # The engine's adaptive mode now steps in 12 ms: the table loses to it.
        adaptive.step_s, adaptive.batch_step_s = 0.001, 0.011
        beaten = specmeter("verify", str(run_dir), "--endpoint", table.url, "--verify-dir", str(tmp_path / "v2"),
                           "--repeats", "3", cwd=tmp_path)
    assert beaten.returncode == 0 and "Traceback" not in beaten.stderr, beaten.stderr[-2000:]
    said = beaten.stdout + beaten.stderr
    point = load_summary(tmp_path / "v2").analysis.verification[0]
    assert point.vs_adaptive is not None and point.vs_adaptive.outcome == "beats" and point.disagrees
    assert "the engine's adaptive speculation beats the table here" in said, said[-3000:]
    corrected = _answer(run_dir)
    assert corrected.round == 3, said[-3000:]  # round 2 was verified (held) and then disagreed
    assert corrected.best is not None and corrected.best.spec is not None and corrected.best.spec.adaptive
    assert any(c.startswith("drafter: ") for c in corrected.changes), corrected.changes
