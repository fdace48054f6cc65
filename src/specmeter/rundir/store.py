"""The run directory: summary.json written atomically, requests.jsonl appended as requests finish.

Layout of runs/<id>/:
  summary.json      versioned RunSummary with the whole plan (rewritten atomically after every point)
  requests.jsonl    one RequestRecord per line, written as each request finishes (RecordWriter)
  captures/<config>/<point>-r<repeat>.json  the raw telemetry of each point (PointCapture): results derive from it
  server-<server>.log the output of each launched server (one per server id of the plan)

What survives what. A finished request's record is handed to a writer thread, which writes it to the
file at once (one write(2), never held back for a batch): from then on it is in the kernel's page cache
and survives the death of specmeter itself, SIGKILL included. fsync is what makes it survive the machine
(power loss, a kernel crash): it runs in batches, off the writer's path, after FSYNC_EVERY records or
FSYNC_AFTER_S seconds after the first record it has not covered, and always before summary.json is
replaced and when the store closes, so summary.json never calls a point finished whose records are not
on stable storage. What a kill can cost: a record still between the request's end and its write (the
writer's wake-up, milliseconds), and, on a crashed machine, records written since the last fsync. Neither
is a silent loss: resume re-sends every request whose record is not in the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from specmeter.common.errors import InputError, SpecmeterError, stored_file_message
from specmeter.engines.registry import get_engine
from specmeter.schemas.capture import PointCapture
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import SCHEMA_VERSION, RunSummary

SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
CAPTURES = "captures"
CALIBRATION = "calibration.json"  # the step-cost model fitted on the run (predict/calibration.py)
FSYNC_EVERY = 256  # records written and not yet fsync'd ...
FSYNC_AFTER_S = 1.0  # ... or seconds since the first of them: whichever comes first


def new_run_id(label: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in label)[:40]
    return f"{stamp}-{safe}"


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_once(path: Path, text: str) -> None:
    """Create `path` with `text`, complete or not at all; refused (InputError) if it exists: what one command
    wrote into a run directory no other replaces."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)  # fails where `path` exists, atomically: no check-then-write race
    except FileExistsError:
        raise InputError(f"{path}: exists already, and what one command wrote no other replaces: run the command "
                         "again (it takes a new name), or give another path") from None
    finally:
        tmp.unlink(missing_ok=True)


def free_name(path: Path) -> Path:
    """`path`, or the first of `stem-2.suffix`, `stem-3.suffix`, ... that does not exist yet."""
    candidate, i = path, 2
    while candidate.exists():
        candidate, i = path.with_name(f"{path.stem}-{i}{path.suffix}"), i + 1
    return candidate


def keep(path: Path, text: str) -> Path:
    """`text` kept under `path`, or under the next free name where `path` holds something else (nothing is
    replaced); where `path` holds this very text already, nothing is written. Returns where it is."""
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return path
    target = free_name(path)
    write_once(target, text)
    return target


class RunStore:
    """Owns one run directory. `append` costs its caller (the event loop timing the streams) only the
    record's serialization: a RecordWriter, started by the first append, does the file I/O."""

    def __init__(self, root: Path, fsync_every: int = FSYNC_EVERY, fsync_after_s: float = FSYNC_AFTER_S) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._fsync_every, self._fsync_after_s = fsync_every, fsync_after_s
        self._writer: RecordWriter | None = None

    @property
    def summary_path(self) -> Path:
        return self.root / SUMMARY

    @property
    def requests_path(self) -> Path:
        return self.root / REQUESTS

    def server_log(self, server: str) -> Path:
        return self.root / f"server-{server}.log"

    def capture_path(self, config_id: str, point_id: str, repeat: int) -> Path:
        return self.root / CAPTURES / config_id / f"{point_id}-r{repeat}.json"

    def write_capture(self, capture: PointCapture) -> None:
        path = self.capture_path(capture.config_id, capture.point_id, capture.repeat)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, capture.model_dump_json() + "\n")

    def read_capture(self, config_id: str, point_id: str, repeat: int) -> PointCapture | None:
        """The stored capture of a point, or None (not measured yet, or a run of specmeter 0.1.0)."""
        path = self.capture_path(config_id, point_id, repeat)
        if not path.exists():
            return None
        try:
            return PointCapture.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(f"{path}: not a point capture ({exc.__class__.__name__}); the run directory is "
                             "damaged: restore the file, or measure the run again") from exc

    def append(self, record: RequestRecord) -> None:
        """Hand the record to the writer (serialized here, so later changes to the object do not reach the
        file). Raises the writer's error, if it had one, instead of losing records quietly."""
        if self._writer is None:
            self._writer = RecordWriter(self.requests_path, self._fsync_every, self._fsync_after_s)
        self._writer.put(record.model_dump_json(exclude_computed_fields=True) + "\n")

    def sync(self) -> None:
        """Every record appended so far written and fsync'd."""
        if self._writer is not None:
            self._writer.barrier(fsync=True)

    def write_summary(self, summary: RunSummary) -> None:
        self.sync()  # summary.json never claims records that are not on stable storage
        atomic_write_text(self.summary_path, summary.model_dump_json(indent=2) + "\n")

    def close(self) -> None:
        """Write and fsync what is queued, then stop the writer (a later append starts a new one)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    # -- reading back --------------------------------------------------------------------------------
    def read_records(self) -> list[RequestRecord]:
        """All records appended (the writer's queue is written out first) or on disk from an earlier run;
        a torn last line (crash mid-write) is skipped, others must parse."""
        if self._writer is not None:
            self._writer.barrier(fsync=False)
        if not self.requests_path.exists():
            return []
        lines = self.requests_path.read_text(encoding="utf-8").splitlines()
        out: list[RequestRecord] = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(RequestRecord.model_validate_json(line))
            except ValueError as exc:
                if i == len(lines):
                    break  # torn final line: the request it described is simply redone on resume
                raise InputError(f"{self.requests_path} line {i}: not a request record "
                                 f"({exc.__class__.__name__}); the run directory is damaged") from exc
        return out


@dataclass
class _Barrier:
    """Queued behind the lines to wait for: set once they are written (and fsync'd, when asked)."""

    fsync: bool
    done: threading.Event = field(default_factory=threading.Event)


class RecordWriter:
    """Owns requests.jsonl while a run appends to it. A writer thread writes each line as soon as it gets
    it (lines queued meanwhile go out in the same write); a sync thread fsyncs in batches, so a slow fsync
    (a shared filesystem's) holds up no write, and no stream: the caller only puts a string on a queue."""

    def __init__(self, path: Path, fsync_every: int, fsync_after_s: float) -> None:
        self.path = path
        self._every, self._after_s = fsync_every, fsync_after_s
        self._queue: queue.SimpleQueue[str | _Barrier | None] = queue.SimpleQueue()
        self._fd = -1
        self._error: OSError | None = None
        self._reported = False
        self._written = 0  # records written, and covered by an fsync (guarded by _state)
        self._synced = 0
        self._closing = False
        self._state = threading.Condition()
        self._threads = [threading.Thread(target=self._write_loop, name="specmeter-records", daemon=True),
                         threading.Thread(target=self._sync_loop, name="specmeter-fsync", daemon=True)]
        for t in self._threads:
            t.start()

    def put(self, line: str) -> None:
        self._raise()
        self._queue.put(line)

    def barrier(self, *, fsync: bool) -> None:
        """Wait until every line put so far is written (and fsync'd)."""
        b = _Barrier(fsync)
        self._queue.put(b)
        b.done.wait()
        self._raise()

    def close(self) -> None:
        try:
            self.barrier(fsync=True)
        finally:
            self._queue.put(None)
            with self._state:
                self._closing = True
                self._state.notify_all()
            for t in self._threads:
                t.join()
            if self._fd >= 0:
                os.close(self._fd)

    def _raise(self) -> None:
        """The writer's error, once: the run stops on it; what was written stays, and resume redoes the rest."""
        if self._error is not None and not self._reported:
            self._reported = True
            raise SpecmeterError(f"{self.path}: request records could not be written "
                                 f"({self._error.strerror or self._error}); free space there, or use --out on "
                                 "another filesystem, then `specmeter resume` the run")

    def _fail(self, exc: OSError) -> None:
        with self._state:
            self._error = self._error or exc
            self._state.notify_all()

    def _write_loop(self) -> None:
        try:
            drop_torn_tail(self.path)  # before the first append: a resume must not glue onto a torn line
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            self._fail(exc)
        while True:
            items = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    items.append(self._queue.get_nowait())
            lines = [i for i in items if isinstance(i, str)]
            if lines and self._error is None:
                self._write("".join(lines).encode(), len(lines))
            for b in items:
                if isinstance(b, _Barrier):
                    if b.fsync and self._error is None:
                        self._fsync()
                    b.done.set()
            if None in items:
                return

    def _write(self, data: bytes, records: int) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            self._fail(exc)
            return
        with self._state:
            unsynced = self._written - self._synced
            self._written += records
            # Wake the sync thread only when it has something to do: start its clock, or fsync a full batch.
            if unsynced == 0 or unsynced < self._every <= unsynced + records:
                self._state.notify_all()

    def _fsync(self) -> None:
        with self._state:
            target = self._written
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._fail(exc)
            return
        with self._state:
            self._synced = max(self._synced, target)

    def _sync_loop(self) -> None:
        def stop() -> bool:
            return self._closing or self._error is not None

        while True:
            with self._state:
                # Something to cover, then enough of it or long enough.
                self._state.wait_for(lambda: stop() or self._written > self._synced)
                self._state.wait_for(lambda: stop() or self._written - self._synced >= self._every,
                                     timeout=self._after_s)
                if stop():
                    return  # close() fsyncs what is left
            self._fsync()


def drop_torn_tail(path: Path, block: int = 1 << 16) -> None:
    """A crash mid-write leaves a last line without its newline. read_records skips it, but a record
    appended after it (resume) would be glued onto it, damaging the file: cut it off first."""
    if not path.exists():
        return
    with path.open("rb+") as fh:
        end = fh.seek(0, os.SEEK_END)
        pos = end
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            if pos == end and chunk.endswith(b"\n"):
                return  # the last line is whole
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                fh.truncate(start + newline + 1)
                return
            pos = start
        fh.truncate(0)


# The summary holds the plan and every result: no command can rebuild it, the records and captures beside it
# are what was measured.
DAMAGED = ("the run directory is damaged: restore summary.json from a copy (requests.jsonl and captures/ keep what "
           "was measured)")


def load_summary(run_dir: Path) -> RunSummary:
    path = run_dir / SUMMARY
    if not path.exists():
        raise InputError(f"{path}: no summary.json here; pass a run directory written by `specmeter run`")
    text = path.read_text(encoding="utf-8")
    try:
        version = json.loads(text).get("schema_version")
    except (ValueError, AttributeError):
        version = None
    if isinstance(version, int) and version != SCHEMA_VERSION:
        raise InputError(f"{path}: written by another specmeter (summary schema {version}, this one reads "
                         f"{SCHEMA_VERSION}); use the specmeter that wrote it, or run again")
    try:
        summary = RunSummary.model_validate_json(text)
    except ValueError as exc:
        raise InputError(stored_file_message(path, exc, "a specmeter run summary", DAMAGED, RunSummary)) from exc
    _read_batch_limits(summary)
    return summary


def _read_batch_limits(summary: RunSummary) -> None:
    """A summary written before ConfigResult.batch_limit: each launched server's cap, read from its command by its
    engine, as the runner now records it."""
    kinds = {c.id: c.engine.kind or "vllm" for c in summary.plan.configs}
    for res in summary.configs:
        if res.batch_limit is None and res.server_command and res.config_id in kinds:
            res.batch_limit = get_engine(kinds[res.config_id]).launcher.batch_limit(res.server_command)


def latest_records(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """One record per key: the last one written (a resume re-sends under the same key)."""
    return list({r.key: r for r in records}.values())
