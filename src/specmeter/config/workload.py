"""What a plan sends: the dataset, which of its conversations, and their input lengths (a sweep file's workload
section)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from specmeter.config import flag_text
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel
from specmeter.config.trace import TraceSpec


class PhaseSpec(StrictModel):
    """One phase of a phase-shift workload: conversations of some of the dataset's categories, sent together."""

    name: str = Field(min_length=1, description="The phase's name in reports (e.g. code, chat).")
    categories: list[str] = Field(min_length=1, description="The dataset's categories this phase draws from.")
    conversations: int | None = Field(default=None, ge=1, description="How many it sends, drawn stratified by "
                                      "category (None: every one of its categories'); the next phase starts "
                                      "after them: the switch.")


class WorkloadSpec(StrictModel):
    """What the sweep sends. `input_len` takes two forms, told apart by type: a number or a list of numbers is an
    axis (`[128, 512]`: every configuration runs every length at every load, prompts shaped to exactly each length;
    data/shaping.py), a string "LO:HI" (as `--input-len`) or `{min: LO, max: HI}` is a range that keeps the
    dataset's own prompts with LO <= input tokens < HI."""

    dataset: Annotated[str, Flag("--dataset")] = Field(
        default="sample", description="Workload: sample, jsonl, speed-bench, gsm8k, mt-bench, spec-bench, sonnet, "
        "random.")
    path: Annotated[str | None, Flag("--dataset-path")] = Field(
        default=None, description="File or directory of the dataset.")
    num_prompts: int | None = Field(default=None, ge=1, description="Conversations per point (as load.num_prompts, "
                                    "which --num-prompts sets; this one wins where both are in a file).")
    categories: Annotated[list[str] | None, Flag("--category")] = Field(
        default=None, description="Only these categories (repeatable).")
    options: Annotated[dict[str, Any], Flag("--dataset-option")] = Field(
        default_factory=dict, description="Loader option KEY=VALUE (repeatable), e.g. input_len=256 for "
        "random/sonnet, config=qualitative for speed-bench.")
    input_len: Annotated[list[int] | tuple[int, int] | None, Flag("--input-len", text=flag_text.input_len)] = Field(
        default=None, description="Input tokens (the target's tokenizer): N or N1,N2 (lengths), or LO:HI (the "
        "dataset's prompts with LO <= tokens < HI, e.g. 0:512); run keeps a range, a sweep makes lengths an axis.")
    tokenizer: Annotated[str | None, Flag("--tokenizer")] = Field(
        default=None, description="The target's tokenizer, where tokens are counted from text (default: the target "
        "model).")
    trace: TraceSpec | None = Field(default=None, description="A production trace to replay at the load's trace "
                                    "points (load.trace_scale): its rows' text is the trace's own, else this "
                                    "dataset's at each row's input length (docs/traces.md).")

    phases: list[PhaseSpec] | None = Field(default=None, description="A phase-shift workload: these phases of the "
                                           "dataset sent one after another at every point, each reported on its own "
                                           "(docs/datasets.md, \"A phase shift\").")

    @field_validator("input_len", mode="before")
    @classmethod
    def _axis_or_range(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("give input lengths as [N, ...] or a range as 'LO:HI'")
        if isinstance(value, int):
            return [value]
        if isinstance(value, str):
            lo, sep, hi = value.partition(":")
            if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
                raise ValueError(f"{value!r}: write a range as 'LO:HI' (e.g. '0:512') or lengths as [128, 512]")
            value = {"min": int(lo), "max": int(hi)}
        if isinstance(value, dict):
            if set(value) != {"min", "max"}:
                raise ValueError("a range is {min: LO, max: HI}")
            if not 0 <= value["min"] < value["max"]:
                raise ValueError(f"range {value['min']}:{value['max']} must satisfy 0 <= LO < HI")
            return (value["min"], value["max"])
        if isinstance(value, list):
            if not value or len(set(value)) != len(value) or any(
                    isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in value):
                raise ValueError("input lengths are distinct positive token counts, e.g. [128, 512]")
            return list(value)
        return value

    @model_validator(mode="after")
    def _trace_has_its_lengths(self) -> WorkloadSpec:
        if self.trace is not None and self.input_len is not None:
            raise ValueError("a trace's rows have their own input lengths: drop input_len, or the trace")
        return self

    @model_validator(mode="after")
    def _phases_hold_apart(self) -> WorkloadSpec:
        if self.phases is None:
            return self
        if len(self.phases) < 2:
            raise ValueError("workload.phases: a phase shift needs at least two phases")
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise ValueError(f"workload.phases: names repeat ({', '.join(names)}); name each phase once")
        seen: dict[str, str] = {}
        for phase in self.phases:
            for cat in phase.categories:
                if cat in seen:
                    raise ValueError(f"workload.phases: category {cat!r} is in phases {seen[cat]!r} and "
                                     f"{phase.name!r}; give each category to one phase")
                seen[cat] = phase.name
        clash = [f for f, set_ in (("categories", self.categories), ("num_prompts", self.num_prompts),
                                   ("trace", self.trace), ("input_len", self.input_len)) if set_ is not None]
        if clash:
            raise ValueError(f"workload.phases: each phase names its categories and its number of conversations; "
                             f"drop {', '.join(clash)}")
        return self

    @property
    def lengths(self) -> list[int]:
        """The input-length axis ([] without one)."""
        return self.input_len if isinstance(self.input_len, list) else []

    @property
    def length_range(self) -> tuple[int, int] | None:
        return self.input_len if isinstance(self.input_len, tuple) else None
