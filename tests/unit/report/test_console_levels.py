"""What the console shows at each verbosity (-q, the default, -v): the stored demo run as `specmeter report`
shows it, and a sweep with repeats built by hand."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from contextlib import nullcontext
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from test_recommend import BATCHES, CLEAR, sweep

from specmeter.config.output import ReportFiles
from specmeter.report.console import DEFAULT, QUIET, VERBOSE, render
from specmeter.report.grid import point_label
from specmeter.report.recommendation import deploy_lines, evidence_table, range_text
from specmeter.report.tables import SD_COUNTS, notes, pays_table, sd_table, summary_tables
from specmeter.rundir.run_data import RunData, load_run
from specmeter.rundir.store import RunStore
from specmeter.schemas.progress import Reporter
from specmeter.schemas.results import RunSummary
from specmeter.workflows.report import report
from specmeter.workflows.terminal import Terminal

STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
BOX = set("┃│┏┡└├")  # the characters of a drawn table


def terminal(verbosity: int, out: StringIO, err: StringIO | None = None) -> Terminal:
    return Terminal(out=Console(file=out, width=400), err=Console(file=err or StringIO(), width=400),
                    progress=lambda _console: nullcontext(Reporter()), verbosity=verbosity)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("stored") / STORED.name
    shutil.copytree(STORED, dest)  # report may write beside the run: never into the fixture
    return dest


@pytest.fixture(scope="module")
def shown(run_dir: Path) -> dict[int, str]:
    """`specmeter report RUN` at each verbosity."""
    texts: dict[int, str] = {}
    for level in (QUIET, DEFAULT, VERBOSE):
        out = StringIO()
        report(run_dir, ReportFiles(), terminal(level, out))
        texts[level] = out.getvalue()
    return texts


def runs(run: RunData) -> Iterator[RunData]:
    """The run and the verification stored inside it."""
    yield run
    if run.verification is not None:
        yield from runs(run.verification)


def titles(run: RunData) -> set[str]:
    """Every table title today's full renderer draws for the run: its tables and its recommendation's evidence."""
    out: set[str] = set()
    for part in runs(run):
        out |= {g.title for g in summary_tables(part.summary)}
        if part.recommendation is not None:
            out |= {evidence_table(part.recommendation, d).title for d in part.recommendation.drafters}
    return out


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def flat(text: str) -> str:
    """Text with its runs of white space as one space: a title wraps to its table's width."""
    return " ".join(text.split())


@pytest.mark.parametrize("level", [QUIET, DEFAULT, VERBOSE])
def test_the_answer_comes_before_any_table(run_dir: Path, shown: dict[int, str], level: int) -> None:
    text = shown[level]
    assert lines(text)[0].startswith("The answer: ")
    first_table = min((i for i, line in enumerate(lines(text)) if BOX & set(line)), default=None)
    config = lines(text).index(next(line for line in lines(text) if "--speculative-config" in line))
    assert first_table is None or config < first_table  # the config to copy is above every table
    for title in titles(load_run(run_dir)):
        assert flat(title) not in flat(text) or flat(text).index("The answer: ") < flat(text).index(flat(title))


def test_quiet_prints_the_answer_alone(run_dir: Path, shown: dict[int, str]) -> None:
    rec = load_run(run_dir).recommendation
    assert rec is not None and rec.best is not None and rec.best.deploy is not None
    text = shown[QUIET]
    assert shlex.join(rec.best.deploy.flags) in text  # the config to copy
    assert all(f"batch {r.start}" in text for r in rec.best.ranges)  # the table
    assert not BOX & set(text) and "•" not in text  # no table, no note
    assert [line.text for line in deploy_lines(rec, full=False)] == lines(text)[1:]


def test_default_says_each_note_once_with_its_count(run_dir: Path, shown: dict[int, str]) -> None:
    text = shown[DEFAULT]
    for part in runs(load_run(run_dir)):
        rows = [(c, pr) for c in part.summary.configs for pr in c.points]
        agree = sum(1 for c, pr in rows if c.role.value != "baseline" and pr.sd.agree)
        baseline = sum(1 for c, pr in rows if c.role.value == "baseline")
        assert agree and baseline  # the fixture has both kinds of per-point notes
        assert f"{SD_COUNTS}: per-request sums equal the /metrics counter deltas at {agree} of {agree} points" in text
        assert f"baseline at {baseline} points: no SD metrics: " in text
    per_point = [line for line in lines(text) if line.startswith("• ") and " @ " in line]
    assert per_point == []  # no note about one point: every one of them said the same as its kind
    assert sum(1 for line in lines(text) if line.startswith(f"• {SD_COUNTS}:")) == len(list(runs(load_run(run_dir))))


def test_default_shows_the_tables_that_carry_the_answer_and_leaves_the_rest_to_v(run_dir: Path,
                                                                                shown: dict[int, str]) -> None:
    run = load_run(run_dir)
    pays, acceptance = pays_table(run.summary), sd_table(run.summary)
    assert pays is not None and acceptance is not None
    text = flat(shown[DEFAULT])
    assert flat(pays.title) in text and flat(acceptance.title) in text
    assert text.index(flat(pays.title)) < text.index(flat(acceptance.title))
    assert all(flat(c.note) in text for c in run.summary.analysis.crossovers)
    for title in titles(run) - {acceptance.title}:  # the plan, throughput, latency, evidence... are -v
        assert flat(title) not in text, title
    assert len(lines(text)) < len(lines(shown[VERBOSE])) / 4


def test_verbose_keeps_everything_the_full_report_had(run_dir: Path, shown: dict[int, str]) -> None:
    run = load_run(run_dir)
    text = flat(shown[VERBOSE])
    for title in titles(run):
        assert flat(title) in text, title
    for part in runs(run):
        for note in notes(part.summary):  # every per-point note, as it was
            assert flat(note.text) in text, note.text
        if part.recommendation is not None:
            assert all(flat(line.text) in text for line in deploy_lines(part.recommendation))


def test_a_check_that_fails_at_some_points_names_them_and_shows_their_notes(run_dir: Path) -> None:
    run = load_run(run_dir)
    summary = run.summary.model_copy(deep=True)
    candidates = [(c, pr) for c in summary.configs if c.role.value != "baseline" for pr in c.points]
    config, wrong = candidates[-1]
    wrong.sd.agree = False
    wrong.sd.agreement = "per-request sums differ from the /metrics counter deltas: num_steps 9 vs 10 (-1)"
    console = Console(record=True, width=400)
    render(summary, console, verbosity=DEFAULT)
    text = console.export_text()
    where = f"{config.config_id} @ {point_label(summary, wrong.point_id)}"
    n = len(candidates)
    assert f"at {n - 1} of {n} points; not at {where}" in text
    assert f"{where}: {wrong.sd.agreement}" in text  # the one a person must read, in full


def repeated_sweep() -> RunSummary:
    """A sweep of two K at three loads, each point run twice."""
    twice = {cid: {p: [v, v] for p, v in per.items()} for cid, per in CLEAR.items()}
    summary, _ = sweep(twice, BATCHES)  # type: ignore[arg-type]
    summary.plan = summary.plan.model_copy(update={"repeats": 2})
    return summary


def test_repeats_are_rows_only_at_verbose() -> None:
    summary = repeated_sweep()
    shown: dict[int, str] = {}
    for level in (DEFAULT, VERBOSE):
        console = Console(record=True, width=400)
        render(summary, console, verbosity=level)
        shown[level] = console.export_text()
    rows = {level: [line for line in lines(text) if line.startswith("│")] for level, text in shown.items()}
    assert any("#2" in row for row in rows[VERBOSE])
    assert rows[DEFAULT] and not any("#1" in row or "#2" in row for row in rows[DEFAULT])
    assert "median ± MAD over repeats" in flat(shown[DEFAULT])  # the speedups are pooled over them


def test_quiet_without_a_recommendation_shows_the_headline_speedups(run_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    RunStore(bare).write_summary(load_run(run_dir).summary)  # the sweep alone: nothing recommended yet
    out = StringIO()
    report(bare, ReportFiles(), terminal(QUIET, out))
    pays, acceptance = pays_table(load_run(bare).summary), sd_table(load_run(bare).summary)
    assert pays is not None and acceptance is not None
    text = flat(out.getvalue())
    assert text.startswith(flat(pays.title)) and all(row[2] in text for row in pays.rows)
    assert "•" not in text and flat(acceptance.title) not in text


def test_quiet_silences_paths_notes_and_progress(run_dir: Path, tmp_path: Path) -> None:
    def no_progress(_console: Console) -> nullcontext[Reporter]:
        raise AssertionError("no progress display under -q")

    out, err = StringIO(), StringIO()
    term = Terminal(out=Console(file=out), err=Console(file=err), progress=no_progress, verbosity=QUIET)
    with term.reporting() as reporter:
        reporter.note("a note")
    report(run_dir, ReportFiles(csv=tmp_path / "csv"), term)
    term.note.print("a warning")
    assert out.getvalue() == "" and err.getvalue() == ""
    assert any((tmp_path / "csv").iterdir())  # the files are written all the same
    loud = terminal(VERBOSE, out)
    loud.detail.print("detail")
    terminal(DEFAULT, out).detail.print("not at the default")
    assert out.getvalue() == "detail\n"


def test_each_range_says_where_its_k_comes_from(run_dir: Path) -> None:
    rec = load_run(run_dir).recommendation
    assert rec is not None and rec.best is not None
    for r in rec.best.ranges:
        text = range_text(r, rec.best.segments)
        assert text.startswith(f"batch {r.start}-{r.end}: " if r.start < r.end else f"batch {r.start}: ")
        assert ("drafting off, K=0" in text) == (r.k == 0) and f"K={r.k}" in text
        inside = [s for s in rec.best.segments if r.start <= s.start and s.end <= r.end]
        for seg in inside:
            if seg.basis == "unmeasured":
                assert f"not measured beyond {seg.start - 1}: no claim" in text
            elif seg.basis == "measured":
                assert "measured at " in text and str(seg.start) in text
        assert "interpolated, measured" not in text  # bases named with their batch sizes, not as a list
