"""The run directory: summary.json written atomically, requests.jsonl appended as requests finish.

Layout of runs/<id>/:
  summary.json      versioned RunSummary with the whole plan (rewritten atomically after every point)
  requests.jsonl    one RequestRecord per line, flushed as each request finishes
  captures/<config>/<point>-r<repeat>.json  the raw telemetry of each point (PointCapture): results derive from it
  server-<server>.log the output of each launched server (one per server id of the plan)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from specmeter import __version__
from specmeter.errors import InputError
from specmeter.installed import installed_version
from specmeter.schemas.capture import PointCapture
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import SCHEMA_VERSION, RunSummary

SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
CAPTURES = "captures"


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


class RunStore:
    """Owns one run directory. Appends are line-buffered and fsync'd per record."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._requests: IO[str] | None = None

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
        if self._requests is None:
            self._drop_torn_tail()
            self._requests = self.requests_path.open("a", encoding="utf-8")
        self._requests.write(record.model_dump_json(exclude_computed_fields=True) + "\n")
        self._requests.flush()
        os.fsync(self._requests.fileno())

    def _drop_torn_tail(self, block: int = 1 << 16) -> None:
        """A crash mid-write leaves a last line without its newline. read_records skips it, but a record
        appended after it (resume) would be glued onto it, damaging the file: cut it off first."""
        if not self.requests_path.exists():
            return
        with self.requests_path.open("rb+") as fh:
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

    def write_summary(self, summary: RunSummary) -> None:
        atomic_write_text(self.summary_path, summary.model_dump_json(indent=2) + "\n")

    def close(self) -> None:
        if self._requests is not None:
            self._requests.close()
            self._requests = None

    # -- reading back --------------------------------------------------------------------------------
    def read_summary(self) -> RunSummary:
        return load_summary(self.root)

    def read_records(self) -> list[RequestRecord]:
        """All records on disk; a torn last line (crash mid-write) is skipped, others must parse."""
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
        return RunSummary.model_validate_json(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a specmeter run summary ({exc.__class__.__name__}); check the path") from exc


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def model_fingerprint(model: str | None) -> dict[str, Any] | None:
    """Content hashes of a local model directory's weights and config (None for hub ids)."""
    if not model:
        return None
    p = Path(model)
    if not p.is_dir():
        return {"id": model}
    files = sorted(
        f for f in p.iterdir() if f.suffix in {".safetensors", ".bin", ".json"} and f.is_file()
    )
    return {"path": str(p.resolve()), "sha256": {f.name: file_sha256(f) for f in files}}


def environment_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "specmeter": __version__,
        "uvloop": installed_version("uvloop"),  # the client's event loop when load.event_loop is auto
    }


def latest_records(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """One record per key: the last one written (a resume re-sends under the same key)."""
    return list({r.key: r for r in records}.values())
