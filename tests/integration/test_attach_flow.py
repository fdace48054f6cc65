"""The README's "your own server" flow on real vLLM CPU servers: `specmeter run --endpoint URL --baseline-endpoint
URL2 --spec ...` measures two servers specmeter did not start, then `specmeter recommend RUN` answers from it and
renders the answer as vLLM's flags, as it does for a run that launched them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_helpers import ServerPool

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.schemas.recommend import Recommendation

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]


def test_run_attached_with_its_spec_then_recommend(pool: ServerPool, models: Path, tmp_path: Path) -> None:
    draft = str(models / "demo-draft")
    sd = pool.get(SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=2, draft_model=draft))
    off = pool.get(SpecConfig())
    spec = json.dumps({"method": "draft_model", "model": draft, "num_speculative_tokens": 2})
    run = subprocess.run([*SPECMETER, "run", "--endpoint", sd.base_url, "--baseline-endpoint", off.base_url,
                          "--spec", spec, "--concurrency", "1,4", "--num-prompts", "4", "--max-tokens", "24",
                          "--temperature", "0", "--warmup", "1", "--out", str(tmp_path), "--name", "attached"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rec_run = subprocess.run([*SPECMETER, "recommend", str(tmp_path / "attached")], capture_output=True, text=True,
                             timeout=300)
    assert rec_run.returncode == 0, rec_run.stdout[-3000:] + rec_run.stderr[-3000:]
    assert "Traceback" not in rec_run.stderr
    rec = Recommendation.model_validate_json((tmp_path / "attached" / "recommendation.json").read_text("utf-8"))
    best = rec.best
    assert best is not None and best.candidates == ["draft_model-k2"]
    assert all(r.k in (0, 2) for r in best.ranges)
    # The static K is the one the attached server runs, or 0 where it pays nowhere: renderable either way.
    assert best.static_k in (0, 2)
    if best.static_k:
        assert best.deploy is not None and "--speculative-config" in best.deploy.flags
