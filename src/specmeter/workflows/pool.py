"""`specmeter compare RUN RUN ... --pool`: several runs of one plan (another day, another box) as one verdict per
cell and one answer, each range saying whether it held in every run. Reads stored summaries only; writes nothing."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from specmeter.analysis.pool import pool
from specmeter.common.errors import InputError, stored_file_message
from specmeter.config.criteria import Criteria
from specmeter.engines.deploy import sweep_engine, with_deploy_configs
from specmeter.report.console import render_recommendation, to_rich
from specmeter.report.pool import cells_table, held_lines, summary_lines
from specmeter.rundir.store import load_summary
from specmeter.schemas.pool import Pooled
from specmeter.schemas.results import RunSummary
from specmeter.workflows.evidence import distinct_runs
from specmeter.workflows.terminal import Terminal

# The GPU check (benchmarks/gpu/check.sh) keeps its run's summary under this name in its results folder.
GPU_CHECK_SUMMARY = "run-summary.json"


def read_run(path: Path) -> RunSummary:
    """A run directory's summary, or the summary a GPU check results folder keeps."""
    if path.is_dir() and (path / GPU_CHECK_SUMMARY).is_file():  # a run directory has none
        text = (path / GPU_CHECK_SUMMARY).read_text(encoding="utf-8")
        try:
            return RunSummary.model_validate_json(text)
        except ValueError as exc:
            raise InputError(stored_file_message(path / GPU_CHECK_SUMMARY, exc, "a specmeter run summary",
                                                 "give a folder the GPU check wrote", RunSummary)) from exc
    return load_summary(path)


def pool_runs(paths: list[Path], criteria: Criteria, term: Terminal) -> Pooled:
    """The command: pool the runs, render the answer for the engine they ran, show or print it as JSON."""
    for i, p in enumerate(paths):
        for other in paths[:i]:
            distinct_runs(other, p, "pool")
    names = [p.resolve().name for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    runs = [(name, read_run(p)) for name, p in zip(names, paths)]
    pooled = pool(runs, objective=criteria.objective or "throughput", max_num_seqs=criteria.max_num_seqs,
                  min_gain=criteria.min_gain, indifference=criteria.indifference)
    if pooled.recommendation is not None:
        pooled.recommendation = with_deploy_configs(pooled.recommendation, sweep_engine(runs[0][1].plan))
    if term.json_out:
        term.emit(pooled.model_dump_json(indent=2))
        return pooled
    out = term.out
    if pooled.recommendation is not None and pooled.recommendation.best is not None:
        render_recommendation(pooled.recommendation, out, verbosity=term.verbosity,
                              title=f"The answer pooled over {len(runs)} runs")
        for line in held_lines(pooled):
            out.print(Text(line, style="bold"), soft_wrap=True)
    elif pooled.no_answer:
        out.print(Text(f"no pooled answer: {pooled.no_answer}", style="yellow"), soft_wrap=True)
    if term.quiet:
        return pooled
    out.print(to_rich(cells_table(pooled, runs[0][1])))
    for line in summary_lines(pooled):
        out.print(Text("• " + line, style="dim"), soft_wrap=True)
    return pooled
