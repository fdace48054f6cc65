"""What measuring one point captured, raw: the telemetry read around and through it, stored beside the
request records so that the point's results are a pure function of what is on disk.

A capture is kept per (configuration, point, repeat) in captures/<config>/<point>-r<repeat>.json. Each
attempt at the point (the first run, then each `--resume` that finished it on a new server) adds one
`Attempt`: its own clock, scrapes, samples and feed reads. Requests carry the attempt that sent them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from specmeter.schemas.host import HostReading


class Scrape(BaseModel):
    """One GET of the engine's Prometheus text, as it came (or why it did not)."""

    at_s: float = Field(description="When the answer arrived, seconds since the attempt started (monotonic).")
    text: str | None = None
    error: str | None = None


class FeedRead(BaseModel):
    """One read of an engine's clear-on-read statistics (`telemetry.feed.IterationFeed`)."""

    at_s: float
    phase: str = Field(description="mark (right before the point), poll (through it) or last (right after it).")
    text: str | None = Field(default=None, description="The answer's body; None when the read failed.")
    error: str | None = None


class GaugeSamples(BaseModel):
    """The running-batch gauge polled through the point: (seconds since the attempt started, value)."""

    name: str
    interval_s: float
    samples: list[tuple[float, float]] = Field(default_factory=list)


class ReplicaReads(BaseModel):
    """One server's reads around and through a point: a replica's, when attached to several."""

    url: str = Field(description="The replica's base URL ('' for the one server of an attempt without replicas).")
    before: Scrape | None = None
    after: Scrape | None = None
    running: GaugeSamples | None = None


class Attempt(BaseModel):
    """One run of the point on one server: everything read from it, on the attempt's own clock."""

    index: int = Field(ge=0, description="0 for the first run; each resume that re-sends requests adds one.")
    engine: str = Field(description="The engine kind whose stats parse this attempt's telemetry.")
    metrics_path: str = "/metrics"
    started_s: float = Field(description="Seconds since the run started, when the attempt's point started.")
    wall_s: float | None = Field(default=None, description="None: the attempt never finished (killed).")
    before: Scrape | None = None
    after: Scrape | None = None
    running: GaugeSamples | None = None
    feed: list[FeedRead] | None = Field(default=None, description="None: the engine has no iteration feed (or "
                                        "was read over several replicas, whose feeds are not read).")
    replicas: list[ReplicaReads] | None = Field(default=None, description="Attached to several replicas: each one's "
                                                "reads (before, after and running are then None).")
    turns_with: list[str] = Field(default_factory=list, description="The configurations whose servers it took turns "
                                  "with, a wave at a time (load/turns.py): its times, wall time and gauge samples "
                                  "are then on its own busy clock, its waits for their requests taken out.")
    host: HostReading | None = Field(default=None, description="How busy the machine was with other work through "
                                     "the round this attempt ran in (None: not read, or a capture from before).")
    instance: int = Field(default=0, description="Which of the configuration's server instances it ran on "
                          "(0-based; plan load.instances).")

    def keep(self, reads: list[ReplicaReads]) -> None:
        """One server's reads in before, after and running (as every capture before replicas has them); several
        replicas' in `replicas`."""
        if len(reads) == 1:
            self.before, self.after, self.running = reads[0].before, reads[0].after, reads[0].running
        else:
            self.replicas = reads

    def reads(self) -> list[ReplicaReads]:
        """Every server's reads: the replicas', or the one server's."""
        if self.replicas is not None:
            return self.replicas
        return [ReplicaReads(url="", before=self.before, after=self.after, running=self.running)]

    def rebase(self, by: float) -> None:
        """Move the attempt's clock `by` seconds later (onto the clock its requests' times count from)."""
        self.started_s += by
        reads = self.reads()
        for read in [*(r.before for r in reads), *(r.after for r in reads), *(self.feed or [])]:
            if read is not None:
                read.at_s -= by
        for server in reads:
            if server.running is not None:
                server.running.samples = [(t - by, v) for t, v in server.running.samples]


class PointCapture(BaseModel):
    config_id: str
    point_id: str
    repeat: int = 0
    attempts: list[Attempt] = Field(default_factory=list)

    @property
    def finished(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].wall_s is not None
