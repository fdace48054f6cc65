"""How a sweep asks Slurm for its jobs (`sweep --executor slurm ...`): partition, account, time limit, GPUs per job,
how configurations group into jobs, attempts, and any other sbatch option. A run directory on Slurm stores them
(schemas/jobs.py SlurmRun)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from specmeter.common.errors import InputError
from specmeter.config import flag_text
from specmeter.config.flags import Flag, flagged

Grouping = Literal["node", "drafter"]
SLURM = "With --executor slurm: "  # how each Slurm setting's help begins


class SlurmOptions(BaseModel):
    """How the driver asks Slurm for allocations (`sweep --executor slurm ...`)."""

    partition: Annotated[str | None, Flag("--partition")] = Field(
        default=None, description=SLURM + "the partition jobs run in.")
    account: Annotated[str | None, Flag("--account")] = Field(
        default=None, description=SLURM + "the account jobs are charged to.")
    time: Annotated[str | None, Flag("--time")] = Field(
        default=None, description=SLURM + "each job's time limit, in Slurm's form (e.g. 04:00:00).")
    gpus_per_job: Annotated[int | None, Flag("--gpus-per-job")] = Field(
        default=None, ge=0, description=SLURM + "GPUs of one node each job asks for (its servers are placed on them).")
    jobs: Annotated[Grouping, Flag("--jobs")] = Field(
        default="node", description=SLURM + "node (the whole plan in one job, on one node) or drafter (a job per "
        "drafter, all its K, with its own baseline on the same node).")
    max_attempts: Annotated[int, Flag("--max-attempts")] = Field(
        default=3, ge=1, description=SLURM + "attempts per job group before it is given up (each resubmission resumes "
        "the last one's finished cells on the same node).")
    options: Annotated[dict[str, str], Flag("--slurm-option", items=flag_text.sbatch_options)] = Field(
        default_factory=dict, description=SLURM + "another sbatch option KEY=VALUE (repeatable), e.g. mem=64G, or KEY "
        "alone, e.g. exclusive (sbatch's --mem=64G, --exclusive).")
    poll_s: float = Field(default=10.0, gt=0, description="Seconds between two looks at the queue.")


class Executor(SlurmOptions):
    """Where a sweep's plan runs: here, or as Slurm jobs asked for with the Slurm settings, which apply only there;
    or nowhere, where only the placement is shown (--dry-run)."""

    executor: Annotated[Literal["local", "slurm"], Flag("--executor")] = Field(
        default="local", description="Where the plan runs: local (here, the default) or slurm (jobs submitted with "
        "sbatch, one node each, watched, resubmitted when they end unfinished, merged into the run directory).")
    dry_run: Annotated[bool, Flag("--dry-run", negatable=False)] = Field(
        default=False, description="Print the servers and where each would run (GPUs, tensor parallel, memory "
        "fraction), then exit without starting anything.")

    @model_validator(mode="before")
    @classmethod
    def _slurm_settings_on_slurm(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("executor", "local") == "local":
            given = [flag.name for name, _info, flag in flagged(SlurmOptions) if data.get(name) is not None]
            if given:
                verb = "applies" if len(given) == 1 else "apply"
                raise InputError(f"{', '.join(given)} {verb} to --executor slurm; add --executor slurm")
        return data

    def slurm(self) -> SlurmOptions | None:
        """The Slurm settings where the plan runs on Slurm (None: here)."""
        on_slurm = self.executor == "slurm"
        return SlurmOptions.model_validate(self.model_dump(exclude={"executor", "dry_run"})) if on_slurm else None
