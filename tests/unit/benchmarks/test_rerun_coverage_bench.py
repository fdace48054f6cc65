"""benchmarks/rerun_coverage.py: the coverage of each run's intervals over the other runs' estimates, read from run
directories (the saved real demo run, and a copy whose speedups moved)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest
from bench_script import load

from specmeter.rundir.store import load_summary

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "tests/fixtures/runs/20261123-180233-demo"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("rerun_coverage")


def test_coverage_counts_the_other_runs_estimates_inside_each_interval(bench: ModuleType, tmp_path: Path) -> None:
    same, moved = tmp_path / "a", tmp_path / "b"
    shutil.copytree(RUN, same)
    shutil.copytree(RUN, moved)
    summary = load_summary(moved)
    for s in summary.analysis.speedups:  # another run, far off: outside every interval of the first
        r = s.output_throughput
        r.value, r.ci95_low, r.ci95_high = (r.value or 1.0) * 2, (r.ci95_low or 1.0) * 2, (r.ci95_high or 1.0) * 2
    runs = [bench.Run("a", load_summary(same), bench.tta.read_finished(same, 1)),
            bench.Run("b", summary, bench.tta.read_finished(moved, 2))]
    cov = bench.coverage(runs)
    assert cov["share"]["ci95"] == 0.0 and cov["counted"]["ci95"] == 2 * len(summary.analysis.speedups)
    same_twice = bench.coverage([runs[0], bench.Run("c", load_summary(same), runs[0].timing)])
    assert same_twice["share"]["ci95"] == 1.0
    text = bench.report(runs, [])
    assert "coverage of the other runs' estimates" in text and "final tables" in text
