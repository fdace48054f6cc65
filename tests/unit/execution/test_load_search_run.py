"""A load search run end to end on fake engines whose steps slow with the batch (`sweep` with `concurrency: auto`):
speculation pays at low concurrency and slows at high, the search places points between, is killed after choosing
one, and `resume` measures that point and goes on until the crossover is bracketed; summary.json and the report
show every point chosen and why."""

from __future__ import annotations

import itertools
import json
from contextlib import nullcontext
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from fakeengine.drive import RecordingReporter
from fakeengine.server import FakeEngine
from specmeter.common.errors import RunIncomplete
from specmeter.report.console import VERBOSE, ConsoleOutput
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import load_summary
from specmeter.schemas.planner import Calibration
from specmeter.workflows.resume import resume
from specmeter.workflows.sweep import SweepRequest, sweep, sweep_spec
from specmeter.workflows.terminal import Terminal

pytestmark = pytest.mark.timeout(600)
WIDTH, MAX_POINTS = 2.0, 8


class KilledAfterChoosing(RecordingReporter):
    """Stops the run (as Ctrl-C does) when the search announces its first chosen point."""

    def note(self, message: str) -> None:
        super().note(message)
        if message.startswith("load search:"):
            raise KeyboardInterrupt


def terminal(reporter: RecordingReporter, out: StringIO | None = None) -> Terminal:
    return Terminal(out=Console(file=out or StringIO(), width=200), err=Console(file=StringIO()),
                    progress=lambda console: nullcontext(reporter))


def test_an_auto_sweep_brackets_the_crossover_and_a_resume_goes_on_searching(tmp_path: Path) -> None:
    # The baseline emits one token per step; speculation about 2.8 (K = 4, alpha 0.7) but each of its steps costs
    # five times as much per running request: it pays at concurrency 1 and slows at 32.
    with FakeEngine(output_tokens=16, alpha=0.0, step_s=0.01, batch_step_s=0.0005, speculative=False) as base, \
            FakeEngine(output_tokens=16, alpha=0.7, step_s=0.01, batch_step_s=0.0025) as sd:
        sweep_file = tmp_path / "sweep.yaml"
        sweep_file.write_text(json.dumps({
            "workload": {"dataset": "sample", "num_prompts": 8},
            "engine": {"endpoint": sd.url}, "baseline_endpoint": base.url,
            "candidates": [{"method": "ngram", "num_speculative_tokens": 4, "endpoint": sd.url}],
            "load": {"concurrency": {"auto": {"min": 1, "max": 32, "width": WIDTH, "max_points": MAX_POINTS}},
                     "max_tokens": 32, "warmup": 0, "precision": "fixed"}}), encoding="utf-8")
        killed = KilledAfterChoosing()
        with pytest.raises(RunIncomplete):
            sweep(SweepRequest(sweep_spec(sweep_file), tmp_path, name="auto"), terminal(killed))
        run_dir = tmp_path / "auto"
        stopped = load_summary(run_dir)
        (first,) = stopped.load_search
        assert stopped.status == "incomplete" and first.status == "searching"
        starts = [s.point_id for s in first.steps if s.chosen_by == "start"]
        assert starts == ["c1", "c6", "c32"]
        chosen = first.steps[len(starts)]  # chosen, stored, not yet measured when the run stopped
        assert chosen.point_id in [p.id for p in stopped.plan.points]
        assert not any(p.point_id == chosen.point_id for c in stopped.configs for p in c.points)

        resume(run_dir, None, terminal(RecordingReporter()))

    summary = load_summary(run_dir)
    assert summary.status == "complete"
    # The finished sweep keeps its step-cost calibration beside it, fitted on every measured point.
    cal = Calibration.model_validate_json((run_dir / "calibration.json").read_text(encoding="utf-8"))
    assert len(cal.observations) == sum(len(c.points) for c in summary.configs)
    (search,) = summary.load_search
    assert search.status == "bracketed", search.why
    assert search.steps[: len(first.steps)] == first.steps  # the resume went on from what was chosen
    ids = [s.point_id for s in search.steps]
    assert len(set(ids)) == len(ids) <= MAX_POINTS
    assert sorted(ids, key=lambda i: int(i[1:])) == [p.id for p in summary.plan.points]  # kept in load order
    for config in summary.configs:  # every configuration measured every point, once
        assert sorted((p.point_id, p.repeat) for p in config.points) == sorted((i, 0) for i in ids)
    for step in search.steps[len(starts):]:
        assert step.bracket is not None and step.bracket.lo < step.load < step.bracket.hi
        assert step.load == int(step.load) and step.chosen_by in ("model", "bisection")
        assert step.bracket.span in step.why and "measuring concurrency" in step.why

    verdicts = {s.point_id: s.verdict for s in summary.analysis.speedups}
    assert verdicts["c1"] == "pays" and verdicts["c32"] == "slows"
    (cross,) = search.crossovers
    assert (cross.config_id, verdicts[cross.lo_point], verdicts[cross.hi_point]) == ("ngram-k4", "pays", "slows")
    inside = sorted(int(i[1:]) for i in ids if cross.lo <= int(i[1:]) <= cross.hi)
    assert all(b / a <= WIDTH or b - a <= 1 for a, b in itertools.pairwise(inside))
    assert all(verdicts[f"c{c}"] == "unclear" for c in inside[1:-1])
    analysed = next(c for c in summary.analysis.crossovers if c.config_id == "ngram-k4")
    assert analysed.status == "crosses" and analysed.load is not None
    assert cross.lo <= analysed.load <= cross.hi

    # The report shows the points in the order chosen, and why.
    out = StringIO()
    ConsoleOutput(console=Console(file=out, width=250), verbosity=VERBOSE).write(load_run(run_dir))
    text = out.getvalue()
    assert "Load search (concurrency)" in text and "crossover ngram-k4" in text
    for step in search.steps[len(starts):]:
        assert step.point_id in text
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "the load search measured" in page and f"crossover of ngram-k4: {cross.lo_point} (pays)" in page
