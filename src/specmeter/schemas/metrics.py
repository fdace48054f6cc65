"""Summaries of one load point's requests, kept as numbers (never strings): distributions, latency
and throughput, per-category and per-input-length acceptance, the steady window and the engine's running batch."""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from specmeter.schemas.sd import SDCounts


class Distribution(BaseModel):
    """Summary of one per-request (or per-chunk) quantity."""

    count: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None


class LatencySummary(BaseModel):
    """Numbers a serving engineer reads first. Times in seconds."""

    num_requests: int
    num_ok: int
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    wall_s: float
    output_tokens: int
    prompt_tokens: int
    output_tokens_per_s: float | None = Field(description="Sum of output tokens / wall time of the point.")
    requests_per_s: float | None
    ttft_s: Distribution
    tpot_s: Distribution = Field(description="Per request: (E2E - TTFT) / (output tokens - 1).")
    inter_chunk_s: Distribution = Field(description="Gaps between streamed chunks (a chunk may hold many tokens).")
    itl_per_token_s: Distribution = Field(description="Each chunk gap / tokens in that chunk.")
    e2e_s: Distribution
    queued_s: Distribution = Field(description="Client-side wait for a slot: not server latency.")
    tokens_per_chunk: float | None = Field(description="Mean output tokens per streamed chunk.")


class Goodput(BaseModel):
    """Requests of one point that met the run's SLO (load.slo), per second of the point: goodput beside
    throughput. Failed requests never meet it and count in `measured`."""

    slo: str = Field(description="The bounds, as read: e.g. 'ttft_ms <= 500, tpot_ms <= 50'.")
    requests_per_s: float | None = Field(description="Requests that met every bound / the point's wall time.")
    met: int
    measured: int = Field(description="Requests measured at the point (warm-up excluded, failed ones included).")
    share: float | None = Field(description="met / measured.")
    ci95_low: float | None = Field(default=None, description="95% interval of requests_per_s: the Wilson interval "
                                   "of the share met, times the point's requests per second.")
    ci95_high: float | None = None


class CategorySD(BaseModel):
    category: str
    requests: int = Field(description="Measured requests with per-request SD stats.")
    counts: SDCounts
    al_step_weighted: float | None
    al_ci95_low: float | None = Field(default=None, description="95% bootstrap interval of al_step_weighted, "
                                      "resampling the category's requests (None: fewer than 2 with steps).")
    al_ci95_high: float | None = Field(default=None, description="Upper end of that interval.")
    al_request_mean: float | None
    acceptance_rate: float | None
    per_position_rate: list[float]
    conditional_rate: list[float]
    per_depth_rate: list[float] | None = Field(default=None, description="Tree drafts only (SDCounts.per_depth_rate): "
                                               "the share of steps whose accepted path reached each depth.")


class CategoryBreakdown(BaseModel):
    categories: list[CategorySD]
    macro_al: float | None = Field(description="Mean over categories of their step-weighted AL.")
    macro_ar: float | None
    pooled: CategorySD = Field(description="All categories pooled: equals the run-level per-request sums.")


class LengthBucket(BaseModel):
    """The requests whose prompt fell in one input-length bucket, and their acceptance."""

    low: int = Field(ge=0, description="Smallest prompt length in the bucket, tokens.")
    high: int | None = Field(description="Largest, tokens (None: no upper edge, the last bucket).")
    acceptance: CategorySD = Field(description="Their acceptance, as a category's is read (its name: the bucket's).")


class LengthBreakdown(BaseModel):
    """Acceptance per input-length bucket: fixed power-of-two edges in prompt tokens as the engine counted them
    (its usage's prompt_tokens: the chat template included), the buckets that hold a request, shortest first."""

    buckets: list[LengthBucket]
    unknown: int = Field(default=0, description="Measured requests with SD stats whose usage gave no prompt "
                         "length: in no bucket.")


class PhaseAcceptance(BaseModel):
    """One phase of a phase-shift workload at one point: when it started, and its acceptance over the phase and
    over each half of it (how far acceptance, and the K the engine drafted, had moved by the phase's end)."""

    phase: str
    requests: int = Field(description="Its measured requests (with per-request SD stats or not).")
    started_s: float = Field(description="Its first request's send time, seconds since the point started (the "
                             "median over rounds): for every phase but the first, when the switch came.")
    acceptance: CategorySD = Field(description="Its acceptance over the phase, as a category's is read.")
    first_half: SDCounts | None = Field(default=None, description="Pooled counts of the first half of its requests "
                                        "by send time, in each round (None: no per-request stats).")
    second_half: SDCounts | None = Field(default=None, description="The same of the second half.")
    tpot_mean_s: float | None = Field(default=None, description="Mean TPOT of its requests.")

    @property
    def drafted_per_step(self) -> float | None:
        """Draft tokens per step: the K the engine drafted on average (None: no steps counted)."""
        counts = self.acceptance.counts
        return counts.num_draft_tokens / counts.num_steps if counts.num_steps else None


class PhaseBreakdown(BaseModel):
    """One configuration's phases at one point, in the order sent, over its measured rounds."""

    config_id: str
    point_id: str
    phases: list[PhaseAcceptance]


class SteadyState(BaseModel):
    """One point measured over its steady window: all N slots busy (closed loop) or the arrival process
    running (open loop), so ramp-up and drain do not dilute throughput."""

    basis: str = Field(description="What defines the window: 'all slots busy' or 'arrivals running'.")
    start_s: float = Field(description="Window start, seconds since the point started.")
    end_s: float
    share: float = Field(description="Window length / the point's wall time.")
    output_tokens_per_s: float | None = Field(description="Output tokens streamed inside the window / its length.")
    requests_per_s: float | None = Field(description="Requests finished inside the window / its length.")
    tpot_s: Distribution = Field(description="TPOT of requests that started and finished inside the window.")
    ttft_s: Distribution


class RunningBatch(BaseModel):
    """The engine's own running-batch size over a point (vLLM: vllm:num_requests_running), sampled during
    the point: what a dynamic-K table is keyed on, which need not be the client's N."""

    gauge: str
    interval_s: float
    samples: int
    mean: float | None = None
    p50: float | None = None
    max: float | None = None
    steady_mean: float | None = Field(default=None, description="Mean over samples inside the steady window.")
    histogram: dict[int, int] = Field(default_factory=dict, description="Batch size -> samples.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def time_share(self) -> dict[int, float]:
        """Batch size -> the share of the point's sampled time the engine ran it (0: idle). Samples come at a
        fixed interval, so a batch's time is its samples times interval_s and its share is its samples' share."""
        total = sum(self.histogram.values())
        return {size: n / total for size, n in self.histogram.items()} if total else {}


class ReplicaShare(BaseModel):
    """One replica's part of a point, attached to several: the requests it served and its own running batch."""

    url: str
    requests: int = Field(description="Measured requests sent to it (warm-up excluded).")
    ok: int = Field(description="Of those, completed.")
    share: float = Field(description="Its fraction of the point's measured requests.")
    running_batch: RunningBatch | None = Field(default=None, description="Its own gauge, sampled through the point.")
