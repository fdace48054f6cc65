"""One streamed answer on the wire, and the record of a request the fake engine got."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from fakeengine import chunks
from fakeengine.steps import Plan

if TYPE_CHECKING:
    from fakeengine.server import FakeEngine


@dataclass
class Received:
    """One HTTP request as the server saw it."""

    index: int | None  # position among completion requests (None for GETs)
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    fault: str | None = None
    outcome: str = "pending"  # ok | aborted | rejected | pending


class Stream:
    """One streamed answer: writes chunks in the personality's shape and keeps the tokens sent so far."""

    def __init__(self, server: FakeEngine, request: web.Request, resp: web.StreamResponse, chat: bool,
                 index: int, plan: Plan, continuous: bool) -> None:
        self.server, self.request, self.resp, self.chat, self.plan = server, request, resp, chat, plan
        self.continuous = continuous
        self.rid = chunks.completion_id(chat, f"fake-{index}")
        self.created = int(time.time())
        self.done = 0  # tokens sent

    def choice(self, text: Any, finish: Any = None, token_ids: list[int] | None = None,
               role: bool = False) -> dict[str, Any]:
        return chunks.choice(self.chat, text, finish, token_ids, role, **self.server.personality.choice_extra)

    def usage_so_far(self) -> dict[str, Any]:
        return chunks.usage(self.plan.prompt_tokens, self.done)

    async def write(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                    **extra: Any) -> None:
        obj = chunks.chunk(self.rid, self.chat, self.created, self.server.answer_model or self.server.model,
                           choices, usage, **extra)
        if usage is None and self.server.personality.null_usage:
            obj["usage"] = None
        await self.resp.write(chunks.sse(obj))

    async def content(self, text: Any, finish: Any, ids: list[int] | None) -> None:
        await self.write([self.choice(text, finish, ids)], self.usage_so_far() if self.continuous else None)
