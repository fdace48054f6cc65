"""Stop conditions: each a small object with one `check`, composed into a set that is checked in one place.

A condition looks at what has happened so far (its state) and answers None (go on) or a `Stop`: a failure,
carrying the error the run stops with, or a clean end (enough was sent, a budget is spent). A load point checks
its set on every finished request (load/traffic.py); the runner's rounds check their budgets before each round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from specmeter.common.errors import EngineDied, ErrorRateExceeded, SpecmeterError
from specmeter.schemas.records import RequestRecord

# Errors below this many finished requests never trip the error-rate limit (one early failure
# is not a rate).
MIN_REQUESTS_FOR_ERROR_LIMIT = 8

S = TypeVar("S", contravariant=True)
T = TypeVar("T")


@dataclass(frozen=True)
class Stop:
    """Why to stop, and the error to stop with when stopping is a failure (None: a clean end)."""

    why: str
    error: SpecmeterError | None = None


class StopCondition(Protocol[S]):
    """One reason to stop, read off the state it is checked on."""

    def check(self, state: S, /) -> Stop | None:
        """A stop now, or None to go on."""


class StopConditions(Generic[T]):
    """Conditions checked together: a failure wins over a clean end; otherwise the first to stop, in order."""

    def __init__(self, *conditions: StopCondition[T]) -> None:
        self.conditions = conditions

    def check(self, state: T) -> Stop | None:
        found: Stop | None = None
        for condition in self.conditions:
            stop = condition.check(state)
            if stop is not None and stop.error is not None:
                return stop
            found = found or stop
        return found


@dataclass
class PointProgress:
    """What a point's conditions read: its requests so far, in the process that checks them."""

    elapsed: Callable[[], float]  # seconds since the point started
    finished: int = 0  # requests finished
    errors: int = 0  # of those, failed
    last_error: str | None = None  # of the latest failed request (the tipping one may have succeeded)
    latest: RequestRecord | None = None  # the request that finished last
    sent: int = 0  # requests of the conversations that ended (a failed turn ends its conversation)

    def add(self, record: RequestRecord, ended_turns: int) -> None:
        """A finished request; `ended_turns`: the turns of the conversation it ended (0: it goes on)."""
        self.finished += 1
        self.latest = record
        self.sent += ended_turns
        if not record.ok:
            self.errors += 1
            self.last_error = record.error


@dataclass(frozen=True)
class ErrorRateLimit:
    """More than `limit` of the finished requests failed (from MIN_REQUESTS_FOR_ERROR_LIMIT on)."""

    limit: float

    def check(self, state: PointProgress, /) -> Stop | None:
        if state.finished >= MIN_REQUESTS_FOR_ERROR_LIMIT and state.errors / state.finished > self.limit:
            error = ErrorRateExceeded(state.errors, state.finished, self.limit, state.last_error)
            return Stop(str(error), error)
        return None


@dataclass(frozen=True)
class DurationFloor:
    """A timed point (load.duration_s) is done once that long has passed and its conversations that ended
    hold at least `floor` requests: a clean end, the strategy starts no more."""

    duration_s: float
    floor: int

    def check(self, state: PointProgress, /) -> Stop | None:
        if state.elapsed() >= self.duration_s and state.sent >= self.floor:
            return Stop(f"duration_s ({self.duration_s:g}) passed with {state.sent} requests sent")
        return None


@dataclass(frozen=True)
class ServerAlive:
    """A request failed and the launched server is gone: the point stops with EngineDied. Made by whoever
    holds the server process (`alive`), with the message that says where its log is (`obituary`)."""

    alive: Callable[[float], bool]  # whether the process still runs after waiting up to that many seconds to exit
    obituary: Callable[[], str]
    # A killed server refuses connections before its process has finished exiting (a large one takes a while):
    # on a connection error, wait this long for it, so a dead server is named as such, not as an error rate.
    settle_s: float = 2.0

    def check(self, state: PointProgress, /) -> Stop | None:
        latest = state.latest
        if latest is None or latest.ok:
            return None
        if not self.alive(self.settle_s if latest.error_kind == "connection" else 0.0):
            error = EngineDied(self.obituary())
            return Stop(str(error), error)
        return None


@dataclass(frozen=True)
class ReplicaDown:
    """A request to one of several attached replicas failed to connect and nothing listens there any more: the
    point stops with EngineDied naming it. Going on over the others would measure a smaller deployment than the
    one planned, and its counters could no longer be summed over the point."""

    reachable: Callable[[str], bool]  # whether the replica at this URL accepts connections (load/replicas.py)

    def check(self, state: PointProgress, /) -> Stop | None:
        latest = state.latest
        if latest is None or latest.ok or latest.error_kind != "connection" or latest.replica is None:
            return None
        if self.reachable(latest.replica):
            return None
        error = EngineDied(f"replica {latest.replica} stopped accepting connections during the point "
                           f"({latest.error}): restart the server there")
        return Stop(str(error), error)
