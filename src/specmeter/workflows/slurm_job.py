"""What one Slurm array task runs inside its allocation: the ordinary local execution of its group's sub-plan, into
its own attempt directory (RUN/jobs/<group>/attempt-<n>/), so whatever places servers on a node locally places
them here too. A task Slurm runs twice (requeued) resumes its own directory; a resubmitted group's next attempt
resumes the previous attempt's finished cells only on the same node."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from specmeter.common.errors import RunIncomplete
from specmeter.execution.runner import Execution
from specmeter.executors.layout import AttemptDir
from specmeter.placement.inventory import detect_gpus
from specmeter.plans.resume import resume_execution, stored_workload
from specmeter.plans.sweep import placed_on_node
from specmeter.rundir.store import CAPTURES, REQUESTS, SUMMARY
from specmeter.workflows.execute import measure_one
from specmeter.workflows.terminal import Terminal


def slurm_job_id() -> str | None:
    """This task's id as squeue shows it (1234_0), or the plain job's."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def run_job(run_dir: Path, group: str, attempt: int, seed: int | None, api_key: str | None, command: list[str],
            term: Terminal) -> None:
    """Measure (or finish) one attempt of one group; `seed`: the earlier attempt it may resume from."""
    where = AttemptDir(run_dir, group, attempt)
    node = socket.gethostname()
    where.write_job_info(node, slurm_job_id())
    summary = where.path / SUMMARY
    if not summary.exists() and seed:
        _seed(where, AttemptDir(run_dir, group, seed), node, term)
    if summary.exists():
        if where.status() == "complete":
            term.human.print(f"{where.path}: already complete")
            return
        ex = resume_execution(where.path, api_key)
    else:
        plan = where.plan()
        if plan.placement is None:  # placed here, on the GPUs of this job's allocation (none: a CPU node)
            gpus, source = detect_gpus(None, "", os.environ)
            plan = placed_on_node(plan, gpus, source)
        convs, by_length = stored_workload(plan, str(where.plan_path))
        ex = Execution(plan=plan, conversations=convs, by_length=by_length, api_key=api_key,
                       command=command)
    try:
        measure_one(ex, where.path, term)
    except RunIncomplete as exc:  # the runner names the attempt's directory; a user resumes the Slurm run
        first = str(exc).splitlines()[0].split("; what finished", 1)[0]
        raise RunIncomplete(f"{group}/attempt-{attempt} stopped ({first}); what finished stays in {where.path}; the "
                            f"driver resubmits it, or `specmeter resume {run_dir}` does once it stopped") from exc


def _seed(where: AttemptDir, earlier: AttemptDir, node: str, term: Terminal) -> None:
    """Start from what the earlier attempt finished, if it ran on this node: its cells and these would otherwise
    be compared across two nodes' hardware. Copied, never moved: the earlier attempt stays as it was."""
    if not (earlier.path / SUMMARY).exists():
        return
    if earlier.node() != node:
        term.human.print(f"{earlier.path.name} ran on {earlier.node() or 'an unknown node'}, this one on {node}: "
                         "measuring the group again here, so no comparison spans two nodes")
        return
    if (earlier.path / REQUESTS).exists():
        shutil.copy2(earlier.path / REQUESTS, where.path / REQUESTS)
    if (earlier.path / CAPTURES).is_dir():
        shutil.copytree(earlier.path / CAPTURES, where.path / CAPTURES, dirs_exist_ok=True)
    shutil.copy2(earlier.path / SUMMARY, where.path / SUMMARY)  # last: its presence says the copy is whole
    term.human.print(f"resuming {earlier.path.name}'s finished cells on the same node ({node})")
