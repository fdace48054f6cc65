"""How `data prepare` fetches a hub dataset once, with network, before benchmarking: which subset, at which
revision, where its JSONL files and manifest go."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class Preparation(StrictModel):
    """data prepare's settings."""

    subset: Annotated[str, Flag("--subset")] = Field(
        default="qualitative", description="The dataset's subset: qualitative, throughput_1k/2k/8k/16k/32k, or all.")
    revision: Annotated[str | None, Flag("--revision")] = Field(
        default=None, description="Dataset revision (commit) to pin.")
    out: Annotated[Path, Flag("--out")] = Field(
        default=Path("data/speed-bench"), description="Directory that receives the prepared JSONL files and their "
        "manifest.")
    seed: Annotated[int, Flag("--seed")] = Field(default=0, description="Seed for anything sampled while filling rows.")
