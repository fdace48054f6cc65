"""Engine kind -> its stats reader and launcher. Imported lazily: naming an engine loads only its module."""

from __future__ import annotations

import importlib
from functools import cache

from specmeter.common.errors import InputError
from specmeter.config.models import ENGINE_KINDS
from specmeter.engines.base import Engine, EngineLauncher, EngineStats, ServerProbe
from specmeter.schemas.plan import Plan

# kind (one of config.ENGINE_KINDS, every one) -> "module:StatsClass:LauncherClass"
_ENGINES: dict[str, str] = {
    "vllm": "specmeter.engines.vllm:VLLMStats:VLLMLauncher",
    "llamacpp": "specmeter.engines.llamacpp:LlamaCppStats:LlamaCppLauncher",
    "sglang": "specmeter.engines.sglang:SGLangStats:SGLangLauncher",
    "trtllm": "specmeter.engines.trtllm:TRTLLMStats:TRTLLMLauncher",
}


def engine_kinds() -> list[str]:
    return list(ENGINE_KINDS)


@cache
def get_engine(kind: str) -> Engine:
    try:
        ref = _ENGINES[kind]
    except KeyError:
        raise InputError(f"unknown engine {kind!r}; choose one of: {', '.join(_ENGINES)}") from None
    module_name, stats_name, launcher_name = ref.split(":")
    module = importlib.import_module(module_name)
    stats: EngineStats = getattr(module, stats_name)()
    launcher: EngineLauncher = getattr(module, launcher_name)()
    return Engine(kind, stats, launcher)


def detect_engine(probe: ServerProbe) -> str:
    """The one registered engine that recognizes `probe`; an InputError naming the fix otherwise."""
    matches = [kind for kind in _ENGINES if get_engine(kind).stats.can_adapt(probe)]
    if len(matches) == 1:
        return matches[0]
    what = "none of " if not matches else "several of "
    found = ", ".join(matches or _ENGINES)
    raise InputError(f"{probe.url}: cannot tell which engine serves it ({what}{found} recognize its /metrics "
                     "and /v1/models); pass --engine")


def plan_stats(plan: Plan) -> dict[str, EngineStats]:
    """The stats that read each configuration's server, by config id (configurations of unknown kind left out)."""
    return {c.id: get_engine(c.engine.kind).stats for c in plan.configs if c.engine.kind is not None}
