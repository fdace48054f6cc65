"""What an engine server's log says went wrong, as one line for the error that reports it.

Engines end a failed start far from its cause. vLLM's API server ends on "Engine core initialization failed.
See root cause above." after the worker's own exception (an AssertionError, a hub lookup of a model path that
does not exist, a config ValidationError); llama.cpp logs the specific failure ("failed to open GGUF file")
first, then a chain of generic ones ("exiting due to model loading error"). The log file keeps everything.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

_READ_LINES = 5000  # a start failure's cause sits in the last few hundred lines; a long run's log can be huge
_MAX_CHARS = 300

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# vLLM: "(EngineCore pid=7643) ERROR 11-24 11:51:41 [core.py:1510] message"
_VLLM = re.compile(r"^\([^()]*pid=\d+\) (?:(?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] ?)?")
# llama.cpp (common_log with prefix and timestamps): "0.00.123.456 E message"
_LLAMACPP = re.compile(r"^\d+\.\d\d\.\d{3}\.\d{3} (?P<level>[IWED]) ")
# A Python exception line, at the start of the line: "AssertionError: ...", "huggingface_hub.errors.X: ...".
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<name>[A-Z]\w*(?:Error|Exception))(?:: (?P<msg>.*))?$")
# A wrapper that only points at the real exception logged before it.
_DEFERS = re.compile(r"root cause|(?:stack )?trace(?:back)? above|see (?:the )?(?:above|logs?)\b", re.IGNORECASE)
_PYDANTIC = re.compile(r"^\d+ validation errors? for ")
_ERROR_LEVELS = {"ERROR", "CRITICAL", "E"}
_HEADER = "# specmeter:"  # the launcher's own first line
LAUNCH_HEADER = f"{_HEADER} launching "  # ... of each start: a resume appends its own


def _read_lines(path: Path, lines: int) -> list[str]:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            return [line.rstrip("\r\n") for line in deque(fh, maxlen=lines)]
    except OSError:
        return []


def _payload(line: str) -> tuple[str | None, str]:
    """(log level or None, the message without the engine's line prefix)."""
    line = _ANSI.sub("", line)
    for prefix in (_VLLM, _LLAMACPP):
        m = prefix.match(line)
        if m:
            return m.group("level"), line[m.end():]
    return None, line


def _exception(lines: list[str], i: int) -> str | None:
    """The exception line at `i` (pydantic's first detail joined on), or None when it is not one."""
    m = _EXCEPTION.match(lines[i])
    if not m:
        return None
    msg = (m.group("msg") or "").strip()
    if _PYDANTIC.match(msg) and i + 1 < len(lines) and lines[i + 1].startswith("  "):
        detail = lines[i + 1].strip().split(" [type=")[0]
        msg = f"{msg}: {detail}"
    return f"{m.group('name')}: {msg}" if msg else m.group("name")


def root_cause(lines: list[str]) -> str | None:
    """The line that says why the server failed: the last Python exception that does not defer to an earlier
    one; else the first error-level line (llama.cpp's most specific); else None."""
    parsed = [_payload(line) for line in lines]
    texts = [text for _, text in parsed]
    exceptions = [e for i in range(len(texts)) if (e := _exception(texts, i)) is not None]
    if exceptions:
        own = [e for e in exceptions if not _DEFERS.search(e)]
        return (own or exceptions)[-1]
    for level, text in parsed:
        if text.strip() and (level in _ERROR_LEVELS or text.lower().startswith(("error:", "fatal:"))):
            return text.strip()
    return None


def failure_reason(path: Path) -> str:
    """One line on why the server whose log is `path` failed: its root cause, else the last line it printed."""
    lines = [line for line in _read_lines(path, _READ_LINES) if not line.startswith(_HEADER)]
    reason = root_cause(lines)
    if reason is None:
        last = next((_payload(line)[1].strip() for line in reversed(lines) if line.strip()), None)
        reason = f"its last log line: {last}" if last else "it logged nothing"
    reason = " ".join(reason.split())
    return reason if len(reason) <= _MAX_CHARS else reason[: _MAX_CHARS - 1] + "…"
