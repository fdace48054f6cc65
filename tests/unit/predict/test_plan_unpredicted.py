"""A measured point the step-cost model gives no prediction for carries the reason, and the planner's output
says it beside the points it concerns (never a bare "-"); a calibration names the hardware it was measured on."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.predict.calibration import calibrate, hardware_of
from specmeter.predict.observations import request_mix
from specmeter.predict.predict import Predictor, checks, measured_points
from specmeter.predict.profiles import drafter_profiles
from specmeter.report.planner import unpredicted_lines
from specmeter.rundir.store import load_summary
from specmeter.schemas.results import RunSummary

STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def test_a_point_without_a_prediction_says_why() -> None:
    summary = load_summary(STORED)
    cal = calibrate([(str(STORED), summary)])
    mix = request_mix(summary)
    assert mix is not None
    predictor = Predictor.calibrated(cal, mix)
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


def test_a_gpu_runs_calibration_names_the_gpus_its_servers_ran_on() -> None:
    """A GPU run's step cost is its GPU's, not its host CPU's: two boxes of one GPU pool into one calibration."""
    h100 = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu" / "results-20261126-nvidia-h100-80gb-hbm3"
    summary = RunSummary.model_validate_json((h100 / "run-summary.json").read_text(encoding="utf-8"))
    assert hardware_of(summary) == "NVIDIA H100 80GB HBM3 x1"
    other_host = summary.model_copy(update={"environment": {**summary.environment, "cpu": "another host CPU"}})
    assert calibrate([("a", summary), ("b", other_host)]).hardware == "NVIDIA H100 80GB HBM3 x1"
    assert summary.plan.placement is not None
    gpus = [g.model_copy(update={"name": "NVIDIA H200"}) for g in summary.plan.placement.gpus]
    other_gpu = summary.model_copy(update={"plan": summary.plan.model_copy(
        update={"placement": summary.plan.placement.model_copy(update={"gpus": gpus})})})
    with pytest.raises(InputError, match="NVIDIA H200 x1"):  # two kinds of GPU: calibrate them apart
        calibrate([("a", summary), ("b", other_gpu)])
    assert "x" in hardware_of(load_summary(STORED))  # a CPU run: its CPU, as before
