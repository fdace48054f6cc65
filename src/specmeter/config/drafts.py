"""The speculative configs a command line gives: run's one --spec, a sweep's candidates (each at every K of --k),
and the draft lengths the demo sweeps and plan and estimate predict."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from specmeter.config import flag_text
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class Drafts(StrictModel):
    """The shorthand of a sweep file's candidates (`--spec '{...}' --k 1,2,4`) and of run's spec section."""

    spec: Annotated[list[str], Flag("--spec")] = Field(
        default_factory=list, description='A speculative config as JSON, e.g. \'{"method": "ngram", '
        '"num_speculative_tokens": 4}\' (repeatable where a command compares several); "synthetic_acceptance": '
        '{"rates": [...]} or {"length": L} sets acceptance instead of verifying (benchmarking only).')
    k: Annotated[list[int] | None, Flag("--k", short="-k", text=flag_text.ks)] = Field(
        default=None, description="Draft lengths K, a list: 1,2,4.")

    def given(self) -> bool:
        """Whether any flag that defines a sweep's candidates was given (they, --model and a sweep file exclude
        each other)."""
        return bool(self.spec or self.k)
