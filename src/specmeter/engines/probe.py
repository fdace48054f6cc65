"""Before a run against running servers: is each endpoint there, and which engine is it?

Runs before anything is written, so an endpoint that does not answer costs one line and no run directory.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from specmeter.common.errors import InputError
from specmeter.engines.base import ServerProbe, served_models
from specmeter.engines.registry import detect_engine, get_engine
from specmeter.schemas.plan import Plan, Role
from specmeter.telemetry.prometheus import parse_exposition


def _get(url: str, api_key: str | None, timeout: float) -> tuple[bytes, str | None]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read(), resp.headers.get("Server")


def probe(url: str, api_key: str | None = None, timeout: float = 10.0) -> ServerProbe:
    """GET /v1/models (required) and /metrics (optional) of the server at `url`."""
    base = url.rstrip("/")
    try:
        body, server = _get(f"{base}/v1/models", api_key, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise InputError(f"{base} refused the request ({exc.code}): pass its key with --api-key or "
                             "SPECMETER_API_KEY") from None
        raise InputError(f"{base}/v1/models answered HTTP {exc.code}: is this an OpenAI-compatible server? "
                         "Check --endpoint (the base URL, without /v1)") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"{base} is unreachable ({reason}): start the server there or fix --endpoint") from None
    try:
        models: dict[str, Any] | None = json.loads(body)
    except json.JSONDecodeError:
        models = None
    try:
        text, _ = _get(f"{base}/metrics", api_key, timeout)
        metrics = parse_exposition(text.decode("utf-8", errors="replace"))
    except Exception:  # no /metrics is allowed: the engine is then told by /v1/models, or by --engine
        metrics = None
    return ServerProbe(url=base, models=models if isinstance(models, dict) else None, metrics=metrics,
                       server_header=server)


def resolve_endpoints(plan: Plan, api_key: str | None) -> Plan:
    """Check every attached server (each replica of one) answers; fill in the engine kind of those given without
    one. Replicas of one server must be one engine: detected kinds that differ are named."""
    probes: dict[str, ServerProbe] = {}
    configs = []
    for config in plan.configs:
        engine = config.engine
        found = []
        for url in engine.endpoints:
            probes[url] = probes.get(url) or probe(url, api_key)
            found.append(probes[url])
        if found and engine.kind is None:
            kinds = {p.url: detect_engine(p) for p in found}
            if len(set(kinds.values())) > 1:
                raise InputError(f"configuration {config.id}: its replicas run different engines ("
                                 + ", ".join(f"{url}: {kind}" for url, kind in kinds.items())
                                 + "); list replicas of one server, or pass --engine")
            engine = engine.model_copy(update={"kind": kinds[found[0].url]})
        configs.append(config.model_copy(update={"engine": engine}))
    resolved = plan.model_copy(update={"configs": configs})
    check_identity(resolved, probes)
    return resolved


def check_identity(plan: Plan, probes: dict[str, ServerProbe]) -> None:
    """Attached servers are what the plan says they are, checked before anything is measured: a server given a
    speculative config runs one, the baseline is another server than the candidates, it serves the same model,
    and it does not speculate."""
    check_drafting(plan, probes)
    base = plan.main_baseline
    if base is None or not base.engine.endpoints:
        return
    base_urls = set(base.engine.endpoints)
    base_models = {m for url in base_urls for m in served_models(probes[url])}
    for config in plan.configs:
        if config.role is not Role.candidate or not config.engine.endpoints:
            continue
        same = base_urls & set(config.engine.endpoints)
        if same:
            raise InputError(f"{config.id} and the baseline are the same server ({', '.join(sorted(same))}): the "
                             "baseline is a twin with speculation off; start one and give it as --baseline-endpoint")
        models = {m for url in config.engine.endpoints for m in served_models(probes[url])}
        if base_models and models and not base_models & models:
            raise InputError(f"the baseline at {', '.join(sorted(base_urls))} serves {', '.join(sorted(base_models))} "
                             f"but {config.id} at {', '.join(config.engine.endpoints)} serves "
                             f"{', '.join(sorted(models))}: a speedup compares one model with and without "
                             "speculation; point both at the same model")
    if base.engine.kind is not None:
        stats = get_engine(base.engine.kind).stats
        drafting = [url for url in sorted(base_urls) if (m := probes[url].metrics) is not None and stats.speculates(m)]
        if drafting:
            raise InputError(f"the baseline at {', '.join(drafting)} runs speculative decoding (its "
                             f"{stats.metrics_path} shows drafts): the speedup is over speculation off; start the "
                             "baseline without a speculative config")


def check_drafting(plan: Plan, probes: dict[str, ServerProbe]) -> None:
    """An attached candidate given a speculative config (--spec), or the server `verify --endpoint` runs the table
    on, runs speculative decoding, where its engine shows that before any traffic (vLLM)."""
    for config in plan.configs:
        engine = config.engine
        if config.role not in (Role.candidate, Role.verification) or not config.spec.enabled \
                or not engine.endpoints or engine.kind is None:
            continue
        stats = get_engine(engine.kind).stats
        plain = [url for url in engine.endpoints
                 if (m := probes[url].metrics) is not None and stats.speculation_shown_at_start and not
                 stats.speculates(m)]
        if not plain:
            continue
        fix = ("start it with the table's config (`specmeter recommend RUN` prints the flag) and give it to "
               "--endpoint" if config.role is Role.verification else
               "give --endpoint the server that runs it, or drop --spec to measure the server as it is")
        raise InputError(f"{config.id}: the server at {', '.join(plain)} runs no speculative decoding (its "
                         f"{stats.metrics_path} shows no draft counters), but it was given as "
                         f"{config.spec.method.value} K = {config.spec.k}; {fix}")
