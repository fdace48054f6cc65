"""Helpers for the data tests: small files written into tmp_path and a stand-in for datasets.load_dataset.

Nothing here touches the network: SPEED-Bench and its sources are replaced by in-memory rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specmeter.data.speed_bench import DATASET, PLACEHOLDER_PREFIX

PLACEHOLDER_LINE = PLACEHOLDER_PREFIX + " USING THE TOOL"


def write_jsonl(path: Path, rows: Sequence[Any]) -> Path:
    """Write rows (dicts, or raw strings written as-is) one per line."""
    lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def speed_row(
    qid: str, category: str, turns: list[str], source: str = "made-up/source", src_id: str = "x", **extra: Any
) -> dict[str, Any]:
    """One row in the SPEED-Bench schema."""
    return {
        "question_id": qid,
        "category": category,
        "sub_category": "general",
        "turns": turns,
        "source": source,
        "src_id": src_id,
        "difficulty": "medium",
        "multiturn": len(turns) > 1,
        **extra,
    }


def placeholder_row(qid: str, category: str, source: str, src_id: str, template: str) -> dict[str, Any]:
    """A placeholder row: the placeholder line, a blank line, then the template to fill."""
    return speed_row(qid, category, [f"{PLACEHOLDER_LINE}\n\n{template}"], source=source, src_id=src_id)


class GatedError(Exception):
    """Mimics the hub's refusal for a gated repository."""


class FakeHub:
    """Callable like datasets.load_dataset; serves SPEED-Bench configs and sources from memory.

    sources maps a source name to its rows, or to an exception to raise (gated / offline).
    Every call is recorded so tests can check the revision and config that were asked for.
    """

    def __init__(
        self,
        configs: Mapping[str, list[dict[str, Any]]],
        sources: Mapping[str, list[dict[str, Any]] | Exception] | None = None,
        wrap: Callable[[list[dict[str, Any]]], Any] = list,
    ) -> None:
        self.configs = configs
        self.sources = dict(sources or {})
        self.wrap = wrap
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, path: str, **kwargs: Any) -> Any:
        self.calls.append((path, kwargs))
        if path == DATASET:
            if kwargs.get("name") not in self.configs:
                raise ValueError(f"BuilderConfig {kwargs.get('name')} not found")
            return self.wrap([dict(row) for row in self.configs[kwargs["name"]]])
        found = self.sources.get(path)
        if found is None:
            raise ConnectionError(f"Couldn't reach '{path}' on the Hub (offline)")
        if isinstance(found, Exception):
            raise found
        return self.wrap(found)


def qualitative_rows() -> list[dict[str, Any]]:
    """Text rows, a fillable cnn_dailymail placeholder, an unfillable MMLU-Pro one and a gated HLE one."""
    return [
        speed_row("q-03", "coding", ["Write a function that reverses a string."]),
        speed_row("q-01", "writing", ["Write a haiku about rain.", "Now make it rhyme."]),
        placeholder_row(
            "q-02", "summarization", "abisee/cnn_dailymail", "art-1", "Summarize this article:\n\n{article}"
        ),
        placeholder_row("q-04", "stem", "TIGER-Lab/MMLU-Pro", "range(10, 12)", "unused"),
        placeholder_row("q-05", "humanities", "cais/hle", "hle-7", "unused"),
    ]


def throughput_rows() -> list[dict[str, Any]]:
    return [
        speed_row("t-2", "high_entropy", ["Tell a long story. " * 20], o200k_tokens=1000),
        speed_row("t-1", "low_entropy", ["Sort these numbers: 3 1 2. " * 20], o200k_tokens=1000),
        placeholder_row("t-3", "mixed", "RUCAIBox/BAMBOO", "b_1", "unused"),
    ]


def cnn_source() -> list[dict[str, Any]]:
    return [
        {"id": "art-0", "article": "Unrelated article."},
        {"id": "art-1", "article": "The river rose overnight and the bridge was closed."},
    ]
