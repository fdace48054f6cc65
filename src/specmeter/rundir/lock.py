"""One writer per run directory: every command that writes into a run holds its lock while it does.

Two `specmeter resume` of one run at once both appended to requests.jsonl and raced on summary.json's temporary
file; a run is only as good as its one writer. The lock is the kernel's (flock on RUN/.lock, which says who holds
it): it is released when its holder exits however it ends, SIGKILL included, so a lock a killed process left is
simply free again; a holder that ends cleanly removes the file, so a run directory is as the command found it.
Launched servers do not inherit it (Python opens files close-on-exec). It is re-entrant within one process: the
demo's sweep, recommend and verify take it in turn over one run.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from specmeter.common.errors import InputError

LOCK = ".lock"
_held: dict[Path, int] = {}  # run directory -> how many holds this process has on it


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote into the file."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        doc = json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError):
        return "another specmeter"
    return f"`{doc.get('command', 'specmeter')}` (pid {doc.get('pid', '?')}, since {doc.get('since', '?')})"


@contextmanager
def writing(run_dir: Path, command: str) -> Iterator[None]:
    """Hold `run_dir`'s lock (the directory exists) for the block, or refuse in one line naming the command that
    holds it."""
    key = run_dir.resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    path = run_dir / LOCK
    fd = _take(path, run_dir)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"command": command, "pid": os.getpid(),
                                 "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}).encode())
        _held[key] = 1
        try:
            yield
        finally:
            del _held[key]
            path.unlink(missing_ok=True)  # while still held: the run directory is as the command found it
    finally:
        os.close(fd)  # and the kernel lets go


def _take(path: Path, run_dir: Path) -> int:
    """An open descriptor holding the lock on the file at `path`. A holder unlinks the file before it lets go, so
    a lock taken on a file no longer at `path` guards nothing: take the one there now."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise InputError(f"{run_dir}: {holder} is writing this run; wait for it to end, or stop it (its work is "
                             "kept), then run this again") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
