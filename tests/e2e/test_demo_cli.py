"""The README's main job, as a user runs it (smaller): the demo sweeps K against the baseline, prints the SD
report and the speedup, measures head to head a K the step-cost model proposes where it predicts one wins,
recommends a K per batch size and, when some K pays, runs that config on the engine. The one test here that reads
the real host (the integration tests turn the probe off): every round records how busy the machine was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.rundir.answer import read_answer
from specmeter.rundir.store import load_summary
from specmeter.schemas.recommend import Recommendation
from specmeter.telemetry.host import OFF_ENV

pytestmark = pytest.mark.e2e


def test_demo_end_to_end(tmp_path: Path) -> None:
    # 96 tokens as in the demo: the tiny target's first ~32 accept too little for K = 2 to pay even at batch 1,
    # and then the verification this test is here to run would be skipped. Two rounds: one on each instance.
    env = {k: v for k, v in os.environ.items() if k != OFF_ENV}  # the real host, read
    res = subprocess.run(
        [sys.executable, "-m", "specmeter.cli", "demo", "--concurrency", "1", "-k", "2", "--num-prompts", "6",
         "--max-tokens", "96", "--max-rounds", "2", "--out", str(tmp_path), "-v"],  # -v: every table
        capture_output=True, text=True, timeout=1200, env=env,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for heading in ("Speculative decoding", "Acceptance per category", "Throughput", "Latency", "Speedup",
                    "Where speculation stops paying", "Lossless check"):
        assert heading in res.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    assert summary.plan.kind == "demo" and summary.plan.interleave
    assert [c.config_id for c in summary.configs] == ["baseline", "draft_model-k2"]
    assert summary.configs[0].spec_label == "off"
    (speedup,) = summary.analysis.speedups
    assert speedup.point_id == "c1" and speedup.same_work
    assert speedup.output_throughput.value and speedup.output_throughput.value > 0
    assert speedup.verdict is not None
    (check,) = summary.analysis.lossless
    assert check.compared == speedup.paired_requests
    for server in ("draft_model-k2", "baseline"):
        assert (run_dir / f"server-{server}.log").exists()
        assert (run_dir / f"server-{server}.2.log").exists()  # its second instance (--instances 2, the default)
    for config in summary.configs:  # rounds alternate between the two instances, each a server of its own
        assert [i.instance for i in config.instance_servers] == [1]
        assert config.instance_servers[0].server_pid not in (None, config.server_pid)
        assert all(p.instance == p.repeat % 2 for p in config.points)
    if len(summary.configs[1].points) > 1:  # both instances measured: a restart's effect is in the intervals
        assert speedup.output_throughput.instances == 2 and speedup.output_throughput.rerun_low is not None
    rounds = [p for c in summary.configs for p in c.points]
    assert all(p.host is not None and p.host.wall_s > 0 and p.host.busy_cpu_s > 0 and p.host.own_cpu_s > 0
               for p in rounds)  # the kernel's CPU time, and the servers' and specmeter's own within it
    host = summary.analysis.host  # judged: quiet, or each disturbed round named with what took the CPU
    assert host is not None and host.rounds == len({(p.point_id, p.repeat) for p in rounds})
    assert set(host.disturbed_points) <= {p.id for p in summary.plan.points}
    assert (run_dir / "requests.jsonl").exists()
    assert summary.models["target"]["sha256"]

    rec = Recommendation.model_validate_json((run_dir / "recommendation.json").read_text(encoding="utf-8"))
    assert rec.best is not None and rec.best.ranges[0].start == 1
    answer = read_answer(run_dir)  # the pointer holds the latest round's latest state
    assert answer is not None and answer.rounds[0].number == 1 and answer.recommendation == rec
    # K = 2 alone: the model may propose K = 1 or 3 (one, the default budget); what it said is in the answer.
    proposed = {p.config_id for p in rec.proposed}
    if (run_dir / "propose").exists():
        ran = load_summary(run_dir / "propose")
        assert ran.plan.kind == "propose" and [p.config_id for p in ran.plan.proposed] == sorted(proposed)
        assert all(p.k in (1, 3) and p.run == "propose" and all(c.outcome for c in p.contests) for p in rec.proposed)
    else:
        assert not proposed
    if rec.best.spec is None:  # K = 2 did not clearly beat the baseline: the answer is speculation off
        assert "nothing to verify" in res.stderr and not (run_dir / "verify").exists()
        return
    assert "The dynamic config, run" in res.stdout
    verified = load_summary(run_dir / "verify")
    assert verified.status == "complete" and verified.plan.kind == "verify"
    (row,) = verified.analysis.verification
    assert row.point_id == "c1" and row.static_id in {"draft_model-k2", *proposed}  # a proposed K may have won
    assert row.drafted.followed, f"{row.drafted.note} ({row.drafted.drafted})"
    assert row.vs_baseline is not None and row.vs_static is not None and row.vs_static.same_work
