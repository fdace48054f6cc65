"""Where a plan's cells ran when Slurm ran them: the job groups (what must share a node for a fair comparison),
every attempt at each group (one Slurm array task each), and the node each ran on.

A group's attempt writes only to its own run directory (RUN/jobs/<group>/attempt-<n>/): one writer per cell, and
an attempt that was cancelled but still wrote stays where it is, named, never mixed into another."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specmeter.config.slurm import SlurmOptions
from specmeter.schemas.plan import Plan

AttemptStatus = Literal["submitted", "running", "complete", "incomplete"]


class JobGroup(BaseModel):
    """Configurations that run in one job, on one node: a candidate is compared only with configurations of
    its own group."""

    name: str
    config_ids: list[str]


class JobAttempt(BaseModel):
    """One submission of one group: a Slurm array task writing RUN/jobs/<group>/attempt-<n>/."""

    group: str
    attempt: int = Field(ge=1)
    job_id: str | None = Field(default=None, description="Slurm's id of the array task, e.g. 1234_0.")
    state: str | None = Field(default=None, description="Slurm's last word on it: PENDING, RUNNING, COMPLETED, "
                              "CANCELLED, FAILED, TIMEOUT, PREEMPTED, ...; GONE: it left the queue and Slurm keeps "
                              "no accounting to say how.")
    node: str | None = Field(default=None, description="The host it ran on (written by the job itself).")
    status: AttemptStatus = "submitted"
    why: str | None = Field(default=None, description="Why it ended unfinished, and what the driver did then.")
    used: bool = Field(default=False, description="The attempt whose results the run merged (one per group).")

    @property
    def name(self) -> str:
        return f"{self.group}/attempt-{self.attempt}"


class SlurmRun(BaseModel):
    """RUN/slurm.json: what the driver needs to watch, resubmit and merge, also after it was itself stopped."""

    options: SlurmOptions
    plan: Plan = Field(description="The plan as merged: every group's configurations (node baselines included).")
    groups: list[JobGroup]
    attempts: list[JobAttempt] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list)
    cwd: str = Field(description="Where jobs run (relative model paths in the plan resolve from here).")
    python: str = Field(description="The interpreter jobs run specmeter with.")
    created_utc: str

    def latest(self, group: str) -> JobAttempt | None:
        return max((a for a in self.attempts if a.group == group), key=lambda a: a.attempt, default=None)


class RanOn(BaseModel):
    """Where one configuration's numbers came from, when Slurm ran it."""

    node: str | None
    group: str
    attempt: int
    job_id: str | None = None

    def label(self) -> str:
        job = f", job {self.job_id}" if self.job_id else ""
        return f"{self.node or 'node ?'} ({self.group}/attempt-{self.attempt}{job})"
