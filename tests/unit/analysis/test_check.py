"""`specmeter compare REF_RUN RUN --check` on pairs of copies of the saved real run: a copy measured on a machine
twice as slow (every server alike) has no regression; a copy whose K = 4 drafter accepts less and runs slower at
concurrency 4 regresses there, in AL and in speedup, and nowhere else, from per-request steps and from the counters
alone; runs on different workloads are refused with what differs. The CLI's exit codes and --json."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from in_process import specmeter

from specmeter.analysis.decide import analyze
from specmeter.analysis.regression import check_runs
from specmeter.common.errors import InputError, RegressionFound
from specmeter.rundir.run_data import load_run, run_records
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.schemas.sd import SDCounts

pytestmark = pytest.mark.timeout(180)
RUN = Path(__file__).parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
WHERE = ("draft_model-k4", "c4")  # the configuration and point the regressed copy changes
ACCEPTS, SLOWER = 0.8, 1.25  # there: each position accepted 0.8 as often, every request 1.25x as long


def copy_run(root: Path) -> Path:
    dest = root / RUN.name
    shutil.copytree(RUN, dest, ignore=shutil.ignore_patterns("verify"))
    return dest


def rewrite(run_dir: Path, summary: RunSummary, records: list[RequestRecord]) -> None:
    """Store the edited run, its decisions derived again from what it now holds."""
    RunStore(run_dir).write_summary(summary)
    (run_dir / "requests.jsonl").write_text("".join(r.model_dump_json(exclude_computed_fields=True) + "\n"
                                                    for r in records), encoding="utf-8")
    summary.analysis = analyze(summary, run_records(RunStore(run_dir), summary.plan))
    RunStore(run_dir).write_summary(summary)


def fresh(root: Path) -> Path:
    run_dir = copy_run(root)
    rewrite(run_dir, load_summary(run_dir), RunStore(run_dir).read_records())
    return run_dir


def accept_less(c: SDCounts, factor: float) -> SDCounts:
    """The same steps, each position accepted `factor` as often; the accepted count and histogram follow."""
    steps = c.num_steps or 0
    pos = [int(x * factor) for x in c.accepted_per_pos]
    hist = [steps - pos[0], *(a - b for a, b in itertools.pairwise(pos)), pos[-1]]
    return c.model_copy(update={"accepted_per_pos": pos, "num_accepted_tokens": sum(pos),
                                "histogram": hist if c.histogram is not None else None})


def regress(run_dir: Path, *, counters_only: bool = False) -> None:
    """The K = 4 drafter at concurrency 4 accepts less and every one of its requests takes SLOWER as long, in the
    records and the summary alike. `counters_only`: the engine kept no per-request step count (as llama.cpp)."""
    summary = load_summary(run_dir)
    records = []
    for r in RunStore(run_dir).read_records():
        if (r.config_id, r.point_id) == WHERE:
            r = r.model_copy(update={"ttft_s": (r.ttft_s or 0) * SLOWER, "e2e_s": (r.e2e_s or 0) * SLOWER,
                                     "chunk_offsets_s": [x * SLOWER for x in r.chunk_offsets_s], "sd_raw": None,
                                     "sd": accept_less(r.sd, ACCEPTS) if r.sd else None})
        if counters_only and r.sd is not None:
            r = r.model_copy(update={"sd": r.sd.model_copy(update={"num_steps": None})})
        records.append(r)
    result = summary.config(WHERE[0])
    assert result is not None
    for pr in result.repeats(WHERE[1]):
        la, sd = pr.latency, pr.sd
        la.wall_s *= SLOWER
        la.output_tokens_per_s = la.output_tokens / la.wall_s
        sd.counters = accept_less(sd.counters, ACCEPTS) if sd.counters else None
        sd.per_request = accept_less(sd.per_request, ACCEPTS) if sd.per_request else None
    rewrite(run_dir, summary, records)


def slow_machine(run_dir: Path) -> None:
    """Every server of the run twice as slow, each request by 2 x (0.9 .. 1.1): another machine, same software."""
    summary = load_summary(run_dir)
    for config in summary.configs:
        for pr in config.points:
            pr.latency.wall_s *= 2.0
            pr.latency.output_tokens_per_s = pr.latency.output_tokens / pr.latency.wall_s
    records = []
    for i, r in enumerate(RunStore(run_dir).read_records()):
        f = 2.0 * (0.9 + 0.2 * ((i * 7) % 11) / 10)
        records.append(r.model_copy(update={"ttft_s": (r.ttft_s or 0) * f, "e2e_s": (r.e2e_s or 0) * f,
                                            "chunk_offsets_s": [x * f for x in r.chunk_offsets_s]}))
    rewrite(run_dir, summary, records)


def test_a_slower_machine_is_no_regression(tmp_path: Path) -> None:
    ref, run = fresh(tmp_path / "ref"), fresh(tmp_path / "run")
    slow_machine(run)
    result = check_runs(load_run(run), load_run(ref), max_al_drop=0.02, max_speedup_drop=0.03)
    assert not result.regressed and not result.regressions
    assert {(c.config_id, c.point_id) for c in result.checks} == {
        (cid, p) for cid in ("draft_model-k2", "draft_model-k4") for p in ("c1", "c4", "c16")}
    for c in result.checks:
        assert c.outcome != "regressed"
        if c.paired_requests < 2 and c.metric == "speedup":  # the saved run kept 3 requests a point, not all shared
            assert c.low is None and c.outcome == "unsettled" and c.note and "no interval" in c.note
            continue
        assert c.low is not None and c.high is not None and c.low <= c.change.value <= c.high  # type: ignore[operator]
        if c.metric == "acceptance_length":  # the same outputs: acceptance did not move at all
            assert c.change.value == pytest.approx(1.0) and c.outcome == "held" and c.paired_requests >= 2
            assert c.basis.startswith("per-request steps")
        else:  # both servers slowed alike: the speedup stays, though throughput halved
            assert c.change.value == pytest.approx(1.0, abs=1e-9)
    res = specmeter("compare", ref, run, "--check")
    assert res.returncode == 0, res.stderr
    assert "no regression beyond the bounds" in res.stdout


@pytest.mark.parametrize("counters_only", [False, True], ids=["per-request", "counters"])
def test_a_drafter_that_accepts_less_and_runs_slower_regresses_there_only(tmp_path: Path, counters_only: bool) -> None:
    ref, run = fresh(tmp_path / "ref"), fresh(tmp_path / "run")
    regress(run, counters_only=counters_only)
    if counters_only:
        regress_ref = load_summary(ref)  # the reference too kept no per-request steps
        records = [r.model_copy(update={"sd": r.sd.model_copy(update={"num_steps": None}) if r.sd else None})
                   for r in RunStore(ref).read_records()]
        rewrite(ref, regress_ref, records)
    result = check_runs(load_run(run), load_run(ref), max_al_drop=0.02, max_speedup_drop=0.03)
    regressed = {(c.metric, c.config_id, c.point_id) for c in result.checks if c.outcome == "regressed"}
    assert regressed == {("acceptance_length", *WHERE), ("speedup", *WHERE)}
    assert len(result.regressions) == 2 and all("draft_model-k4 at concurrency 4" in r for r in result.regressions)
    al = next(c for c in result.checks if (c.metric, c.config_id, c.point_id) == ("acceptance_length", *WHERE))
    assert al.high is not None and al.high < 1 - 0.02 and al.value < al.reference  # type: ignore[operator]
    assert al.basis.startswith("counters") if counters_only else al.basis.startswith("per-request steps")
    speedup = next(c for c in result.checks if (c.metric, c.config_id, c.point_id) == ("speedup", *WHERE))
    assert speedup.change.value == pytest.approx(1 / SLOWER, rel=0.02)  # the baseline there did not change
    assert speedup.decided_on == "output_throughput"

    res = specmeter("compare", ref, run, "--check")
    assert res.returncode == RegressionFound.exit_code, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: check: 2 regression(s)")
    for word in ("AL of draft_model-k4 at concurrency 4", "speedup of draft_model-k4 at concurrency 4"):
        assert word in lines[0]
    assert "REGRESSED" in res.stdout

    res = specmeter("compare", ref, run, "--check", "--json", "--max-al-drop", "25%", "--max-speedup-drop", "0.3")
    assert res.returncode == 0, res.stderr  # looser bounds: the same drops are allowed
    doc = json.loads(res.stdout)
    assert doc["max_al_drop"] == 0.25 and doc["max_speedup_drop"] == 0.3 and doc["regressions"] == []
    res = specmeter("compare", ref, run, "--check", "--json")
    assert res.returncode == RegressionFound.exit_code
    assert len(json.loads(res.stdout)["regressions"]) == 2  # one document, read whole


def test_runs_of_different_workloads_are_refused_with_what_differs(tmp_path: Path) -> None:
    ref, run = fresh(tmp_path / "ref"), fresh(tmp_path / "run")
    summary = load_summary(run)
    plan = summary.plan
    plan.load.max_tokens = 128
    plan.load.points = plan.load.points[:2]
    plan.workload.conversation_ids = plan.workload.conversation_ids[:5]
    RunStore(run).write_summary(summary)
    with pytest.raises(InputError) as err:
        check_runs(load_run(run), load_run(ref), max_al_drop=0.02, max_speedup_drop=0.03)
    message = str(err.value)
    assert "\n" not in message
    for field in ("load.max_tokens 128 vs 96", "workload.conversation_ids", "load.points c1, c4 vs c1, c4, c16"):
        assert field in message
    res = specmeter("compare", ref, run, "--check")
    assert res.returncode == InputError.exit_code
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1 and "load.max_tokens" in res.stderr


@pytest.mark.parametrize("flag,value", [("--max-al-drop", "2"), ("--max-speedup-drop", "lots"),
                                        ("--max-al-drop", "150%")])
def test_a_bound_that_is_not_a_drop_is_refused_in_one_line(flag: str, value: str) -> None:
    res = specmeter("compare", RUN, RUN, "--check", flag, value)
    assert res.returncode == InputError.exit_code
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in res.stderr
