"""The Slurm driver: submit each job group as an array task, watch the queue, resubmit a group whose attempt
ended unfinished (failed, cancelled, timed out, pre-empted, node lost) as its next attempt, until every group has
a complete attempt or has used its attempts. Slurm schedules; specmeter only asks it and reads its answers.

The truth about an attempt is its own summary.json, read once its job has left the queue: a job Slurm calls
CANCELLED may still have finished (it had stopped writing by then), and one Slurm calls COMPLETED may have ended
its run incomplete."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from specmeter.executors.layout import JOBS, AttemptDir, write_state
from specmeter.executors.slurm_cli import Queued, Slurm
from specmeter.schemas.jobs import AttemptStatus, JobAttempt, SlurmRun

Verdict = Literal["wait", "done", "resubmit", "give up"]
JOB_COMMAND = "slurm-job"  # the hidden CLI command a job runs (cli/sweep.py)


def judge(attempt: JobAttempt, queued: Queued | None, ended: str | None, status: AttemptStatus | None,
          max_attempts: int) -> Verdict:
    """What to do about a group's latest attempt, given what Slurm and the attempt's directory say; updates the
    attempt's record with it."""
    if attempt.job_id is None:  # the driver stopped during sbatch: whether the job exists is unknown
        attempt.status, attempt.why = "incomplete", "its submission was never confirmed; not used"
        return "resubmit" if attempt.attempt < max_attempts else "give up"
    if queued is not None:
        attempt.state, attempt.node = queued.state, queued.node or attempt.node
        attempt.status = "running" if queued.state in ("RUNNING", "COMPLETING") else "submitted"
        return "wait"
    attempt.state = ended or "GONE"
    if status == "complete":  # finished before it stopped, whatever Slurm calls its end
        attempt.status, attempt.why = "complete", None
        return "done"
    attempt.status = "incomplete"
    how = "left the queue (no accounting says how)" if attempt.state == "GONE" else f"ended {attempt.state}"
    attempt.why = f"job {attempt.job_id} {how} with its run {'never started' if status is None else status}"
    if attempt.attempt < max_attempts:
        return "resubmit"
    attempt.why += f"; given up after {max_attempts} attempts"
    return "give up"


def settled(attempt: JobAttempt | None, max_attempts: int) -> bool:
    """A group's latest attempt needs nothing more: complete, or the last one it was given and ended."""
    return attempt is not None and (attempt.status == "complete" or (
        attempt.status == "incomplete" and attempt.attempt >= max_attempts))


class Driver:
    """Submits, watches and resubmits one Slurm run's groups; its state is on disk after every change."""

    def __init__(self, run_dir: Path, state: SlurmRun, slurm: Slurm, note: Callable[[str], None],
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.run_dir, self.state, self.slurm, self.note, self.sleep = run_dir, state, slurm, note, sleep

    def run(self) -> None:
        """Until every group is settled (also after the driver itself was stopped: it reads its state back)."""
        while not self.step():
            self.sleep(self.state.options.poll_s)

    def step(self) -> bool:
        """One look at the queue: record what changed, resubmit what ended unfinished; True once all settled."""
        queue = self.slurm.queue()
        most = self.state.options.max_attempts
        latest = {g.name: self.state.latest(g.name) for g in self.state.groups}
        gone = [a.job_id for a in latest.values()
                if a is not None and a.job_id and not settled(a, most) and a.job_id not in queue]
        ended = self.slurm.ended(gone) if gone else None
        again: list[str] = []
        for group, attempt in latest.items():
            if attempt is None:
                again.append(group)
                continue
            if settled(attempt, most):
                continue
            where = AttemptDir(self.run_dir, group, attempt.attempt)
            before = attempt.state
            verdict = judge(attempt, queue.get(attempt.job_id or ""), (ended or {}).get(attempt.job_id or ""),
                            where.status(), most)
            attempt.node = where.node() or attempt.node
            if attempt.state != before:
                self.note(f"{attempt.name}: job {attempt.job_id} {attempt.state}"
                          + (f" on {attempt.node}" if attempt.node else ""))
            if verdict == "resubmit":
                self.note(f"{attempt.name}: {attempt.why}; resubmitting as attempt-{attempt.attempt + 1}")
                again.append(group)
            elif verdict == "give up":
                self.note(f"[red]{attempt.name}: {attempt.why}[/]")
        write_state(self.run_dir, self.state)
        if again:
            self.submit(again)
            return False
        return all(settled(a, most) for a in latest.values())

    def submit(self, groups: list[str]) -> None:
        """One array job: a task per group, each its group's next attempt. The attempts are on disk before sbatch
        runs, so a driver stopped in between never gives two jobs one attempt directory."""
        fresh: list[tuple[JobAttempt, int | None]] = []
        for group in groups:
            last = self.state.latest(group)
            attempt = JobAttempt(group=group, attempt=last.attempt + 1 if last else 1)
            # A new attempt may resume from the last one whose job is known to have ended (the job decides whether
            # it may: only on the same node, or speedups would span two nodes' hardware).
            seed = last.attempt if last is not None and last.job_id is not None else None
            fresh.append((attempt, seed))
        self.state.attempts += [a for a, _ in fresh]
        write_state(self.run_dir, self.state)
        options = self.sbatch_options(len(fresh))
        job = self.slurm.submit(self._script(fresh, options), options)
        for i, (attempt, _) in enumerate(fresh):
            attempt.job_id = f"{job}_{i}"
        write_state(self.run_dir, self.state)
        self.note(f"submitted job {job} (array of {len(fresh)}): "
                  + ", ".join(f"{a.name} as {a.job_id}" for a, _ in fresh))

    def _script(self, fresh: list[tuple[JobAttempt, int | None]], options: list[str]) -> Path:
        """jobs/submit-<n>.sh: the command each array task runs, and how it was submitted, kept for the record."""
        jobs = self.run_dir / JOBS
        jobs.mkdir(parents=True, exist_ok=True)
        path = jobs / f"submit-{len(list(jobs.glob('submit-*.sh'))) + 1}.sh"
        run = shlex.quote(str(self.run_dir))
        tasks = " ".join(shlex.quote(f"{a.group}:{a.attempt}:{seed or 0}") for a, seed in fresh)
        lines = ["#!/bin/bash", f"# submitted with: {shlex.join(['sbatch', *options, str(path)])}",
                 f"tasks=({tasks})",
                 'IFS=: read -r group attempt seed <<< "${tasks[$SLURM_ARRAY_TASK_ID]}"',
                 f"exec {shlex.quote(self.state.python)} -m specmeter.cli {JOB_COMMAND} {run} "
                 '"$group" "$attempt" --seed "$seed"']
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def sbatch_options(self, tasks: int) -> list[str]:
        """One node per job (a fair comparison never spans two); the user's partition, account, time and GPUs. No
        requeue by Slurm: a requeued task could resume its attempt on another node; the driver resubmits instead."""
        opts = self.state.options
        out = [f"--job-name=specmeter-{self.run_dir.name}", "--nodes=1", "--no-requeue", f"--array=0-{tasks - 1}",
               f"--output={self.run_dir / JOBS}/slurm-%A_%a.out", f"--chdir={self.state.cwd}"]
        for flag, value in (("partition", opts.partition), ("account", opts.account), ("time", opts.time),
                            ("gpus", opts.gpus_per_job)):
            if value is not None:
                out.append(f"--{flag}={value}")
        out += [f"--{key}={value}" if value else f"--{key}" for key, value in opts.options.items()]
        return out
