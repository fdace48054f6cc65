"""Which trace format a file is, and the one entry point that reads any of them.

A format is named, or told from the file: its extension (.jsonl or .csv), then the first format in the registry's
order with any of its signature keys in the first row (or columns in the header). A Bailian row has every key a
Mooncake row has beside its own, so Bailian comes first; a row missing one of its format's fields is still told
apart, and then refused for that field. A file that matches no format, or whose extension no format has, is refused
in one line that names the formats, so the user can name one.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.common.registry import Registry
from specmeter.data._rows import at, iter_jsonl, read_text
from specmeter.data.traces import azure, bailian, burstgpt, mooncake
from specmeter.data.traces._fields import Stamped, build_trace
from specmeter.data.traces.model import Trace, TraceFormatName


@dataclass(frozen=True)
class TraceFormat:
    name: TraceFormatName
    what: str  # the format as a refusal names it
    suffix: str
    signature: frozenset[str]  # keys (JSONL) or columns (CSV) any of which tells the format
    clock_field: str  # the field a row's arrival is read from
    block_tokens: int | None  # tokens per hash_ids block
    parse: Callable[[str, str], Iterator[Stamped]]


TRACE_FORMATS: Registry[TraceFormat] = Registry("trace format", {fmt.name: fmt for fmt in (
    TraceFormat("bailian", "Bailian JSONL", ".jsonl", bailian.SIGNATURE, "timestamp", bailian.BLOCK_TOKENS,
                bailian.parse),
    TraceFormat("mooncake", "Mooncake JSONL", ".jsonl", mooncake.SIGNATURE, "timestamp", mooncake.BLOCK_TOKENS,
                mooncake.parse),
    TraceFormat("burstgpt", "BurstGPT CSV", ".csv", frozenset(burstgpt.COLUMNS), "Timestamp", None, burstgpt.parse),
    TraceFormat("azure", "Azure LLM inference CSV", ".csv", frozenset(azure.COLUMNS), "TIMESTAMP", None, azure.parse),
)})


def read_trace(path: str | Path, format: str | None = None) -> Trace:
    """Read a trace file as `format` (a TRACE_FORMATS name), or as the format its name and first row tell."""
    path = Path(path)
    source = str(path)
    text = read_text(path)
    if not text.strip():
        raise InputError(f"{source}: the file is empty; give a trace with one request per line")
    name = detect_format(text, path) if format is None else format
    chosen = TRACE_FORMATS.get(name)
    return build_trace(chosen.parse(text, source), source, chosen.name, chosen.block_tokens, chosen.clock_field)


def detect_format(text: str, path: Path) -> str:
    """The name of the first format whose extension the file has and any of whose signature its first row has."""
    names = ", ".join(TRACE_FORMATS)
    suffix = path.suffix.lower()
    candidates = [name for name, fmt in TRACE_FORMATS.items() if fmt.suffix == suffix]
    if not candidates:
        raise InputError(f"{path}: cannot tell the trace format from a {suffix or 'missing'} extension (.jsonl or "
                         f".csv); name the format: one of {names}")
    line, keys = _first_keys(text, str(path)) if suffix == ".jsonl" else (1, _header(text))
    found = next((name for name in candidates if TRACE_FORMATS[name].signature & keys), None)
    if found is None:
        expected = "; ".join(f"{TRACE_FORMATS[n].what} has {', '.join(sorted(TRACE_FORMATS[n].signature))}"
                             for n in candidates)
        raise InputError(f"{at(path, line)}: cannot tell the trace format from {', '.join(sorted(keys)) or 'no keys'} "
                         f"({expected}); name the format: one of {names}")
    return found


def _first_keys(text: str, source: str) -> tuple[int, frozenset[str]]:
    """The first row's line and keys (the file is known not to be blank)."""
    line, row = next(iter_jsonl(text, source))
    return line, frozenset(row)


def _header(text: str) -> frozenset[str]:
    return frozenset(next(csv.reader([text.removeprefix("\ufeff").split("\n", 1)[0]]), []))
