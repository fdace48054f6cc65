"""Predictions: TPOT, throughput and speedup per drafter, K and engine batch size, with intervals, from a
calibration and acceptance profiles; and every measured point checked against what the model says for it.

A speedup at batch B is the baseline's TPOT at B over the drafter's: tau x step_off(B) / step_sd(B, K), tau
the tokens per step (AL(K)). Its interval joins the step's uncertainty with the acceptance interval of AL(K), in
quadrature on the log scale. The step's is the larger of the fit's uncertainty of that ratio (one point's scatter
included, Student's t on the fit's degrees of freedom) and what the calibration's own held-out steps missed by
(FormChoice.half_width, 95% of them); where the calibration could not tell several forms apart, the prediction is
the middle of theirs (geometric) and the interval spans them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specmeter.analysis.student import t_quantile
from specmeter.predict.acceptance import AcceptanceProfile, ALEstimate
from specmeter.predict.calibration import refit
from specmeter.predict.observations import Mix, prefill_per_step
from specmeter.predict.stepcost import Fit
from specmeter.schemas.analysis import Speedup
from specmeter.schemas.planner import Calibration, Cell, Check, Observation

CONFIDENCE = 0.95
NEAR = 1.25  # a measured point speaks for a grid batch within this factor of its own


@dataclass(frozen=True)
class Estimate:
    """One prediction of an SD configuration against the baseline, at given batches for each side."""

    tpot_s: float
    throughput: float
    speedup: float
    low: float | None
    high: float | None


class Predictor:
    """Predicts from one fit (and the fits of the forms tied with its own), the run's request mix and the
    drafters' acceptance profiles. `floor`: the log half-width an interval holds at least (the held-out error)."""

    def __init__(self, model: Fit, mix: Mix, tied: Sequence[Fit] = (), floor: float | None = None) -> None:
        self.model = model
        self.mix = mix
        self.tied = tuple(tied)
        self.floor = floor
        self.t = t_quantile(CONFIDENCE, model.dof) if model.dof > 0 else None

    @classmethod
    def calibrated(cls, calibration: Calibration, mix: Mix) -> Predictor:
        """The predictor a calibration makes: its chosen form's fit, the tied forms' and its held-out error."""
        model, tied = refit(calibration)
        return cls(model, mix, tied, calibration.choice.half_width if calibration.choice else None)

    def _x(self, model: Fit, drafter: str | None, k: float, batch: float, tokens: float) -> np.ndarray | None:
        ctx = self.mix.prompt_tokens + self.mix.output_tokens / 2
        return model.determined(model.features(drafter, k, batch, batch * ctx,
                                               prefill_per_step(batch, tokens, self.mix.prompt_tokens,
                                                                self.mix.output_tokens)))

    def baseline_tpot(self, batch: float) -> float | None:
        x = self._x(self.model, None, 0.0, batch, 1.0)
        step = self.model.step(x) if x is not None else 0.0
        return step if step > 0 else None

    def _steps(self, model: Fit, drafter: str, k: int, al: float, batch: float,
               base_batch: float) -> tuple[float, float, float | None] | str:
        """(step with speculation off, step of the drafter at K, the standard error of their log ratio) from one
        fit; a string says why it has none."""
        x_sd = self._x(model, drafter, float(k), batch, al)
        x_off = self._x(model, None, 0.0, base_batch, 1.0)
        for x, what in ((x_sd, "this K and batch"), (x_off, "the baseline at this batch")):
            if x is None:
                return (f"the calibration cannot separate the terms {what} needs (measure more Ks or loads of "
                        "this engine)")
        assert x_sd is not None and x_off is not None
        step_sd, step_off = model.step(x_sd), model.step(x_off)
        if step_sd <= 0 or step_off <= 0:
            return "the fitted step time is not positive here: outside what the calibration can say"
        return step_off, step_sd, model.ratio_se(x_off, x_sd)

    def estimate(self, drafter: str, k: int, al: ALEstimate, batch: float,
                 base_batch: float | None = None) -> Estimate | str:
        """The drafter at K and `batch` against the baseline at `base_batch` (default: the same batch), from the
        chosen form and the tied ones that can say it; a string says why none can."""
        if drafter not in self.model.drafters:
            return "its drafter is not in the calibration (no measured point of it was used)"
        said = [self._steps(m, drafter, k, al.al, batch, base_batch or batch) for m in (self.model, *self.tied)]
        steps = [s for s in said if not isinstance(s, str)]
        if not steps:
            return str(said[0])
        ratios = [off / sd for off, sd, _ in steps]
        least, most = min(ratios), max(ratios)
        ratio = math.sqrt(least * most)  # the middle of the forms the calibration could not tell apart
        se = steps[0][2]
        halves = [h for h in (self.t * se if se is not None and self.t is not None else None, self.floor)
                  if h is not None]
        low = high = None
        if halves:
            half = max(halves)
            down = math.log(al.al / al.low) if al.low > 0 else math.inf
            up = math.log(al.high / al.al)
            low = al.al * least * math.exp(-math.hypot(half, down))
            high = al.al * most * math.exp(math.hypot(half, up))
        step = steps[0][0] / ratio
        return Estimate(tpot_s=step / al.al, throughput=batch * al.al / step, speedup=al.al * ratio, low=low,
                        high=high)


def grid(predictor: Predictor, drafter: str, profile: AcceptanceProfile, ks: Sequence[int],
         batches: Sequence[int], category: str | None = None) -> list[Cell]:
    """Every (K, batch) cell of one drafter."""
    cells: list[Cell] = []
    for k in ks:
        al = profile.al(k)
        for b in batches:
            est = predictor.estimate(drafter, k, al, float(b))
            cell = Cell(drafter=drafter, k=k, batch=b, category=category, al=al.al, al_low=al.low, al_high=al.high,
                        extrapolated_positions=al.extrapolated, tpot_s=None, throughput=None, speedup=None)
            if isinstance(est, str):
                cell.why_none = est
            else:
                cell.tpot_s, cell.throughput, cell.speedup = est.tpot_s, est.throughput, est.speedup
                cell.speedup_low, cell.speedup_high = est.low, est.high
            cells.append(cell)
    return cells


@dataclass(frozen=True)
class MeasuredPoint:
    """A configuration's measured point as checks and cells read it: batches of both sides, the speedup."""

    config_id: str
    point_id: str
    drafter: str
    k: int
    batch: float
    base_batch: float
    kv_tokens: float
    base_kv_tokens: float
    in_calibration: bool
    speedup: Speedup


def measured_points(observations: Sequence[Observation], speedups: Sequence[Speedup],
                    ks: dict[str, int]) -> list[MeasuredPoint]:
    """Per SD configuration and point: the mean batch of its repeats and of the baseline's there, with the
    paired speedup analysis measured."""
    out: list[MeasuredPoint] = []
    for s in speedups:
        mine = [o for o in observations if o.config_id == s.config_id and o.point_id == s.point_id]
        base = [o for o in observations if o.config_id == s.baseline_id and o.point_id == s.point_id]
        if not mine or not base or s.tpot.value is None or mine[0].drafter is None:
            continue
        out.append(MeasuredPoint(
            config_id=s.config_id, point_id=s.point_id, drafter=mine[0].drafter, k=ks[s.config_id],
            batch=float(np.mean([o.batch for o in mine])), base_batch=float(np.mean([o.batch for o in base])),
            kv_tokens=float(np.mean([o.kv_tokens for o in mine])),
            base_kv_tokens=float(np.mean([o.kv_tokens for o in base])),
            in_calibration=all(o.used for o in mine), speedup=s))
    return out


def checks(predictor: Predictor, points: Sequence[MeasuredPoint], profiles: Mapping[str, AcceptanceProfile],
           set_acceptance: Mapping[str, AcceptanceProfile] | None = None) -> list[Check]:
    """Each measured point against the prediction at its own batches (a left-out configuration: blind), at its
    drafter's profile, or, for a configuration in `set_acceptance` (by id: synthetic acceptance), at the rates it
    was set to."""
    given = set_acceptance or {}
    out: list[Check] = []
    for m in points:
        profile = given.get(m.config_id) or profiles.get(m.drafter)
        est: Estimate | str = "no acceptance profile for its drafter"
        if profile is not None:
            est = predictor.estimate(m.drafter, m.k, profile.al(m.k), m.batch, m.base_batch)
        measured = m.speedup.tpot
        assert measured.value is not None
        predicted = None if isinstance(est, str) else est
        covered = None
        if predicted is not None and predicted.low is not None and predicted.high is not None:
            covered = predicted.low <= measured.value <= predicted.high
        out.append(Check(config_id=m.config_id, point_id=m.point_id, batch=m.batch, k=m.k,
                         in_calibration=m.in_calibration, measured_tpot_speedup=measured.value,
                         measured_low=measured.ci95_low, measured_high=measured.ci95_high,
                         predicted=predicted.speedup if predicted else None,
                         predicted_low=predicted.low if predicted else None,
                         predicted_high=predicted.high if predicted else None,
                         error=(predicted.speedup - measured.value) / measured.value if predicted else None,
                         covered=covered, why=est if isinstance(est, str) else None))
    return out


def mark_measured(cells: list[Cell], points: Sequence[MeasuredPoint]) -> list[Cell]:
    """Cells with a measured point of the same drafter and K within a factor NEAR of their batch."""
    out = []
    for cell in cells:
        near = [m for m in points if m.drafter == cell.drafter and m.k == cell.k
                and max(cell.batch / m.batch, m.batch / cell.batch) <= NEAR]
        if near:
            best = min(near, key=lambda m: abs(math.log(cell.batch / m.batch)))
            cell = cell.model_copy(update={"measured": True, "measured_speedup": best.speedup.tpot.value,
                                           "measured_point": f"{best.config_id}/{best.point_id}"})
        out.append(cell)
    return out
