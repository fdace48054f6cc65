"""The demo EAGLE-3 head (models/demo-eagle3) through the planner and the regression check, on the real engine and
attached to the session's servers (the head at K = 3 is test_eagle3's, the baseline every test's): a sweep of the
head at K = 2 and 3 at two loads calibrates the step-cost model, which then predicts the head at Ks and batches the
sweep never ran and checks every point it measured; two runs of the head at K = 3 on one workload pass the check,
and the head at K = 2 against them is reported as the acceptance drop it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from vllm_helpers import ServerPool

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.plans.run import config_id
from specmeter.predict.observations import drafter_key
from specmeter.rundir.store import load_summary
from specmeter.schemas.check import RegressionCheck
from specmeter.schemas.planner import PlanResult

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
SWEPT_KS, CONCURRENCY = (2, 3), (1, 4)
PLAN_KS, PLAN_BATCHES = (1, 2, 3, 4, 6), (1, 2, 4, 8, 16)


def head(models: Path, k: int) -> SpecConfig:
    return SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=k, draft_model=str(models / "demo-eagle3"))


def sweep(pool: ServerPool, models: Path, ks: tuple[int, ...], out: Path, name: str) -> Path:
    """The baseline and the head at `ks`, eight conversations at each load, each point once (fixed precision),
    every server one of the session's; the run directory."""
    candidates = [{**spec.model_dump(mode="json", exclude_none=True, exclude={"extra"}),
                   "endpoint": pool.get(spec).base_url} for spec in (head(models, k) for k in ks)]
    spec = {"workload": {"dataset": "sample", "num_prompts": 8},
            "engine": {"model": str(models / "demo-target")},
            "baseline_endpoint": pool.get(SpecConfig()).base_url, "candidates": candidates,
            "load": {"concurrency": list(CONCURRENCY), "max_tokens": 32, "temperature": 0, "warmup": 1,
                     "precision": "fixed"},
            "interleave": True}
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    res = subprocess.run([*SPECMETER, "sweep", str(path), "--out", str(out), "--name", name, "-q"],
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("eagle3-runs")


@pytest.fixture(scope="module")
def swept(pool: ServerPool, models: Path, runs: Path) -> Path:
    return sweep(pool, models, SWEPT_KS, runs, "swept")


@pytest.fixture(scope="module")
def at_k3(pool: ServerPool, models: Path, runs: Path) -> Path:
    return sweep(pool, models, (3,), runs, "at-k3")


@pytest.fixture(scope="module")
def again_k3(pool: ServerPool, models: Path, runs: Path, at_k3: Path) -> Path:
    return sweep(pool, models, (3,), runs, "again-k3")


@pytest.fixture(scope="module")
def at_k2(pool: ServerPool, models: Path, runs: Path) -> Path:
    return sweep(pool, models, (2,), runs, "at-k2")


def plan(*args: str) -> PlanResult:
    res = subprocess.run([*SPECMETER, "plan", *args, "--k", ",".join(map(str, PLAN_KS)), "--batch",
                          ",".join(map(str, PLAN_BATCHES)), "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return PlanResult.model_validate_json(res.stdout)


def check(run: Path, against: Path, *bounds: str) -> tuple[int, RegressionCheck]:
    res = subprocess.run([*SPECMETER, "compare", str(against), str(run), "--check", *bounds, "--json"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode in (0, 5), res.stderr[-3000:]
    return res.returncode, RegressionCheck.model_validate_json(res.stdout)


def test_plan_calibrates_on_the_head_and_predicts_it_where_nothing_ran(swept: Path, models: Path) -> None:
    result = plan(str(swept))
    key = drafter_key(head(models, 3))
    cost = result.calibration.drafter(key)
    assert cost is not None and cost.label == "eagle3 demo-eagle3"
    assert cost.per_draft_s >= 0 and cost.per_draft_token_s >= 0
    used = {o.config_id for o in result.calibration.observations if o.used}
    assert used == {"baseline", *(config_id(head(models, k)) for k in SWEPT_KS)}
    cells = {(c.k, c.batch): c for c in result.cells if c.drafter == key and c.category is None}
    assert set(cells) == {(k, b) for k in PLAN_KS for b in PLAN_BATCHES}
    for (k, batch), cell in cells.items():
        # Every cell predicted, at every K and batch (one request mix: the chance KV differences of its points do not
        # decide what the model can place): a head's drafts are what it accepts, never more than K.
        assert cell.tpot_s is not None and cell.tpot_s > 0 and cell.speedup is not None, (k, batch, cell.why_none)
        assert 1.0 <= cell.al_low <= cell.al <= cell.al_high <= k + 1
        assert cell.extrapolated_positions == max(0, k - max(SWEPT_KS))
    for batch in PLAN_BATCHES:  # one profile: more positions drafted, more accepted
        als = [cells[(k, batch)].al for k in PLAN_KS]
        assert als == sorted(als)
    # Marked measured where the sweep ran that K near that batch, and only there.
    assert {k for (k, _batch), c in cells.items() if c.measured} == set(SWEPT_KS)
    # Every point the sweep measured of the head is checked against the model at its own batch.
    summary = load_summary(swept)
    measured = {(c.config_id, p.point_id) for c in summary.configs if c.config_id != "baseline" for p in c.points}
    assert {(c.config_id, c.point_id) for c in result.checks} == measured
    assert all(c.in_calibration and c.predicted is not None for c in result.checks)


def test_a_k_left_out_is_predicted_blind_at_batch_one(swept: Path, models: Path) -> None:
    """K = 3 left out: predicted from K = 2 alone, its third position carried on from K = 2's rates. At batch 1 no
    other request prefills, so one K determines the head's cost per drafted position; at the larger load the
    prefills, which grow with AL, cannot be told from it with one K, and the check says so instead of guessing."""
    left_out = config_id(head(models, 3))
    result = plan(str(swept), "--exclude", left_out)
    assert left_out in result.calibration.excluded
    assert not any(o.used for o in result.calibration.observations if o.config_id == left_out)
    blind = {c.point_id: c for c in result.checks if c.config_id == left_out}
    assert set(blind) == {f"c{n}" for n in CONCURRENCY} and not any(c.in_calibration for c in blind.values())
    assert blind["c1"].predicted is not None and blind["c1"].error is not None
    cell = next(c for c in result.cells if c.k == 3 and c.batch == 1 and c.category is None)
    assert cell.extrapolated_positions == 1 and cell.speedup is not None


def test_two_runs_of_the_head_on_one_workload_pass_the_check(at_k3: Path, again_k3: Path, models: Path) -> None:
    """The same design twice, minutes apart. AL is held to the default 2%: at temperature 0 the same server drafts
    and accepts alike. A speedup is each run's over its own interleaved baseline, yet on a shared CI machine the
    load of other jobs moves it between runs (up to a fifth seen here between identical runs): 25% is allowed."""
    code, result = check(again_k3, at_k3, "--max-speedup-drop", "25%")
    assert code == 0 and not result.regressed, result.regressions
    points = {p.id for p in load_summary(at_k3).plan.points}
    for metric in ("acceptance_length", "speedup"):
        found = [c for c in result.checks if c.metric == metric]
        assert {c.point_id for c in found} == points and all(c.paired_requests > 0 for c in found)
        assert {c.config_id for c in found} == {config_id(head(models, 3))}
    for c in result.checks:
        if c.metric == "acceptance_length":
            assert c.outcome == "held", c
    assert not result.unmatched


def test_the_head_at_a_shorter_k_is_reported_as_the_acceptance_it_lost(at_k3: Path, at_k2: Path,
                                                                          models: Path) -> None:
    code, result = check(at_k2, at_k3)
    assert code == 5 and result.regressed
    al = [c for c in result.checks if c.metric == "acceptance_length"]
    assert len(al) == len(CONCURRENCY)
    for c in al:
        # Lined up across the runs (each run's only head): the head at K = 2 here, at K = 3 in the reference.
        assert (c.config_id, c.reference_config_id) == (config_id(head(models, 2)), config_id(head(models, 3)))
        assert c.value < c.reference and c.outcome == "regressed" and c.line() in result.regressions
    # The other way round nothing was lost in acceptance.
    _code, back = check(at_k3, at_k2)
    assert all(c.outcome != "regressed" for c in back.checks if c.metric == "acceptance_length")
