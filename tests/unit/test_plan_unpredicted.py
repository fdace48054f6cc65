"""A measured point the step-cost model gives no prediction for carries the reason, and the planner's output
says it beside the points it concerns (never a bare "-")."""

from __future__ import annotations

from pathlib import Path

from specmeter.predict.calibration import calibrate, refit
from specmeter.predict.observations import request_mix
from specmeter.predict.predict import Predictor, checks, measured_points
from specmeter.predict.profiles import drafter_profiles
from specmeter.report.planner import unpredicted_lines
from specmeter.rundir.store import load_summary

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123-180233-demo"


def test_a_point_without_a_prediction_says_why() -> None:
    summary = load_summary(STORED)
    cal = calibrate([(str(STORED), summary)])
    mix = request_mix(summary)
    assert mix is not None
    predictor = Predictor(refit(cal), mix)
    measured = measured_points(cal.observations, summary.analysis.speedups, {c.id: c.k for c in summary.plan.configs})
    profiles = drafter_profiles(summary, "demo")
    found = checks(predictor, measured, profiles)
    assert found and all(c.predicted is not None and c.why is None for c in found)
    assert unpredicted_lines(found) == []

    missing = checks(predictor, measured, {})  # no acceptance profile for any drafter
    assert all(c.predicted is None and c.error is None and c.why == "no acceptance profile for its drafter"
               for c in missing)
    (line,) = unpredicted_lines(missing)
    assert line.endswith(": no acceptance profile for its drafter")
    assert all(f"{c.config_id}/{c.point_id}" in line for c in missing)
