"""What a command that reads a stored run needs from its directory, checked before it reads or writes: the
per-request records every paired comparison and recomputation reads; and the evidence a run's answer is decided
on, the sweep with the measurements of the Ks the step-cost model proposed pooled in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specmeter.analysis.correction import Evidence, pooled
from specmeter.analysis.sequential import futile_points
from specmeter.common.errors import InputError
from specmeter.rundir.run_data import proposal_dirs, run_records
from specmeter.rundir.store import REQUESTS, RunStore, load_summary
from specmeter.schemas.proposal import ProposedK
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary


def require_records(run_dir: Path, needs: str) -> None:
    """requests.jsonl must be there, and hold records: without it a comparison pairs nothing and a recomputation
    counts no request, which would pass for a result."""
    path = run_dir / REQUESTS
    if not path.is_file() or path.stat().st_size == 0:
        state = "missing" if not path.exists() else "not a file" if not path.is_file() else "empty"
        raise InputError(f"{path}: {state}; {needs} reads every request's record from it, so this run directory "
                         "is damaged: restore requests.jsonl from a copy of the run")


def distinct_runs(first: Path, second: Path, what: str) -> None:
    """A run against itself pairs every request with itself: it can neither regress nor differ."""
    if first.resolve() == second.resolve():
        raise InputError(f"{what}: {first} and {second} are the same run directory, and a run compared with itself "
                         "always matches; give the reference run as the other one")


@dataclass(frozen=True)
class AnswerEvidence:
    """The sweep with every proposal measurement pooled in (a proposed K as a configuration of its own), the
    proposals those runs measured, each naming its run, and the points those runs stopped for futility
    (sequential.futile_points)."""

    summary: RunSummary
    records: list[RequestRecord]
    proposed: list[ProposedK]
    futile: frozenset[str]


def answer_evidence(run_dir: Path) -> AnswerEvidence:
    """What every round of the run's answer is decided on: one reading for recommend, verify and the tune loop, so
    the run keeps one answer."""
    sweep = load_summary(run_dir)
    evidence: Evidence = (sweep, run_records(RunStore(run_dir), sweep.plan))
    runs = [(d, load_summary(d)) for d in proposal_dirs(run_dir)]
    if runs:
        evidence = pooled(evidence, [(s, run_records(RunStore(d), s.plan)) for d, s in runs], [])
    proposed = [p.model_copy(update={"run": d.name}) for d, s in runs for p in s.plan.proposed]
    return AnswerEvidence(evidence[0], list(evidence[1]), proposed, futile_points([sweep, *(s for _, s in runs)]))
