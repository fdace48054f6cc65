"""benchmarks/time_to_answer.py: a finished demo's wall time split into its phases, from the run directory's own
records (the saved real demo run), and the comparison of two designs' final tables."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest
from bench_script import load

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "tests/fixtures/runs/20261123-180233-demo"


@pytest.fixture(scope="module")
def tta() -> ModuleType:
    return load("time_to_answer")


def test_the_phases_add_up_to_the_wall_time_and_come_from_the_run(tta: ModuleType) -> None:
    t = tta.read_run(RUN, design="before", rev="abc", repeat=1, wall_s=900.0, setup_s=60.0)
    assert t.setup_s + t.starts_s + t.sweep_s + t.propose_s + t.verify_s + t.other_s == pytest.approx(900.0)
    assert t.propose_s == 0  # a run from before the tune loop proposed
    sweep = json.loads((RUN / "summary.json").read_text())
    verify = json.loads((RUN / "verify/summary.json").read_text())
    launched = [c for s in (sweep, verify) for c in s["configs"] if c.get("startup_s")]
    assert t.servers_started == len(launched) and t.starts_s == pytest.approx(sum(c["startup_s"] for c in launched))
    assert t.sweep_s + t.verify_s + t.starts_s == pytest.approx(sweep["wall_s"] + verify["wall_s"])
    lines = [json.loads(x) for d in (RUN, RUN / "verify") for x in (d / "requests.jsonl").read_text().splitlines()]
    assert t.requests == sum(not x.get("warmup") for x in lines) and t.verify_rounds == 1
    rec = json.loads((RUN / "recommendation.json").read_text())
    assert t.table == rec["drafters"][0]["spec"]["num_speculative_tokens_per_batch_size"]
    assert set(t.points) == {p["point_id"] for p in sweep.get("sampling") or []}


def test_the_report_marks_a_table_that_differs_from_the_first_before_run(tta: ModuleType) -> None:
    before = tta.read_run(RUN, design="before", rev="abc", repeat=1, wall_s=900.0, setup_s=0.0)
    same = replace(before, design="after", rev="def", wall_s=300.0)
    other = replace(before, design="after", rev="def", repeat=2, wall_s=330.0, table=[[1, 64, 1]])
    text = tta.report([before, same, other])
    rows = [line for line in text.splitlines() if line.startswith("| after")]
    assert rows[0].endswith("| yes |") and rows[1].endswith("| no |")
    assert "after / before (medians): wall 0.35" in text


def test_cold_runs_are_reported_against_warm_runs_of_the_same_revision(tta: ModuleType) -> None:
    """--cold: one revision, a new user's runs (new environment, empty compile caches) beside a returning one's."""
    warm = tta.read_run(RUN, design="warm", rev="abc", repeat=1, wall_s=600.0, setup_s=0.0)
    cold = replace(warm, design="cold", wall_s=900.0, setup_s=200.0)
    text = tta.report([warm, cold])
    assert "cold / warm (medians): wall 1.50" in text and "after / before" not in text
    assert [line.endswith("| yes |") for line in text.splitlines() if line.startswith("| cold")] == [True]


def test_the_measuring_of_proposed_ks_is_a_phase_of_its_own(tta: ModuleType, tmp_path: Path) -> None:
    run = shutil.copytree(RUN, tmp_path / "run")
    shutil.copytree(run / "verify", run / "propose")  # a proposal run's files, as the tune loop writes them
    before = tta.read_run(RUN, design="before", rev="abc", repeat=1, wall_s=900.0, setup_s=0.0)
    t = tta.read_run(run, design="after", rev="def", repeat=1, wall_s=900.0, setup_s=0.0)
    assert t.propose_s == pytest.approx(before.verify_s) and t.verify_s == pytest.approx(before.verify_s)
    assert t.requests > before.requests and t.servers_started > before.servers_started
    assert t.setup_s + t.starts_s + t.sweep_s + t.propose_s + t.verify_s + t.other_s == pytest.approx(900.0)


def test_a_sweep_file_is_timed_as_its_own_tune_loop(tta: ModuleType, tmp_path: Path) -> None:
    """--sweep FILE runs `specmeter sweep FILE --verify` (read in the clone) into a run directory of a known name."""
    assert tta.answer_command(None, tmp_path, ["-k", "2"]) == ["demo", "--out", str(tmp_path), "-k", "2"]
    assert tta.answer_command("examples/demo-sweep.yaml", tmp_path, []) == [
        "sweep", "examples/demo-sweep.yaml", "--verify", "--name", "answer", "--out", str(tmp_path)]


def test_verification_rounds_are_found_by_either_commands_names(tta: ModuleType, tmp_path: Path) -> None:
    """The demo writes verify/, verify-r2/; `sweep --verify` <timestamp>-verify/, <timestamp>-verify-r2/."""
    for name in ("verify-r2", "verify", "20261127-014641-verify-r2", "20261127-014641-verify", "verifying", "propose"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text("{}")
    assert [d.name for d in tta.verify_dirs(tmp_path)] == [
        "20261127-014641-verify", "verify", "20261127-014641-verify-r2", "verify-r2"]


def test_servers_that_overlap_their_starts_count_once(tta: ModuleType, tmp_path: Path) -> None:
    """Where the cells were captured, the start phase runs from the execution's start to its first measured cell."""
    run = shutil.copytree(RUN, tmp_path / "run")
    for d, first in ((run, 95.0), (run / "verify", 40.0)):
        for i, config in enumerate(("baseline", "other")):
            (d / "captures" / config).mkdir(parents=True)
            attempts = [{"index": 0, "started_s": first + 30.0 * i}, {"index": 1, "started_s": first + 300.0}]
            (d / "captures" / config / "c1-r0.json").write_text(json.dumps({"attempts": attempts}))
    t = tta.read_run(run, design="after", rev="def", repeat=1, wall_s=900.0, setup_s=0.0)
    sweep = json.loads((run / "summary.json").read_text())
    verify = json.loads((run / "verify/summary.json").read_text())
    assert t.starts_s == pytest.approx(95.0 + 40.0)
    assert t.sweep_s == pytest.approx(sweep["wall_s"] - 95.0) and t.verify_s == pytest.approx(verify["wall_s"] - 40.0)
    assert t.setup_s + t.starts_s + t.sweep_s + t.propose_s + t.verify_s + t.other_s == pytest.approx(900.0)


def test_a_finished_run_is_read_from_its_sweeps_start_to_its_last_answer(tta: ModuleType, tmp_path: Path) -> None:
    """--read: no clock outside the run, so its wall time runs from the sweep's created_utc to the last write of a
    summary or recommendation.json, and the phases still add up to it."""
    run = shutil.copytree(RUN, tmp_path / "run")
    created = datetime.fromisoformat(json.loads((run / "summary.json").read_text())["created_utc"]).timestamp()
    for f, at in ((run / "summary.json", 300.0), (run / "recommendation.json", 310.0),
                  (run / "verify/summary.json", 612.5)):
        os.utime(f, (created + at, created + at))
    t = tta.read_finished(run, 2)
    assert t.wall_s == pytest.approx(612.5) and t.setup_s == 0 and t.repeat == 2 and t.rev == "run"
    assert t.starts_s + t.sweep_s + t.propose_s + t.verify_s + t.other_s == pytest.approx(612.5)
    text = tta.report([t, replace(t, repeat=3, table=[[1, 64, 1]])])
    rows = [line for line in text.splitlines() if line.startswith("| read")]
    assert rows[0].endswith("| yes |") and rows[1].endswith("| no |")  # against the first run read
    assert "read: wall 10.2 min [10.2, 10.2]" in text


def test_drift_burns_a_core_while_the_block_runs_and_stops_after(tta: ModuleType) -> None:
    with tta.drifting(0.2) as burner:
        time.sleep(0.5)
        assert burner is not None and burner.poll() is None  # burning or resting, alive
    assert burner.poll() is not None
    with tta.drifting(None) as none:
        assert none is None


def test_the_round_spread_is_how_much_a_speedup_moves_from_round_to_round(tta: ModuleType) -> None:
    """Per point: the standard deviation across rounds of each configuration's throughput over the baseline's in the
    same round, averaged over configurations; a point of one round has none."""
    def summary(rates: dict[str, list[float]]) -> dict[str, object]:
        """The sweep's speedups over the baseline per round, from each configuration's throughput per round."""
        base = rates["baseline"]
        return {"analysis": {"speedups": [
            {"config_id": c, "point_id": p, "output_throughput": {
                "repeat_values": [x / b for x, b in zip(xs, base, strict=True)][: None if p == "c16" else 1]}}
            for c, xs in rates.items() if c != "baseline" for p in ("c1", "c16")]}}
    steady = tta.round_spread(summary({"baseline": [1.0, 2.0, 1.0], "k2": [1.1, 2.2, 1.1]}))
    assert steady == {"c16": pytest.approx(0.0)}  # drift that moves both alike is not spread
    moving = tta.round_spread(summary({"baseline": [1.0, 1.0, 1.0], "k2": [1.0, 1.2, 1.1], "k4": [1.0, 1.0, 1.0]}))
    assert moving["c16"] == pytest.approx(0.1 / 2)  # k2's 0.1, k4's 0, averaged
    real = tta.read_run(RUN, design="before", rev="abc", repeat=1, wall_s=900.0, setup_s=0.0)
    assert set(real.round_sd) <= set(real.points) and all(sd >= 0 for sd in real.round_sd.values())
