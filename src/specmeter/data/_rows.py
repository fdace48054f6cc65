"""Shared helpers for reading rows from files and raising one-line, actionable errors.

Every loader reports bad input the same way, `<where>: field "<f>" <problem>; <fix>` with where =
`<file> line <n>` (or `row <n>` for parquet), so a user can go straight to the offending row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specmeter.common.errors import InputError, validation_message
from specmeter.data.model import Conversation

ROW_FIX = "fix the row or drop it"


def at(source: str | Path, number: int, unit: str = "line") -> str:
    """The location prefix of an error: file and line (or row) number."""
    return f"{source} {unit} {number}"


def row_error(where: str, field: str | None, problem: str, fix: str = ROW_FIX) -> InputError:
    """Build the one-line error: `<where>: field "<f>" <problem>; <fix>`."""
    what = f'field "{field}" {problem}' if field else problem
    return InputError(f"{where}: {what}; {fix}".replace("\n", " "))


def read_text(path: Path) -> str:
    """Read a UTF-8 file, turning OS and encoding failures into one-line InputErrors."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; check the path") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file; give the file path") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason}); save the file as UTF-8") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror}); check the path and permissions") from None


def iter_jsonl(text: str, source: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; bad JSON or non-objects raise InputError."""
    # Split on \n only: str.splitlines() also breaks on characters JSON allows inside strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise row_error(at(source, number), None, f"is not valid JSON ({detail})") from None
        if not isinstance(obj, dict):
            raise row_error(at(source, number), None, "is not a JSON object", "each line must be one {...} object")
        if "\\ud" in line.lower() and not _encodable(obj):
            # A lone surrogate escape loads in Python but fails later when the request is sent or stored.
            raise row_error(at(source, number), None, "holds an unpaired surrogate escape (\\udXXX)")
        yield number, obj


def _encodable(obj: Any) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Read a JSONL file row by row, errors naming the file and line."""
    return iter_jsonl(read_text(path), path)


def read_parquet_rows(path: Path) -> list[dict[str, Any]]:
    """Read a parquet file into plain dicts (pyarrow is imported only when a parquet file is used)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: reading parquet needs pyarrow; run pip install 'specmeter[data]'") from None
    if not path.is_file():
        raise InputError(f"{path}: file not found; check the path")
    try:
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        return rows
    except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: not a readable parquet file ({first}); re-download or re-export it") from None


def require_columns(rows: list[dict[str, Any]], columns: tuple[str, ...], source: Path | str) -> None:
    """Fail once for a file missing a whole column, rather than once per row."""
    if rows:
        missing = [column for column in columns if column not in rows[0]]
        if missing:
            raise InputError(
                f"{source}: missing column(s) {', '.join(missing)} (found {', '.join(sorted(rows[0]))}); "
                "check that this is the right file"
            )


def require_turns(value: Any, where: str, field: str = "turns") -> list[str]:
    """Check a list of non-blank user-turn strings, the shape every loader ends up with."""
    if not isinstance(value, list) or not value or not all(isinstance(t, str) and t.strip() for t in value):
        raise row_error(where, field, "must be a non-empty list of non-blank strings")
    return list(value)


def require_text(value: Any, where: str, field: str) -> str:
    """Check one non-blank string field (a prompt, a question)."""
    if not isinstance(value, str) or not value.strip():
        raise row_error(where, field, "must be a non-blank string")
    return value


def optional_str(row: dict[str, Any], key: str, where: str) -> str | None:
    """Read an optional string field (ids may be given as integers, which are common in datasets)."""
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise row_error(where, key, "must be a string")
    text = str(value)
    if not text.strip():
        raise row_error(where, key, "must not be blank", "fix the row or drop the field")
    return text


def optional_positive_int(row: dict[str, Any], key: str, where: str) -> int | None:
    """Read an optional positive integer field such as max_tokens."""
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise row_error(where, key, "must be a positive integer", "fix the row or drop the field")
    return value


def check_unique_ids(ids: list[tuple[str, str]], source: Path | str) -> None:
    """Ids key per-request results, so a duplicate would silently merge two items. ids: (id, where)."""
    seen: dict[str, str] = {}
    for ident, where in ids:
        if ident in seen:
            raise row_error(where, "id", f'"{ident}" repeats {seen[ident]}', "give every row a unique id")
        seen[ident] = where


def make_conversation(where: str, **fields: Any) -> Conversation:
    """Build a Conversation; a model-level rejection still becomes a one-line InputError for that row."""
    try:
        return Conversation(**fields)
    except ValidationError as exc:
        raise InputError(f"{validation_message(exc, where, Conversation)}; {ROW_FIX}") from None
