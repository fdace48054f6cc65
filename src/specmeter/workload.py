"""From CLI/config choices to the conversations a run sends, plus a description for the summary."""

from __future__ import annotations

from typing import Any

from specmeter.config import LoadSpec
from specmeter.data.model import Conversation
from specmeter.data.registry import load_workload
from specmeter.data.selection import select
from specmeter.errors import InputError


def load_conversations(
    dataset: str,
    path: str | None,
    load: LoadSpec,
    categories: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[list[Conversation], dict[str, Any]]:
    """Load, filter by category and sample (stratified) the workload; fail before any server starts."""
    convs = load_workload(dataset, path, **(options or {}))
    if not convs:
        raise InputError(f"workload {dataset!r} ({path or 'built-in'}) has no rows; check the file")
    chosen = select(convs, num_prompts=load.num_prompts, categories=categories or None, seed=load.seed)
    cats: dict[str, int] = {}
    for c in chosen:
        cats[c.category] = cats.get(c.category, 0) + 1
    info = {
        "dataset": dataset,
        "path": path,
        # What resume needs to rebuild the same selection.
        "selection": {"categories": categories or None, "num_prompts": load.num_prompts, "seed": load.seed,
                      "options": options or {}},
        "conversation_ids": [c.id for c in chosen],
        "conversations": len(chosen),
        "requests": sum(len(c.turns) for c in chosen),
        "multi_turn": sum(1 for c in chosen if c.multi_turn),
        "categories": cats,
    }
    return chosen, info
