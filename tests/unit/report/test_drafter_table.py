"""The drafters side by side (report/drafters.py) on the saved demo run: acceptance per position and per category
of every drafter and K, the drafting cost per step the sweep's step-cost model fitted, and the KV cache each
server held against the baseline's; with the run's calibration.json read back as the reports read it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.server import FakeEngine
from specmeter.predict.calibration import calibrate
from specmeter.predict.observations import drafter_key
from specmeter.report.drafters import drafter_table
from specmeter.report.grid import Grid
from specmeter.report.tables import category_tables, summary_tables
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import CALIBRATION
from specmeter.schemas.planner import Calibration
from specmeter.schemas.results import RunSummary

FIXTURE = Path(__file__).parents[2] / "fixtures/runs/20261123-180233-demo"


@pytest.fixture(scope="module")
def summary() -> RunSummary:
    return load_run(FIXTURE).summary


@pytest.fixture(scope="module")
def cal(summary: RunSummary) -> Calibration:
    return calibrate([(str(FIXTURE), summary)])


def column(t: Grid, name: str) -> list[str]:
    i = next(i for i, c in enumerate(t.columns) if c.name == name)
    return [row[i] for row in t.rows]


def cost_columns(t: Grid) -> list[str]:
    return [c.name for c in t.columns if c.name.startswith("draft ms B=")]


def test_one_row_per_drafter_and_k_with_its_acceptance_per_position(summary: RunSummary, cal: Calibration) -> None:
    t = drafter_table(summary, cal)
    assert t is not None
    speculative = [c for c in summary.plan.configs if c.spec.enabled]
    assert column(t, "configuration") == [c.id for c in sorted(speculative,
                                                              key=lambda c: c.spec.num_speculative_tokens or 0)]
    for cfg, rates, al in zip(speculative, column(t, "per-position a_i"), column(t, "AL")):
        res = summary.config(cfg.id)
        assert res is not None
        # One rate per drafted position, never rising (a_i counts steps that accepted at least i tokens).
        values = [float(v) for v in rates.split()]
        assert len(values) == cfg.spec.num_speculative_tokens and values == sorted(values, reverse=True)
        # Pooled over every point: between the points' own ALs.
        point_als = [pr.sd.headline.acceptance_length for pr in res.points if pr.sd.headline is not None]
        assert min(a for a in point_als if a is not None) - 0.005 <= float(al) <= max(
            a for a in point_als if a is not None) + 0.005


def test_the_categories_spread_from_lowest_to_highest(summary: RunSummary, cal: Calibration) -> None:
    t = drafter_table(summary, cal)
    assert t is not None
    for cell in column(t, "category AL (low .. high)"):
        low, high = cell.split(" .. ")
        assert float(low.split()[0]) <= float(high.split()[0])
    assert [g.title for g in category_tables(summary)] == [
        f"Acceptance per category ({c.config_id}, concurrency 1, per-request stats)" for c in summary.configs
        if any(pr.categories is not None for pr in c.points)]


def test_the_drafting_cost_is_the_fitted_drafters_terms_at_the_k_it_drafted(summary: RunSummary,
                                                                           cal: Calibration) -> None:
    t = drafter_table(summary, cal)
    assert t is not None
    low_col, high_col = cost_columns(t)
    cost = cal.drafter(drafter_key(summary.plan.configs[1].spec))
    assert cost is not None and cost.per_draft_s + cost.per_draft_token_s > 0
    ks, lows, highs = (column(t, n) for n in ("drafted/step", low_col, high_col))
    # The same drafter's coefficients: what it costs grows with what it drafts and with the batch.
    assert float(ks[0]) < float(ks[1]) and float(lows[0]) < float(lows[1])
    assert all(float(h) >= float(lo) for lo, h in zip(lows, highs))
    assert "the baseline's measured step" in t.title


def test_without_a_calibration_the_cost_columns_are_gone(summary: RunSummary) -> None:
    t = drafter_table(summary, None)
    assert t is not None and not cost_columns(t) and "drafted/step" not in [c.name for c in t.columns]
    assert "no calibration.json" in t.title


def test_the_kv_cache_each_server_held_against_the_baseline(summary: RunSummary, cal: Calibration) -> None:
    held = summary.model_copy(deep=True)
    tokens = {"baseline": 40_000, "draft_model-k2": 36_000, "draft_model-k4": 36_000}
    for res in held.configs:
        res.kv_capacity_tokens = tokens[res.config_id]
    t = drafter_table(held, cal)
    assert t is not None and column(t, "KV tokens (vs baseline)") == ["36,000 (-10%)", "36,000 (-10%)"]


def test_the_reports_read_the_runs_calibration(tmp_path: Path, cal: Calibration) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    assert load_run(run_dir).calibration is None
    (run_dir / CALIBRATION).write_text(cal.model_dump_json(), encoding="utf-8")
    run = load_run(run_dir)
    assert run.calibration == cal
    drafters = next(g for g in summary_tables(run.summary, run.calibration) if g.title.startswith("Drafters"))
    assert cost_columns(drafters)
    res = subprocess.run([sys.executable, "-m", "specmeter", "report", str(run_dir), "--json"], capture_output=True,
                         text=True, check=True)
    doc = json.loads(res.stdout)
    assert next(iter(doc)) == "answer" and Calibration.model_validate(doc["calibration"]) == cal
    # A calibration of another schema is not this run's: the reports go on without it.
    (run_dir / CALIBRATION).write_text('{"schema_version": 0}', encoding="utf-8")
    assert load_run(run_dir).calibration is None


def test_a_plain_sweep_shows_its_drafters_once_its_step_cost_model_is_fitted(fake_engine: FakeEngine,
                                                                              fake_baseline: FakeEngine,
                                                                              tmp_path: Path) -> None:
    """The sweep's own console (no --verify) comes after its calibration, so the drafters carry their cost."""
    url = fake_engine.url
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(json.dumps({
        "workload": {"dataset": "sample", "num_prompts": 3}, "engine": {"endpoint": url},
        "baseline_endpoint": fake_baseline.url,
        "candidates": [{"method": "ngram", "num_speculative_tokens": 3, "endpoint": url},
                       {"method": "draft_model", "model": "models/demo-draft", "num_speculative_tokens": 3,
                        "endpoint": url}],
        "load": {"concurrency": [1, 2], "max_tokens": 8, "warmup": 0}}), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "specmeter", "sweep", str(sweep_file), "--out", str(tmp_path),
                          "--name", "sweep"], capture_output=True, text=True, check=True,
                         env={**os.environ, "COLUMNS": "250"})
    out = " ".join(res.stdout.split())
    assert (tmp_path / "sweep" / CALIBRATION).exists()
    assert "Drafters side by side" in out and "drafting ms per step fitted by the step-cost model" in out
