"""Ground truth a real engine gives: draft == target at temperature 0 accepts every drafted token."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_helpers import ServerPool, measure, only_config

from specmeter.config.models import LoadSpec, SpecConfig, SpecMethod

K = 3
pytestmark = pytest.mark.integration


def test_self_draft_accepts_everything(pool: ServerPool, models: Path, tmp_path: Path) -> None:
    spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=K, draft_model=str(models / "demo-target"))
    load = LoadSpec(concurrency=[1, 3], max_tokens=32, temperature=0.0, warmup=1)
    summary = measure(pool.get(spec).base_url, tmp_path / "run", load, num_prompts=6, spec=spec)
    assert summary.status == "complete"
    for level in only_config(summary).points:
        sd = level.sd
        assert sd.available and sd.reference == "counters"
        for counts in (sd.counters, sd.per_request):
            assert counts is not None and counts.num_steps > 0
            assert counts.acceptance_length == K + 1
            assert counts.acceptance_rate == 1.0
            assert counts.per_position_rate == [1.0] * K
            assert counts.conditional_rate == [1.0] * K
            assert counts.histogram is None or counts.histogram[:K] == [0] * K
        assert sd.agree is True, sd.agreement
