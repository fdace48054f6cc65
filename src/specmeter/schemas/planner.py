"""What the planner stores and prints: the step-cost calibration (calibration.json, with every observation and
its residual, so anyone can re-audit the fit) and the predictions `specmeter plan` makes from it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specmeter.schemas.recommend import DrafterRecommendation

CALIBRATION_SCHEMA = 1

# The target's step-cost terms, in the order of the coefficient vector; a form's caps and knees follow them, then
# each drafter's terms (StepForm).
TARGET_TERMS = ("fixed", "per_sequence", "per_token", "per_kv_token", "per_prefill_token")
# A drafter's possible terms, each per engine step: K (one draft pass per drafted position), K x B (a drafted token
# of each running sequence), 1 (a speculative step, whatever K), B (a speculative step of each running sequence).
DrafterTerm = Literal["per_draft", "per_draft_token", "per_step", "per_step_sequence"]
PAID: dict[tuple[DrafterTerm, ...], str] = {("per_draft", "per_draft_token"): "per pass",
                                            ("per_step", "per_step_sequence"): "per step",
                                            ("per_step", "per_draft_token"): "per step and drafted token"}
Scheme = Literal["leave one K out", "leave one load out"]


class StepForm(BaseModel):
    """Which terms a step's cost has beyond the target's five: how a drafter is paid, and where the step bends with
    the running sequences B. A cap adds a per-sequence cost up to `cap` sequences and none beyond (steps that grow
    steeply over the first sequences, then flatten, as on a GPU); a knee a per-sequence cost beyond `knee` only
    (steps that turn steeper, as where a memory-bound step turns compute-bound)."""

    model_config = ConfigDict(frozen=True)  # hashable: forms key their cross-validation

    drafter_terms: tuple[DrafterTerm, ...] = ("per_draft", "per_draft_token")
    caps: tuple[float, ...] = ()
    knees: tuple[float, ...] = ()

    @property
    def name(self) -> str:
        paid = PAID.get(self.drafter_terms)
        parts = [paid or " + ".join(t.removeprefix("per_").replace("_", " ") for t in self.drafter_terms)]
        parts += [f"cap {c:g}" for c in self.caps] + [f"knee {n:g}" for n in self.knees]
        return ", ".join(parts)

    @property
    def size(self) -> int:
        """Columns per drafter plus the target's extra ones: the form's complexity (a tie goes to the smaller)."""
        return len(self.drafter_terms) + len(self.bends)

    @property
    def bends(self) -> tuple[float, ...]:
        return (*self.caps, *self.knees)


class FormScore(BaseModel):
    """One candidate form, cross-validated: every group of points held out in turn and predicted from the rest."""

    form: StepForm
    name: str
    error: float | None = Field(description="Median |relative error| of the held-out steps it predicted.")
    worst: float | None = Field(description="The largest |relative error| among them.")
    score: float = Field(description="Mean |relative error| with each held-out step it could not predict counted "
                         "as 100%: what the choice minimises.")
    predicted: int
    held_out: int


class FormChoice(BaseModel):
    """The step-cost form a calibration chose among the candidates by its own held-out error."""

    scheme: Scheme
    groups: list[str] = Field(description="What was held out in turn (Ks or load points).")
    chosen: str
    decided: bool = Field(default=True, description="False: no candidate fitted without a group could predict a "
                          "step of it (too few loads or Ks), so the form is the default, not chosen.")
    scores: list[FormScore] = Field(description="Every candidate, best first.")
    tied: list[StepForm] = Field(default_factory=list, description="Other forms the held-out error could not tell "
                                 "from the chosen one: predictions span them all.")
    spread: float | None = Field(default=None, description="How far the tied forms' step predictions differ at most "
                                 "(relative), over K = 1 to twice the largest measured and the measured batches.")
    spread_at: str | None = Field(default=None, description="Where that largest difference lies.")
    half_width: float | None = Field(default=None, description="The log half-width that holds 95% of the chosen "
                                     "form's held-out speculative steps: the floor of a prediction's interval.")


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
    position and running request (a K-step chain runs K draft passes over the batch), `per_step_s` per speculative
    step and `per_step_sequence_s` per speculative step and running request, whatever K (the terms its form has;
    the others are 0)."""

    drafter: str
    label: str
    per_draft_s: float
    per_draft_token_s: float
    per_step_s: float = 0.0
    per_step_sequence_s: float = 0.0

    def step_s(self, k: float, batch: float) -> float:
        """What drafting K tokens for each of `batch` sequences costs one engine step."""
        if k <= 0:
            return 0.0
        return k * (self.per_draft_s + self.per_draft_token_s * batch) + self.per_step_s + (
            self.per_step_sequence_s * batch)


class Calibration(BaseModel):
    """A step-cost model fitted on measured points of one engine and hardware (weighted least squares on
    relative error):

        step = fixed + per_sequence B + per_token B (1 + K) + per_kv_token KV + per_prefill_token P
               [+ cap_c min(B, c) + knee_n max(0, B - n)]              (the form's bends, if any)
               + per_draft K + per_draft_token K B [+ per_step + per_step_sequence B]   (per drafter, its form's)

    The form is chosen among candidates by the calibration's own held-out error (`choice`).
    """

    schema_version: int = CALIBRATION_SCHEMA
    engine: str
    engine_version: str | None
    hardware: str
    target: str
    runs: list[str]
    form: StepForm = Field(default_factory=StepForm, description="The terms the fit has (a file without one: per "
                           "pass, no bend).")
    choice: FormChoice | None = Field(default=None, description="How the form was chosen (None: given, not chosen).")
    terms: list[str] = Field(description="The coefficient vector's terms: the target's, the form's bends, then the "
                             "form's terms per drafter.")
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
