"""The servers of a run: each configuration group's server (launched, attached, or failed to start), and the pool
that keeps launched servers up across plans so that a later plan with the same engine and speculative config
reuses them."""

from __future__ import annotations

import json
from contextlib import ExitStack

from specmeter.common.errors import EngineError, InputError
from specmeter.config.models import EngineSpec
from specmeter.engines.base import Engine
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.registry import get_engine
from specmeter.load.client import OpenAIClient
from specmeter.schemas.plan import PlannedConfig


class Server:
    """One server of a block: launched, attached, or failed to start."""

    def __init__(self, configs: list[PlannedConfig]) -> None:
        self.configs = configs
        self.head = configs[0]
        kind = self.head.engine.kind
        if kind is None:  # execute() resolves attached servers' kinds before any _Server exists
            raise InputError(f"server {self.head.server}: engine kind unknown; pass --engine")
        self.engine: Engine = get_engine(kind)
        self.process: LaunchedServer | None = None
        self.urls: list[str] = self.head.engine.endpoints  # attached: its replicas; launched: set once it is up
        self.error: str | None = None
        self.model: str | None = None


class ServerPool:
    """Launched servers by what they run (engine + speculative config), stopped when the pool closes."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._up: dict[str, LaunchedServer] = {}

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._up.clear()
        self._stack.close()

    @staticmethod
    def _key(config: PlannedConfig) -> str:
        return json.dumps([config.engine.model_dump(mode="json"), config.spec.model_dump(mode="json")],
                          sort_keys=True)

    def running(self, config: PlannedConfig) -> LaunchedServer | None:
        found = self._up.get(self._key(config))
        return found if found is not None and found.alive() else None

    def stop(self, config: PlannedConfig) -> None:
        """Stop the server running `config` now (one no later plan needs, to free its memory)."""
        found = self._up.pop(self._key(config), None)
        if found is not None:
            found.stop()

    def start(self, config: PlannedConfig, proc: LaunchedServer) -> None:
        """Start `proc` (stopped when the pool closes, even if it never gets ready) and keep it for reuse."""
        self._stack.callback(proc.stop)
        proc.start()
        self._up[self._key(config)] = proc


async def served_model(client: OpenAIClient, engine: EngineSpec) -> str:
    if engine.served_model_name:
        return engine.served_model_name
    if engine.launch and engine.model:
        return engine.model
    try:
        data = await client.get_json("/v1/models")
        return str(data["data"][0]["id"])
    except Exception as exc:
        raise EngineError(
            f"{client.base_url}/v1/models did not name a model ({type(exc).__name__}); pass --served-model-name"
        ) from exc
