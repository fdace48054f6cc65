"""The run directory: summary.json written atomically, requests.jsonl appended as requests finish.

Layout of runs/<id>/:
  summary.json      versioned RunSummary (rewritten atomically after every level)
  requests.jsonl    one RequestRecord per line, flushed as each request finishes
  server-<phase>.log  the launched server's output
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from specmeter import __version__
from specmeter.errors import InputError
from specmeter.load.records import RequestRecord
from specmeter.results import RunSummary

SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"


def new_run_id(label: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
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

    def server_log(self, phase: str) -> Path:
        return self.root / f"server-{phase}.log"

    def append(self, record: RequestRecord) -> None:
        if self._requests is None:
            self._requests = self.requests_path.open("a", encoding="utf-8")
        self._requests.write(record.model_dump_json(exclude_computed_fields=True) + "\n")
        self._requests.flush()
        os.fsync(self._requests.fileno())

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
                raise InputError(f"{self.requests_path} line {i}: not a request record ({exc.__class__.__name__}); the run directory is damaged") from exc
        return out


def load_summary(run_dir: Path) -> RunSummary:
    path = run_dir / SUMMARY
    if not path.exists():
        raise InputError(f"{path}: no summary.json here; pass a run directory written by `specmeter run`")
    try:
        return RunSummary.model_validate_json(path.read_text(encoding="utf-8"))
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
    }


SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Environment for the record: values of secret-looking variables replaced."""
    return {k: "***" if any(w in k.upper() for w in SECRET_ENV_WORDS) else v for k, v in env.items()}


def redact_argv(argv: list[str], secret_flags: tuple[str, ...] = ("--api-key",)) -> list[str]:
    """The command line with secret flag values replaced, safe to write into results."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        if any(arg == f or arg.endswith("=" + f) for f in secret_flags):  # --api-key, --engine-arg=--api-key
            out.append(arg)
            hide_next = True
            continue
        for f in secret_flags:  # --api-key=KEY, --engine-arg=--api-key=KEY
            i = arg.find(f + "=")
            if i >= 0:
                arg = arg[: i + len(f) + 1] + "***"
        out.append(arg)
    return out


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
