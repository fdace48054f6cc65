"""Engine kind -> its stats reader and launcher (each engine module's ENGINE). Imported lazily: naming an engine
loads only its module. The kinds are config's ENGINE_KINDS, the one list of them."""

from __future__ import annotations

from specmeter.common.errors import InputError
from specmeter.common.registry import Registry
from specmeter.config.models import ENGINE_KINDS
from specmeter.engines.base import Engine, EngineStats, ServerProbe
from specmeter.schemas.plan import Plan

ENGINES: Registry[Engine] = Registry("engine", {kind: f"specmeter.engines.{kind}:ENGINE" for kind in ENGINE_KINDS})


def engine_kinds() -> list[str]:
    return ENGINES.names()


def get_engine(kind: str) -> Engine:
    return ENGINES.get(kind)


def detect_engine(probe: ServerProbe) -> str:
    """The one registered engine that recognizes `probe`; an InputError naming the fix otherwise."""
    matches = [kind for kind in ENGINES if get_engine(kind).stats.can_adapt(probe)]
    if len(matches) == 1:
        return matches[0]
    what = "none of " if not matches else "several of "
    found = ", ".join(matches or ENGINES.names())
    raise InputError(f"{probe.url}: cannot tell which engine serves it ({what}{found} recognize its /metrics "
                     "and /v1/models); pass --engine")


def plan_stats(plan: Plan) -> dict[str, EngineStats]:
    """The stats that read each configuration's server, by config id (configurations of unknown kind left out)."""
    return {c.id: get_engine(c.engine.kind).stats for c in plan.configs if c.engine.kind is not None}
