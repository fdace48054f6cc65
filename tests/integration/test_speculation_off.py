"""A server with speculation off: the run says there are no SD metrics (no zeros, no crash)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_helpers import measure, start_server

from specmeter.config import LoadSpec, SpecConfig
from specmeter.engines.launcher import LaunchedServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(models: Path, tmp_path_factory: pytest.TempPathFactory) -> LaunchedServer:
    srv = start_server(SpecConfig(), tmp_path_factory.mktemp("nospec"))
    yield srv
    srv.stop()


def test_no_sd_metrics_reported(server: LaunchedServer, tmp_path: Path) -> None:
    load = LoadSpec(concurrency=[2], max_tokens=24, temperature=0.0, warmup=1)
    summary = measure(server.base_url, tmp_path / "run", load, num_prompts=4, phase="baseline")
    assert summary.status == "complete"
    level = summary.phases[0].levels[0]
    assert level.sd.available is False
    assert level.sd.counters is None and level.sd.per_request is None
    assert "speculation is off" in (level.sd.reason or "")
    assert level.categories is None
    assert level.latency.num_ok == level.latency.num_requests > 0
    assert level.latency.output_tokens_per_s and level.latency.output_tokens_per_s > 0
