"""A load ramp on fake engines that run at most four requests at once (the rest wait their turn): the sweep stops
going up at the first load past that, says where and why in summary.json, the console and the HTML page, skips the
higher loads (a resume too), reports goodput under the SLO beside throughput at every point it ran; a load search
stays at or below the saturated load."""

from __future__ import annotations

import json
from contextlib import nullcontext
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from fakeengine.drive import RecordingReporter
from fakeengine.server import FakeEngine
from specmeter.execution.ramp import Ramp
from specmeter.report.console import VERBOSE, ConsoleOutput
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import RunStore, load_summary
from specmeter.workflows.resume import resume
from specmeter.workflows.sweep import SweepRequest, sweep, sweep_spec
from specmeter.workflows.terminal import Terminal

pytestmark = pytest.mark.timeout(300)
SLOTS = 4


def terminal(reporter: RecordingReporter) -> Terminal:
    return Terminal(out=Console(file=StringIO(), width=200), err=Console(file=StringIO()),
                    progress=lambda console: nullcontext(reporter))


def capped() -> tuple[FakeEngine, FakeEngine]:
    """A baseline and a speculative server, each streaming at most SLOTS requests at once, 10 ms a step."""
    return (FakeEngine(output_tokens=16, alpha=0.0, step_s=0.01, max_num_seqs=SLOTS, speculative=False),
            FakeEngine(output_tokens=16, alpha=0.7, step_s=0.01, max_num_seqs=SLOTS))


def sweep_file(tmp_path: Path, base: FakeEngine, sd: FakeEngine, load: dict[str, object]) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps({
        "workload": {"dataset": "sample", "num_prompts": 4},
        "engine": {"endpoint": sd.url}, "baseline_endpoint": base.url, "interleave": True,
        "candidates": [{"method": "ngram", "num_speculative_tokens": 4, "endpoint": sd.url}],
        "load": {"max_tokens": 16, "warmup": 0, "precision": "fixed", **load}}), encoding="utf-8")
    return path


def test_a_listed_ramp_stops_past_the_engines_capacity_and_says_why(tmp_path: Path) -> None:
    base, sd = capped()
    with base, sd:
        file = sweep_file(tmp_path, base, sd, {"concurrency": [1, 2, 4, 8, 16],
                                               "slo": {"ttft_ms": 60_000, "e2e_ms": 60_000}})
        reporter = RecordingReporter()
        sweep(SweepRequest(sweep_spec(file), tmp_path, name="ramp"), terminal(reporter))
        run_dir = tmp_path / "ramp"
        summary = load_summary(run_dir)
        assert summary.status == "complete"
        (ramp,) = summary.ramp
        assert ramp.axis == "concurrency" and ramp.saturated_at == "c8" and ramp.load == 8
        assert ramp.skipped == ["c16"]
        measured = {p.point_id for c in summary.configs for p in c.points}
        assert measured == {"c1", "c2", "c4", "c8"}  # nothing at c16, for any configuration
        last = ramp.steps[-1]
        assert (last.lower_point, last.point_id, last.saturated) == ("c4", "c8", True)
        assert {r.config_id for r in last.readings} == {"baseline", "ngram-k4"}
        for r in last.readings:  # beyond the engine's slots, more load only waits
            assert r.saturated and r.throughput_low is not None and r.throughput_low <= 1 + ramp.min_gain
            assert r.latency_low is not None and r.latency_low > 1 + ramp.latency_rise
        assert not any(s.saturated for s in ramp.steps[:-1])
        assert any(n.startswith("load ramp: saturated at concurrency 8, skipping c16") for n in reporter.notes)
        for config in summary.configs:  # a lenient SLO: every request met it, so goodput is the request rate
            for pr in config.points:
                assert pr.goodput is not None and pr.goodput.met == pr.latency.num_ok
                assert pr.goodput.requests_per_s == pytest.approx(pr.latency.requests_per_s)

        out = StringIO()
        ConsoleOutput(console=Console(file=out, width=250), verbosity=VERBOSE).write(load_run(run_dir))
        text = out.getvalue()
        assert "Load ramp (concurrency)" in text and "c4 -> c8" in text and "goodput req/s" in text
        assert "the load ramp (concurrency) stopped at concurrency 8" in text
        assert "the load ramp (concurrency) stopped at concurrency 8" in (run_dir / "report.html").read_text()

        # A resumed run skips the same points and starts nothing.
        sent = len(RunStore(run_dir).read_records())
        summary.status = "incomplete"
        RunStore(run_dir).write_summary(summary)
        resume(run_dir, None, terminal(RecordingReporter()))
        assert len(RunStore(run_dir).read_records()) == sent
        assert load_summary(run_dir).ramp == summary.ramp

        summary.plan.load.stop_at_saturation = False  # the switch that measures every point
        ramp_off = Ramp(summary, lambda: [])
        assert ramp_off.start(summary.plan.point("c16")) and not ramp_off.skips(summary.plan.point("c16"))


def test_a_load_search_stays_at_or_below_the_saturated_load(tmp_path: Path) -> None:
    base, sd = capped()
    with base, sd:
        file = sweep_file(tmp_path, base, sd, {"concurrency": {"auto": {"min": 1, "max": 64,
                                                                         "start": [1, 4, 16, 64]}}})
        sweep(SweepRequest(sweep_spec(file), tmp_path, name="auto"), terminal(RecordingReporter()))
    summary = load_summary(tmp_path / "auto")
    (ramp,) = summary.ramp
    assert ramp.saturated_at == "c16" and ramp.skipped == ["c64"]
    (search,) = summary.load_search
    measured = sorted({p.point_id for c in summary.configs for p in c.points}, key=lambda i: int(i[1:]))
    assert measured[-1] == "c16"  # the search never measured above the saturated load
    assert all(s.load <= 16 for s in search.steps if s.chosen_by != "start")
    assert search.status != "searching" and "where every server saturated" in search.why
