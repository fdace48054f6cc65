"""SPEED-Bench: load a prepared copy (JSONL or parquet) into Conversations.

The public nvidia/SPEED-Bench rows for some sources are placeholders: the first turn starts with
PLACEHOLDER_PREFIX and holds a template, not a prompt. Benchmarking that text would measure acceptance on
a boilerplate sentence, so a placeholder row is an error here; `specmeter data prepare speed-bench`
(speed_bench_prepare.prepare) fills them from their sources or drops them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.data._rows import (
    at,
    check_unique_ids,
    make_conversation,
    read_jsonl,
    read_parquet_rows,
    require_turns,
    row_error,
)
from specmeter.data.model import Conversation

DATASET = "nvidia/SPEED-Bench"
DEFAULT_REVISION = "487aa718444e816458d1a0a52bfce7a454285cf4"
SPLIT = "test"
CONFIGS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
PLACEHOLDER_PREFIX = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"
PREPARE_HINT = "run `specmeter data prepare speed-bench` to fill placeholder rows from their sources"


def prepared_file_name(config: str) -> str:
    return f"speed_bench_{config}.jsonl"


def check_config(config: str) -> str:
    if config not in CONFIGS:
        raise InputError(f"unknown SPEED-Bench config {config!r}; choose one of {', '.join(CONFIGS)}")
    return config


def is_placeholder(turns: Any) -> bool:
    """True for a row whose first turn is the public repository's stand-in text."""
    return (
        isinstance(turns, list)
        and bool(turns)
        and isinstance(turns[0], str)
        and turns[0].lstrip().startswith(PLACEHOLDER_PREFIX)
    )


def load_speed_bench(path: str | Path, config: str | None = None) -> list[Conversation]:
    """Load prepared SPEED-Bench rows from a file, or from a directory plus a config name."""
    data_file = _resolve(Path(path), config)
    if data_file.suffix == ".parquet":
        located = [(at(data_file, n, "row"), row) for n, row in enumerate(read_parquet_rows(data_file), start=1)]
    else:
        located = [(at(data_file, n), row) for n, row in read_jsonl(data_file)]
    if not located:
        raise InputError(f"{data_file}: no rows found; {PREPARE_HINT}")
    conversations = [_to_conversation(row, where) for where, row in located]
    check_unique_ids([(c.id, where) for c, (where, _) in zip(conversations, located, strict=True)], data_file)
    return conversations


def _resolve(path: Path, config: str | None) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise InputError(f"{path}: not found; give a prepared SPEED-Bench file or directory ({PREPARE_HINT})")
    if config is not None:
        candidate = path / prepared_file_name(check_config(config))
        if candidate.is_file():
            return candidate
        raise InputError(f"{candidate}: not found; {PREPARE_HINT} --config {config}")
    found = sorted(p for pattern in ("*.jsonl", "*.parquet") for p in path.glob(pattern))
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(f"{path}: no .jsonl or .parquet file inside; {PREPARE_HINT}")
    names = ", ".join(p.name for p in found)
    raise InputError(f"{path}: holds several data files ({names}); choose one with --dataset-option config=NAME "
                     "or pass the file path")


def _to_conversation(row: dict[str, Any], where: str) -> Conversation:
    for field in ("question_id", "category", "turns"):
        if row.get(field) in (None, "", []):
            raise row_error(where, field, "is missing", "fix the row or prepare the file again")
    if is_placeholder(row["turns"]):
        raise row_error(where, "turns", "holds the SPEED-Bench placeholder text, not a prompt", PREPARE_HINT)
    turns = require_turns(row["turns"], where)
    if not isinstance(row["category"], str):
        raise row_error(where, "category", "must be a string")
    metadata = {key: value for key, value in row.items() if key not in ("question_id", "category", "turns")}
    return make_conversation(
        where, id=str(row["question_id"]), category=row["category"], turns=turns, metadata=metadata
    )
