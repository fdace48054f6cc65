"""The tune loop on a sweep's servers, before and while the answer is decided: the Ks the step-cost model
proposes, measured head to head, then recommend -> verify -> correct (the demo, sweep --verify and verify)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from specmeter.config import flag_text
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel

DEFAULT_BUDGET = 1  # proposed Ks measured where none is asked for


class Tuning(StrictModel):
    """How many Ks the step-cost model may propose, which, and how many verification rounds correct the table."""

    propose: Annotated[int, Flag("--propose", parse_bounds=True)] = Field(
        default=DEFAULT_BUDGET, ge=0, description="Before the answer is decided: measure at most N draft lengths K "
        "the sweep did not run, where the step-cost model calibrated on it predicts one beats the K chosen at a "
        "measured point by more than the indifference zone; each runs head to head against that K and enters the "
        "table only where it beats it (0: none).")
    propose_k: Annotated[tuple[int, int] | None, Flag("--propose-k", text=flag_text.k_range)] = Field(
        default=None, description="The Ks a proposal may take, LOW-HIGH, e.g. 1-6 (default: a sweep file's "
        "num_speculative_tokens LO-HI, else the swept Ks' span widened by one on each side).")
    rounds: Annotated[int, Flag("--rounds", parse_bounds=True)] = Field(
        default=2, ge=1, description="The most verification rounds: a table verification contradicts is corrected "
        "and verified again.")
    verify: Annotated[bool, Flag("--verify", negatable=False)] = Field(
        default=False, description="After a sweep: measure the K the step-cost model proposes (--propose), recommend a "
        "K per batch size and run that dynamic config (as `specmeter verify`), reusing the sweep's servers.")


class Verification(StrictModel):
    """What `specmeter verify` runs beyond the tune loop's settings: which table, where it writes, which points."""

    recommendation: Annotated[Path | None, Flag("--recommendation")] = Field(
        default=None, description="Verify this recommendation.json (e.g. one you edited) as a new round, instead of "
        "the run's answer.")
    verify_dir: Annotated[Path | None, Flag("--verify-dir")] = Field(
        default=None, description="Run directory of the verification (default: a new one inside RUN_DIR).")
    every_point: Annotated[bool, Flag("--every-point", negatable=False)] = Field(
        default=False, description="Run every point the sweep measured, also those where every decision behind the "
        "table's K was settled (by default the sweep's evidence stands there).")
