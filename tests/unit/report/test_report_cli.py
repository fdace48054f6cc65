"""`specmeter report` re-renders a saved run with no server: tables, HTML, CSV, plots and simulator profiles by flag."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from in_process import specmeter

from specmeter.report.csv_output import POINT_COLUMNS
from specmeter.report.plots import PLOTS

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specmeter.cli", "report", *args], capture_output=True, text=True,
                          timeout=300, env={"COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"})


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / FIXTURE.name))


def test_the_answer_then_where_speculation_pays_then_the_verification(run_dir: Path) -> None:
    res = _report(str(run_dir))
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    answer, pays, acceptance, verified = (out.index("The answer: "), out.index("Where speculation pays"),
                                          out.index("Speculative decoding"), out.index("Verification run"))
    assert answer < pays < acceptance < verified  # what to deploy, why, then the run that checked it
    assert "Evidence for draft_model" not in out  # the evidence, and every other table, are -v


def test_html_csv_and_plots_by_flag(run_dir: Path, tmp_path: Path) -> None:
    page, csv_dir, plot_dir = tmp_path / "r.html", tmp_path / "csv", tmp_path / "plots"
    res = _report(str(run_dir), "--html", str(page), "--csv", str(csv_dir), "--plots", str(plot_dir))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Speedup over the baseline" not in res.stdout  # files asked for: no tables
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    header = (csv_dir / "points.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",") == list(POINT_COLUMNS)
    stems = {p.stem for p in plot_dir.glob("*.png")}
    assert stems and stems <= set(PLOTS) and {"throughput", "speedup", "recommended_k", "verify"} <= stems
    assert stems == {p.stem for p in plot_dir.glob("*.svg")}
    for path in [page, *csv_dir.glob("*.csv"), *plot_dir.iterdir()]:
        assert str(path) in res.stdout


def test_profiles_by_flag_are_named_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "profiles"
    res = specmeter("report", run_dir, "--profiles", dest)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Speedup over the baseline" not in res.stdout  # files asked for: no tables
    files = [p for p in dest.rglob("*") if p.is_file()]
    assert {"aiconfigurator.yaml", "planner-profiles.json", "speculation_profile.json", "blis.args",
            "dynamo-mocker.json"} <= {p.name for p in files}
    told = [line for line in res.stdout.splitlines() if line.startswith("profiles in")]
    assert len(told) == 1 and all(p.relative_to(dest).as_posix() in told[0] for p in files)
    for simulator in ("BLIS", "AIConfigurator", "specdec_bench", "Dynamo mocker", "planner"):
        assert f"{simulator}: " in told[0]


def test_a_directory_without_a_run_is_one_line(tmp_path: Path) -> None:
    res = _report(str(tmp_path))
    assert res.returncode != 0
    assert "no summary.json here" in res.stderr and "Traceback" not in res.stderr
