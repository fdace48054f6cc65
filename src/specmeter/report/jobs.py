"""Where a Slurm run's numbers came from: every attempt of every job group (its Slurm job, node and how it ended)
and which one the run's results were merged from. Drawn from RunSummary.jobs as stored; nothing here decides."""

from __future__ import annotations

from specmeter.report.grid import Grid, Note, grid
from specmeter.schemas.results import RunSummary


def jobs_table(summary: RunSummary) -> Grid | None:
    if not summary.jobs:
        return None
    t = grid("Slurm jobs: each group ran on one node; its speedups are over a baseline measured on that node",
             ("group", "attempt", "job", "node", "Slurm state", "run", "results", "why"),
             left={"group", "job", "node", "Slurm state", "run", "results", "why"})
    for a in summary.jobs:
        t.add_row(a.group, str(a.attempt), a.job_id or "-", a.node or "-", a.state or "-", a.status,
                  "merged" if a.used else "-", a.why or "")
    return t


def jobs_notes(summary: RunSummary) -> list[Note]:
    """Resubmissions, and groups that ran on different nodes (compared only through each one's own baseline)."""
    out = [Note(f"{a.group}/attempt-{a.attempt}: {a.why}", warn=not a.used)
           for a in summary.jobs if a.why and a.status != "complete"]
    nodes = {c.ran_on.node for c in summary.configs if c.ran_on is not None}
    if len(nodes) > 1:
        out.append(Note(f"the job groups ran on {len(nodes)} nodes ({', '.join(sorted(n or '?' for n in nodes))}): "
                        "each speedup is over its own node's baseline; configurations of two groups are never "
                        "compared head to head"))
    return out
