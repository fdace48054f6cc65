"""benchmarks/planner_accuracy.py: a committed run scored blind, whichever file holds its summary, with the form
each calibration chose; the table over the committed runs gives each run one row."""

from __future__ import annotations

from pathlib import Path

from bench_script import load

bench = load("planner_accuracy")


def test_every_committed_run_is_read_and_a_gpu_checks_summary_beside_its_own() -> None:
    kinds = {path.name for path in bench.COMMITTED}
    assert {"summary.json", "run-summary.json"} <= kinds
    gpu = next(path for path in bench.COMMITTED if path.name == "run-summary.json")
    run_dir, summary = bench.read(gpu.parent)  # the folder holds the check's own summary.json too
    assert run_dir == gpu.parent and summary.plan.configs


def test_a_run_scored_blind_names_each_calibrations_form_and_the_table_gives_it_a_row() -> None:
    fixture = next(path for path in bench.COMMITTED if "fixtures" in path.parts)
    result = bench.score(fixture.parent)
    rows = result["rows"]
    assert rows and all(r["form"] and isinstance(r["form_chosen"], bool) for r in rows)
    assert {r["calibrated_on"] for r in rows} == {"draft_model-k2", "draft_model-k4"}
    # Never a point of a calibrated configuration: every row is blind.
    assert all(r["config"] != r["calibrated_on"] for r in rows)
    table = bench.accuracy_table([result, result])
    assert len(table) == 4 and all(Path(result["run"]).name in line for line in table[2:])
