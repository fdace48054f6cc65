"""What makes the fake look like one engine rather than another: its /v1/models owner, its /metrics names
and labels, how it frames a stream, and where it puts per-request SD numbers. The server core (server.py)
does the generation, the faults and the bookkeeping; a personality only shapes what goes on the wire.

Metric names, labels and payload shapes follow the engines themselves (shared/REFERENCE.md and the
captures in tests/fixtures), written out here rather than imported from specmeter's adapters, so a name the
adapters get wrong shows up as a failing test instead of being copied into the fake."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from fakeengine.counters import Counters

if TYPE_CHECKING:
    from aiohttp import web

    from fakeengine.server import FakeEngine

# hide_sd (a server-wide fault): None shows every SD series, "required" keeps only the per-position ones,
# "all" shows none.
Hide = str | None


class Personality:
    name = ""
    owned_by = ""
    server_header: str | None = None  # the HTTP Server header, where the engine's own is telling
    no_draft_prob = 0.0  # the share of decode steps that draft nothing (n-gram misses)
    replica_label: str | None = None  # the label telling engine replicas apart, for engines that expose them
    one_token_per_chunk = False  # streams every token in a chunk of its own, even when a step made several
    finish_apart = False  # the finish_reason comes in a chunk of its own after the content
    role_content: str | None = ""  # delta.content of the first chat chunk, the one with the role
    choice_extra: ClassVar[dict[str, Any]] = {}  # fields the engine adds to every streamed choice
    null_usage = False  # every chunk carries "usage": null
    close_after_stream = False  # closes the connection after a streamed answer, whatever keep-alive says
    created_twins = True  # counters have `_created` twins (prometheus_client does that)
    metrics_path = "/metrics"  # where the Prometheus text is served

    def bind(self, server: FakeEngine) -> None:
        self.server = server

    def routes(self, app: web.Application, prometheus: Any) -> None:
        """Mount the engine's statistics endpoints; `prometheus` is the core's handler of the text format."""
        app.router.add_get(self.metrics_path, prometheus)

    def render(self, replicas: list[Counters], created: float, hide: Hide) -> str:
        raise NotImplementedError

    def sd_payload(self, told: dict[str, Any], body: dict[str, Any], output_tokens: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A finished request's SD numbers, as (top-level fields of chunks sent with no choices before the
        usage chunk, top-level fields added to the usage chunk). `told` is `steps.sd_stats` of what the
        server reports (a lie under lie_extra_accepted)."""
        raise NotImplementedError

    def on_step(self, accepted: int, drafted: int) -> None:
        """A decode step was made (before its chunk goes out): for engines that report per iteration."""
