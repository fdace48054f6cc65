"""From CLI/config choices to the conversations a run sends, plus a description for the summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specmeter.config import LoadSpec
from specmeter.data.model import Conversation
from specmeter.data.registry import load_workload
from specmeter.data.selection import bucket_by_input_length, select
from specmeter.errors import InputError


def target_token_counter(tokenizer: str | None) -> Callable[[str], int]:
    """Count tokens with the target's own tokenizer (a local path or a cached hub id)."""
    if not tokenizer:
        raise InputError("--input-len needs the target's tokenizer: pass --tokenizer PATH (launch mode uses --model)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputError("--input-len needs `transformers` to read the tokenizer; pip install transformers") from None
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the same user fix
        raise InputError(f"tokenizer {tokenizer!r} could not be loaded ({type(exc).__name__}); check --tokenizer") from exc
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def load_conversations(
    dataset: str,
    path: str | None,
    load: LoadSpec,
    categories: list[str] | None = None,
    options: dict[str, Any] | None = None,
    input_len: tuple[int, int] | None = None,
    tokenizer: str | None = None,
) -> tuple[list[Conversation], dict[str, Any]]:
    """Load, filter by category and input length, sample (stratified); fail before any server starts."""
    convs = load_workload(dataset, path, **(options or {}))
    if not convs:
        raise InputError(f"workload {dataset!r} ({path or 'built-in'}) has no rows; check the file")
    if input_len is not None:
        convs = bucket_by_input_length(convs, target_token_counter(tokenizer), [input_len])[input_len]
        if not convs:
            raise InputError(f"no {dataset} prompt has {input_len[0]} <= input tokens < {input_len[1]}; widen --input-len")
    chosen = select(convs, num_prompts=load.num_prompts, categories=categories or None, seed=load.seed)
    cats: dict[str, int] = {}
    for c in chosen:
        cats[c.category] = cats.get(c.category, 0) + 1
    info = {
        "dataset": dataset,
        "path": path,
        # What resume needs to rebuild the same selection.
        "selection": {"categories": categories or None, "num_prompts": load.num_prompts, "seed": load.seed,
                      "options": options or {}, "input_len": list(input_len) if input_len else None,
                      "tokenizer": tokenizer},
        "conversation_ids": [c.id for c in chosen],
        "conversations": len(chosen),
        "requests": sum(len(c.turns) for c in chosen),
        "multi_turn": sum(1 for c in chosen if c.multi_turn),
        "categories": cats,
    }
    return chosen, info
