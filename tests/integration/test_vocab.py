"""`specmeter vocab` on a demo-pair run made on the real engine: the baseline's token ids as vLLM returned them
lie in the target's vocabulary, every category of the run is reported, the whole vocabulary caps nothing, a larger
top-N covers at least as much, and the measured acceptance it shows is the run's own."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml
from vllm_helpers import ServerPool

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.data.sample import SAMPLE_RESOURCE
from specmeter.metrics.sd import sum_counts
from specmeter.rundir.store import load_summary
from specmeter.schemas.vocab import VocabReport

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
K = 2
DRAFTED = f"draft_model-k{K}"
SAMPLE = Path(str(resources.files("specmeter.data").joinpath(SAMPLE_RESOURCE)))  # a text corpus: the prompts


@pytest.fixture(scope="module")
def run_dir(pool: ServerPool, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    draft = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=K, draft_model=str(models / "demo-draft"))
    sweep = {
        "workload": {"dataset": "sample", "num_prompts": 22},  # two conversations per category
        "engine": {"model": str(models / "demo-target")},
        "baseline_endpoint": pool.get(SpecConfig()).base_url,
        "candidates": [{**draft.model_dump(mode="json", exclude_none=True, exclude={"extra"}),
                        "endpoint": pool.get(draft).base_url}],
        "load": {"concurrency": [4], "max_tokens": 32, "temperature": 0, "warmup": 1, "precision": "fixed"},
        "interleave": True,
    }
    out = tmp_path_factory.mktemp("vocab")
    (out / "sweep.yaml").write_text(yaml.safe_dump(sweep), encoding="utf-8")
    res = subprocess.run([*SPECMETER, "sweep", str(out / "sweep.yaml"), "--out", str(out), "--name", "run"],
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out / "run"


def test_vocab_on_a_real_run(run_dir: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "all.npy", np.arange(8192))
    res = subprocess.run([*SPECMETER, "vocab", str(run_dir), "--draft-vocab", str(tmp_path / "all.npy"), "--top",
                          "64,512", "--corpus", str(SAMPLE), "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = VocabReport.model_validate_json(res.stdout)
    summary = load_summary(run_dir)
    assert report.target_vocab_size == 8192  # read from the run's target; every returned id lay inside it
    assert {c.category for c in report.maps[0].categories} == set(summary.plan.workload.category_counts)
    assert report.requests == summary.plan.workload.requests  # each request once, at temperature 0

    full, small, large = report.maps
    assert full.overall.coverage.value == 1.0 and full.overall.al_ceiling.value == pytest.approx(K + 1)
    for a, b in zip([small.overall.coverage, *small.overall.ceiling], [large.overall.coverage,
                                                                        *large.overall.ceiling]):
        assert a.value is not None and b.value is not None and a.value <= b.value
    assert large.overall.al_ceiling.value is not None and small.overall.al_ceiling.value is not None
    assert large.overall.al_ceiling.value >= small.overall.al_ceiling.value

    # The measured side is the run's own per-request acceptance, pooled over its points.
    result = summary.config(DRAFTED)
    assert result is not None
    pooled = sum_counts([p.sd.per_request for p in result.points if p.sd.per_request is not None])
    (drafted,) = full.drafted
    assert drafted.config_id == DRAFTED and drafted.source == "per_request"
    assert drafted.overall.al_measured == pytest.approx(pooled.acceptance_length)
    # Nothing lies outside the whole vocabulary: it forces none of the rejections.
    assert all(p.explained == 0.0 for p in drafted.overall.positions if p.measured is not None and p.measured < 1)
    assert (run_dir / "vocab.json").exists()
