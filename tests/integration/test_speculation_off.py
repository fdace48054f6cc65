"""A server with speculation off: the run says there are no SD metrics (no zeros, no crash)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_helpers import ServerPool, measure, only_config

from specmeter.config.models import LoadSpec, SpecConfig

pytestmark = pytest.mark.integration


def test_no_sd_metrics_reported(pool: ServerPool, tmp_path: Path) -> None:
    load = LoadSpec(concurrency=[2], max_tokens=24, temperature=0.0, warmup=1)
    summary = measure(pool.get(SpecConfig()).base_url, tmp_path / "run", load, num_prompts=8)
    assert summary.status == "complete"
    level = only_config(summary).points[0]
    assert level.sd.available is False
    assert level.sd.counters is None and level.sd.per_request is None
    assert "speculation is off" in (level.sd.reason or "")
    assert level.categories is None
    assert level.latency.num_ok == level.latency.num_requests > 0
    assert level.latency.output_tokens_per_s and level.latency.output_tokens_per_s > 0
