"""One benchmark run: for each phase (SD on, speculation off) launch or attach, sweep the load levels,
snapshot the engine's counters around each level, and write everything to the run directory as it
happens. The run summary is rewritten after every level, so a stop at any point loses nothing measured.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from specmeter import __version__
from specmeter.analysis.speedup import compute_speedups
from specmeter.config import EngineSpec, LoadSpec, SpecConfig
from specmeter.data.model import Conversation
from specmeter.engines.base import EngineAdapter
from specmeter.engines.launcher import LaunchedServer, log_tail
from specmeter.engines.registry import get_adapter
from specmeter.errors import EngineError, RunIncomplete, SpecmeterError
from specmeter.load.client import OpenAIClient
from specmeter.load.records import RequestRecord
from specmeter.load.scheduler import ErrorRateExceeded, count_requests, run_level
from specmeter.metrics.categories import category_breakdown
from specmeter.metrics.latency import summarize_latency
from specmeter.metrics.prometheus import Snapshot, parse_exposition
from specmeter.metrics.sd_summary import summarize_sd
from specmeter.results import LevelResult, PhaseResult, RunSummary
from specmeter.store import RunStore, redact_argv, redact_env, environment_info, model_fingerprint

BASELINE = "baseline"
SD = "sd"


class Reporter:
    """Progress sink. This base is silent (tests, --json); the CLI's RichReporter draws bars."""

    def phase_start(self, name: str, label: str) -> None: ...
    def server_ready(self, name: str, seconds: float) -> None: ...
    def level_start(self, phase: str, concurrency: int, total: int) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def level_done(self, phase: str, level: LevelResult) -> None: ...
    def note(self, message: str) -> None: ...


@dataclass
class PhasePlan:
    """One engine configuration on one workload. Consecutive phases with the same server share it."""

    name: str
    spec: SpecConfig
    engine: EngineSpec
    workload: str = "main"
    # None: the run's conversations. `derive` builds them at phase start from the records already
    # written (e.g. random tokens matched to a real workload's measured lengths).
    conversations: list[Conversation] | None = None
    derive: Callable[[list[RequestRecord]], list[Conversation]] | None = None
    load: LoadSpec | None = None
    server_name: str | None = None  # names the server log; defaults to the phase name

    def server_key(self) -> str:
        return self.engine.model_dump_json() + self.spec.model_dump_json()


@dataclass
class RunPlan:
    phases: list[PhasePlan]
    load: LoadSpec
    conversations: list[Conversation]
    workload: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    # Resume: the summary and records already on disk. Finished levels are kept as they are; an
    # unfinished level re-sends only the conversations that have not fully succeeded.
    prior: RunSummary | None = None
    prior_records: list[RequestRecord] = field(default_factory=list)


def plan_phases(engine: EngineSpec, spec: SpecConfig, baseline: bool, baseline_endpoint: str | None) -> list[PhasePlan]:
    """SD first, then the same engine with speculation off (launch mode) or at baseline_endpoint."""
    phases = [PhasePlan(SD if spec.enabled or not engine.launch else BASELINE, spec, engine)]
    if not baseline or not spec.enabled:
        return phases
    if engine.launch:
        phases.append(PhasePlan(BASELINE, SpecConfig(), engine))
    elif baseline_endpoint:
        phases.append(PhasePlan(BASELINE, SpecConfig(), engine.model_copy(update={"endpoint": baseline_endpoint})))
    return phases


class EngineDied(EngineError):
    pass


async def _snapshot(client: OpenAIClient) -> tuple[Snapshot | None, str | None]:
    """The server's /metrics, or (None, why not). A server without /metrics, or whose /metrics is
    garbage, still gets measured: SD then comes from per-request stats, and the reason is recorded."""
    try:
        text = await client.get_text("/metrics")
    except Exception as exc:  # noqa: BLE001 - any failure means the same: no counters this time
        return None, f"/metrics could not be read ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
    try:
        return parse_exposition(text, taken_at=time.monotonic()), None
    except EngineError as exc:
        return None, str(exc)


async def _served_model(client: OpenAIClient, engine: EngineSpec) -> str:
    if engine.served_model_name:
        return engine.served_model_name
    if engine.launch and engine.model:
        return engine.model
    try:
        data = await client.get_json("/v1/models")
        return str(data["data"][0]["id"])
    except Exception as exc:  # noqa: BLE001
        raise EngineError(
            f"{engine.endpoint}/v1/models did not name a model ({type(exc).__name__}); pass --served-model-name"
        ) from exc


async def _run_phase(
    plan: RunPlan,
    phase: PhasePlan,
    adapter: EngineAdapter,
    base_url: str,
    server: LaunchedServer | None,
    store: RunStore,
    reporter: Reporter,
    result: PhaseResult,
    on_level: Any,
) -> None:
    load = phase.load or plan.load
    conversations = phase.conversations if phase.conversations is not None else plan.conversations
    async with OpenAIClient(base_url, adapter, api_key=plan.api_key, timeout_s=load.request_timeout_s) as client:
        model = await _served_model(client, phase.engine)

        def on_record(record: RequestRecord) -> None:
            store.append(record)
            reporter.request_done(record)
            if server is not None and not record.ok and not server.alive():
                raise EngineDied(
                    f"the {adapter.name} server died during the run (last log lines of {server.log_path}):\n"
                    f"{log_tail(server.log_path)}"
                )

        for concurrency in load.concurrency:
            if result.level(concurrency) is not None:
                continue  # finished before a resume
            prior = [r for r in plan.prior_records
                     if r.phase == phase.name and r.concurrency == concurrency and not r.warmup]
            skip = completed_conversations(prior, conversations)
            if load.warmup:
                warm = [c.model_copy(update={"turns": c.turns[:1], "id": f"warmup-{c.id}"}) for c in conversations[: load.warmup]]
                await run_level(client, warm, min(concurrency, len(warm)), load, model, phase.name, on_record, warmup=True)
            before, err_before = await _snapshot(client)
            reporter.level_start(phase.name, concurrency, count_requests(conversations))
            level = await run_level(client, conversations, concurrency, load, model, phase.name, on_record, skip=skip)
            after, err_after = await _snapshot(client)
            sd = summarize_sd(adapter, before, after, level.records, scrape_error=err_before or err_after)
            records, wall = level.records, level.wall_s
            if prior:
                records = latest_records([*prior, *level.records])
                wall += max((r.start_s + (r.e2e_s or 0.0) for r in prior), default=0.0)
                if sd.available:
                    sd = summarize_sd(adapter, None, None, records)
                    sd.counters_invalid_reason = (
                        "level finished by --resume on a new server: counter deltas cover only the resumed "
                        "requests, so per-request stats are used"
                    )
            lr = LevelResult(
                concurrency=concurrency,
                latency=summarize_latency(records, wall),
                sd=sd,
                categories=category_breakdown(records),
                resumed=bool(prior),
            )
            result.levels.append(lr)
            reporter.level_done(phase.name, lr)
            on_level()


def execute(plan: RunPlan, store: RunStore, reporter: Reporter | None = None) -> RunSummary:
    """Run every phase; always leaves summary.json consistent with what was measured."""
    reporter = reporter or Reporter()
    t0 = time.perf_counter()
    first = plan.phases[0]
    if plan.prior is not None:
        summary = plan.prior
        summary.status, summary.incomplete_reason, summary.speedup = "running", None, []
    else:
        summary = RunSummary(
            specmeter_version=__version__,
            created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            command=plan.command,
            config={
                "engine": {**first.engine.model_dump(mode="json"), "extra_args": redact_argv(first.engine.extra_args),
                           "env": redact_env(first.engine.env)},
                "spec": first.spec.model_dump(mode="json"),
                "load": plan.load.model_dump(mode="json"),
                "baseline": [p.name for p in plan.phases] != [first.name],
                "baseline_endpoint": next((p.engine.endpoint for p in plan.phases[1:] if not p.engine.launch), None),
            },
            workload=plan.workload,
            models={"target": model_fingerprint(first.engine.model), "draft": model_fingerprint(first.spec.draft_model)},
            environment=environment_info(),
        )
    store.write_summary(summary)
    try:
        for group in group_phases(plan.phases):
            _run_group(plan, group, summary, store, reporter)
        summary.speedup = compute_speedups(summary, latest_records(store.read_records()))
        summary.status = "complete"
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        _mark_incomplete(summary, "interrupted by the user (Ctrl-C or SIGTERM)")
        raise RunIncomplete(f"run interrupted; what finished is in {store.root}; `specmeter run --resume {store.root}` completes it") from exc
    except ErrorRateExceeded as exc:
        _mark_incomplete(summary, str(exc))
        raise RunIncomplete(f"stopped early: {exc}; results so far are in {store.root}") from exc
    except EngineDied as exc:
        _mark_incomplete(summary, str(exc))
        raise RunIncomplete(f"{exc}\nwhat finished is in {store.root}; `specmeter run --resume {store.root}` "
                            "completes the run on a new server") from exc
    except SpecmeterError as exc:
        _mark_incomplete(summary, str(exc))
        raise
    except Exception as exc:
        _mark_incomplete(summary, f"internal error: {type(exc).__name__}: {exc}")
        raise
    finally:
        summary.wall_s = time.perf_counter() - t0
        store.write_summary(summary)
        store.close()
    return summary


def group_phases(phases: Sequence[PhasePlan]) -> list[list[PhasePlan]]:
    """Consecutive phases with the same engine and speculative config run on one server."""
    groups: list[list[PhasePlan]] = []
    for phase in phases:
        if groups and groups[-1][0].server_key() == phase.server_key():
            groups[-1].append(phase)
        else:
            groups.append([phase])
    return groups


def _phase_result(summary: RunSummary, phase: PhasePlan, adapter: EngineAdapter) -> PhaseResult:
    result = summary.phase(phase.name)
    if result is None:
        label = phase.spec.label() if phase.engine.launch or phase.spec.enabled else "as the server runs"
        result = PhaseResult(
            name=phase.name, spec_label=label, spec=phase.spec.model_dump(mode="json"), workload=phase.workload,
            engine_version=adapter.version() if phase.engine.launch else None,
        )
        summary.phases.append(result)
    return result


def _run_group(plan: RunPlan, group: list[PhasePlan], summary: RunSummary, store: RunStore, reporter: Reporter) -> None:
    """Start (or attach to) one server and run each of the group's unfinished phases on it."""
    head = group[0]
    adapter = get_adapter(head.engine.kind)
    results = [_phase_result(summary, p, adapter) for p in group]
    pending = [(p, r) for p, r in zip(group, results)
               if not all(r.level(c) is not None for c in (p.load or plan.load).concurrency)]
    if not pending:
        return  # finished before a resume: no server needed
    with ExitStack() as stack:
        server: LaunchedServer | None = None
        if head.engine.launch:
            server = LaunchedServer(adapter, head.engine, head.spec, store.server_log(head.server_name or head.name),
                                    api_key=plan.api_key)
            for r in results:
                r.server_command, r.server_log = redact_argv(server.command), server.log_path.name
            store.write_summary(summary)
            reporter.note(f"starting {adapter.name} server: speculation {head.spec.label()}")
            stack.enter_context(server)
            for r in results:
                r.startup_s = server.startup_seconds
                r.server_pid = server.proc.pid if server.proc else None
            store.write_summary(summary)  # the pid on disk lets a user (or a test) find the server
            reporter.server_ready(head.name, server.startup_seconds or 0.0)
            base_url = server.base_url
        else:
            assert head.engine.endpoint is not None
            base_url = head.engine.endpoint
        for phase, result in pending:
            if phase.derive is not None:
                phase.conversations = phase.derive(latest_records(store.read_records()))
            reporter.phase_start(phase.name, result.spec_label)
            _run_async(_run_phase(plan, phase, adapter, base_url, server, store, reporter, result,
                                  lambda: store.write_summary(summary)))


def _mark_incomplete(summary: RunSummary, reason: str) -> None:
    summary.status = "incomplete"
    summary.incomplete_reason = reason


def _run_async(coro: Any) -> None:
    """asyncio.run with SIGTERM treated like Ctrl-C: cancel in-flight requests, then unwind."""
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        task_holder: list[asyncio.Task[Any]] = []

        def _cancel() -> None:
            for t in task_holder:
                t.cancel()

        try:
            loop.add_signal_handler(signal.SIGTERM, _cancel)
        except (NotImplementedError, RuntimeError):  # not the main thread / not Unix
            pass

        async def main() -> None:
            task_holder.append(asyncio.current_task())  # type: ignore[arg-type]
            await coro

        try:
            runner.run(main())
        finally:
            try:
                loop.remove_signal_handler(signal.SIGTERM)
            except (NotImplementedError, RuntimeError):
                pass


def latest_records(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """One record per (phase, level, conversation, turn): the last one written (a resume re-sends)."""
    out: dict[tuple[str, int, str, int, bool], RequestRecord] = {}
    for r in records:
        out[(r.phase, r.concurrency, r.conversation_id, r.turn, r.warmup)] = r
    return list(out.values())


def completed_conversations(records: Sequence[RequestRecord], conversations: Sequence[Conversation]) -> set[str]:
    """Ids of conversations whose every turn has a successful record."""
    ok = {(r.conversation_id, r.turn) for r in latest_records(records) if r.ok}
    return {c.id for c in conversations if all((c.id, t) in ok for t in range(len(c.turns)))}
