"""Integration helpers: real vLLM CPU servers on the demo models, shared by every test of the session.

Each distinct speculative configuration is launched once (the first test that needs it pays the start)
and stopped when the session ends, so the whole suite pays each server start once. Sweeps attach to these
servers, exactly as a user attaches specmeter to servers they already run.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.vllm import VLLMLauncher
from specmeter.execution.runner import Execution, execute
from specmeter.plans.demo import demo_engine
from specmeter.plans.run import run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import ConfigResult, RunSummary


class ServerPool:
    """LaunchedServers keyed by their speculative config and replica index; started on first use."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[tuple[str, int], LaunchedServer] = {}

    def get(self, spec: SpecConfig, replica: int = 0) -> LaunchedServer:
        """The server running `spec`; `replica` > 0: another server of the same config (data-parallel replicas)."""
        key = (spec.model_dump_json(), replica)
        if key not in self._servers:
            name = spec.label().replace(" ", "_").replace("=", "")
            log = self.log_dir / f"server-{name}-{len(self._servers)}.log"
            self._servers[key] = LaunchedServer(VLLMLauncher(), demo_engine(), spec, log).start()
        return self._servers[key]

    def stop(self, spec: SpecConfig, replica: int = 0) -> None:
        """Stop one server now (a test's own configuration, to keep the session's memory in bounds)."""
        server = self._servers.pop((spec.model_dump_json(), replica), None)
        if server is not None:
            server.stop()

    def stop_all(self) -> None:
        """Stop every server; a later `get` starts its config again."""
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


def attached_sweep_file(pool: ServerPool, models: Path, specs: list[SpecConfig], out: Path, *, num_prompts: int,
                        load: dict[str, object]) -> Path:
    """A sweep file over the sample workload whose baseline and candidates attach to the pool's servers for `specs`
    (started on first use), written into `out`."""
    candidates = [{**spec.model_dump(mode="json", exclude_none=True, exclude={"extra"}),
                   "endpoint": pool.get(spec).base_url} for spec in specs]
    sweep = {
        "workload": {"dataset": "sample", "num_prompts": num_prompts},
        "engine": {"model": str(models / "demo-target")},
        "baseline_endpoint": pool.get(SpecConfig()).base_url,
        "candidates": candidates,
        "load": load,
        "interleave": True,
    }
    path = out / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    return path


def measure(base_url: str | list[str], run_dir: Path, load: LoadSpec, num_prompts: int | None = None,
            spec: SpecConfig | None = None) -> RunSummary:
    """Run the sample workload (stratified) against an attached server (a list: its replicas) and return the
    summary."""
    convs = select(load_sample(), num_prompts=num_prompts, seed=0)
    plan = run_plan(EngineSpec(endpoint=base_url), spec or SpecConfig(), load, baseline=False,
                    baseline_endpoint=None,
                    workload=WorkloadSelection(dataset="sample", conversation_ids=[c.id for c in convs]))
    return execute(Execution(plan=plan, conversations=convs), RunStore(run_dir))


def only_config(summary: RunSummary) -> ConfigResult:
    (config,) = summary.configs
    return config
