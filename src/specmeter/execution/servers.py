"""The servers of a run: each configuration group's server (launched, attached, or failed to start), and the pool
that keeps launched servers up across plans so that a later plan with the same engine and speculative config
reuses them."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from specmeter.common.errors import EngineError, InputError
from specmeter.config.models import EngineSpec
from specmeter.engines.base import Engine
from specmeter.engines.launcher import LaunchedServer, wait_served
from specmeter.engines.registry import get_engine
from specmeter.load.client import OpenAIClient
from specmeter.schemas.plan import PlannedConfig


class Server:
    """One server of a block: launched, attached, or failed to start; `instance` of its configurations' servers
    (load.instances: each a server of its own, started once, its rounds alternating with the others')."""

    def __init__(self, configs: list[PlannedConfig], instance: int = 0) -> None:
        self.configs, self.instance = configs, instance
        self.head = configs[0]
        # The first instance is named as its configuration's server; more are numbered from 2 (logs, notes).
        self.name = self.head.server if instance == 0 else f"{self.head.server}.{instance + 1}"
        kind = self.head.engine.kind
        if kind is None:  # execute() resolves attached servers' kinds before any _Server exists
            raise InputError(f"server {self.head.server}: engine kind unknown; pass --engine")
        self.engine: Engine = get_engine(kind)
        self.process: LaunchedServer | None = None
        self.urls: list[str] = self.head.engine.endpoints  # attached: its replicas; launched: set once it is up
        self.error: str | None = None
        self.model: str | None = None  # what the run's requests ask for
        self.names: tuple[str, ...] = ()  # what its streams may name (execution.servers.served_model)


class ServerPool:
    """Launched servers by what they run (engine + speculative config), stopped when the pool closes."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._up: dict[tuple[str, int], LaunchedServer] = {}

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._up.clear()
        self._stack.close()

    @staticmethod
    def _key(config: PlannedConfig, instance: int) -> tuple[str, int]:
        return json.dumps([config.engine.model_dump(mode="json"), config.spec.model_dump(mode="json")],
                          sort_keys=True), instance

    def running(self, config: PlannedConfig, instance: int = 0) -> LaunchedServer | None:
        found = self._up.get(self._key(config, instance))
        return found if found is not None and found.alive() else None

    def stop(self, config: PlannedConfig) -> None:
        """Stop every instance of the server running `config` now (one no later plan needs, to free its memory)."""
        for key in [k for k in self._up if k[0] == self._key(config, 0)[0]]:
            self._up.pop(key).stop()

    def keep_instances(self, count: int) -> None:
        """Stop the instances from `count` on (a plan that runs fewer than an earlier plan started frees their
        memory before its own servers start)."""
        for key in [k for k in self._up if k[1] >= count]:
            self._up.pop(key).stop()

    def spawn(self, proc: LaunchedServer) -> None:
        """Spawn `proc`, stopped when the pool closes, even if it never gets ready."""
        self._stack.callback(proc.stop)
        proc.spawn()

    def ready(self, config: PlannedConfig, proc: LaunchedServer, instance: int = 0) -> None:
        """Wait until the spawned `proc` serves (EngineError where it does not), then keep it for reuse."""
        proc.wait_ready()
        self._up[self._key(config, instance)] = proc


def start_waves(servers: Sequence[Server]) -> list[list[Server]]:
    """The launched servers in waves whose servers start at once: servers placed on GPUs no other server of the wave
    uses (a large model's start is mostly weight loading and compilation, which overlap when each server has GPUs of
    its own), and servers of an engine that starts beside others on shared devices (EngineLauncher.starts_together:
    vLLM's CPU build). Any other server waits for the wave before it: vLLM sizes its KV cache from the GPU memory it
    finds free while it starts, which a neighbour starting on the same GPU changes under it."""
    waves: list[tuple[set[str], bool, list[Server]]] = []  # (GPUs taken, shared devices, servers)
    for server in servers:
        engine = server.head.engine
        gpus = set(filter(None, engine.env.get("CUDA_VISIBLE_DEVICES", "").split(",")))
        shared = engine.launch and server.engine.launcher.starts_together(engine)
        if shared:
            wave = next((w for w in waves if w[1]), None)
        elif gpus and engine.launch:
            wave = next((w for w in waves if not w[1] and w[0] and not gpus & w[0]), None)
        else:
            wave = None
        if wave is None:
            waves.append((set(gpus), shared, [server]))
        else:
            wave[0].update(gpus)
            wave[2].append(server)
    return [w[2] for w in waves]


def start_all(servers: Sequence[Server], spawn: Callable[[Server], LaunchedServer | None],
              ready: Callable[[Server, LaunchedServer], None],
              starting: Callable[[Server, LaunchedServer], None] | None = None) -> None:
    """Start `servers` wave by wave (start_waves): `spawn` starts a server's process (None: it needs none), `ready`
    takes it once it serves (or says why it does not), `starting` is shown each server still starting after every
    look (a progress line). A wave's servers are looked at together until each serves or ends
    (launcher.wait_served), so each is timed when it came to serve; the next wave starts after."""
    for wave in start_waves(servers):
        spawned = [(server, proc) for server in wave if (proc := spawn(server)) is not None]
        wait_served([proc for _, proc in spawned], tick=None if starting is None else _ticker(spawned, starting))
        for server, proc in spawned:
            ready(server, proc)


def _ticker(spawned: Sequence[tuple[Server, LaunchedServer]], starting: Callable[[Server, LaunchedServer], None]
            ) -> Callable[[Sequence[LaunchedServer]], None]:
    """wait_served's tick: `starting` for each server whose process is still starting."""
    by_proc = {id(proc): server for server, proc in spawned}

    def tick(waiting: Sequence[LaunchedServer]) -> None:
        for proc in waiting:
            starting(by_proc[id(proc)], proc)
    return tick


async def served_model(client: OpenAIClient, engine: EngineSpec) -> tuple[str, tuple[str, ...]]:
    """The model name the run's requests ask for, and every name a stream of this server may give: the one asked
    for and those its /v1/models lists (vLLM's chunks name its first served name, whichever was asked for). ()
    where /v1/models lists none: the streams' model is then not checked."""
    why = "an empty list"
    try:
        data = await client.get_json("/v1/models")
        listed = [str(card["id"]) for card in data["data"]]
    except Exception as exc:  # any answer that is not a model list
        listed, why = [], type(exc).__name__
    model = engine.served_model_name or (engine.model if engine.launch else None) or next(iter(listed), None)
    if model is None:
        raise EngineError(f"{client.base_url}/v1/models did not name a model ({why}); "
                          "pass --served-model-name")
    return model, tuple(dict.fromkeys([model, *listed])) if listed else ()
