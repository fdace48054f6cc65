"""Finish an interrupted run from its own run directory: the stored plan, reloaded, never rebuilt."""

from __future__ import annotations

from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data.model import Conversation
from specmeter.data.workload import reload_conversations, reload_lengths
from specmeter.execution.runner import Execution
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.plan import Plan


def resume_execution(run_dir: Path, api_key: str | None) -> Execution:
    summary = load_summary(run_dir)
    if summary.status == "complete":
        raise InputError(f"{run_dir}: this run is already complete; nothing to resume")
    plan = summary.plan
    for config in plan.configs:
        if config.engine.launch and config.engine.has_redacted_secret:
            raise InputError(
                f"{run_dir}: configuration {config.id} was launched with a secret engine argument or variable that "
                "specmeter never stores (e.g. --api-key); it cannot be relaunched from the run directory: start a "
                "new run"
            )
    convs, by_length = stored_workload(plan, str(run_dir))
    return Execution(plan=plan, conversations=convs, api_key=api_key, command=summary.command, prior=summary,
                     prior_records=RunStore(run_dir).read_records(), by_length=by_length)


def stored_workload(plan: Plan, where: str) -> tuple[list[Conversation], dict[int, list[Conversation]]]:
    """The conversations a stored plan's selection names (the main ones, and each length's on an input-length
    axis), or an error naming `where` when the dataset no longer gives them."""
    by_length = reload_lengths(plan.workload, plan.load, where)
    convs = next(iter(by_length.values())) if by_length else reload_conversations(plan.workload, plan.load, where)
    return convs, by_length
