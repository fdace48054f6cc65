"""The host's own conditions (telemetry/host.py read, analysis/host.py judged): foreign work beside a run is seen,
a round it disturbed is set aside where the point has clean ones and run again before the point settles, and a
comparison resting on disturbed rounds alone says "disturbed" instead of a verdict, on every report."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_recommend import sweep

from fakeengine.drive import attach_pair, conversations, run_plan
from fakeengine.server import FakeEngine
from specmeter.analysis.decide import analyze
from specmeter.analysis.host import DISTURBED_SHARE, why_disturbed
from specmeter.config.models import ConcurrencyPoint
from specmeter.execution.rounds import Rounds
from specmeter.plans.run import BASELINE
from specmeter.report.host import host_line
from specmeter.rundir.store import RunStore
from specmeter.schemas.host import GpuReading, HostReading
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.telemetry import host as probe
from specmeter.telemetry.host import OFF_ENV, HostProbe, listeners

K2, K4 = "draft_model-k2", "draft_model-k4"
C1 = ConcurrencyPoint(concurrency=1)
QUIET = HostReading(wall_s=10.0, cpus=2, busy_cpu_s=12.0, own_cpu_s=11.9, niced_cpu_s=0.0)
BUSY = HostReading(wall_s=10.0, cpus=2, busy_cpu_s=20.0, own_cpu_s=10.0, niced_cpu_s=0.0)  # one core of two


def test_foreign_work_is_what_ran_at_normal_priority_or_was_stolen_not_what_was_niced() -> None:
    assert QUIET.foreign_share == pytest.approx(0.005)
    assert BUSY.foreign_share == pytest.approx(0.5)
    niced = BUSY.model_copy(update={"niced_cpu_s": 10.0})  # a nice 19 build: it got only what the run left idle
    assert niced.foreign_share == 0.0
    stolen = QUIET.model_copy(update={"steal_s": 4.0})
    assert stolen.foreign_share == pytest.approx(0.205)
    assert why_disturbed(QUIET) is None and why_disturbed(None) is None
    assert "50% of the 2 CPUs" in (why_disturbed(BUSY) or "")
    assert why_disturbed(stolen) is not None
    on_gpu = QUIET.model_copy(update={"gpus": [GpuReading(index=0, foreign_pids=[4242])]})
    assert "4242" in (why_disturbed(on_gpu) or "")
    just_under = QUIET.model_copy(update={"own_cpu_s": 12.0 - 0.99 * DISTURBED_SHARE * 20})
    assert why_disturbed(just_under) is None


def _hosted(speedups: dict[str, dict[str, list[tuple[float, float, float]]]],
            busy: set[int]) -> tuple[RunSummary, list[RequestRecord]]:
    """A sweep whose repeats in `busy` shared the machine with one other busy core, the rest quiet."""
    summary, records = sweep(speedups, {"c1": 1.0})
    for config in summary.configs:
        for pr in config.points:
            pr.host = BUSY if pr.repeat in busy else QUIET
    summary.analysis = analyze(summary, records)
    return summary, records


def test_a_disturbed_round_is_set_aside_where_the_point_has_clean_ones() -> None:
    rows = {K2: {"c1": [(1.30, 1.28, 1.32), (0.60, 0.58, 0.62), (1.30, 1.28, 1.32)]}}
    summary, _ = _hosted(rows, busy={1})
    (s,) = summary.analysis.speedups
    assert s.output_throughput.set_aside == [1] and not s.output_throughput.disturbed
    assert s.output_throughput.value == pytest.approx(1.30, rel=0.02)  # the slow, disturbed round is not in it
    assert len(s.output_throughput.repeat_values) == 2 and s.verdict == "pays"
    host = summary.analysis.host
    assert host is not None and not host.quiet and host.disturbed_points == ["c1"] and host.rounds == 3
    line, warns = host_line(summary) or ("", False)
    assert warns and "1 of 3 rounds disturbed" in line and "concurrency 1" in line
    (choice,) = summary.analysis.choices
    assert any("set aside" in h.summary() for h in choice.evidence)


def test_a_speedup_resting_on_disturbed_rounds_alone_is_no_clean_verdict() -> None:
    summary, _ = _hosted({K2: {"c1": [(1.30, 1.28, 1.32)] * 2}}, busy={0, 1})
    (s,) = summary.analysis.speedups
    assert s.output_throughput.disturbed and s.verdict == "disturbed"
    doc = json.loads(summary.model_dump_json())  # what `report --json` prints
    assert doc["analysis"]["speedups"][0]["verdict"] == "disturbed"
    assert doc["analysis"]["host"]["disturbed_points"] == ["c1"]


def test_a_quiet_run_says_how_quiet() -> None:
    summary, _ = _hosted({K2: {"c1": [(1.30, 1.28, 1.32)] * 2}}, busy=set())
    line, warns = host_line(summary) or ("", True)
    assert not warns and line.startswith("machine quiet") and "2 rounds read" in line
    assert summary.analysis.speedups[0].verdict == "pays"


def test_a_point_runs_again_in_place_of_a_disturbed_round_before_it_settles() -> None:
    clear = {K2: {"c1": [(1.3, 1.28, 1.32)] * 4}, K4: {"c1": [(1.6, 1.58, 1.62)] * 4}}
    summary, records = _hosted(clear, busy={1})
    summary.plan.load = summary.plan.load.model_copy(update={"precision": "adaptive"})
    summary.plan.interleave = True
    rounds = Rounds(summary, lambda: records, lambda p: 20)
    assert rounds.start(C1, 0, BASELINE) and rounds.start(C1, 1, BASELINE)
    assert rounds.start(C1, 2, BASELINE)  # clear, but only one of its two rounds was clean: one more
    entry = summary.sampled("c1")
    assert entry is not None and entry.stopped is None and entry.looks[-1].disturbed[0].startswith("r2: other work")
    assert not rounds.start(C1, 3, BASELINE)  # two clean rounds: settled
    assert entry.stopped == "settled" and entry.rounds == 3


def test_a_machine_busy_through_most_rounds_is_not_waited_on_and_its_verdicts_say_so() -> None:
    """Other work through every round: more rounds would be disturbed too, so the point stops where a quiet one
    would, and what it measured carries no clean verdict."""
    clear = {K2: {"c1": [(1.3, 1.28, 1.32)] * 4}, K4: {"c1": [(1.6, 1.58, 1.62)] * 4}}
    summary, records = _hosted(clear, busy={0, 1, 2, 3})
    summary.plan.load = summary.plan.load.model_copy(update={"precision": "adaptive"})
    summary.plan.interleave = True
    rounds = Rounds(summary, lambda: records, lambda p: 20)
    assert rounds.start(C1, 0, BASELINE) and rounds.start(C1, 1, BASELINE)
    assert not rounds.start(C1, 2, BASELINE)
    entry = summary.sampled("c1")
    assert entry is not None and entry.stopped == "settled" and len(entry.looks[-1].disturbed) == 4
    assert {s.verdict for s in summary.analysis.speedups} == {"disturbed"}


class _Scripted:
    """A host probe whose second round shared the machine with another busy core."""

    rounds = 0

    def __init__(self, urls: object = ()) -> None:
        pass

    def start(self) -> None:
        type(self).rounds += 1

    def stop(self) -> HostReading:
        return BUSY if type(self).rounds == 2 else QUIET


def test_the_runner_records_the_host_per_round_and_runs_a_disturbed_one_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specmeter.execution.runner.HostProbe", _Scripted)
    convs = conversations([f"Question {i}: explain caching." for i in range(6)])
    with FakeEngine(output_tokens=12, slow_chunk_s=0.004, default_fault="slow") as sd, \
            FakeEngine(output_tokens=12, slow_chunk_s=0.03, default_fault="slow", seed=1,
                       speculative=False) as base:
        ex = attach_pair(sd.url, base.url, convs, interleave=True, concurrency=[2], precision="adaptive",
                         max_rounds=4, max_num_seqs=64)  # room for both: each round's cells take turns, one reading
        summary, error, _ = run_plan(ex, tmp_path / "run")
    assert error is None, repr(error)
    (entry,) = summary.sampling
    assert entry.stopped == "settled" and entry.rounds == 3  # clear after two rounds, one of which was disturbed
    host = summary.analysis.host
    assert host is not None and host.disturbed == [f"{entry.point_id} r2: other work took 50% of the 2 CPUs"]
    capture = RunStore(tmp_path / "run").read_capture("ngram-k4", entry.point_id, 1)
    assert capture is not None and capture.attempts[-1].host == BUSY  # in the capture: --recompute sees it
    (s,) = summary.analysis.speedups
    assert s.output_throughput.set_aside == [1] and s.verdict == "pays"


def test_the_probe_counts_its_own_children_as_own_and_a_stranger_as_foreign(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OFF_ENV, raising=False)
    if not HostProbe().enabled:
        pytest.skip("no /proc/stat on this machine")
    spin = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"
    host = HostProbe()
    host.start()
    subprocess.run([sys.executable, "-c", spin], check=True)  # our own child, reaped within the round
    own = host.stop()
    assert own is not None and own.own_cpu_s >= 0.5
    # A stranger: started through a shell that exits at once, so it belongs to no process of ours.
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{spin}' >/dev/null 2>&1 &"], check=True)
    host.start()
    time.sleep(1.2)
    foreign = host.stop()
    assert foreign is not None and foreign.foreign_cpu_s >= 0.3


def test_a_server_listening_on_loopback_is_the_runs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp on this machine")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert probe.loopback_ports([f"http://127.0.0.1:{port}", "http://gpu-box:8000"]) == {port}
        assert os.getpid() in listeners({port})
