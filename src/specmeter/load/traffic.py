"""What one load point sends and keeps: conversations replayed turn by turn, each finished request handed on at
once, and the point's stop conditions checked on every one.

A conversation is replayed turn by turn and each later turn carries the model's own earlier replies, as a chat
user would. Every finished request is handed to `on_record` at once (the store appends it to disk), so nothing
finished is lost if the run stops.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specmeter.config.models import LoadSpec
from specmeter.data.model import Conversation
from specmeter.load.client import OpenAIClient
from specmeter.load.replicas import Replicas
from specmeter.load.requests import build_request
from specmeter.load.stops import PointProgress, Stop, StopCondition, StopConditions
from specmeter.load.turns import Seat
from specmeter.schemas.records import RequestRecord

OnRecord = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class PointKey:
    """What every record sent at this point carries: ids from the stored plan."""

    config_id: str
    point_id: str
    repeat: int = 0
    attempt: int = 0  # which attempt at the point (a resume adds one): the clock its records' times count from


@dataclass
class PointTraffic:
    """The requests one strategy sent at one point, and how long the point took."""

    records: list[RequestRecord] = field(default_factory=list)
    wall_s: float = 0.0
    t0: float = 0.0  # time.perf_counter() when the point started: every record's start_s counts from it
    processes: int = 1  # client processes that sent it


class Traffic:
    """Sends conversations for one point, keeps its records and clock, and checks its stop conditions."""

    def __init__(self, client: Replicas, load: LoadSpec, model: str, key: PointKey, on_record: OnRecord,
                 warmup: bool, stops: Sequence[StopCondition[PointProgress]], t0: float | None = None,
                 relay: bool = False, seat: Seat | None = None) -> None:
        """`stops`: checked on every finished request; a failure raises its error, a clean end sets `stopped`
        (the strategy then starts no more conversations). `t0`: the point's start on time.perf_counter() (a
        client process gets its parent's). `relay`: this is a client process's part of the point: records go to
        `on_record` only (the parent keeps them and checks the point's own conditions over every process). `seat`:
        the point takes turns with other servers' (load/turns.py): each request waits for its turn, and every time
        here is on the seat's busy clock."""
        self.client, self.load, self.model, self.key = client, load, model, key
        self.seat = seat
        self.on_record, self.warmup, self.relay = on_record, warmup, relay
        self.t0 = time.perf_counter() if t0 is None else t0
        self.result = PointTraffic(t0=self.t0)
        self.progress = PointProgress(self.elapsed)
        self.stops = StopConditions(*stops)
        self.stopped: Stop | None = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0 if self.seat is None else self.seat.clock(self.t0)

    async def conversation(self, conv: Conversation, scheduled_s: float | None = None,
                           slot: asyncio.Semaphore | None = None) -> None:
        """Every turn of `conv` in order; a failed turn ends it (later turns depend on its reply)."""
        ready = time.perf_counter()
        if slot is not None:
            await slot.acquire()
        try:
            with self.client.conversation() as (client, replica):  # every turn on one replica (load/replicas.py)
                await self._turns(conv, scheduled_s, ready, client, replica)
        finally:
            if slot is not None:
                slot.release()

    async def _turns(self, conv: Conversation, scheduled_s: float | None, ready: float, client: OpenAIClient,
                     replica: str | None) -> None:
        history: list[str] = []
        turns = len(conv.turns)
        for turn in range(turns):
            record = RequestRecord(
                config_id=self.key.config_id, point_id=self.key.point_id, repeat=self.key.repeat,
                attempt=self.key.attempt, conversation_id=conv.id, turn=turn, category=conv.category,
                phase=conv.phase, warmup=self.warmup, scheduled_s=scheduled_s if turn == 0 else None, replica=replica,
            )
            record.queued_s = time.perf_counter() - ready if turn == 0 else 0.0
            request = build_request(conv, turn, history, self.load, self.model)
            if self.seat is None:
                text = await client.send(request, record, self.t0)
            else:
                async with self.seat:  # on the busy clock: its waits so far taken out of the point's t0
                    text = await client.send(request, record, self.t0 + self.seat.waited_s)
            ends = not record.ok or turn == turns - 1
            self.deliver(record, ended_turns=turns if ends else 0)
            if not record.ok:
                return
            history.append(text)

    def deliver(self, record: RequestRecord, ended_turns: int = 0) -> None:
        """A finished request: kept (unless relayed), handed on, then the stop conditions checked.
        `ended_turns`: the turns of the conversation it ended (0: its conversation goes on, or not sent here)."""
        if not self.relay:
            self.result.records.append(record)
        self.on_record(record)
        self.progress.add(record, ended_turns)
        stop = self.stops.check(self.progress)
        if stop is not None and stop.error is not None:
            raise stop.error
        self.stopped = self.stopped or stop
