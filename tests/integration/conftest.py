"""Integration fixtures: the real vLLM CPU server serving the project's demo models.

Each test module starts its server once (module scope) and stops it at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specmeter.config import EngineSpec, LoadSpec, SpecConfig
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.demo import demo_engine, models_dir
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.vllm import VLLMAdapter
from specmeter.results import RunSummary
from specmeter.runner import PhasePlan, RunPlan, execute
from specmeter.store import RunStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def models() -> Path:
    return models_dir()


def start_server(spec: SpecConfig, log_dir: Path) -> LaunchedServer:
    return LaunchedServer(VLLMAdapter(), demo_engine(), spec, log_dir / "server.log").start()


@pytest.fixture(scope="module")
def server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LaunchedServer]]:
    started: list[LaunchedServer] = []
    yield started
    for s in started:
        s.stop()


def measure(
    base_url: str,
    run_dir: Path,
    load: LoadSpec,
    num_prompts: int | None = None,
    phase: str = "sd",
) -> RunSummary:
    """Run the sample workload (stratified) against an attached server and return the summary."""
    convs = select(load_sample(), num_prompts=num_prompts, seed=0)
    plan = RunPlan(
        phases=[PhasePlan(phase, SpecConfig(), EngineSpec(endpoint=base_url))],
        load=load,
        conversations=convs,
    )
    return execute(plan, RunStore(run_dir))
