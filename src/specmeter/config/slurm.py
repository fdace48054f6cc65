"""How a sweep asks Slurm for its jobs (`sweep --executor slurm ...`): partition, account, time limit, GPUs per job,
how configurations group into jobs, attempts, and any other sbatch option. A run directory on Slurm stores them
(schemas/jobs.py SlurmRun)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Grouping = Literal["node", "drafter"]


class SlurmOptions(BaseModel):
    """How the driver asks Slurm for allocations (`sweep --executor slurm ...`)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = Field(default=None, description="Each job's time limit, in Slurm's form (e.g. 04:00:00).")
    gpus_per_job: int | None = Field(default=None, ge=0, description="GPUs of one node each job asks for.")
    jobs: Grouping = Field(default="node", description="node: the whole plan in one job on one node; drafter: one "
                           "job per drafter (all its K) with its own baseline on the same node.")
    max_attempts: int = Field(default=3, ge=1, description="A group is given up after this many attempts.")
    options: dict[str, str] = Field(default_factory=dict, description="More sbatch options, KEY -> VALUE "
                                    "(`--slurm-option mem=16G` is sbatch's --mem=16G).")
    poll_s: float = Field(default=10.0, gt=0, description="Seconds between two looks at the queue.")
