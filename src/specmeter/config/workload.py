"""What a plan sends: the dataset, which of its conversations, and their input lengths (a sweep file's workload
section)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from specmeter.config.points import StrictModel


class WorkloadSpec(StrictModel):
    """What the sweep sends. `input_len` takes two forms, told apart by type: a number or a list of numbers is an
    axis (`[128, 512]`: every configuration runs every length at every load, prompts shaped to exactly each length;
    data/shaping.py), a string "LO:HI" (as `--input-len`) or `{min: LO, max: HI}` is a range that keeps the
    dataset's own prompts with LO <= input tokens < HI."""

    dataset: str = "sample"
    path: str | None = None
    num_prompts: int | None = Field(default=None, ge=1)
    categories: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    input_len: list[int] | tuple[int, int] | None = None
    tokenizer: str | None = None

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

    @property
    def lengths(self) -> list[int]:
        """The input-length axis ([] without one)."""
        return self.input_len if isinstance(self.input_len, list) else []

    @property
    def length_range(self) -> tuple[int, int] | None:
        return self.input_len if isinstance(self.input_len, tuple) else None
