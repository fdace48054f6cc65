"""A point's requests spread over a server's data-parallel replicas (attach mode with several endpoints and no
load balancer in front): one streaming client per replica, each conversation sent to one of them.

The choice: a conversation goes to the replica with the fewest conversations in flight, ties taken in turn, and
stays there for all its turns.
- Least outstanding, not round-robin per request: in a closed loop of concurrency N over R replicas it keeps
  N / R in flight on each however their speeds differ (round-robin piles streams onto the slower one), so each
  replica's running batch is the one the point stands for: the batch a dynamic-K table is keyed on. Ties in turn,
  so one user at a time still visits every replica.
- Per conversation: a later turn carries the earlier ones as its prefix; sent to another replica it would miss
  that replica's prefix cache, a cost one server never pays.

With one endpoint this is that endpoint's client, and records name no replica (as before replicas existed).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from urllib.parse import urlsplit

from specmeter.load.client import ClientSettings, OpenAIClient


@dataclass(frozen=True)
class ReplicaSettings:
    """What Replicas are made from in a client process (picklable): each replica's client settings."""

    clients: tuple[ClientSettings, ...]


class Replicas:
    """The clients of a point's replicas, and which conversations are in flight on each."""

    def __init__(self, clients: Sequence[OpenAIClient]) -> None:
        if not clients:
            raise ValueError("Replicas needs at least one client")
        self.clients = list(clients)
        self._in_flight = [0] * len(self.clients)
        self._turn = 0  # the replica a tie goes to next
        self._stack = AsyncExitStack()

    @classmethod
    def from_settings(cls, settings: ReplicaSettings) -> Replicas:
        return cls([OpenAIClient.from_settings(s) for s in settings.clients])

    @property
    def settings(self) -> ReplicaSettings:
        return ReplicaSettings(tuple(c.settings for c in self.clients))

    @property
    def first(self) -> OpenAIClient:
        """The client of the first replica: for what every replica answers alike (the served model's name)."""
        return self.clients[0]

    @property
    def many(self) -> bool:
        return len(self.clients) > 1

    async def __aenter__(self) -> Replicas:
        for client in self.clients:
            await self._stack.enter_async_context(client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    @contextlib.contextmanager
    def conversation(self) -> Iterator[tuple[OpenAIClient, str | None]]:
        """The client one conversation sends all its turns with, and the replica's URL for its records (None with
        one endpoint); it counts as in flight there until the block ends."""
        n = len(self.clients)
        pick = min(((self._turn + j) % n for j in range(n)), key=lambda i: self._in_flight[i])
        self._turn = (pick + 1) % n
        self._in_flight[pick] += 1
        client = self.clients[pick]
        try:
            yield client, client.base_url if self.many else None
        finally:
            self._in_flight[pick] -= 1


def accepts_connections(url: str, timeout_s: float = 2.0) -> bool:
    """Whether something still listens at `url`'s host and port. Blocking, on purpose: called only after a
    request there failed to connect, when the point is about to stop unless the replica is back."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            return True
    except OSError:
        return False
