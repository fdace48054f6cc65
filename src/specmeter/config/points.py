"""Load points: where on the load axis a plan measures (closed loop at a concurrency, open loop at a request rate),
and the strict base every config model is built on. Below config/models.py, which re-exports them (their users import
them from there)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specmeter.config import flag_text
from specmeter.config.flags import Flag
from specmeter.config.load_search import parse_auto

ArrivalKind = Literal["poisson", "gamma", "constant"]  # load/arrivals.py draws their send times


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A point of a sweep whose workload has an input-length axis (workload.input_len: [N, ...]) runs that length's
# prompts; its id starts with `in<N>-`, so every stored thing keyed by point id (records, captures, summary points,
# sampling, analysis) keys on (input length, load). Without the axis the field is None and ids are as in 0.1.0.
INPUT_LEN_DOC = "Input length of the prompts this point sends (a workload.input_len axis; None: no axis)."


def _length_prefix(input_len: int | None) -> str:
    return "" if input_len is None else f"in{input_len}-"


def _length_label(input_len: int | None) -> str:
    return "" if input_len is None else f", {input_len} input tokens"


class ConcurrencyPoint(StrictModel):
    """Closed loop: N workers, each sends its next request the moment its previous one ends."""

    kind: Literal["concurrency"] = "concurrency"
    concurrency: int = Field(ge=1, description="Requests in flight at once.")
    input_len: int | None = Field(default=None, ge=1, description=INPUT_LEN_DOC)

    @property
    def id(self) -> str:
        return f"{_length_prefix(self.input_len)}c{self.concurrency}"

    @property
    def axis(self) -> Literal["concurrency", "rate"]:
        return "concurrency"

    @property
    def load(self) -> float:
        """The value on the load axis."""
        return float(self.concurrency)

    @property
    def slots(self) -> int | None:
        """The most requests in flight at once (None: unbounded)."""
        return self.concurrency

    def label(self) -> str:
        return f"concurrency {self.concurrency}{_length_label(self.input_len)}"


class RatePoint(StrictModel):
    """Open loop: conversations start at a request rate, on seeded arrival times that every
    configuration of a plan shares, whatever the server's speed."""

    kind: Literal["rate"] = "rate"
    rate: float = Field(gt=0, description="Conversations started per second.")
    arrival: ArrivalKind = Field(default="poisson", description="poisson, gamma (with burstiness) or constant.")
    burstiness: float = Field(default=1.0, gt=0, description="gamma shape: 1 is Poisson, < 1 burstier, > 1 smoother.")
    max_concurrency: int | None = Field(default=None, ge=1, description="Cap on requests in flight (None: none).")
    input_len: int | None = Field(default=None, ge=1, description=INPUT_LEN_DOC)

    @model_validator(mode="after")
    def _burstiness_needs_gamma(self) -> RatePoint:
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError(f"burstiness applies to arrival: gamma only (arrival is {self.arrival})")
        return self

    @property
    def id(self) -> str:
        shape = {"poisson": "", "gamma": f"-gamma{self.burstiness:g}", "constant": "-constant"}[self.arrival]
        cap = f"-cap{self.max_concurrency}" if self.max_concurrency else ""
        return f"{_length_prefix(self.input_len)}r{self.rate:g}{shape}{cap}"

    @property
    def axis(self) -> Literal["concurrency", "rate"]:
        return "rate"

    @property
    def load(self) -> float:
        return self.rate

    @property
    def slots(self) -> int | None:
        return self.max_concurrency

    def label(self) -> str:
        shape = {"poisson": "Poisson", "gamma": f"gamma b={self.burstiness:g}", "constant": "constant"}[self.arrival]
        cap = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"{self.rate:g} req/s ({shape}{cap}){_length_label(self.input_len)}"


class TracePoint(StrictModel):
    """Trace replay: the workload's trace (workload.trace) sent on its own arrival times divided by `scale`, the
    same schedule and content for every configuration, whatever the server's speed. On the rate axis it stands at
    its scale: 2 offers twice the trace's own rate."""

    kind: Literal["trace"] = "trace"
    scale: float = Field(gt=0, description="Time scale: 2 sends the trace's requests twice as fast, 0.5 half as "
                         "fast.")
    input_len: None = Field(default=None, description="A trace's rows have their own lengths: never an "
                            "input-length axis.")

    @property
    def id(self) -> str:
        return f"t{self.scale:g}x"

    @property
    def axis(self) -> Literal["concurrency", "rate"]:
        return "rate"

    @property
    def load(self) -> float:
        return self.scale

    @property
    def slots(self) -> int | None:
        return None

    def label(self) -> str:
        return f"trace at {self.scale:g}x"


def point_shorthand(raw: Any) -> Any:
    """4 -> {kind: concurrency, concurrency: 4}; {rate: 2} -> {kind: rate, rate: 2}; {scale: 2} -> {kind: trace,
    scale: 2}."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return {"kind": "concurrency", "concurrency": raw}
    if isinstance(raw, dict) and "kind" not in raw:
        if "rate" in raw:
            return {"kind": "rate", **raw}
        if "concurrency" in raw:
            return {"kind": "concurrency", **raw}
        if "scale" in raw:
            return {"kind": "trace", **raw}
    return raw


LoadPoint = Annotated[ConcurrencyPoint | RatePoint | TracePoint, Field(discriminator="kind")]
POINT_KINDS = ("concurrency", "rate", "trace")  # the discriminator tags of LoadPoint


class PointsShorthand(StrictModel):
    """The keys a load section may give its points by instead of `points`: `concurrency: [1, 4]`, `request_rate:
    [2.0]` (either as `auto`: a load search, config/load_search.py), and the shape of each request-rate point.
    LoadSpec folds them into its points and searches (`folded`)."""

    concurrency: Annotated[Any, Flag("--concurrency", text=flag_text.levels_or_auto)] = Field(
        default=None, description="Closed-loop load points: concurrency levels, e.g. 1,4,16 (sweep: or auto, a load "
        "search that places the points).")
    request_rate: Annotated[Any, Flag("--request-rate", text=flag_text.rates)] = Field(
        default=None, description="Open-loop load points: conversations per second, e.g. 0.5,2.")
    arrival: Annotated[ArrivalKind | None, Flag("--arrival")] = Field(
        default=None, description="Open loop: poisson (default), gamma or constant arrivals (over a file: at each "
        "of its request-rate points).")
    burstiness: Annotated[float | None, Flag("--burstiness")] = Field(
        default=None, description="Open loop, gamma: shape (1 = Poisson, < 1 burstier).")
    max_concurrency: Annotated[int | None, Flag("--max-concurrency")] = Field(
        default=None, description="Open loop: cap on requests in flight.")
    # A sweep file's key only: a trace replay needs workload.trace, which only a file gives.
    trace_scale: Any = Field(default=None, description="Trace replay points: time scales of workload.trace, e.g. "
                             "[0.5, 1, 2] (2: twice as fast).")

    def folded(self, data: dict[str, Any]) -> dict[str, Any]:
        """A load section's other keys with these folded in: `points` (and `search` for an axis given as auto)."""
        conc, rates = self.concurrency, self.request_rate
        arrival: dict[str, Any] = {k: getattr(self, k) for k in ("arrival", "burstiness", "max_concurrency") if k in
                   self.model_fields_set}
        if arrival and rates is None:  # over a section's own points (a flag over a file): each rate point's shape
            shaped = _shaped(data.get("points"), arrival)
            if shaped is None:
                raise ValueError(f"{', '.join(arrival)} shape request-rate points: give request_rate too")
            data["points"] = shaped
        searches = [s for s in (parse_auto("concurrency", conc), parse_auto("request_rate", rates)) if s is not None]
        for s in searches:  # the start loads are the axis's first points
            if s.axis == "concurrency":
                conc = [int(v) for v in s.start]
            else:
                rates = s.start
        for v in _as_list(conc):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"concurrency: {v!r} is not a whole number; give whole numbers, e.g. "
                                 "concurrency: [1, 4, 16]")
        for v in _as_list(rates):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"request_rate: {v!r} is not a number of requests/s; give numbers, e.g. "
                                 "request_rate: [0.5, 2]")
        scales = _as_list(self.trace_scale)
        for v in scales:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"trace_scale: {v!r} is not a time scale; give numbers, e.g. trace_scale: [0.5, 1, 2]")
        if conc is not None or rates is not None or scales:
            if data.get("points"):
                raise ValueError("give load points either as points or as concurrency/request_rate/trace_scale, "
                                 "not both")
            data["points"] = [*(_as_list(conc)), *({"rate": r, **arrival} for r in _as_list(rates)),
                              *({"kind": "trace", "scale": v} for v in scales)]
        if searches:
            data["search"] = [*data.get("search", []), *searches]
        return data


def _shaped(points: Any, arrival: dict[str, Any]) -> list[Any] | None:
    """`points` with the arrival settings (arrival, burstiness, max_concurrency) over each request-rate point's;
    None where none is a request-rate point."""
    if not isinstance(points, list):
        return None
    raw = [p.model_dump() if isinstance(p, RatePoint) else point_shorthand(p) for p in points]
    rate = [isinstance(r, dict) and r.get("kind") == "rate" for r in raw]
    if not any(rate):
        return None
    return [{**r, **arrival} if is_rate else p for p, r, is_rate in zip(points, raw, rate)]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [] if value is None else [value]


def one_user() -> list[LoadPoint]:
    return [ConcurrencyPoint(concurrency=1)]


# At a closed-loop point of concurrency N, at least this many x N requests are sent (the workload is
# cycled), so a high-concurrency point is not all ramp-up and drain.
REQUESTS_PER_SLOT_FLOOR = 4


class SaturationRule(StrictModel):
    """When a ramp of loads counts a server as saturated at a point (load.saturation; analysis/saturation.py):
    against the next lower load measured, its throughput did not rise by more than `min_gain` (the ratio's interval
    reaches down to 1 + min_gain or below) while its E2E latency (p50) rose by more than `latency_rise` (the whole
    interval above 1 + latency_rise)."""

    min_gain: float = Field(default=0.05, gt=0.0, lt=1.0, description="Throughput must rise by more than this "
                            "fraction over the lower load, beyond its interval, to count as still rising.")
    latency_rise: float = Field(default=0.10, gt=0.0, description="E2E p50 must rise by more than this fraction, "
                                "its whole interval above it, to count as growing.")
