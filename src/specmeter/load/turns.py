"""Cells measured in turns: the configurations of one round at a point of concurrency 1, each on its own server,
send their requests one at a time across the servers (A, B, C, then C, B, A, then A, B, C ...), instead of each
server's requests in a block of its own.

Drift (the machine a little slower for a minute) then lands on every configuration alike within the round, where
blocks let it land on whichever ran then: on a 2-core machine two blocked rounds of the same pair differed by about
4% in their ratio, two alternated ones by 0.2% (docs/demo.md, "Where the noise comes from"). At concurrency 1 a
server has one request in flight whether the others wait between its requests or not, so the load each server
sees is the block's; at higher concurrency taking turns would change the load, so only concurrency 1 takes them.

Each cell keeps its own busy clock (`Seat.clock`): the time it waited for the others' requests is taken out, so its
requests' times, its wall time and its gauge samples read as if it had run alone, and everything summarized from
them (throughput as tokens over wall time, the running batch, the steady window) means what a block's means.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

from specmeter.config.models import ConcurrencyPoint, LoadPoint


def takes_turns(point: LoadPoint) -> bool:
    """Whether the point's configurations take turns request by request when they interleave: one request in
    flight (a closed loop of concurrency 1), the same load to a server whether or not others wait between its
    requests."""
    return isinstance(point, ConcurrencyPoint) and point.concurrency == 1


class Turns:
    """Whose turn it is among `n` seats: laps in serpentine order (ascending, then descending, ...), so each seat
    follows each other about equally often and a linear drift within a lap cancels over two. A seat that has left
    (its requests all sent) is skipped; one that has not asked yet is waited for."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("turns need at least one seat")
        self._active = set(range(n))
        self._current: int | None = 0
        self._ascending = True
        self._holding = False
        self._changed = asyncio.Condition()
        self.seats = [Seat(self, i) for i in range(n)]

    async def _acquire(self, seat: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self._current == seat and not self._holding)
            self._holding = True

    async def _release(self, seat: int) -> None:
        async with self._changed:
            self._holding = False
            self._advance(seat)
            self._changed.notify_all()

    async def _leave(self, seat: int) -> None:
        async with self._changed:
            self._active.discard(seat)
            if self._current == seat and not self._holding:
                self._advance(seat)
            self._changed.notify_all()

    def _advance(self, after: int) -> None:
        """The turn after `after`'s: the next active seat in this lap's direction, or the first of the next lap."""
        if not self._active:
            self._current = None
            return
        later = [s for s in self._active if (s > after if self._ascending else s < after)]
        if later:
            self._current = min(later) if self._ascending else max(later)
            return
        self._ascending = not self._ascending
        self._current = min(self._active) if self._ascending else max(self._active)


class Seat:
    """One cell's place in the turns: `async with seat:` around each request it sends, `await seat.leave()` once it
    sends no more (always: a seat that never leaves holds up the others' turns)."""

    def __init__(self, turns: Turns, index: int) -> None:
        self.turns, self.index = turns, index
        self.waited_s = 0.0  # time spent waiting for the others' requests
        self.holding = False

    def clock(self, t0: float) -> float:
        """Seconds since `t0` (a time.perf_counter() reading) on this seat's busy clock: without its waits."""
        return time.perf_counter() - t0 - self.waited_s

    def in_turn(self, t0: float) -> float | None:
        """The busy clock while the seat holds its turn; None while it waits (its server idles meanwhile)."""
        return self.clock(t0) if self.holding else None

    async def __aenter__(self) -> Seat:
        asked = time.perf_counter()
        await self.turns._acquire(self.index)
        self.waited_s += time.perf_counter() - asked
        self.holding = True
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.holding = False
        await asyncio.shield(self.turns._release(self.index))

    async def leave(self) -> None:
        await asyncio.shield(self.turns._leave(self.index))
