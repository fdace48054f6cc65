"""The planner's check of a configuration whose acceptance was set (synthetic acceptance): predicted at the rates
the engine was set to, never at its drafter's measured acceptance, blind or not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.config.synthetic import SyntheticAcceptance, min_variance_rates
from specmeter.predict.calibration import calibrate
from specmeter.predict.observations import drafter_key, request_mix
from specmeter.predict.predict import Estimate, Predictor, checks, measured_points
from specmeter.predict.profiles import drafter_profiles, set_profiles
from specmeter.rundir.store import load_summary
from specmeter.schemas.planner import PlanResult
from specmeter.schemas.results import RunSummary

STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
SET = "draft_model-k4"


def with_set_acceptance(synth: SyntheticAcceptance) -> RunSummary:
    """The stored vLLM demo run as if its K = 4 configuration had run with `synth` (its measurements unchanged)."""
    summary = load_summary(STORED)
    configs = [c.model_copy(update={"spec": c.spec.model_copy(update={"synthetic_acceptance": synth})})
               if c.id == SET else c for c in summary.plan.configs]
    return summary.model_copy(update={"plan": summary.plan.model_copy(update={"configs": configs})})


@pytest.mark.parametrize(("synth", "rates"), [
    (SyntheticAcceptance(rates=[0.9, 0.7, 0.5, 0.3]), [0.9, 0.7, 0.5, 0.3]),
    # A length is turned into rates by the engine's own schedule: vLLM's is the minimum-variance one.
    (SyntheticAcceptance(length=3.5), min_variance_rates(3.5, 4)),
])
def test_a_set_configuration_gets_the_rates_its_engine_was_set_to(synth: SyntheticAcceptance,
                                                                 rates: list[float]) -> None:
    profiles = set_profiles(with_set_acceptance(synth))
    assert list(profiles) == [SET]  # the others verified their drafts: nothing set
    assert list(profiles[SET].per_position) == rates
    assert profiles[SET].al(4).al == pytest.approx(1 + sum(rates))
    assert profiles[SET].al(4).low == profiles[SET].al(4).high  # given, not sampled


def test_its_points_are_checked_at_the_set_rates_even_left_out() -> None:
    summary = with_set_acceptance(SyntheticAcceptance(rates=[0.95, 0.9, 0.85, 0.8]))
    cal = calibrate([(str(STORED), summary)], exclude=[SET])
    mix = request_mix(summary)
    assert mix is not None
    predictor = Predictor.calibrated(cal, mix)
    measured = measured_points(cal.observations, summary.analysis.speedups, {c.id: c.k for c in summary.plan.configs})
    drafter = drafter_profiles(summary, "demo", [SET])
    given = set_profiles(summary)
    found = checks(predictor, measured, drafter, given)
    blind = [c for c in found if c.config_id == SET]
    assert blind and not any(c.in_calibration for c in blind)
    for check in blind:
        m = next(p for p in measured if p.config_id == SET and p.point_id == check.point_id)
        expected = predictor.estimate(m.drafter, 4, given[SET].al(4), m.batch, m.base_batch)
        assert isinstance(expected, Estimate) and check.predicted == pytest.approx(expected.speedup)
    # Without the set rates the same point reads the drafter's own (far lower) acceptance instead.
    key = drafter_key(summary.plan.configs[-1].spec)
    assert drafter[key].al(4).al < given[SET].al(4).al
    unset = {c.point_id: c.predicted for c in checks(predictor, measured, drafter) if c.config_id == SET}
    assert all(unset[c.point_id] is not None and unset[c.point_id] < c.predicted  # type: ignore[operator]
               for c in blind)
    # The configurations that verified their drafts are checked as before.
    others = [c for c in found if c.config_id != SET]
    assert others == [c for c in checks(predictor, measured, drafter) if c.config_id != SET]


def test_plan_on_a_sweep_of_set_acceptance_alone_checks_it_blind_and_fills_no_table(tmp_path: Path) -> None:
    """A sweep whose every speculative configuration set its acceptance (a cost measurement): `plan --exclude`
    predicts the left-out K at its set rates; there is nothing to recommend, so no table, and it says why."""
    run = Path(shutil.copytree(STORED, tmp_path / "run"))
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    for config in summary["plan"]["configs"]:
        k = config["spec"].get("num_speculative_tokens")
        if k:
            config["spec"]["synthetic_acceptance"] = {"rates": [0.8, 0.6, 0.45, 0.34][:k]}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "specmeter", "plan", str(run), "--exclude", SET, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = PlanResult.model_validate_json(done.stdout)
    blind = [c for c in result.checks if not c.in_calibration]
    assert {c.config_id for c in blind} == {SET}
    assert all(c.predicted is not None and c.error is not None for c in blind)
    assert result.tables == [] and any("synthetic" in note for note in result.notes)
