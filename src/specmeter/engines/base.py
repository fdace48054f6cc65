"""What every engine adapter provides: how to launch it, and how to read its SD stats into SDCounts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from specmeter.config import EngineSpec, SpecConfig
from specmeter.metrics.prometheus import CounterDelta, Snapshot
from specmeter.schemas.sd import SDCounts


class EngineAdapter(ABC):
    """One serving engine. Adapters are stateless; a registry maps `EngineSpec.kind` to one."""

    name: str

    @abstractmethod
    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        """The argv that launches the engine's OpenAI-compatible server."""

    def server_env(self, engine: EngineSpec) -> dict[str, str]:
        """Extra environment for a launched server (on top of the caller's)."""
        return dict(engine.env)

    def api_key_env(self, api_key: str) -> dict[str, str]:
        """Environment that makes a launched server require `api_key` (empty: engine cannot)."""
        return {}

    def request_extensions(self, temperature: float) -> dict[str, Any]:
        """Engine-specific fields added to every request body (e.g. ask for the generated token ids)."""
        return {}

    @property
    def running_gauge(self) -> str | None:
        """Exact name of the gauge holding the engine's running-batch size (None: not exposed)."""
        return None

    @abstractmethod
    def version(self) -> str | None:
        """Installed engine version, or None when the engine is not installed here."""

    @property
    @abstractmethod
    def sd_counter_names(self) -> list[str]:
        """Exact Prometheus sample names whose deltas give run-level SD counts."""

    @property
    @abstractmethod
    def traffic_counter_names(self) -> dict[str, str]:
        """Exact sample names for 'requests finished' and 'generated tokens' (foreign-traffic check)."""

    @abstractmethod
    def sd_from_counters(self, delta: CounterDelta) -> SDCounts | None:
        """Run-level SDCounts from counter deltas; None when the engine exposes no SD counters."""

    @abstractmethod
    def sd_from_response(self, payload: dict[str, Any]) -> tuple[SDCounts | None, dict[str, Any] | None]:
        """Per-request SDCounts (and the raw engine fields) from a final response/usage chunk."""

    def sd_enabled_in(self, snapshot: Snapshot) -> bool:
        """Whether the server's /metrics shows speculation is configured at all."""
        return any(snapshot.has(n) for n in self.sd_counter_names)
