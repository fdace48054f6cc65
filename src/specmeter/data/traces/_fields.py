"""What every trace reader checks the same way: lengths, timestamps, CSV records, and the arrival order.

Each refusal is one line naming the file, the line, the field and the fix (data/_rows.py's row_error), so a user
goes straight to the row; a row that does not read stops the whole trace, never skipped.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from specmeter.common.errors import InputError, validation_message
from specmeter.data._rows import ROW_FIX, at, row_error
from specmeter.data.traces.model import Trace, TraceFormatName, TraceRow


@dataclass(frozen=True)
class Stamped:
    """A request as a reader found it: its line, its time on the format's own clock in seconds, that time as the
    file writes it (for the refusal), and its other TraceRow fields."""

    line: int
    clock_s: float
    written: str
    fields: dict[str, Any]


def shown(value: Any) -> str:
    """A value as a refusal quotes it: numbers plain, text quoted, long values cut."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def tokens(value: Any, where: str, field: str) -> int:
    """A length in tokens: a JSON whole number, or a CSV cell holding one; never negative."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise row_error(where, field, f"{shown(value)} is not a whole number of tokens")
    if number < 0:
        raise row_error(where, field, f"{shown(value)} is negative, not a number of tokens")
    return number


def whole(value: Any, where: str, field: str, least: int, meaning: str) -> int:
    """An id or a count at least `least` (a JSON whole number); `meaning` says what the field holds."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise row_error(where, field, f"{shown(value)} is not {meaning}")
    return value


def seconds(value: Any, where: str, field: str, scale: float = 1.0) -> float:
    """A relative timestamp (a JSON number, or a CSV cell holding one) times `scale`, in seconds; never before 0."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise row_error(where, field, f"{shown(value)} is not a number")
    if number < 0:
        raise row_error(where, field, f"{shown(value)} is negative, before the trace's start at 0")
    return number * scale


def hash_list(value: Any, where: str, field: str = "hash_ids") -> list[int]:
    """Block hashes: a list of whole numbers, 0 or more."""
    if not isinstance(value, list) or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in value):
        raise row_error(where, field, f"{shown(value)} is not a list of whole numbers, e.g. [0, 1, 2]")
    return value


def required(row: dict[str, Any], key: str, where: str, what: str) -> Any:
    """The value of a key the format always has (JSON null counts as missing); `what` says what to give."""
    value = row.get(key)
    if value is None:
        raise row_error(where, key, "is missing", f"give {what}")
    return value


def iter_csv(text: str, source: str, columns: tuple[str, ...], what: str) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line, record) for each non-blank CSV record under the header; a header without `columns` or a record
    whose fields do not match the header is refused in one line."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    try:
        header = next(reader, [])
        missing = [column for column in columns if column not in header]
        if missing:
            raise InputError(f"{at(source, 1)}: missing column(s) {', '.join(missing)} (found "
                             f"{', '.join(header) or 'none'}); check that this is {what}")
        for record in reader:
            if not any(cell.strip() for cell in record):
                continue
            if len(record) != len(header):
                raise row_error(at(source, reader.line_num), None,
                                f"has {len(record)} fields where the header names {len(header)}")
            yield reader.line_num, dict(zip(header, record))
    except csv.Error as exc:
        raise row_error(at(source, reader.line_num), None, f"is not valid CSV ({exc})") from None


def cell(record: dict[str, str], column: str, where: str) -> str:
    """A CSV cell that must not be empty."""
    value = record[column].strip()
    if not value:
        raise row_error(where, column, "is empty")
    return value


def optional_cell(record: dict[str, str], column: str) -> str | None:
    """A CSV cell that may be absent (an older file without the column) or empty."""
    value = record.get(column, "").strip()
    return value or None


def build_trace(stamped: Iterable[Stamped], source: str, format: TraceFormatName, block_tokens: int | None,
                clock_field: str) -> Trace:
    """The trace of a reader's requests: each must arrive no earlier than the one on the line before it (a replay
    sends in file order, so an unsorted file would send late requests early), arrivals count from the first."""
    rows: list[TraceRow] = []
    first: Stamped | None = None
    last: Stamped | None = None
    for request in stamped:
        if last is not None and request.clock_s < last.clock_s:
            raise row_error(at(source, request.line), clock_field,
                            f"{request.written} is earlier than line {last.line}'s {last.written}",
                            "a trace must be in arrival order: sort the file by it")
        if first is None:
            first = request
        last = request
        rows.append(_row(request, request.clock_s - first.clock_s, source))
    if not rows:
        raise InputError(f"{source}: no requests in it; give a trace with one request per line")
    return Trace(source=source, format=format, block_tokens=block_tokens, rows=rows)


def _row(request: Stamped, arrival_s: float, source: str) -> TraceRow:
    try:
        return TraceRow(line=request.line, arrival_s=arrival_s, **request.fields)
    except ValidationError as exc:
        raise InputError(f"{validation_message(exc, at(source, request.line), TraceRow)}; {ROW_FIX}") from None
