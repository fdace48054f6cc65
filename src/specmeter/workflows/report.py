"""`specmeter report` and `compare`: stored runs shown again and written as files, no server. A recomputation
of stored results from their captures belongs here too, beside the outputs that show them."""

from __future__ import annotations

import json
from pathlib import Path

from specmeter.analysis.compare import compare_runs
from specmeter.common.errors import InputError
from specmeter.config.output import ReportFiles, check_output_dir
from specmeter.report.compare import render_comparison
from specmeter.report.console import ConsoleOutput
from specmeter.report.outputs import output
from specmeter.report.recommendation import answer_document
from specmeter.rundir.run_data import load_run
from specmeter.workflows.evidence import distinct_runs, require_records
from specmeter.workflows.recompute import recompute as recompute_run
from specmeter.workflows.terminal import Terminal


def report(run_dir: Path, files: ReportFiles, term: Terminal, *, recompute: bool = False) -> None:
    """Write the files asked for; show the tables when nothing was asked (under --json: the run's answer, then
    summary.json's keys, then the step-cost model the sweep fitted, calibration.json, or null).
    `recompute`: first derive every point's results and the run's decisions again from the stored captures."""
    if recompute:
        for done in recompute_run(run_dir):
            term.human.print(done.line())
    run = load_run(run_dir)
    asked = [output(kind, dest) for kind, dest in (("html", files.html), ("csv", files.csv), ("plots", files.plots),
                                                   ("profiles", files.profiles)) if dest is not None]
    told = [line for out in asked for line in out.told(out.write(run))]
    if term.json_out:  # the run's answer first, then summary.json's keys as they are, then its calibration
        answer = json.loads(answer_document(run.answer)) if run.answer is not None else None
        cal = json.loads(run.calibration.model_dump_json()) if run.calibration is not None else None
        term.emit(json.dumps({"answer": answer, **json.loads(run.summary.model_dump_json()), "calibration": cal},
                             indent=2))
    elif not asked:
        ConsoleOutput(console=term.answer, verbosity=term.verbosity).write(run)
    for line in told:
        term.human.print(line, soft_wrap=True)


def compare(run_dirs: list[Path], term: Terminal, *, allow_different_workloads: bool = False,
            plots: Path | None = None) -> None:
    """Stored runs side by side at the load points they share, each against the first; overlaid plots on ask."""
    if len(run_dirs) < 2:
        raise InputError("compare: give two or more run directories (the first is the reference)")
    check_output_dir("--plots", plots)
    for i, d in enumerate(run_dirs):
        for other in run_dirs[:i]:
            distinct_runs(other, d, "compare")
    runs = [load_run(d) for d in run_dirs]
    for d in run_dirs:
        require_records(d, "compare (it pairs runs by request)")
    comparison = compare_runs(runs, allow_different_workloads=allow_different_workloads)
    if term.json_out:
        term.emit(comparison.model_dump_json(indent=2))
    else:
        render_comparison(comparison, term.out)
    if plots is not None:
        from specmeter.report.plot_style import save  # matplotlib: only when plots are asked for
        from specmeter.report.plots import compare_figures

        plots.mkdir(parents=True, exist_ok=True)
        saved: list[Path] = []
        for name, fig in compare_figures(runs).items():
            saved += save(fig, plots, name)  # PNG and SVG, as the run's own plots are saved
        term.human.print(f"plots: {len(saved)} files in [cyan]{plots}[/]")
