"""Execute a Plan: start (or attach to) each configuration's server once, run its load points, snapshot
the engine's counters around each point, and write everything to the run directory as it happens.

The unit of work is a cell: (configuration, load point, repeat). Cells run in blocks; a block is the
set of servers up at once: one server at a time, or, with `interleave`, every server together with
the configurations alternating at each point (at a closed-loop point a wave at a time: load/turns.py), so
machine drift hits them alike. Each finished cell is
written to summary.json atomically, so a stop at any moment loses nothing measured, and `--resume`
runs only the cells that are not finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from specmeter import __version__
from specmeter.analysis.decide import analyze
from specmeter.common.errors import (
    EngineDied,
    EngineError,
    ErrorRateExceeded,
    InputError,
    RunIncomplete,
    SpecmeterError,
)
from specmeter.common.redact import redact_argv
from specmeter.config.models import ConcurrencyPoint, LoadPoint
from specmeter.data.matched import matched_random
from specmeter.data.model import Conversation
from specmeter.engines.base import Engine
from specmeter.engines.kv_capacity import kv_capacity_from_log
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.probe import resolve_endpoints
from specmeter.engines.server_log import failure_reason
from specmeter.engines.start_notes import StartWatch
from specmeter.execution.leftovers import start_ticks, stop_leftovers
from specmeter.execution.load_search import Search
from specmeter.execution.ramp import Ramp
from specmeter.execution.rounds import Rounds
from specmeter.execution.schedule import Block, Cell
from specmeter.execution.schedule import schedule as schedule  # re-exported: its users import it from here
from specmeter.execution.servers import Server, ServerPool, served_model, start_all
from specmeter.load import eventloop
from specmeter.load.client import OpenAIClient
from specmeter.load.point import count_requests, point_conversations, run_point
from specmeter.load.replicas import Replicas, accepts_connections
from specmeter.load.split import client_processes
from specmeter.load.stops import PointProgress, ReplicaDown, ServerAlive, StopCondition
from specmeter.load.traffic import PointKey, PointTraffic
from specmeter.load.turns import Seat, Turns, runs_whole, takes_turns, wave
from specmeter.results.summarize import summarize_point
from specmeter.rundir.lock import writing
from specmeter.rundir.provenance import environment_info, model_fingerprint
from specmeter.rundir.run_data import run_records
from specmeter.rundir.store import RunStore, latest_records
from specmeter.schemas.capture import Attempt, PointCapture
from specmeter.schemas.host import HostReading
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.progress import Reporter
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, InstanceServer, PointResult, RunSummary
from specmeter.telemetry.gauge import wall_clock
from specmeter.telemetry.host import HostProbe
from specmeter.telemetry.point import PointTelemetry


@dataclass
class Execution:
    """A plan and what executing it needs beyond the plan itself (never stored: the API key)."""

    plan: Plan
    conversations: list[Conversation]  # the main workload, as the plan's selection gives it
    by_length: dict[int, list[Conversation]] = field(default_factory=dict)  # an input-length axis: per length
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    # Resume: the summary and records already on disk. Finished cells are kept as they are; an
    # unfinished cell re-sends only the conversations that have not fully succeeded.
    prior: RunSummary | None = None
    prior_records: list[RequestRecord] = field(default_factory=list)

    def main(self, point: LoadPoint) -> list[Conversation]:
        """The main workload's conversations at a point: its input length's, on an input-length axis."""
        if point.input_len is None:
            return self.conversations
        if point.input_len not in self.by_length:
            raise InputError(f"point {point.id}: the plan has no conversations of {point.input_len} input tokens")
        return self.by_length[point.input_len]


@dataclass
class _Leg:
    """One cell being measured: its server and client, what it sends, and the attempt being captured."""

    cell: Cell
    server: Server
    client: Replicas
    model: str
    convs: list[Conversation]
    prior: list[RequestRecord]  # its requests from earlier attempts (resume)
    capture: PointCapture
    key: PointKey
    skip: set[str]  # conversations finished in earlier attempts
    stops: list[StopCondition[PointProgress]]
    telemetry: PointTelemetry
    seat: Seat | None  # its place in the turns it takes with other cells (None: it runs alone)
    t0: float = field(init=False)  # time.perf_counter() at the attempt's start
    attempt: Attempt = field(init=False)


class _Run:
    """State of one execution: the summary being filled and the store it is written to."""

    def __init__(self, ex: Execution, store: RunStore, reporter: Reporter, pool: ServerPool | None) -> None:
        self.ex, self.plan, self.store, self.reporter, self.pool = ex, ex.plan, store, reporter, pool
        self.t0 = time.perf_counter()
        self.summary = ex.prior if ex.prior is not None else self._new_summary()
        self._derived: dict[str, list[Conversation]] = {}
        self._started: dict[str, str | None] = {}  # server -> None: this run started it; else why it failed
        self._watches: dict[str, StartWatch] = {}  # server -> what its start is doing, read when it was spawned
        self.ramp = Ramp(self.summary, lambda: run_records(store, self.plan), reporter.note)

    def _new_summary(self) -> RunSummary:
        plan = self.plan
        head = plan.configs[0]
        return RunSummary(
            specmeter_version=__version__,
            created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
            command=self.ex.command,
            plan=plan,
            models={"target": model_fingerprint(head.engine.model),
                    "drafts": {c.id: model_fingerprint(c.spec.draft_model)
                               for c in plan.configs if c.spec.draft_model}},
            environment=environment_info(),
        )

    def save(self) -> None:
        self.store.write_summary(self.summary)

    def result(self, config: PlannedConfig, engine: Engine) -> ConfigResult:
        found = self.summary.config(config.id)
        if found is None:
            found = ConfigResult(config_id=config.id, role=config.role, spec_label=config.label,
                                 workload=config.workload,
                                 engine_version=engine.launcher.version() if config.engine.launch else None)
            self.summary.configs.append(found)
        return found

    def done(self, cell: Cell) -> bool:
        """Measured: a point whose requests all failed is not done, and a resume runs it again."""
        res = self.summary.config(cell.config.id)
        found = res.point(cell.point.id, cell.repeat) if res is not None else None
        return found is not None and found.measured

    def conversations(self, config: PlannedConfig, point: LoadPoint) -> list[Conversation]:
        if config.matched_random is None:
            return self.ex.main(point)
        if config.id not in self._derived:
            self._derived[config.id] = matched_random(config.matched_random, latest_records(self.store.read_records()))
        return self._derived[config.id]

    # -- servers ---------------------------------------------------------------------------------------
    def start(self, servers: Sequence[Server], pool: ServerPool) -> None:
        """Launch the block's servers, or reuse the pool's running ones; attached servers need nothing. Servers on
        GPUs of their own start together, and so do a CPU build's whose KV cache has a set size; the rest start in
        turn (servers.start_all). A server that fails is recorded and the rest go on."""
        start_all(servers, lambda server: self._spawn(server, pool),
                  lambda server, proc: self._ready(server, proc, pool), self._starting)

    def _spawn(self, server: Server, pool: ServerPool) -> LaunchedServer | None:
        """Spawn the server's process (None: it needs none: failed before, attached, or running in the pool)."""
        results = [self.result(c, server.engine) for c in server.configs]
        head = server.head
        if self._started.get(server.name) is not None:  # failed earlier in this run (a search's earlier look)
            server.error = self._started[server.name]
            return None
        for r in results:
            r.server_error = None
        if not head.engine.launch:
            return None
        running = pool.running(head, server.instance)
        if running is not None:
            self._bind(server, running, reused=server.name not in self._started)
            if server.name not in self._started:  # started by an earlier plan
                self.reporter.note(f"server {server.name}: reusing the {server.engine.kind} server running it")
            return None
        proc = LaunchedServer(server.engine.launcher, head.engine, head.spec, self.store.server_log(server.name),
                              api_key=self.ex.api_key)
        if server.instance == 0:
            for r in results:
                r.server_command, r.server_log = redact_argv(proc.command), proc.log_path.name
                r.batch_limit = server.engine.launcher.batch_limit(proc.command)
        self.save()
        self.reporter.note(f"starting {server.engine.kind} server {server.name}: speculation {head.label}")
        self._watches[server.name] = StartWatch.of(server.name, server.engine.kind, proc.engine.model or server.name,
                                                   server.engine.launcher.compile_cache(proc.engine))
        pool.spawn(proc)
        return proc

    def _starting(self, server: Server, proc: LaunchedServer) -> None:
        """A spawned server not serving yet: past engines.start_notes.SLOW_START_S, a line saying what it does."""
        watch = self._watches.get(server.name)
        line = None if watch is None else watch.line(proc.elapsed_s())
        if line is not None:
            self.reporter.server_starting(server.name, line)

    def _ready(self, server: Server, proc: LaunchedServer, pool: ServerPool) -> None:
        """Wait for a spawned server; one that fails is recorded with the engine's own reason, and the plan goes on
        without its configurations."""
        head = server.head
        try:
            pool.ready(head, proc, server.instance)
        except EngineError as exc:
            self.reporter.server_started(server.name)
            server.error = self._started[server.name] = str(exc)
            for r in (self.result(c, server.engine) for c in server.configs):
                r.server_error = server.error
            self.save()
            self.reporter.note(f"[red]server {server.name} failed to start; its configurations are skipped[/]"
                               f"\n{exc}")
            return
        self._bind(server, proc, reused=False)
        self._started[server.name] = None
        self.save()  # the pid on disk lets a user (or a test) find the server
        if (watch := self._watches.pop(server.name, None)) is not None and proc.startup_seconds is not None:
            watch.record(proc.startup_seconds)
        self.reporter.server_started(server.name)
        self.reporter.server_ready(server.name, proc.startup_seconds or 0.0)

    def _bind(self, server: Server, proc: LaunchedServer, *, reused: bool) -> None:
        server.process, server.urls = proc, [proc.base_url]
        if server.instance > 0:
            self._bind_instance(server, proc, reused=reused)
            return
        kv_tokens = kv_capacity_from_log(server.engine.kind, proc.log_path)
        for r in (self.result(c, server.engine) for c in server.configs):
            r.server_pid = proc.proc.pid if proc.proc else None
            r.server_started = start_ticks(proc.proc.pid) if proc.proc else None
            r.kv_capacity_tokens = kv_tokens
            r.gpu_offload = proc.gpu_offload
            if reused:  # started by an earlier plan: its log lives in that run's directory
                r.server_command, r.server_log, r.startup_s = redact_argv(proc.command), str(proc.log_path), 0.0
                r.batch_limit = server.engine.launcher.batch_limit(proc.command)
            else:
                r.startup_s = proc.startup_seconds

    def _bind_instance(self, server: Server, proc: LaunchedServer, *, reused: bool) -> None:
        """A further instance of the configurations' server, on record beside the first."""
        entry = InstanceServer(instance=server.instance, server_pid=proc.proc.pid if proc.proc else None,
                               server_started=start_ticks(proc.proc.pid) if proc.proc else None,
                               server_log=str(proc.log_path) if reused else proc.log_path.name,
                               startup_s=0.0 if reused else proc.startup_seconds)
        for r in (self.result(c, server.engine) for c in server.configs):
            r.instance_servers = [*(i for i in r.instance_servers if i.instance != server.instance), entry]

    # -- cells ---------------------------------------------------------------------------------------------
    async def measure(self, group: Sequence[tuple[Cell, Server]]) -> list[PointResult]:
        """Send each cell's requests and capture the engine's telemetry around and through them; each result is
        summarized from what was captured (results/summarize.py), merged with earlier attempts at the point (resume).
        Several cells (one round of a closed-loop point, each on a server of its own) take turns a wave at a time
        (load/turns.py); a single cell runs alone."""
        turns = Turns(len(group), per_turn=wave(group[0][0].point)) if len(group) > 1 else None
        async with AsyncExitStack() as stack:
            legs = [await self._prepare(cell, server, stack, turns.seats[i] if turns is not None else None)
                    for i, (cell, server) in enumerate(group)]
            # The host's other work through the round's traffic: one reading for every cell that takes turns in it.
            host = HostProbe([url for _, server in group for url in server.urls])
            host.start()
            for leg in legs:
                await self._begin(leg, [other.cell.config.id for other in legs if other is not leg])
            tasks = [asyncio.ensure_future(self._send(leg)) for leg in legs]
            try:
                traffics = await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            reading = host.stop()
        return [self._finish(leg, traffic, reading) for leg, traffic in zip(legs, traffics, strict=True)]

    async def _prepare(self, cell: Cell, server: Server, stack: AsyncExitStack, seat: Seat | None) -> _Leg:
        """A cell's client, its warm-up, and its telemetry read before its traffic."""
        config, point, repeat = cell.config, cell.point, cell.repeat
        load = self.plan.load_for(config)
        stats = server.engine.stats
        assert server.urls and config.engine.kind is not None
        convs = point_conversations(self.conversations(config, point), point, load)
        prior = [r for r in self.ex.prior_records
                 if (r.config_id, r.point_id, r.repeat) == (config.id, point.id, repeat) and not r.warmup]
        capture = (self.store.read_capture(config.id, point.id, repeat)
                   or PointCapture(config_id=config.id, point_id=point.id, repeat=repeat))
        index = max([len(capture.attempts), *(r.attempt + 1 for r in prior)])
        key = PointKey(config.id, point.id, repeat, attempt=index)
        if server.model is None:
            async with OpenAIClient(server.urls[0], api_key=self.ex.api_key) as probe:
                server.model, server.names = await served_model(probe, config.engine)
        client = await stack.enter_async_context(Replicas([
            OpenAIClient(url, keep_connections=stats.keeps_connections, api_key=self.ex.api_key,
                         timeout_s=load.request_timeout_s, extra_body=stats.request_extensions(load.temperature),
                         answers_as=server.names)
            for url in server.urls]))
        self._same_model(config, server)
        model, stops = server.model, self._stops(server)
        if load.warmup:
            cap = min(load.warmup_max_tokens, load.max_tokens)
            warm = [c.model_copy(update={"turns": c.turns[:1], "id": f"warmup-{c.id}",
                                         "max_tokens": min(c.max_tokens or cap, cap)})
                    for c in convs[: load.warmup]]
            await run_point(client, ConcurrencyPoint(concurrency=len(warm)), warm,
                            load.model_copy(update={"max_tokens": cap}), model, key, self._on_record(),
                            warmup=True, stops=stops)
        feed = stats.iteration_feed()  # statistics the server clears on every read
        telemetry = PointTelemetry([(c.base_url, c.get_text) for c in client.clients], stats.metrics_path,
                                   stats.running_gauge, feed.path if feed is not None else None,
                                   clock=seat.in_turn if seat is not None else wall_clock)
        await telemetry.scrape_before()
        return _Leg(cell, server, client, model, convs, prior, capture, key, completed_conversations(prior, convs),
                    stops, telemetry, seat)

    def _same_model(self, config: PlannedConfig, server: Server) -> None:
        """The model the server serves is the one the run measured there (a server restarted for `resume` may
        serve another); the first time, it is recorded."""
        res = self.result(config, server.engine)
        if res.served_model is not None and res.served_model != server.model:
            raise InputError(f"{config.id}: the server at {server.urls[0]} serves {server.model}, but this run "
                             f"measured {res.served_model} there; resume against a server serving {res.served_model}, "
                             "or start a new run for the other model")
        res.served_model = server.model

    async def _begin(self, leg: _Leg, turns_with: list[str]) -> None:
        """The attempt's clock starts; its first scrape is on disk before any request is sent."""
        config, point = leg.cell.config, leg.cell.point
        self.reporter.point_start(config, point, leg.cell.repeat, count_requests(leg.convs) - count_requests(
            [c for c in leg.convs if c.id in leg.skip]))
        leg.t0 = time.perf_counter()  # the attempt's clock until the traffic's own start is known
        leg.telemetry.start(leg.t0)
        assert config.engine.kind is not None
        leg.attempt = Attempt(index=leg.key.attempt, engine=config.engine.kind,
                              metrics_path=leg.server.engine.stats.metrics_path, started_s=leg.t0 - self.t0,
                              turns_with=turns_with, instance=leg.server.instance)
        leg.attempt.keep(leg.telemetry.reads)
        leg.capture.attempts.append(leg.attempt)
        self.store.write_capture(leg.capture)  # a killed run still leaves the attempt's clock and first scrape

    async def _send(self, leg: _Leg) -> PointTraffic:
        async with leg.telemetry:
            traffic = await run_point(leg.client, leg.cell.point, leg.convs, self.plan.load_for(leg.cell.config),
                                      leg.model, leg.key, self._on_record(), skip=leg.skip, stops=leg.stops,
                                      seat=leg.seat)
        await leg.telemetry.scrape_after()
        return traffic

    def _finish(self, leg: _Leg, traffic: PointTraffic, host: HostReading | None) -> PointResult:
        attempt, config = leg.attempt, leg.cell.config
        attempt.wall_s, attempt.host = traffic.wall_s, host
        attempt.keep(leg.telemetry.reads)
        attempt.feed = leg.telemetry.feed_reads
        attempt.rebase(traffic.t0 - leg.t0)  # client processes start their clock once every one is ready
        self.store.write_capture(leg.capture)
        return summarize_point(leg.capture, [*leg.prior, *traffic.records], leg.cell.point, leg.server.engine.stats,
                               expect_sd=config.role is Role.candidate, spec=config.spec,
                               load=self.plan.load_for(config))

    def _on_record(self) -> Callable[[RequestRecord], None]:
        def on_record(record: RequestRecord) -> None:
            # Runs in the event loop that timestamps every other stream: nothing here may block. append only
            # queues the record for the store's writer thread (file I/O and fsync happen there).
            self.store.append(record)
            self.reporter.request_done(record)
        return on_record

    @staticmethod
    def _stops(server: Server) -> list[StopCondition[PointProgress]]:
        """A launched server that dies, or one of several attached replicas, stops the point (checked on every
        failed request)."""
        proc = server.process
        if proc is None:
            return [ReplicaDown(accepts_connections)] if len(server.urls) > 1 else []
        return [ServerAlive(proc.alive, lambda: f"the {server.engine.kind} server {server.name} {proc.ended()} "
                            f"during the run: {failure_reason(proc.log_path)} (whole log: {proc.log_path})")]

    # -- the whole plan ----------------------------------------------------------------------------------
    def run_block(self, block: Block) -> None:
        rounds = Rounds(self.summary, lambda: run_records(self.store, self.plan), self._per_round)
        pending = [c for c in block.cells if not self.done(c) and not rounds.stopped_before(c.point, c.repeat)
                   and not self.ramp.skips(c.point)]
        if not pending:
            return  # finished before a resume: no server needed
        needed = {(c.config.server, self._instance(c)) for c in pending}
        with ExitStack() as stack:
            # Without a pool from the caller, the block's servers stop when the block ends.
            pool = self.pool if self.pool is not None else stack.enter_context(ServerPool())
            servers = {(group[0].server, i): Server(group, i) for group in block.servers
                       for i in range(self._instances(group[0])) if (group[0].server, i) in needed}
            self.start(list(servers.values()), pool)
            for _, same in itertools.groupby(pending, key=lambda c: (c.point.id, c.repeat)):
                # Whether each cell of this round of the point runs is asked once its earlier rounds are measured.
                runnable = [(cell, server) for cell in same
                            if (server := servers[(cell.config.server, self._instance(cell))]).error is None
                            and self.ramp.start(cell.point) and rounds.start(cell.point, cell.repeat, cell.config.id)]
                for group in self._in_turns(runnable):
                    loop = self.plan.load_for(group[0][0].config).event_loop
                    measured = eventloop.run_cancellable(self.measure(group), loop)
                    for (cell, server), point_result in zip(group, measured, strict=True):
                        self.result(cell.config, server.engine).keep(point_result)
                        self.reporter.point_done(cell.config, point_result)
                    self.save()
            for point in self.plan.points:
                rounds.finish(point)
            for axis, length in dict.fromkeys((p.axis, p.input_len) for p in self.plan.points):
                self.ramp.look(axis, input_len=length)  # the top step too: where a load search must stay below
            self.save()

    def _instances(self, config: PlannedConfig) -> int:
        """Server instances of the configuration: load.instances where specmeter launches it, else one."""
        return self.plan.load_for(config).instances if config.engine.launch else 1

    def _instance(self, cell: Cell) -> int:
        """The instance a cell's round runs on: rounds alternate between them."""
        return cell.repeat % self._instances(cell.config)

    def _in_turns(self, cells: list[tuple[Cell, Server]]) -> list[list[tuple[Cell, Server]]]:
        """How one round of a point runs: with `interleave` at a closed-loop point, its cells on servers of their own
        take turns a wave at a time (load/turns.py), so drift within the round lands on each alike; a derived
        workload (it needs its source's records first) runs alone after them. Any other point, or a round whose
        cells share a server, ask for different event loops, send from several client processes or would overfill a
        server's batch (load/turns.py `runs_whole`), runs each cell alone, in order."""
        point = cells[0][0].point if cells else None
        takers = [(c, s) for c, s in cells if c.config.matched_random is None]
        servers = [s.head.server for _, s in takers]
        loops = {self.plan.load_for(c.config).event_loop for c, _ in takers}
        split = any(client_processes(c.point, self.plan.load_for(c.config)) > 1 for c, _ in takers)
        whole = all(runs_whole(c.point, c.config.engine.max_num_seqs) for c, _ in takers)
        if (not self.plan.interleave or point is None or not takes_turns(point) or len(takers) < 2
                or len(set(servers)) < len(servers) or len(loops) > 1 or split or not whole):
            return [[one] for one in cells]
        return [takers, *([one] for one in cells if one not in takers)]

    def run_all(self) -> None:
        """The plan's blocks; with a load search, again after each look that adds points (servers stay up meanwhile)."""
        search = Search(self.summary, lambda: run_records(self.store, self.plan))
        with ServerPool() if search.active and self.pool is None else contextlib.nullcontext(self.pool) as pool:
            self.pool = pool
            if pool is not None:  # instances an earlier plan started that this one does not run
                pool.keep_instances(max(self._instances(c) for c in self.plan.configs))
            while True:
                for block in schedule(self.plan):
                    self.run_block(block)
                chosen = search.step()
                self.save()  # a search's choice is on disk before its point runs (a resume measures it)
                if not chosen:
                    return
                for step in chosen:
                    self.reporter.note(f"load search: {step.why}")
                self.reporter.plan_grown(self.plan, self.total_requests())

    def _per_round(self, point: LoadPoint) -> int:
        """Requests one configuration sends in one round of the point."""
        return count_requests(point_conversations(self.ex.main(point), point, self.plan.load))

    def failed_servers(self) -> list[str]:
        return [f"{c.config_id}: {c.server_error.splitlines()[0]}" for c in self.summary.configs if c.server_error]

    def total_requests(self) -> int | None:
        """Requests the plan will send (derived workloads are counted as their source's)."""
        total = 0
        for block in schedule(self.plan):
            for cell in block.cells:
                if self.done(cell) or self.ramp.skips(cell.point):
                    continue
                load = self.plan.load_for(cell.config)
                if load.duration_s is not None:
                    return None
                matched = cell.config.matched_random
                source = self.plan.config(matched.source_config) if matched else cell.config
                if source.matched_random is not None:
                    return None
                total += count_requests(point_conversations(self.conversations(source, cell.point), cell.point, load))
        return total


def execute(ex: Execution, store: RunStore, reporter: Reporter | None = None,
            pool: ServerPool | None = None) -> RunSummary:
    """Run every unfinished cell of the plan; always leaves summary.json consistent with what was
    measured. A server that fails to start is reported and skipped; the run then ends incomplete.
    With a `pool`, launched servers outlive this plan (the caller closes the pool) and a later plan
    with the same engine and speculative config reuses them instead of starting its own."""
    # One writer per run directory; the lock names what holds it (a resume runs under the run's first command).
    with writing(store.root, "specmeter resume" if ex.prior is not None else " ".join(ex.command[:2]) or "specmeter"):
        return _execute(ex, store, reporter, pool)


def _execute(ex: Execution, store: RunStore, reporter: Reporter | None, pool: ServerPool | None) -> RunSummary:
    # Attached servers answer and are what the plan says (engines/probe.check_identity), whoever built the plan: a
    # resume's servers may have been restarted or swapped since the run began, verify's --endpoint is the user's.
    if any(c.engine.endpoints for c in ex.plan.configs):
        ex = replace(ex, plan=resolve_endpoints(ex.plan, ex.api_key))
    run = _Run(ex, store, reporter or Reporter(), pool)
    summary = run.summary
    if ex.prior is not None:  # a server the killed run left would share this run's cores and memory
        stop_leftovers(ex.prior, run.reporter.note)
    summary.status, summary.incomplete_reason = "running", None
    run.save()
    try:
        run.reporter.plan_start(ex.plan, run.total_requests())
        run.run_all()
        summary.analysis = analyze(summary, run_records(store, summary.plan))
        failed = run.failed_servers()
        empty = [f"{c.config_id} @ {p.point_id} r{p.repeat + 1}" for c in summary.configs for p in c.points
                 if not p.measured]
        if failed:
            _mark_incomplete(summary, "server(s) failed to start: " + "; ".join(failed))
        elif empty:
            _mark_incomplete(summary, f"{len(empty)} point(s) measured nothing (every request failed, or the "
                             f"usage said 0 tokens): {', '.join(empty[:4])}")
        else:
            summary.status = "complete"
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        _mark_incomplete(summary, "interrupted by the user (Ctrl-C or SIGTERM)")
        raise RunIncomplete(f"run interrupted; what finished is in {store.root}; `specmeter resume {store.root}` "
                            "completes it") from exc
    except ErrorRateExceeded as exc:
        _mark_incomplete(summary, str(exc))
        raise RunIncomplete(f"stopped early: {exc}; results so far are in {store.root}") from exc
    except EngineDied as exc:
        _mark_incomplete(summary, str(exc))
        raise RunIncomplete(f"{exc}\nwhat finished is in {store.root}; `specmeter resume {store.root}` "
                            "completes the run on a new server") from exc
    except SpecmeterError as exc:
        _mark_incomplete(summary, str(exc))
        raise
    except Exception as exc:
        _mark_incomplete(summary, f"internal error: {type(exc).__name__}: {exc}")
        raise
    finally:
        # A resumed run adds its time to what the earlier runs took (a new summary starts at None).
        summary.wall_s = (summary.wall_s or 0.0) + time.perf_counter() - run.t0
        run.save()
        store.close()
    return summary


def _mark_incomplete(summary: RunSummary, reason: str) -> None:
    summary.status = "incomplete"
    summary.incomplete_reason = reason


def completed_conversations(records: Sequence[RequestRecord], conversations: Sequence[Conversation]) -> set[str]:
    """Ids of conversations whose every turn has a successful record."""
    ok = {(r.conversation_id, r.turn) for r in latest_records(records) if r.ok}
    return {c.id for c in conversations if all((c.id, t) in ok for t in range(len(c.turns)))}
