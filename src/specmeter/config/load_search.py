"""`load: {concurrency: auto}` (or `request_rate: auto`): where a sweep's load points come from when nobody lists
them. The sweep measures `start`, then places each next point where the crossover or a best-K boundary is least
sure (execution/load_search.py), until every such bracket is narrower than `width` (its high load over its low one) or
`max_points` points have run on the axis.

    load: {concurrency: auto}                                        # 1 to 64, starting at 1, 8 and 64
    load: {concurrency: {auto: {min: 1, max: 32, width: 1.3, max_points: 10}}}
    load: {request_rate: {auto: {min: 0.5, max: 8}}}                 # a rate has no natural scale: say where

Read here, below the config models, so LoadSpec validates the shorthand in one place with the others.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specmeter.common.errors import validation_message

SearchAxis = Literal["concurrency", "rate"]
AUTO_KEYS = ("min", "max", "start", "width", "max_points")
CONCURRENCY_RANGE = (1, 64)
DEFAULT_WIDTH = 1.5
DEFAULT_MAX_POINTS = 8


def round_rate(rate: float, digits: int = 2) -> float:
    """A request rate rounded to `digits` significant figures (what a person would type)."""
    if rate <= 0:
        raise ValueError(f"a request rate is positive, not {rate}")
    return float(f"{rate:.{digits}g}")


class LoadSearch(BaseModel):
    """One axis searched: its range, the points measured first, and when the search stops."""

    model_config = ConfigDict(extra="forbid")

    axis: SearchAxis
    min: float = Field(gt=0, description="The lowest load the search may measure.")
    max: float = Field(gt=0, description="The highest load the search may measure.")
    start: list[float] = Field(description="Loads measured before any is chosen (ascending).")
    width: float = Field(default=DEFAULT_WIDTH, gt=1.0, description="The search stops once every bracket around a "
                         "crossover or best-K boundary is narrower than this (its high load / its low load).")
    max_points: int = Field(default=DEFAULT_MAX_POINTS, ge=2, description="The most points measured on the axis, "
                            "the start points included.")

    @model_validator(mode="after")
    def _consistent(self) -> LoadSearch:
        key = self.key
        if self.max <= self.min:
            raise ValueError(f"{key}.auto: max {self.max:g} must be above min {self.min:g}")
        if self.axis == "concurrency":
            for name, v in (("min", self.min), ("max", self.max), *(("start", s) for s in self.start)):
                if v != int(v) or v < 1:
                    raise ValueError(f"{key}.auto: {name} {v:g} is not a whole concurrency of at least 1")
        if len(self.start) < 2 or len(set(self.start)) != len(self.start):
            raise ValueError(f"{key}.auto: start {self.start} needs at least two different loads to bracket "
                             "anything between them")
        outside = [s for s in self.start if not self.min <= s <= self.max]
        if outside:
            raise ValueError(f"{key}.auto: start load {outside[0]:g} lies outside min..max "
                             f"({self.min:g}..{self.max:g}); widen the range or move it")
        if self.max_points < len(self.start):
            raise ValueError(f"{key}.auto: max_points {self.max_points} is fewer than the {len(self.start)} start "
                             "points; raise max_points")
        self.start = sorted(self.start)
        return self

    @property
    def key(self) -> str:
        """The load key this search was given under."""
        return "concurrency" if self.axis == "concurrency" else "request_rate"

    @property
    def integer(self) -> bool:
        """Concurrency is a count of requests: only whole numbers can be measured."""
        return self.axis == "concurrency"


def default_start(axis: SearchAxis, lo: float, hi: float) -> list[float]:
    """The two ends of the range and their geometric middle (the loads are usually spread geometrically)."""
    mid = math.sqrt(lo * hi)
    middle = float(round(mid)) if axis == "concurrency" else round_rate(mid)
    return sorted({float(lo), middle, float(hi)})


def parse_auto(key: Literal["concurrency", "request_rate"], raw: Any) -> LoadSearch | None:
    """`key: auto` or `key: {auto: {...}}` as a search; None for listed points. Auto inside a list is refused:
    the search chooses that axis's points itself."""
    if isinstance(raw, str) and raw == "auto":
        settings: Any = {}
    elif isinstance(raw, dict) and "auto" in raw:
        others = sorted(set(raw) - {"auto"})
        if others:
            raise ValueError(f"{key}: {{auto: {{...}}}} takes its settings inside auto; move {others[0]!r} into it")
        settings = raw["auto"] if raw["auto"] is not None else {}
        if not isinstance(settings, dict):
            raise ValueError(f"{key}.auto: give a mapping of {', '.join(AUTO_KEYS)} (or just {key}: auto)")
    elif isinstance(raw, (list, tuple)) and any(isinstance(v, str) and v == "auto" for v in raw):
        raise ValueError(f"{key}: auto chooses the points of this axis itself, so it cannot be mixed with listed "
                         f"ones ({list(raw)}); give auto with start: [...] for the loads to measure first, or list "
                         "every load")
    else:
        return None
    unknown = sorted(set(settings) - set(AUTO_KEYS))
    if unknown:
        raise ValueError(f"{key}.auto: unknown key {unknown[0]!r}; use {', '.join(AUTO_KEYS)}")
    axis: SearchAxis = "concurrency" if key == "concurrency" else "rate"
    if axis == "rate" and ("min" not in settings or "max" not in settings):
        raise ValueError("request_rate: auto needs min and max in requests/s, e.g. request_rate: {auto: {min: 0.5, "
                         "max: 8}}: a rate has no natural scale")
    lo = settings.get("min", CONCURRENCY_RANGE[0])
    hi = settings.get("max", CONCURRENCY_RANGE[1])
    for name, v in (("min", lo), ("max", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise ValueError(f"{key}.auto: {name} must be a positive number, got {v!r}")
    start = settings.get("start")
    if start is None:
        start = default_start(axis, float(lo), float(hi)) if hi > lo else [lo, hi]
    elif not isinstance(start, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in start):
        raise ValueError(f"{key}.auto: start must be a list of loads, e.g. start: [1, 8, 64]; got {start!r}")
    try:
        return LoadSearch.model_validate({**settings, "axis": axis, "min": lo, "max": hi, "start": start})
    except ValidationError as exc:
        raise ValueError(validation_message(exc, "", LoadSearch, under=f"{key}.auto")) from None
