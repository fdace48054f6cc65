"""Slurm's own command line, as the driver uses it: sbatch to submit an array, squeue to see what is still queued
or running, sacct (where the cluster keeps accounting) to learn how a job ended, scancel. The parsers take the
text these commands print, so they are tested on recorded output."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from specmeter.common.errors import SpecmeterError

# squeue/sacct fields, '|'-separated: the array task's id (1234_0), its state, its node(s).
QUEUE_FORMAT = "%i|%T|%N"
SACCT_FIELDS = "JobID,State,NodeList"


@dataclass(frozen=True)
class Queued:
    """A job still known to the queue: pending, running, or completing (its processes being stopped)."""

    state: str
    node: str | None


class Slurm(Protocol):
    """What the driver needs of Slurm (SlurmCli runs the commands; tests give a fake)."""

    def submit(self, script: Path, options: list[str]) -> str:
        """Submit a batch script with sbatch's options; the job id (of the array)."""
        ...

    def queue(self) -> dict[str, Queued]:
        """Every job in the queue, by id (array tasks one by one)."""
        ...

    def ended(self, job_ids: list[str]) -> dict[str, str] | None:
        """How the jobs that left the queue ended (COMPLETED, CANCELLED, ...); None: no accounting here."""
        ...


def parse_queue(text: str) -> dict[str, Queued]:
    """`squeue -h -r -o '%i|%T|%N'` output: one job (or array task) a line."""
    out: dict[str, Queued] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) >= 2 and fields[0]:
            out[fields[0]] = Queued(state=fields[1], node=(fields[2] or None) if len(fields) > 2 else None)
    return out


def parse_sacct(text: str) -> dict[str, str]:
    """`sacct -n -P -X -o JobID,State,NodeList` output; a state may carry who did it ('CANCELLED by 0')."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) >= 2 and fields[0] and fields[1]:
            out[fields[0]] = fields[1].split()[0]
    return out


def parse_sbatch(text: str) -> str:
    """`sbatch --parsable` output: 'jobid' or 'jobid;cluster'."""
    job = text.strip().split(";")[0]
    if not job.isdigit():
        raise SpecmeterError(f"sbatch answered {text.strip()!r}, not a job id; check the Slurm options given")
    return job


class SlurmCli:
    """Slurm through its commands, which must be on PATH."""

    def __init__(self) -> None:
        missing = [c for c in ("sbatch", "squeue") if shutil.which(c) is None]
        if missing:
            raise SpecmeterError(f"--executor slurm: {' and '.join(missing)} not found; run on a Slurm login node "
                                 "(or put Slurm's commands on PATH)")

    @staticmethod
    def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    def submit(self, script: Path, options: list[str]) -> str:
        done = self._run(["sbatch", "--parsable", *options, str(script)])
        if done.returncode != 0:
            raise SpecmeterError(f"sbatch {script} failed: {done.stderr.strip() or done.stdout.strip()}; fix the "
                                 "Slurm options (--partition, --account, --time, --slurm-option) and resume the run")
        return parse_sbatch(done.stdout)

    def queue(self) -> dict[str, Queued]:
        done = self._run(["squeue", "-h", "-r", "-o", QUEUE_FORMAT])
        if done.returncode != 0:
            raise SpecmeterError(f"squeue failed: {done.stderr.strip()}; is slurmctld up? `specmeter resume RUN` "
                                 "watches the jobs again")
        return parse_queue(done.stdout)

    def ended(self, job_ids: list[str]) -> dict[str, str] | None:
        if not job_ids or shutil.which("sacct") is None:
            return None
        done = self._run(["sacct", "-n", "-P", "-X", "-o", SACCT_FIELDS, "-j", ",".join(job_ids)])
        if done.returncode != 0:  # "Slurm accounting storage is disabled": the attempt's own summary decides
            return None
        return parse_sacct(done.stdout)
