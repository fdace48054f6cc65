"""The Slurm executor without Slurm: its parsers on recorded squeue/sacct/sbatch text, the driver's verdict on an
attempt, the job groups, and a whole run against a fake Slurm whose jobs run the real job code on the fake engine:
the first attempt is cancelled after its first cell, the group is resubmitted, and the merge takes exactly one
attempt, again and again the same."""

from __future__ import annotations

import shlex
import socket
from contextlib import nullcontext
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from fakeengine.drive import RecordingReporter, attach_pair
from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError, RunIncomplete, SpecmeterError
from specmeter.config.models import LoadSpec
from specmeter.config.slurm import SlurmOptions
from specmeter.data.workload import load_conversations
from specmeter.execution.runner import Execution
from specmeter.executors.groups import plan_for_jobs, sub_plan
from specmeter.executors.layout import AttemptDir, read_state
from specmeter.executors.merge import merge
from specmeter.executors.slurm import judge, settled
from specmeter.executors.slurm_cli import Queued, parse_queue, parse_sacct, parse_sbatch
from specmeter.plans.sweep import SweepSpec
from specmeter.rundir.store import CAPTURES, REQUESTS, RunStore, atomic_write_text, load_summary
from specmeter.schemas.jobs import JobAttempt
from specmeter.schemas.plan import Role, WorkloadSelection
from specmeter.workflows.slurm import sweep_on_slurm
from specmeter.workflows.slurm_job import run_job
from specmeter.workflows.terminal import Terminal

pytestmark = pytest.mark.timeout(300)

# squeue -h -r -o '%i|%T|%N' on the one-node test cluster: a running task, a pending one, one being stopped.
SQUEUE = "12_0|RUNNING|vm\n12_1|PENDING|\n13_0|COMPLETING|vm\n"
# sacct -n -P -X -o JobID,State,NodeList after a scancel and a completed task.
SACCT = "12_0|CANCELLED by 0|vm\n12_1|COMPLETED|vm\n"


def test_parsers_read_what_slurm_prints() -> None:
    assert parse_queue(SQUEUE) == {"12_0": Queued("RUNNING", "vm"), "12_1": Queued("PENDING", None),
                                   "13_0": Queued("COMPLETING", "vm")}
    assert parse_sacct(SACCT) == {"12_0": "CANCELLED", "12_1": "COMPLETED"}
    assert parse_sbatch("42\n") == "42" and parse_sbatch("42;cluster\n") == "42"
    with pytest.raises(SpecmeterError, match="not a job id"):
        parse_sbatch("sbatch: error: invalid partition specified: gpu")


@pytest.mark.parametrize(("queued", "ended", "status", "attempt", "verdict", "state"), [
    (Queued("RUNNING", "vm"), None, "running", 1, "wait", "RUNNING"),
    (Queued("COMPLETING", "vm"), None, "incomplete", 1, "wait", "COMPLETING"),  # still stopping: not read yet
    (None, "CANCELLED", "complete", 1, "done", "CANCELLED"),  # cancelled after it finished: its results stand
    (None, "COMPLETED", "incomplete", 1, "resubmit", "COMPLETED"),  # the run inside ended incomplete
    (None, "PREEMPTED", "running", 2, "resubmit", "PREEMPTED"),  # killed: its summary never said it ended
    (None, None, None, 1, "resubmit", "GONE"),  # no accounting, never started
    (None, "FAILED", "incomplete", 3, "give up", "FAILED"),
])
def test_the_verdict_on_an_attempt(queued: Queued | None, ended: str | None, status: str | None, attempt: int,
                                   verdict: str, state: str) -> None:
    a = JobAttempt(group="node", attempt=attempt, job_id="12_0")
    assert judge(a, queued, ended, status, max_attempts=3) == verdict  # type: ignore[arg-type]
    assert a.state == state
    assert settled(a, 3) == (verdict in ("done", "give up"))
    if verdict in ("resubmit", "give up"):
        assert a.why is not None and "12_0" in a.why


def test_an_unconfirmed_submission_is_never_reused() -> None:
    a = JobAttempt(group="node", attempt=1)
    assert judge(a, None, None, "running", max_attempts=3) == "resubmit"
    assert a.why is not None and "never confirmed" in a.why


def _sweep(*candidates: dict[str, object]) -> SweepSpec:
    return SweepSpec.model_validate({"engine": {"model": "models/demo-target"}, "candidates": list(candidates),
                                     "load": {"concurrency": [1, 4]}})


def test_node_grouping_keeps_the_plan_whole() -> None:
    plan = _sweep({"method": "ngram", "k": [2, 4]}).plan(WorkloadSelection(dataset="sample"))
    merged, groups = plan_for_jobs(plan, "node")
    assert merged == plan and [g.config_ids for g in groups] == [[c.id for c in plan.configs]]


def test_drafter_grouping_gives_each_drafter_its_own_baseline() -> None:
    plan = _sweep({"method": "draft_model", "model": "models/demo-draft", "k": [2, 4]},
                  {"method": "ngram", "k": 3}).plan(WorkloadSelection(dataset="sample"))
    merged, groups = plan_for_jobs(plan, "drafter")
    assert [g.config_ids for g in groups] == [
        ["baseline@j1-draft_model", "draft_model-k2", "draft_model-k4"], ["baseline@j2-ngram", "ngram-k3"]]
    for c in merged.configs:
        base = merged.baseline_for(c)
        if c.role is Role.candidate:  # every speedup is over a baseline on the candidate's node
            assert base is not None and base.node_group == c.node_group and base.id == f"baseline@{c.node_group}"
    assert [c.id for c in sub_plan(merged, groups[1]).configs] == ["baseline@j2-ngram", "ngram-k3"]
    one, only = plan_for_jobs(_sweep({"method": "ngram", "k": [2, 4]}).plan(WorkloadSelection(dataset="s")), "drafter")
    assert len(only) == 1 and one.configs[0].id == "baseline"  # one drafter: one job, as --jobs node


def test_drafter_grouping_refuses_a_load_search() -> None:
    spec = SweepSpec.model_validate({"engine": {"model": "m"}, "candidates": [{"method": "ngram", "k": 2},
                                     {"method": "suffix", "k": 4}], "load": {"concurrency": "auto"}})
    with pytest.raises(InputError, match="--jobs node"):
        plan_for_jobs(spec.plan(WorkloadSelection(dataset="sample")), "drafter")


class FakeSlurm:
    """Runs each submitted task at once, in this process, with the real job code (a job that ended before the
    driver looked). The first task is 'cancelled' after its first finished cell: its summary then holds only
    that cell and says it was running, as a job killed mid-way leaves it."""

    def __init__(self, term: Terminal, cancel_first: bool = True) -> None:
        self.term, self.jobs, self.cancel_first = term, 0, cancel_first
        self.options: list[list[str]] = []

    def submit(self, script: Path, options: list[str]) -> str:
        self.jobs += 1
        self.options.append(options)
        text = script.read_text()
        tasks = shlex.split(text.split("tasks=(", 1)[1].split(")", 1)[0])
        run_dir = Path(shlex.split(text.splitlines()[-1])[5])
        for task in tasks:
            group, attempt, seed = task.split(":")
            run_job(run_dir, group, int(attempt), int(seed) or None, None, ["specmeter", "slurm-job"], self.term)
            if self.jobs == 1 and self.cancel_first:
                self._cut(AttemptDir(run_dir, group, int(attempt)).path)
        return str(self.jobs)

    @staticmethod
    def _cut(path: Path) -> None:
        summary = load_summary(path)
        first = summary.configs[0]
        first.points = first.points[:1]
        for other in summary.configs[1:]:
            other.points = []
        summary.status = "running"
        atomic_write_text(path / "summary.json", summary.model_dump_json())

    def queue(self) -> dict[str, Queued]:
        return {}

    def ended(self, job_ids: list[str]) -> dict[str, str] | None:
        return {"1_0": "CANCELLED"} if "1_0" in job_ids else None


def _terminal() -> Terminal:
    reporter = RecordingReporter()
    return Terminal(out=Console(file=StringIO(), width=200), err=Console(file=StringIO()),
                    progress=lambda console: nullcontext(reporter))


def test_a_cancelled_job_is_resubmitted_and_one_attempt_merged(tmp_path: Path) -> None:
    term = _terminal()
    load = LoadSpec(concurrency=[1, 2], num_prompts=4, max_tokens=12, warmup=0)
    convs, selection = load_conversations("sample", None, load)
    slurm = FakeSlurm(term)
    with FakeEngine(k=4) as spec_server, FakeEngine(alpha=0.0, speculative=False) as base_server:
        ex = attach_pair(spec_server.url, base_server.url, convs, workload=selection, concurrency=[1, 2],
                         num_prompts=4, max_tokens=12)
        run_dir = tmp_path / "run"
        sweep_on_slurm(ex, run_dir, SlurmOptions(poll_s=0.001, partition="cpu", options={"mem": "8G"}), term,
                       slurm=slurm)

    assert all({"--nodes=1", "--no-requeue", "--partition=cpu", "--mem=8G"} <= set(o) for o in slurm.options)
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    first, second = summary.jobs
    assert (first.attempt, first.state, first.status, first.used) == (1, "CANCELLED", "incomplete", False)
    assert (second.attempt, second.state, second.status, second.used) == (2, "GONE", "complete", True)
    node = socket.gethostname()
    assert {c.ran_on.label() for c in summary.configs if c.ran_on} == {f"{node} (node/attempt-2, job 2_0)"}
    cells = [(c.config_id, p.point_id, p.repeat) for c in summary.configs for p in c.points]
    assert sorted(cells) == sorted((c.id, p.id, 0) for c in summary.plan.configs for p in summary.plan.points)
    # The cell attempt 1 finished was resumed on the same node, not measured again.
    kept = load_summary(AttemptDir(run_dir, "node", 1).path).configs[0]
    assert summary.config(kept.config_id).point(kept.points[0].point_id) == kept.points[0]  # type: ignore[union-attr]
    assert {(s.config_id, s.point_id) for s in summary.analysis.speedups} == {
        ("ngram-k4", p.id) for p in summary.plan.points}

    # Merging again (a resumed driver, a second look) writes the same data: one attempt per group, no duplicate.
    data = (run_dir / REQUESTS).read_bytes(), sorted(p.name for p in (run_dir / CAPTURES).rglob("*.json"))
    assert len(RunStore(run_dir).read_records()) == len(RunStore(AttemptDir(run_dir, "node", 2).path).read_records())
    merge(run_dir, read_state(run_dir))
    assert ((run_dir / REQUESTS).read_bytes(), sorted(p.name for p in (run_dir / CAPTURES).rglob("*.json"))) == data


def test_drafters_on_their_own_nodes_are_decided_each_against_its_own_baseline(tmp_path: Path) -> None:
    load = LoadSpec(concurrency=[1, 2], num_prompts=4, max_tokens=12, warmup=0)
    _, selection = load_conversations("sample", None, load)
    term = _terminal()
    with FakeEngine(k=4) as ngram, FakeEngine(k=3) as suffix, FakeEngine(alpha=0.0, speculative=False) as base:
        sweep = SweepSpec.model_validate({
            "engine": {"model": "models/demo-target"}, "baseline_endpoint": base.url,
            "candidates": [{"method": "ngram", "k": 4, "endpoint": ngram.url},
                           {"method": "suffix", "k": 3, "endpoint": suffix.url}],
            "load": {"concurrency": [1, 2], "num_prompts": 4, "max_tokens": 12, "warmup": 0, "precision": "fixed"}})
        ex = Execution(plan=sweep.plan(selection), conversations=load_conversations("sample", None, load)[0])
        sweep_on_slurm(ex, tmp_path / "run", SlurmOptions(poll_s=0.001, jobs="drafter"), term,
                       slurm=FakeSlurm(term, cancel_first=False))
    summary = load_summary(tmp_path / "run")
    assert summary.status == "complete" and [a.group for a in summary.jobs] == ["j1-ngram", "j2-suffix"]
    assert {(s.config_id, s.baseline_id) for s in summary.analysis.speedups} == {
        ("ngram-k4", "baseline@j1-ngram"), ("suffix-k3", "baseline@j2-suffix")}
    # One choice per point and node, each walked only through its own node's configurations.
    assert sorted((c.node_group, c.point_id) for c in summary.analysis.choices) == [
        ("j1-ngram", "c1"), ("j1-ngram", "c2"), ("j2-suffix", "c1"), ("j2-suffix", "c2")]
    for choice in summary.analysis.choices:
        group = {c.id for c in summary.plan.configs if c.node_group == choice.node_group}
        assert all({h.config_id, h.against} <= group for h in choice.evidence)


def test_a_job_stopped_mid_way_names_the_slurm_run_to_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's run stopped by the runner (Ctrl-C, a dead server) points its log at the Slurm run, not at its own
    attempt directory, which only the driver may resume."""
    import specmeter.workflows.slurm_job as job

    said: list[str] = []
    measure = job.measure_one

    def stopped(ex: Execution, run_dir: Path, term: Terminal) -> object:
        raise RunIncomplete(f"run interrupted; what finished is in {run_dir}; `specmeter resume {run_dir}` runs what "
                            "is missing")

    class StoppedOnce(FakeSlurm):
        def submit(self, script: Path, options: list[str]) -> str:
            monkeypatch.setattr(job, "measure_one", stopped if self.jobs == 0 else measure)
            try:
                return super().submit(script, options)
            except RunIncomplete as exc:
                said.append(str(exc))
                return str(self.jobs)

    term = _terminal()
    load = LoadSpec(concurrency=[1], num_prompts=2, max_tokens=8, warmup=0)
    convs, selection = load_conversations("sample", None, load)
    with FakeEngine(k=4) as spec_server, FakeEngine(alpha=0.0, speculative=False) as base_server:
        ex = attach_pair(spec_server.url, base_server.url, convs, workload=selection, concurrency=[1],
                         num_prompts=2, max_tokens=8)
        run_dir = tmp_path / "run"
        sweep_on_slurm(ex, run_dir, SlurmOptions(poll_s=0.001), term, slurm=StoppedOnce(term, cancel_first=False))
    (line,) = said
    assert line.startswith("node/attempt-1 stopped (run interrupted)") and f"`specmeter resume {run_dir}`" in line
    assert load_summary(run_dir).status == "complete"
