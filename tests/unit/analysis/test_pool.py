"""Runs of one plan pooled into one verdict (analysis/pool.py, `specmeter compare --pool`): each run is one
observation of the deployment, the pooled interval holds every run's estimate, the verdicts' agreement is said, and
one answer table says per range whether every run chose its K."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from test_recommend import sweep

from specmeter.analysis.pool import Estimate, check_same_plan, pool, pooled_cells, random_effects
from specmeter.common.errors import InputError
from specmeter.schemas.pool import Pooled
from specmeter.schemas.results import RunSummary

GPU = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu"
H100 = sorted(GPU.glob("results-*-h100-*"))
K2, K4 = "draft_model-k2", "draft_model-k4"


def _runs(*tables: dict[str, dict[str, tuple[float, float, float]]]) -> list[tuple[str, RunSummary]]:
    """One run per table: speedups[config][point] = (value, low, high) over its own baseline."""
    return [(f"run{i}", sweep({c: dict(per) for c, per in table.items()}, {"c1": 1.0, "c4": 3.9})[0])
            for i, table in enumerate(tables, 1)]


def test_the_pooled_interval_holds_every_run_and_one_run_alone_gives_none() -> None:
    runs = [Estimate(1.30, 0.01), Estimate(1.45, 0.01), Estimate(1.38, 0.01)]  # apart beyond their own intervals
    value, low, high = random_effects(runs)
    assert low is not None and high is not None
    assert all(low <= e.value <= high for e in runs) and low < value < high
    assert high - low > 1.45 - 1.30  # wider than the runs' spread: the between-run variance is in it
    assert random_effects([Estimate(1.3, 0.01)]) == (1.3, None, None)
    blind = random_effects([Estimate(1.2, None), Estimate(1.25, None), Estimate(1.3, None)])  # errors unknown
    assert blind[1] is not None and blind[1] < 1.2 and blind[2] is not None and blind[2] > 1.3
    agree = random_effects([Estimate(1.30, 0.02), Estimate(1.31, 0.02), Estimate(1.30, 0.02)])
    assert agree[1] is not None and agree[2] is not None
    assert math.log(agree[2] / agree[1]) >= 2 * 1.96 * 0.02 / math.sqrt(3)  # never narrower than the runs' own


def test_cells_say_whether_the_runs_agree_and_the_pooled_verdict() -> None:
    runs = _runs({K2: {"c1": (1.30, 1.28, 1.32), "c4": (1.02, 0.98, 1.06)}},
                 {K2: {"c1": (1.40, 1.38, 1.42), "c4": (0.94, 0.92, 0.96)}},
                 {K2: {"c1": (1.35, 1.33, 1.37), "c4": (1.05, 1.03, 1.07)}})
    cells = {c.point_id: c for c in pooled_cells(runs)}
    c1, c4 = cells["c1"], cells["c4"]
    assert c1.verdict == "pays" and c1.verdicts_agree and c1.intervals_overlap is False
    assert not c4.verdicts_agree and c4.verdict == "unclear"  # slows in one run, pays in another: no clean call
    for cell in (c1, c4):
        low, high = cell.pooled.ci95_low, cell.pooled.ci95_high
        assert low is not None and high is not None
        assert all(low <= (r.value or 0.0) <= high for r in cell.runs)


def test_a_run_disturbed_at_a_cell_is_left_out_where_others_measured_it_clean() -> None:
    runs = _runs({K2: {"c1": (1.30, 1.28, 1.32)}}, {K2: {"c1": (0.70, 0.68, 0.72)}}, {K2: {"c1": (1.32, 1.30, 1.34)}})
    (s,) = [s for s in runs[1][1].analysis.speedups if s.point_id == "c1"]
    s.output_throughput.disturbed, s.verdict = True, "disturbed"
    (cell,) = [c for c in pooled_cells(runs) if c.point_id == "c1"]
    assert cell.left_out == ["run2"] and cell.verdict == "pays"
    assert (cell.pooled.ci95_low or 0.0) > 0.72  # the disturbed run's 0.70 is not in it


def test_runs_of_different_plans_do_not_pool() -> None:
    a, b = _runs({K2: {"c1": (1.3, 1.2, 1.4)}}, {K4: {"c1": (1.3, 1.2, 1.4)}})
    with pytest.raises(InputError, match="different configurations") as err:
        check_same_plan([a, b])
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="two runs"):
        check_same_plan([a])


def test_one_table_from_the_runs_and_each_range_says_whether_it_held() -> None:
    """K = 4 wins clearly at batch 1 in two runs; the third run's sweep kept K = 2 there. At 4, K = 2 in all."""
    clear = {K2: {"c1": (1.30, 1.28, 1.32), "c4": (1.25, 1.23, 1.27)},
             K4: {"c1": (1.60, 1.58, 1.62), "c4": (1.05, 1.03, 1.07)}}
    close = {K2: {"c1": (1.50, 1.40, 1.60), "c4": (1.24, 1.22, 1.26)},
             K4: {"c1": (1.52, 1.42, 1.62), "c4": (1.06, 1.04, 1.08)}}
    runs = _runs(clear, clear, close)
    assert [c.best_k for c in runs[2][1].analysis.choices if c.point_id == "c1"] == [2]
    pooled = pool(runs)
    assert pooled.recommendation is not None and pooled.recommendation.best is not None
    ranges = pooled.recommendation.best.ranges
    assert ranges[0].start == 1 and ranges[0].k in (2, 4)
    held = {h.point_ids[0]: h for h in pooled.held}
    assert held["c1"].chosen_by == [4, 4, 2] and held["c1"].start == 1
    assert held["c1"].held.startswith(f"held in {[4, 4, 2].count(held['c1'].k)} of 3 runs")
    assert held["c4"].chosen_by == [2, 2, 2] and held["c4"].k == 2 and held["c4"].held.startswith("held in every run")


def test_the_committed_gpu_runs_pool_into_one_verdict_per_cell_covering_every_run() -> None:
    assert len(H100) >= 3
    out = subprocess.run([sys.executable, "-m", "specmeter.cli", "compare", *map(str, H100), "--pool", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    pooled = Pooled.model_validate(json.loads(out.stdout))
    assert pooled.cells and pooled.no_answer is not None  # synthetic acceptance only: measured, never recommended
    for cell in pooled.cells:
        low, high = cell.pooled.ci95_low, cell.pooled.ci95_high
        assert cell.verdict is not None and low is not None and high is not None
        assert all(low <= (r.value or 0.0) <= high for r in cell.runs), cell
    assert any(not c.intervals_overlap for c in pooled.cells)  # why pooling exists: the runs disagree


def test_pool_flags_need_pool_and_pool_refuses_check() -> None:
    for args, said in ((["--min-gain", "0.02"], "add --pool"), (["--pool", "--check"], "without --check")):
        out = subprocess.run([sys.executable, "-m", "specmeter.cli", "compare", *map(str, H100[:2]), *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr
