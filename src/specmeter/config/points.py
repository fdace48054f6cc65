"""Load points: where on the load axis a plan measures (closed loop at a concurrency, open loop at a request rate),
and the strict base every config model is built on. Below config/models.py, which re-exports them (their users import
them from there)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


def point_shorthand(raw: Any) -> Any:
    """4 -> {kind: concurrency, concurrency: 4}; {rate: 2} -> {kind: rate, rate: 2}."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return {"kind": "concurrency", "concurrency": raw}
    if isinstance(raw, dict) and "kind" not in raw:
        if "rate" in raw:
            return {"kind": "rate", **raw}
        if "concurrency" in raw:
            return {"kind": "concurrency", **raw}
    return raw


LoadPoint = Annotated[ConcurrencyPoint | RatePoint, Field(discriminator="kind")]
POINT_KINDS = ("concurrency", "rate")  # the discriminator tags of LoadPoint


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
