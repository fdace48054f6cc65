"""`specmeter plan` (one run, or several pooled) on a stored demo run: one JSON document, every measured point
checked, a left-out configuration predicted blind, the table's unmeasured ranges predicted, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from in_process import specmeter

from specmeter.rundir.store import load_summary
from specmeter.schemas.planner import Calibration, PlanResult

STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    return Path(shutil.copytree(STORED, tmp_path / "demo"))


def plan(*args: str | Path) -> PlanResult:
    res = specmeter("plan", *args, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    return PlanResult.model_validate(json.loads(res.stdout))


def test_plan_predicts_every_cell_and_checks_every_measured_point(stored: Path) -> None:
    result = plan(stored, "--k", "1,2,4,8", "--batch", "1,4,16,64")
    assert {(c.k, c.batch) for c in result.cells} == {(k, b) for k in (1, 2, 4, 8) for b in (1, 4, 16, 64)}
    for cell in result.cells:
        assert cell.speedup is not None and cell.speedup > 0
        if cell.speedup_low is not None and cell.speedup_high is not None:
            assert cell.speedup_low <= cell.speedup <= cell.speedup_high
    # K 8 lies past the measured positions (the run drafted 4): extrapolated, and said so.
    assert all(c.extrapolated_positions == 4 for c in result.cells if c.k == 8)
    assert any(c.measured for c in result.cells if c.k in (2, 4))
    assert not any(c.measured for c in result.cells if c.k in (1, 8))
    speedups = [(s.config_id, s.point_id) for s in load_summary(stored).analysis.speedups if s.tpot.value]
    assert sorted((c.config_id, c.point_id) for c in result.checks) == sorted(speedups)
    assert all(c.in_calibration for c in result.checks)
    # The table beyond the largest measured batch comes from the model, labelled predicted.
    (table,) = result.tables
    assert table.segments[-1].basis == "predicted"
    assert "unmeasured" not in {s.basis for s in table.segments}
    assert table.ranges[-1].end == table.segments[-1].end


def test_a_left_out_configuration_is_predicted_blind(stored: Path) -> None:
    result = plan(stored, "--exclude", "draft_model-k4")
    assert result.calibration.excluded == ["draft_model-k4"]
    assert all(not o.used for o in result.calibration.observations if o.config_id == "draft_model-k4")
    blind = [c for c in result.checks if not c.in_calibration]
    assert {c.config_id for c in blind} == {"draft_model-k4"} and blind
    assert all(c.predicted is not None and c.error is not None for c in blind)
    # Its acceptance came from K = 2 alone: positions 3 and 4 were extrapolated.
    assert all(c.extrapolated_positions == 2 for c in result.cells if c.k == 4)


def test_plan_pools_runs_for_the_fit_and_reads_the_file_again(stored: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(stored, tmp_path / "again"))
    pooled = plan(stored, other, "--k", "2", "--batch", "1")
    cal = Calibration.model_validate_json((stored / "calibration.json").read_text(encoding="utf-8"))
    assert pooled.calibration == cal and len(cal.runs) == 2 and all(c >= 0 for c in cal.coefficients)
    assert all(o.residual is not None for o in cal.observations)
    assert plan(stored, "--calibration", stored / "calibration.json").calibration == cal
    res = specmeter("plan", stored, other, "--calibration", stored / "calibration.json")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--calibration" in res.stderr


def test_the_old_calibrate_still_writes_the_pooled_fit_with_a_note(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    res = specmeter("calibrate", stored, stored, "--out", out, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    cal = Calibration.model_validate(json.loads(res.stdout))
    assert cal == Calibration.model_validate_json(out.read_text(encoding="utf-8")) and len(cal.runs) == 2
    assert res.stderr.splitlines()[0] == "note: 'specmeter calibrate RUN...' is now 'specmeter plan RUN...'"


def test_console_output_says_predicted(stored: Path) -> None:
    res = specmeter("plan", stored)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "predicted by a step-cost model" in res.stdout


def test_given_acceptance_replaces_the_runs(stored: Path) -> None:
    result = plan(stored, "--acceptance", "0.9", "--k", "2", "--batch", "1")
    (cell,) = result.cells
    assert cell.al == pytest.approx(1 + 0.9 + 0.81)
    assert "iid" in next(iter(result.acceptance.values()))


@pytest.mark.parametrize(("args", "says"), [
    (["--exclude", "nope"], "--exclude nope"),
    (["--acceptance", "1.5"], "--acceptance"),
    (["--acceptance", "fast"], "--acceptance"),
    (["--k", "0"], "positive"),
])
def test_bad_input_is_one_line_naming_the_flag(stored: Path, args: list[str], says: str) -> None:
    res = specmeter("plan", stored, *args)
    assert res.returncode != 0
    assert says in res.stderr
    assert "Traceback" not in res.stderr


def test_runs_of_different_hardware_do_not_pool(stored: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(stored, tmp_path / "other"))
    summary = json.loads((other / "summary.json").read_text(encoding="utf-8"))
    summary["environment"]["cpu"] = "another CPU"
    (other / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    res = specmeter("plan", stored, other)
    assert res.returncode != 0 and "hardware" in res.stderr
