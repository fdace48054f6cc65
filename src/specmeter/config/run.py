"""What `run` is asked beyond the settings it shares with `sweep`: its YAML file, whether the speculation-off baseline
runs beside the config, and the same pair on random tokens too."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class RunOptions(StrictModel):
    """run's own settings."""

    config: Annotated[Path | None, Flag("--config")] = Field(
        default=None, description="YAML file with engine/spec/workload/load sections (flags override it).")
    baseline: Annotated[bool, Flag("--baseline")] = Field(
        default=True, description="Also run the same engine with speculation off, for the speedup.")
    compare_random: Annotated[bool, Flag("--compare-random", negatable=False)] = Field(
        default=False, description="Also run the same config on random tokens of the dataset's lengths, side by "
        "side: how much of the speedup is the workload's.")
    vocab_size: Annotated[int | None, Flag("--vocab-size")] = Field(
        default=None, ge=1, description="With --compare-random: the target's vocabulary size (read from a local model "
        "if not given).")
