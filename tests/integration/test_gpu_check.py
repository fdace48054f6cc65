"""benchmarks/gpu/check.sh's CPU twin: the GPU check's identical steps (a random-weight pair made with PyTorch and
converted by specmeter's converter, a llama-server sweep with every server interleaved, the findings) on the CPU
build with a tiny pair, so that the run on a GPU box never fails on a typo."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("llama_server")]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu-check")
    env = {**os.environ, "SPECMETER_GPU_WORK": str(tmp_path_factory.mktemp("gpu-work"))}
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu" / "check.sh"), "--cpu", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    (found,) = out.glob("results-*-cpu")
    assert "## 5. The planner, blind at K = 4" in done.stdout  # the summary, printed as written
    return found


@pytest.fixture(scope="module")
def doc(results: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((results / "summary.json").read_text())
    return loaded


def test_the_results_hold_the_summary_the_figures_and_the_sweep(results: Path, doc: dict[str, Any]) -> None:
    for name in ("summary.md", "sweep.yaml", "run-summary.json", "figures/planner-blind.png"):
        assert (results / name).is_file(), name
    assert list((results / "figures").glob("*speedup*.png"))
    assert doc["setup"]["device"].startswith("CPU") and doc["setup"]["status"] == "complete"
    assert (results / "summary.md").read_text().startswith(f"# GPU check: {doc['setup']['device']}")


def test_without_a_gpu_nothing_is_offloaded_and_the_report_says_so(doc: dict[str, Any]) -> None:
    off = doc["findings"]["offload"]
    assert off["ok"] is None and len(off["rows"]) == 5
    assert all(r["devices"] == [] and r["target"] is None for r in off["rows"])


def test_every_server_reports_the_same_kv_capacity(doc: dict[str, Any]) -> None:
    cap = doc["findings"]["capacity"]
    assert cap["mode"] == "cpu" and cap["equal"] and cap["gaps"] == []
    assert len({r["kv_tokens"] for r in cap["rows"]}) == 1 and cap["rows"][0]["kv_tokens"] > 0


def test_synthetic_acceptance_comes_back_as_set(doc: dict[str, Any]) -> None:
    rows = doc["findings"]["synthetic"]["rows"]
    assert len(rows) == 4 * 3  # four synthetic configurations at three loads
    for r in rows:
        assert r["steps"] > 0
        if r["config"].endswith("-ceiling"):  # a ceiling accepts everything it drafts
            assert r["measured_al"] == pytest.approx(r["expected_al"]) and r["within"]
        else:  # 4.5 standard errors, not the report's 99% verdict: this test must not fail one run in a hundred
            assert r["max_abs_z"] < 4.5, r


def test_the_speedup_curve_covers_every_load_with_a_crossover_verdict(doc: dict[str, Any]) -> None:
    sp = doc["findings"]["speedup"]
    assert len(sp["curves"]) == 4
    for cid, rows in sp["curves"].items():
        assert [r["concurrency"] for r in rows] == [1, 2, 8], cid
        assert all(r["throughput"] > 0 for r in rows)
        assert sp["crossovers"][cid]["status"] in ("crosses", "always_pays", "never_pays", "unclear")


def test_the_planner_predicts_k4_blind_at_every_load_or_says_why(results: Path, doc: dict[str, Any]) -> None:
    pl = doc["findings"]["planner"]
    assert pl["left_out_k"] == 4
    assert sorted(pl["calibrated_on"]) == ["draft_model-k2-ceiling", "draft_model-k2-synth-al2.3"]
    assert sorted((r["config"], r["concurrency"]) for r in pl["rows"]) == sorted(
        (c, n) for c in ("draft_model-k4-ceiling", "draft_model-k4-synth-al3") for n in (1, 2, 8))
    summary = (results / "summary.md").read_text()
    for r in pl["rows"]:
        if r["predicted"] is None:  # the tiny pair's sub-millisecond steps on a loaded CPU can defeat the fit
            assert r["why"] and f"No prediction for {r['config']} at concurrency {r['concurrency']}: " in summary
        else:
            assert r["why"] is None and r["error"] == pytest.approx((r["predicted"] - r["measured"]) / r["measured"])
    assert (pl["median_abs_error"] is None) == all(r["predicted"] is None for r in pl["rows"])
    assert pl["in_sample"]["residuals_by_tokens"]
    # The drafting charged per speculative step instead of per pass: a second blind prediction, said in the summary;
    # K = 2 and 4 together split the drafting's cost in the fit of every point.
    step = pl["term"]["step"]
    assert step["residual_sd"] >= 0 and "Charged per speculative step instead of per draft pass" in summary
    split = pl["in_sample"]["drafting"]
    assert split is not None and split["split_residual_sd"] <= split["residual_sd"] + 1e-9


def test_a_second_call_on_the_same_folder_goes_on_from_the_finished_run(results: Path) -> None:
    """A GPU box's time limit per command can stop the check part way: the same --out continues (here, a finished
    run: its results are written again, nothing measured twice)."""
    out = results.parent
    before = (results / "summary.json").stat().st_mtime_ns
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu" / "check.sh"), "--cpu", "--out", str(out)],
                          env={**os.environ, "SPECMETER_GPU_WORK": str(out.parent / "unused-work")},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (results / "summary.json").stat().st_mtime_ns > before
    state = json.loads((out / "check.json").read_text())
    assert state["profile"] == "cpu" and len(state["sweep_s"]) == 1  # the one sweep; no pair made, none resumed
    assert not (out.parent / "unused-work").exists() or not list((out.parent / "unused-work").glob("pair-*"))
