"""What a command that reads a stored run needs from its directory, checked before it reads or writes: the
per-request records every paired comparison and recomputation reads."""

from __future__ import annotations

from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.rundir.store import REQUESTS


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
