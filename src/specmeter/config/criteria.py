"""How a K table is decided (recommend, verify, a sweep's --verify, compare --pool, the demo): what it maximises,
where its last batch-size range ends, what a costlier configuration must win by and within how much two tie. Each
is a field with its flag; a value the decision cannot use is refused in one line naming the flag, the same line
wherever it is given. Below the models, so a sweep file's own min_gain and indifference meet the same rule."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from specmeter.common.errors import InputError
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel
from specmeter.config.slo import SLO

Objective = Literal["throughput", "tpot", "goodput"]
OBJECTIVES: tuple[str, ...] = get_args(Objective)


def check_min_gain(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value < 1.0:
        raise InputError(f"--min-gain {value}: give a fraction in [0, 1), e.g. 0.01 for 1%")
    return value


def check_indifference(value: float | None, min_gain: float | None) -> float | None:
    """--indifference: a fraction, no narrower than the minimum gain (where that is known here)."""
    if value is not None and not 0.0 <= value < 1.0:
        raise InputError(f"--indifference {value}: give a fraction in [0, 1), e.g. 0.03: a costlier "
                         "configuration at most 3% better ties")
    if value is not None and min_gain is not None and value < min_gain:
        raise InputError(f"--indifference {value:g} is below the minimum gain {min_gain:g}: a tie straddles 1 + min "
                         f"gain, so a narrower zone never holds one; give --indifference {min_gain:g} or more")
    return value


class Criteria(StrictModel):
    """How the table is decided; None: the run's own (throughput, its max_num_seqs, the sweep's gain and zone)."""

    objective: Annotated[Objective | None, Flag("--objective")] = Field(
        default=None, description="What the recommendation maximises: throughput (TPOT at request-rate points; the "
        "default), tpot, or goodput (needs --slo).")
    slo: SLO | None = Field(default=None, description="goodput's bounds: the load's slo (--slo).")
    max_num_seqs: Annotated[int | None, Flag("--max-num-seqs")] = Field(
        default=None, description="The engine's max_num_seqs, where the last batch-size range ends (default: from "
        "the run).")
    min_gain: Annotated[float | None, Flag("--min-gain")] = Field(
        default=None, description="A larger K (or costlier drafter) must beat a smaller one head to head by more "
        "than this fraction (default: the sweep's, 0.01).")
    indifference: Annotated[float | None, Flag("--indifference")] = Field(
        default=None, description="A costlier configuration settled at most this fraction better than a cheaper one "
        "is a tie: the cheaper is kept (within this much of the better), and a point stops sampling there, and a "
        "proposed K predicted within it is not measured (at least --min-gain; equal: no ties; default: the sweep's, "
        "0.03 or the min gain where larger).")

    @field_validator("objective", mode="before")
    @classmethod
    def _objective(cls, value: Any) -> Any:
        if value is not None and value not in OBJECTIVES:
            raise InputError(f"--objective {value!r}: choose throughput, tpot or goodput")
        return value

    @field_validator("max_num_seqs")
    @classmethod
    def _batch_limit(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise InputError(f"--max-num-seqs {value}: the engine's batch limit is at least 1, e.g. --max-num-seqs "
                             "256 (or leave it out to read it from the run)")
        return value

    _min_gain = field_validator("min_gain")(check_min_gain)

    @model_validator(mode="after")
    def _zone(self) -> Criteria:
        check_indifference(self.indifference, self.min_gain)
        return self


class AnswerRound(StrictModel):
    """Which round of a run's answer `recommend` shows (the latest by default), or a new one it decides."""

    again: Annotated[bool, Flag("--again", negatable=False)] = Field(
        default=False, description="Decide again (e.g. with another --objective): a new round; the earlier ones stay "
        "as history.")
    round: Annotated[int | None, Flag("--round")] = Field(
        default=None, ge=1, description="Show this round of the run's answer instead of the latest.")
