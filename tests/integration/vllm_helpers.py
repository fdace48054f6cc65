"""Integration helpers: real vLLM CPU servers on the demo models, shared by every test of the session.

Each distinct speculative configuration is launched on first use and kept for the tests after it, as many at once
as the machine's memory holds (ServerPool.max_alive; the least recently used gives way), so the suite pays few
server starts. Sweeps attach to these servers, exactly as a user attaches specmeter to servers they already run.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import yaml

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.server_log import failure_reason
from specmeter.engines.vllm import VLLMLauncher
from specmeter.execution.runner import Execution, execute
from specmeter.plans.demo import demo_engine
from specmeter.plans.run import run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import ConfigResult, RunSummary

# The session's servers get half the demo's KV cache (28k tokens, more than any test's load holds): one idle
# server (target, drafter, vLLM's processes) then takes about 2.3 GiB of proportional set size, and 2.7 with the
# worker process engines/vllm.py CPU_SERVER_ENV leaves out (3.6 with the demo's cache then); SERVER_GIB keeps margin.
KV_CACHE_GIB = "1"
SERVER_GIB = 3.0
# Left free for the servers tests start themselves (a managed run, llama-servers) and pytest itself.
RESERVE_GIB = 7.0
# Eager mode: no torch.compile at start. On a new 2-core machine (CI's, fresh compile caches) a demo draft-model
# server served after 56 s eager against 138 s compiled, and the session starts a dozen or more; what the tests
# check (what specmeter reads from the engine, and which of two configurations is faster) does not need compiled
# speed. The demo itself, and its e2e test, run compiled, as a user's server does.
EAGER = ["--enforce-eager"]
# The widest attached sweep (the drafter choice: the baseline and three drafters) needs four servers up at once.
MIN_ALIVE = 4


def servers_that_fit() -> int:
    """How many pool servers this machine holds beside what the tests start themselves (5 on a 24 GiB one)."""
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        return MIN_ALIVE
    kib = next(int(line.split()[1]) for line in meminfo.read_text().splitlines() if line.startswith("MemAvailable:"))
    return max(MIN_ALIVE, int((kib / 2**20 - RESERVE_GIB) // SERVER_GIB))


class ServerPool:
    """LaunchedServers keyed by their speculative config and replica index; started on first use.

    At most `max_alive` run at once: starting another stops the one used least recently (a later `get` starts it
    again), so the session's memory stays bounded however many configurations its tests use."""

    def __init__(self, log_dir: Path, max_alive: int | None = None) -> None:
        self.log_dir = log_dir
        self.max_alive = max_alive or servers_that_fit()
        self._servers: OrderedDict[tuple[str, int], LaunchedServer] = OrderedDict()  # least recently used first
        self._started = 0

    def get(self, spec: SpecConfig, replica: int = 0) -> LaunchedServer:
        """The server running `spec`; `replica` > 0: another server of the same config (data-parallel replicas)."""
        key = (spec.model_dump_json(), replica)
        server = self._servers.get(key)
        if server is not None:
            if not server.alive():  # a pool server never stops on its own: say how and why, not "unreachable" later
                raise RuntimeError(f"the session's server for {spec.label()} {server.ended()} while idle: "
                                   f"{failure_reason(server.log_path)} (whole log: {server.log_path})")
            self._servers.move_to_end(key)
            return server
        self.keep(self.max_alive - 1)
        name = spec.label().replace(" ", "_").replace("=", "")
        log = self.log_dir / f"server-{name}-{self._started}.log"
        self._started += 1
        engine = demo_engine()
        engine = engine.model_copy(update={"env": {**engine.env, "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB},
                                           "extra_args": [*engine.extra_args, *EAGER]})
        self._servers[key] = LaunchedServer(VLLMLauncher(), engine, spec, log).start()
        return self._servers[key]

    def stop(self, spec: SpecConfig, replica: int = 0) -> None:
        """Stop one server now (a test's own configuration, to keep the session's memory in bounds)."""
        server = self._servers.pop((spec.model_dump_json(), replica), None)
        if server is not None:
            server.stop()

    def keep(self, n: int) -> None:
        """Stop all but the `n` servers used most recently (room for servers a test starts itself)."""
        while len(self._servers) > max(0, n):
            _, server = self._servers.popitem(last=False)
            server.stop()

    def stop_all(self) -> None:
        """Stop every server; a later `get` starts its config again."""
        self.keep(0)


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
