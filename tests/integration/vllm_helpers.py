"""Integration helpers: start the real vLLM CPU server on the demo models, measure against it.

Each test module starts its server once (module scope) and stops it at the end.
"""

from __future__ import annotations

from pathlib import Path

from specmeter.config import EngineSpec, LoadSpec, SpecConfig
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.demo import demo_engine
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.vllm import VLLMAdapter
from specmeter.results import RunSummary
from specmeter.runner import PhasePlan, RunPlan, execute
from specmeter.store import RunStore


def start_server(spec: SpecConfig, log_dir: Path) -> LaunchedServer:
    return LaunchedServer(VLLMAdapter(), demo_engine(), spec, log_dir / "server.log").start()


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
