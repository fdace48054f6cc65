"""What the planner stores and prints: the step-cost calibration (calibration.json, with every observation and
its residual, so anyone can re-audit the fit) and the predictions `specmeter plan` makes from it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specmeter.schemas.recommend import DrafterRecommendation

CALIBRATION_SCHEMA = 1

# The target's step-cost terms, in the order of the coefficient vector; each drafter adds two after them.
TARGET_TERMS = ("fixed", "per_sequence", "per_token", "per_kv_token", "per_prefill_token")


class Observation(BaseModel):
    """One measured point as the fit reads it: one engine step of the configuration at that point."""

    run: str
    config_id: str
    point_id: str
    repeat: int
    drafter: str | None = Field(description="The drafter's key (None: speculation off).")
    k: float = Field(description="Tokens drafted per request per engine step (K where every step drafts).")
    batch: float = Field(description="The engine's running batch (its gauge; a closed loop's N without one).")
    tokens_per_step: float = Field(description="Output tokens per request per engine step (AL where every step "
                                   "drafts; 1 with speculation off).")
    kv_tokens: float = Field(description="KV tokens the batch holds: batch x (prompt + half the output).")
    prefill_tokens: float = Field(description="Other requests' prompt tokens prefilled per step (closed loop).")
    step_s: float = Field(description="Measured: mean TPOT x tokens per step.")
    fitted_s: float | None = None
    residual: float | None = Field(default=None, description="(measured - fitted) / fitted.")
    used: bool = True


class DrafterCost(BaseModel):
    """A drafter's cost per engine step: `per_draft_s` per drafted position, `per_draft_token_s` per drafted
    position and running request (a K-step chain runs K draft passes over the batch)."""

    drafter: str
    label: str
    per_draft_s: float
    per_draft_token_s: float


class Calibration(BaseModel):
    """A step-cost model fitted on measured points of one engine and hardware (weighted least squares on
    relative error):

        step = fixed + per_sequence B + per_token B (1 + K) + per_kv_token KV + per_prefill_token P
               + per_draft K + per_draft_token K B                  (the drafter's terms, per drafter)
    """

    schema_version: int = CALIBRATION_SCHEMA
    engine: str
    engine_version: str | None
    hardware: str
    target: str
    runs: list[str]
    terms: list[str] = Field(description="The coefficient vector's terms: the target's, then two per drafter.")
    coefficients: list[float] = Field(description="Seconds per unit of each term.")
    covariance: list[list[float]] = Field(description="(X' W X)^+ of the weighted fit: times residual_scale^2 "
                                          "it is the coefficients' covariance.")
    residual_scale: float | None = Field(description="Relative residual standard deviation (None: no degrees of "
                                         "freedom left).")
    dof: int
    rank: int
    drafters: list[DrafterCost]
    excluded: list[str] = Field(default_factory=list, description="Configurations left out (--exclude).")
    observations: list[Observation]
    notes: list[str] = Field(default_factory=list)

    def drafter(self, key: str) -> DrafterCost | None:
        return next((d for d in self.drafters if d.drafter == key), None)


Source = Literal["measured", "predicted"]


class Cell(BaseModel):
    """One drafter at one K and engine batch size, predicted (and measured, where a point ran there)."""

    drafter: str
    k: int
    batch: int
    category: str | None = None
    al: float
    al_low: float
    al_high: float
    extrapolated_positions: int = Field(default=0, description="Positions past those measured, whose acceptance "
                                        "was carried on from the measured conditional rates.")
    tpot_s: float | None
    throughput: float | None = Field(description="Output tokens/s of the batch at steady state.")
    speedup: float | None = Field(description="Baseline TPOT / this TPOT at the same batch.")
    speedup_low: float | None = None
    speedup_high: float | None = None
    measured: bool = False
    measured_speedup: float | None = Field(default=None, description="The paired TPOT speedup measured at the point "
                                           "nearest this batch (within a factor 1.25).")
    measured_point: str | None = None
    why_none: str | None = None


class Check(BaseModel):
    """A measured point of a configuration against what the model predicts for it at its own batch."""

    config_id: str
    point_id: str
    batch: float
    k: int
    in_calibration: bool = Field(description="False: the configuration was left out (--exclude): a blind check.")
    measured_tpot_speedup: float
    measured_low: float | None
    measured_high: float | None
    predicted: float | None
    predicted_low: float | None
    predicted_high: float | None
    error: float | None = Field(description="(predicted - measured) / measured.")
    covered: bool | None = Field(description="The measured value lies inside the predicted interval.")
    why: str | None = Field(default=None, description="Why there is no prediction (predicted is None).")


class PlanResult(BaseModel):
    """`specmeter plan`: predictions from a calibration and acceptance profiles, and the table they imply."""

    run: str
    calibration: Calibration
    acceptance: dict[str, str] = Field(description="Per drafter: where its acceptance profile comes from.")
    prompt_tokens: float
    output_tokens: float
    ks: list[int]
    batches: list[int]
    baseline_tpot_s: dict[int, float | None] = Field(description="Per batch: the predicted TPOT without speculation.")
    cells: list[Cell]
    categories: list[Cell] = Field(default_factory=list, description="Per category (profiles from the run).")
    checks: list[Check] = Field(default_factory=list)
    tables: list[DrafterRecommendation] = Field(default_factory=list, description="Per drafter: recommend's "
                                                "table with the ranges no point measured filled from the model "
                                                "(basis predicted).")
    answer_round: int | None = Field(default=None, description="The run's answer round `tables` start from (None: "
                                     "the run had no recommendation; the sweep's table, decided for the plan).")
    answer_verification: str | None = Field(default=None, description="That round's verification: not run, held, "
                                            "disagreed or kept.")
    notes: list[str] = Field(default_factory=list)
