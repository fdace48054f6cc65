"""The pruned draft vocabulary `specmeter vocab` prices on a run's own baseline outputs: EAGLE-3's d2t/t2d (or a
list of token ids), or the top N tokens of a corpus, and where its ceilings are given and written."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from specmeter.config import flag_text
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class Pruning(StrictModel):
    """vocab's settings."""

    draft_vocab: Annotated[Path | None, Flag("--draft-vocab")] = Field(
        default=None, description="The draft vocabulary: a safetensors file or draft model directory holding d2t or "
        "t2d (EAGLE-3), or a .npy / .json list of target token ids.")
    top: Annotated[list[int], Flag("--top", text=functools.partial(flag_text.sizes, example="32000 or 64,128,256"))] = (
        Field(default_factory=list, description="Build the map from the N most frequent tokens of --corpus (several: "
              "64,128,256)."))
    corpus: Annotated[list[Path], Flag("--corpus")] = Field(
        default_factory=list, description="With --top: text, JSONL (text, prompt, turns, messages or token_ids per "
        "line) or a directory of them (repeatable). A run's requests.jsonl of the same workload makes the map "
        "in-sample (circular): the output says so.")
    positions: Annotated[int | None, Flag("--positions")] = Field(
        default=None, ge=1, description="Drafted positions to give ceilings for (at least the largest K of the "
        "drafted configurations; without any, default 4).")
    drafted: Annotated[str | None, Flag("--drafted")] = Field(
        default=None, description="A drafted run to explain, RUN or RUN:CONFIG_ID (default: this run's own "
        "speculative configurations).")
    vocab_json: Annotated[Path | None, Flag("--vocab-json")] = Field(
        default=None, description="Where to write vocab.json (default: into RUN_DIR).")

    @field_validator("top")
    @classmethod
    def _each_size_once(cls, value: list[int]) -> list[int]:
        return sorted(set(value))
