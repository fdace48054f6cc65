"""What a trace replay sends: the trace file, the stretch of it to replay, and where each request's text comes from
when the trace has none (a sweep file's `workload.trace`; data/traces/content.py builds the requests)."""

from __future__ import annotations

from pydantic import Field, field_validator

from specmeter.config.points import StrictModel


class TraceSpec(StrictModel):
    """A production trace to replay: its file, its window, and the text its requests carry (the trace's own where
    a row has some, else the workload's dataset matched to each row's input length, or random tokens if asked)."""

    path: str = Field(description="The trace file (Mooncake or Bailian JSONL, BurstGPT or Azure CSV).")
    format: str | None = Field(default=None, description="mooncake, bailian, burstgpt or azure (default: told "
                               "from the file).")
    start_s: float = Field(default=0.0, ge=0, description="The window's start, seconds after the first arrival.")
    duration_s: float | None = Field(default=None, gt=0, description="The window's length in seconds (default: to "
                                     "the trace's end).")
    length_tolerance: float = Field(default=0.05, ge=0, lt=1, description="How far a request's text may be from "
                                    "its row's input_length, as a fraction of it (at least one token), counted with "
                                    "the target's tokenizer.")
    category_mix: dict[str, float] | None = Field(default=None, description="Weight of each dataset category in "
                                                  "the rows the dataset fills (default: the dataset's own mix).")
    random_tokens: bool = Field(default=False, description="Fill rows without text with random token ids instead "
                                "of the dataset's text (the synthetic contrast: acceptance on it is not real).")

    @field_validator("category_mix")
    @classmethod
    def _weights(cls, mix: dict[str, float] | None) -> dict[str, float] | None:
        if mix is not None and (not mix or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0):
            raise ValueError("category_mix gives each category a weight of 0 or more, some above 0, e.g. "
                             "{coding: 1, math: 1}")
        return mix
