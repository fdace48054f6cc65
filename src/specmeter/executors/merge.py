"""Merge a Slurm run: the run's own directory gets the whole plan and, per group, the records, captures and results
of exactly one attempt (its latest complete one, else its latest that measured anything), each configuration
named with the node, group and attempt it came from. Every attempt stays in jobs/, named in the summary; none is
mixed into another, so a cancelled job that still wrote is never counted twice.

A pure function of the attempt directories: merging again gives the same files. The run's results are then
derived from the merged captures as `report --recompute` derives them (the workflow does that)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

from specmeter import __version__
from specmeter.executors.layout import AttemptDir
from specmeter.rundir.store import CAPTURES, REQUESTS, RunStore, atomic_write_text, load_summary
from specmeter.schemas.jobs import JobAttempt, RanOn, SlurmRun
from specmeter.schemas.results import ConfigResult, RunSummary

T = TypeVar("T")


def pick(run_dir: Path, state: SlurmRun, group: str) -> JobAttempt | None:
    """The attempt a group's results come from: its latest complete one, else its latest with a summary."""
    tried = sorted((a for a in state.attempts if a.group == group), key=lambda a: a.attempt, reverse=True)
    statuses = {a.attempt: AttemptDir(run_dir, group, a.attempt).status() for a in tried}
    return (next((a for a in tried if statuses[a.attempt] == "complete"), None)
            or next((a for a in tried if statuses[a.attempt] is not None), None))


def merge(run_dir: Path, state: SlurmRun) -> RunSummary:
    """Write the merged summary.json (analysis left to recompute), requests.jsonl and captures/ into `run_dir`."""
    picks = {g.name: pick(run_dir, state, g.name) for g in state.groups}
    for a in state.attempts:
        a.used = picks.get(a.group) is a
    parts = {g: load_summary(AttemptDir(run_dir, g, a.attempt).path) for g, a in picks.items() if a is not None}
    first = next(iter(parts.values()), None)
    summary = RunSummary(specmeter_version=first.specmeter_version if first else __version__,
                         created_utc=state.created_utc, command=state.command, plan=state.plan,
                         models=_models(list(parts.values())), environment=first.environment if first else {},
                         jobs=state.attempts)
    for group, part in parts.items():
        attempt = picks[group]
        assert attempt is not None
        where = AttemptDir(run_dir, group, attempt.attempt)
        ran_on = RanOn(node=where.node(), group=group, attempt=attempt.attempt, job_id=attempt.job_id)
        summary.configs += [_located(c, ran_on, where.path.relative_to(run_dir)) for c in part.configs]
    # Adaptive rounds, a ramp and a load search are decided per job; with several groups each point keeps the
    # first group's account of them (a load search is refused there: it needs the whole plan on one node).
    summary.sampling = _first_per_key([p.sampling for p in parts.values()], lambda s: s.point_id)
    summary.ramp = _first_per_key([p.ramp for p in parts.values()], lambda r: (r.axis, r.input_len))
    summary.load_search = first.load_search if first and len(parts) == 1 else []
    summary.wall_s = max((p.wall_s or 0.0 for p in parts.values()), default=None)  # the groups ran side by side
    unfinished = [f"{g} ({a.why or 'not complete'})" if a else f"{g} (never measured)" for g, a in picks.items()
                  if a is None or parts[g].status != "complete"]
    summary.status = "incomplete" if unfinished else "complete"
    summary.incomplete_reason = ("job group(s) without a complete attempt: " + "; ".join(unfinished)
                                 if unfinished else None)
    _copy_data(run_dir, [AttemptDir(run_dir, g, a.attempt).path for g, a in picks.items() if a is not None])
    RunStore(run_dir).write_summary(summary)
    return summary


def _located(result: ConfigResult, ran_on: RanOn, attempt_dir: Path) -> ConfigResult:
    log = str(attempt_dir / result.server_log) if result.server_log and "/" not in result.server_log else None
    return result.model_copy(update={"ran_on": ran_on, "server_log": log or result.server_log})


def _models(parts: list[RunSummary]) -> dict[str, object]:
    if not parts:
        return {}
    drafts: dict[str, object] = {}
    for p in parts:
        drafts.update(p.models.get("drafts") or {})
    return {**parts[0].models, "drafts": drafts}


def _first_per_key(lists: list[list[T]], key: Callable[[T], Hashable]) -> list[T]:
    seen: dict[Hashable, T] = {}
    for items in lists:
        for item in items:
            seen.setdefault(key(item), item)
    return list(seen.values())


def _copy_data(run_dir: Path, attempts: list[Path]) -> None:
    """requests.jsonl and captures/ rebuilt from the picked attempts (replacing what an earlier merge wrote)."""
    lines: list[str] = []
    for path in attempts:
        lines += [r.model_dump_json(exclude_computed_fields=True) + "\n" for r in RunStore(path).read_records()]
    atomic_write_text(run_dir / REQUESTS, "".join(lines))
    fresh = run_dir / f"{CAPTURES}.merging"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    for path in attempts:
        if (path / CAPTURES).is_dir():
            shutil.copytree(path / CAPTURES, fresh, dirs_exist_ok=True)
    shutil.rmtree(run_dir / CAPTURES, ignore_errors=True)
    fresh.rename(run_dir / CAPTURES)
