"""`verify RUN --endpoint URL` on a table with a K = 0 range, the whole flow against fake vLLM servers: a server
whose requests accept nothing after a step that drafted nothing (TensorRT-LLM #16888's fault) fails the
verification in one line, the answer's round kept as history with that state; the same server without the fault
recovers, and the table is verified."""

from __future__ import annotations

import json
from pathlib import Path

from in_process import specmeter

from fakeengine.server import FakeEngine
from specmeter.rundir.answer import read_answer
from specmeter.rundir.store import load_summary

K2 = {"method": "draft_model", "num_speculative_tokens": 2, "draft_model": "fake/draft"}


def test_acceptance_that_collapses_after_k0_fails_verification_and_one_that_recovers_holds(tmp_path: Path) -> None:
    # A step costs 10 ms plus 2 ms per request streaming (5 ms plus 15 ms with drafts to verify): K = 2 pays at
    # batch 1 and loses at 8, so the table drafts nothing above some batch size.
    with FakeEngine(speculative=False, k=1, alpha=0.0, step_s=0.01, batch_step_s=0.002) as base, \
            FakeEngine(k=2, alpha=0.9, step_s=0.005, batch_step_s=0.015, no_draft_prob=0.0) as k2:
        path = tmp_path / "sweep.json"
        path.write_text(json.dumps({
            "workload": {"dataset": "sample", "num_prompts": 8}, "engine": {"endpoint": k2.url},
            "baseline_endpoint": base.url, "candidates": [{**K2, "endpoint": k2.url}],
            "load": {"concurrency": [1, 8], "max_tokens": 16, "warmup": 0, "precision": "fixed"},
            "interleave": True,
        }), encoding="utf-8")
        swept = specmeter("sweep", str(path), "--out", str(tmp_path), "--name", "s", cwd=tmp_path)
        assert swept.returncode == 0, swept.stderr[-2000:]
        run_dir = tmp_path / "s"
        decided = specmeter("recommend", str(run_dir), cwd=tmp_path)
        assert decided.returncode == 0, decided.stderr[-2000:]
        answer = read_answer(run_dir)
        assert answer is not None and answer.recommendation is not None and answer.recommendation.best is not None
        table = answer.recommendation.best.spec
        assert table is not None and any(k == 0 for *_, k in table.num_speculative_tokens_per_batch_size or []), \
            decided.stdout[-2000:]
        with FakeEngine(k=2, alpha=0.9, step_s=0.01, no_draft_prob=0.3, collapse_after_zero=True) as broken:
            failed = specmeter("verify", str(run_dir), "--endpoint", broken.url, "--verify-dir",
                               str(tmp_path / "v-broken"), cwd=tmp_path)
        assert failed.returncode == 0 and "Traceback" not in failed.stderr, failed.stderr[-2000:]
        said = failed.stdout + failed.stderr
        assert "failed: at c1 acceptance after K = 0 did not recover" in said, said[-2000:]
        after = read_answer(run_dir)
        assert after is not None and after.recommendation is not None
        assert after.recommendation.verification == "collapsed"
        recovery = next(vp.recovery for vp in load_summary(tmp_path / "v-broken").analysis.verification
                        if vp.recovery is not None)
        assert recovery.recovered is False and recovery.after_zero is not None and recovery.static is not None
        assert recovery.after_zero < recovery.static
        with FakeEngine(k=2, alpha=0.9, step_s=0.01, no_draft_prob=0.3) as sound:
            held = specmeter("verify", str(run_dir), "--endpoint", sound.url, "--verify-dir", str(tmp_path / "v-ok"),
                             cwd=tmp_path)
        assert held.returncode == 0 and "Traceback" not in held.stderr, held.stderr[-2000:]
    recovered = next(vp.recovery for vp in load_summary(tmp_path / "v-ok").analysis.verification
                     if vp.recovery is not None)
    assert recovered.recovered is not False
