"""The files of a Slurm run, beside the run's own summary.json and reports:

  slurm.json                     the driver's state (SlurmRun): groups, every attempt, its job and node
  jobs/submit-<n>.sh             each sbatch script as submitted (an array: one task per group to run)
  jobs/slurm-<job>_<task>.out    what each task printed
  jobs/<group>/plan.json         the sub-plan the group's jobs run
  jobs/<group>/attempt-<n>/      one attempt's run directory (summary.json, requests.jsonl, captures/, logs)
                 job.json        written by the job when it starts: the node it got and its Slurm job id

An attempt's directory has one writer, its own job; the driver only reads it, and merges after the job left
the queue."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.rundir.store import SUMMARY, atomic_write_text, load_summary
from specmeter.schemas.jobs import AttemptStatus, SlurmRun
from specmeter.schemas.plan import Plan

STATE = "slurm.json"
JOBS = "jobs"
JOB_INFO = "job.json"


def is_slurm_run(run_dir: Path) -> bool:
    return (run_dir / STATE).exists()


def read_state(run_dir: Path) -> SlurmRun:
    path = run_dir / STATE
    try:
        return SlurmRun.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a Slurm run's state ({exc.__class__.__name__}); restore it, or run the "
                         "sweep again") from exc


def write_state(run_dir: Path, state: SlurmRun) -> None:
    atomic_write_text(run_dir / STATE, state.model_dump_json(indent=2) + "\n")


@dataclass(frozen=True)
class AttemptDir:
    """RUN/jobs/<group>/attempt-<n>/ and what the driver reads of it."""

    run_dir: Path
    group: str
    attempt: int

    @property
    def group_dir(self) -> Path:
        return self.run_dir / JOBS / self.group

    @property
    def path(self) -> Path:
        return self.group_dir / f"attempt-{self.attempt}"

    @property
    def plan_path(self) -> Path:
        return self.group_dir / "plan.json"

    def plan(self) -> Plan:
        return Plan.model_validate_json(self.plan_path.read_text(encoding="utf-8"))

    def previous(self) -> AttemptDir | None:
        return AttemptDir(self.run_dir, self.group, self.attempt - 1) if self.attempt > 1 else None

    def status(self) -> AttemptStatus | None:
        """The attempt's own summary status (None: it never wrote one)."""
        if not (self.path / SUMMARY).exists():
            return None
        try:
            return load_summary(self.path).status
        except InputError:
            return None  # a summary torn by a killed job counts as none: the attempt is redone

    def write_job_info(self, node: str, job_id: str | None) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path / JOB_INFO, json.dumps({"node": node, "job_id": job_id}) + "\n")

    def node(self) -> str | None:
        """The node the job said it runs on (None: it never started)."""
        try:
            node = json.loads((self.path / JOB_INFO).read_text(encoding="utf-8")).get("node")
        except (OSError, ValueError):
            return None
        return node if isinstance(node, str) else None
