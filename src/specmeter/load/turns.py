"""Cells measured in turns: the configurations of one round at a closed-loop point, each on its own server, send
their requests a wave at a time across the servers (A, B, C, A, B, C, ...), instead of each
server's requests in a block of its own. A wave is as many requests as the point keeps in flight: at concurrency 1
one request, at concurrency 16 sixteen, sent together, and the turn passes on once all of them have finished.

Drift (the machine a little slower for a minute) then lands on every configuration alike within the round, where
blocks let it land on whichever ran then: on a 2-core machine two blocked rounds of the same pair at concurrency 1
differed by about 4% in their ratio, two alternated ones by 0.2%; at concurrency 4 and 16 rounds in turns disagreed
about a quarter as much as blocked ones (docs/demo.md, "Where the noise comes from").
A server sees the load it would see in a block: its full batch each turn, and none of the others' requests. That
holds where the server runs the whole wave at once (`runs_whole`): past its batch capacity a block keeps requests
queued all along, where a turn's first ones would run unqueued, so such points run in blocks. Where outputs differ
in length, the batch drains toward each turn's end (a block refills freed slots at once): the running batch each
cell reports is what it ran. Open-loop points (a request rate) keep their schedule, so they never take turns.

Each cell keeps its own busy clock (`Seat.clock`): the time it waited for the others' turns is taken out, so its
requests' times, its wall time and its gauge samples read as if it had run alone, and everything summarized from
them (throughput as tokens over wall time, the running batch, the steady window) means what a block's means.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

from specmeter.config.models import ConcurrencyPoint, LoadPoint


def takes_turns(point: LoadPoint) -> bool:
    """Whether the point's configurations take turns, a wave at a time, when they interleave: a closed loop, whose
    load is how many requests are in flight, not when they are sent."""
    return isinstance(point, ConcurrencyPoint)


def runs_whole(point: LoadPoint, max_num_seqs: int | None) -> bool:
    """Whether a server of this batch capacity runs a turn's wave all at once, so a turn is the load a block is: at
    concurrency 1 any server; above, one whose stated `max_num_seqs` holds the wave. Past it a block keeps the
    excess queued all along, where a wave's first requests would run unqueued, so such a point (or one on a server
    of unstated capacity) runs in blocks."""
    return isinstance(point, ConcurrencyPoint) and (point.concurrency == 1 or (max_num_seqs or 0) >= point.concurrency)


def wave(point: LoadPoint) -> int:
    """How many requests one turn at the point sends: the requests it keeps in flight."""
    assert isinstance(point, ConcurrencyPoint), "only a closed-loop point takes turns"
    return point.concurrency


class Turns:
    """Whose turn it is among `n` seats, each turn a wave of up to `per_turn` requests: laps in one order (0, 1, 2,
    0, 1, 2, ...), so every turn follows another seat's. A request right after its own server's previous one ran
    about 4% faster than the same prompt right after another server's (a handover cost: benchmarks/demo_runs.py
    over 18 demo runs of 2026-11-29, 1.039x); laps that turned back (0, 1, 2, 2, 1, 0) gave that edge to each
    seat's every other request, to other prompts as the round's order changed. (Taking it out did not measurably
    quiet the rounds at concurrency 1: docs/demo.md.) A linear drift within a lap favours the earlier seats by a
    turn's worth; the schedule reverses the order every round (execution/schedule.py), so that cancels over two.
    A turn passes on once its wave has all been admitted and has finished, or once its seat has left (its requests
    all sent); a seat that has left is skipped; one that has not asked yet is waited for."""

    def __init__(self, n: int, per_turn: int = 1) -> None:
        if n < 1 or per_turn < 1:
            raise ValueError("turns need at least one seat and one request a turn")
        self.per_turn = per_turn
        self._active = set(range(n))
        self._current: int | None = 0
        self._admitted = 0  # requests the current turn has let in
        self._in_flight = 0  # of them, not finished yet
        self._changed = asyncio.Condition()
        self.seats = [Seat(self, i) for i in range(n)]

    def holds(self, seat: int) -> bool:
        """Whether the seat's requests are running: its turn, with some of its wave in flight."""
        return self._current == seat and self._in_flight > 0

    def _open(self, seat: int) -> bool:
        return self._current == seat and self._admitted < self.per_turn

    async def _acquire(self, seat: int) -> None:
        async with self._changed:
            if self._current != seat:  # another seat's turn (its own full wave still running is no wait)
                self.seats[seat].wait_begins()
            await self._changed.wait_for(lambda: self._open(seat))
            self._admitted += 1
            self._in_flight += 1

    async def _release(self, seat: int) -> None:
        async with self._changed:
            self._in_flight -= 1
            if self._in_flight == 0 and self._admitted >= self.per_turn:
                self._advance(seat)
            self._changed.notify_all()

    async def _leave(self, seat: int) -> None:
        async with self._changed:
            self._active.discard(seat)
            if self._current == seat and self._in_flight == 0:
                self._advance(seat)
            self._changed.notify_all()

    def _advance(self, after: int) -> None:
        """The turn after `after`'s: the next active seat in index order, wrapping round."""
        self._admitted = 0
        self.seats[after].turn_ends(waiting=after in self._active)
        if not self._active:
            self._current = None
            return
        self._current = min((s for s in self._active if s > after), default=min(self._active))
        self.seats[self._current].turn_begins()


class Seat:
    """One cell's place in the turns: `async with seat:` around each request it sends, `await seat.leave()` once it
    sends no more (always: a seat that never leaves holds up the others' turns)."""

    def __init__(self, turns: Turns, index: int) -> None:
        self.turns, self.index = turns, index
        self.waited_s = 0.0  # time spent waiting while other seats had their turns
        self._waiting_since: float | None = None

    @property
    def holding(self) -> bool:
        """Whether this seat's server runs its wave now (its turn, requests in flight)."""
        return self.turns.holds(self.index)

    def clock(self, t0: float) -> float:
        """Seconds since `t0` (a time.perf_counter() reading) on this seat's busy clock: without its waits."""
        waiting = 0.0 if self._waiting_since is None else time.perf_counter() - self._waiting_since
        return time.perf_counter() - t0 - self.waited_s - waiting

    def in_turn(self, t0: float) -> float | None:
        """The busy clock while the seat holds its turn; None while it waits (its server idles meanwhile)."""
        return self.clock(t0) if self.holding else None

    def wait_begins(self) -> None:
        """It asked while another seat had the turn: its wait runs from now (if not already)."""
        if self._waiting_since is None:
            self._waiting_since = time.perf_counter()

    def turn_ends(self, waiting: bool) -> None:
        """Its turn passed on; a seat still sending waits from now."""
        if waiting and self._waiting_since is None:
            self._waiting_since = time.perf_counter()

    def turn_begins(self) -> None:
        """Its turn came: the wait since it asked (or since its last turn ended) is taken off its clock."""
        if self._waiting_since is not None:
            self.waited_s += time.perf_counter() - self._waiting_since
            self._waiting_since = None

    async def __aenter__(self) -> Seat:
        await self.turns._acquire(self.index)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.shield(self.turns._release(self.index))

    async def leave(self) -> None:
        await asyncio.shield(self.turns._leave(self.index))
