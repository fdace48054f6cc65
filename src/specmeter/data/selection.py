"""Choosing what to send: category filter, stratified sampling, input-length buckets, output policy.

Acceptance differs a lot between categories (coding accepts far more than multilingual), so a subset
must keep the category mix: `select` gives every category its proportional share (at least one item
each when there is room), and interleaves them so that a run cut short still covers every category.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specmeter.common.errors import InputError
from specmeter.config.models import LoadSpec
from specmeter.data.model import Conversation

TokenCounter = Callable[[str], int]


def select(
    conversations: Sequence[Conversation],
    num_prompts: int | None = None,
    categories: Iterable[str] | None = None,
    seed: int = 0,
) -> list[Conversation]:
    """Filter to `categories`, then draw `num_prompts` stratified by category (deterministic per seed).

    Without num_prompts every (filtered) conversation is returned in input order.
    """
    by_category: dict[str, list[Conversation]] = {}
    for conversation in conversations:
        by_category.setdefault(conversation.category, []).append(conversation)
    if categories is not None:
        wanted = list(dict.fromkeys(categories))
        unknown = [c for c in wanted if c not in by_category]
        if unknown:
            raise InputError(
                f"unknown categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                f"available: {', '.join(sorted(by_category))}"
            )
        by_category = {c: by_category[c] for c in wanted}
    pool = [c for c in conversations if c.category in by_category]
    if num_prompts is None:
        return pool
    if num_prompts <= 0:
        raise InputError(f"num_prompts must be positive (got {num_prompts})")
    if num_prompts > len(pool):
        raise InputError(
            f"num_prompts {num_prompts} exceeds the {len(pool)} conversations available; "
            "lower it or widen the categories"
        )
    quotas = stratified_quotas({c: len(items) for c, items in by_category.items()}, num_prompts, seed)
    picked: dict[str, list[Conversation]] = {}
    for category in sorted(quotas):
        items = list(by_category[category])
        random.Random(f"{seed}:{category}").shuffle(items)
        picked[category] = items[: quotas[category]]
    return _interleave([picked[c] for c in sorted(picked)])


def stratified_quotas(sizes: dict[str, int], total: int, seed: int = 0) -> dict[str, int]:
    """Split `total` across categories in proportion to their sizes (largest remainder).

    When total >= number of categories, each category first gets one item, and the rest is shared in
    proportion to the remaining sizes, so no category disappears from a small sample. With fewer slots
    than categories, a seeded choice of categories gets one each.
    """
    names = sorted(name for name, size in sizes.items() if size > 0)
    if total >= sum(sizes[n] for n in names):
        return {name: sizes[name] for name in names}
    if total < len(names):
        chosen = random.Random(f"{seed}:categories").sample(names, total)
        return {name: 1 for name in sorted(chosen)}
    spare = {name: sizes[name] - 1 for name in names}
    remaining = total - len(names)
    spare_total = sum(spare.values())
    ideal = {name: remaining * spare[name] / spare_total for name in names}
    quotas = {name: 1 + int(ideal[name]) for name in names}
    leftover = total - sum(quotas.values())
    by_remainder = sorted(names, key=lambda n: (-(ideal[n] - int(ideal[n])), n))
    for name in by_remainder[:leftover]:
        quotas[name] += 1
    return quotas


def _interleave(groups: list[list[Conversation]]) -> list[Conversation]:
    """Round-robin over categories, so a prefix of the run covers every category."""
    out: list[Conversation] = []
    for position in range(max((len(g) for g in groups), default=0)):
        out.extend(group[position] for group in groups if position < len(group))
    return out


def bucket_by_input_length(
    conversations: Iterable[Conversation],
    count_tokens: TokenCounter,
    buckets: Sequence[tuple[int, int]],
) -> dict[tuple[int, int], list[Conversation]]:
    """Group conversations by first-request input length in [lo, hi) buckets; others are left out.

    Lengths are measured with `count_tokens` (the target model's tokenizer) on the system prompt and the
    first turn, or taken from prompt_token_ids. Each returned conversation carries metadata["input_tokens"].
    """
    ordered = sorted(buckets)
    for lo, hi in ordered:
        if not 0 <= lo < hi:
            raise InputError(f"input-length bucket ({lo}, {hi}) must satisfy 0 <= lo < hi")
    for (_, hi), (lo, _) in itertools.pairwise(ordered):
        if lo < hi:
            raise InputError(f"input-length buckets overlap near {lo}; make them disjoint [lo, hi) ranges")
    result: dict[tuple[int, int], list[Conversation]] = {(lo, hi): [] for lo, hi in buckets}
    for conversation in conversations:
        text = "\n".join(part for part in (conversation.system, conversation.turns[0]) if part)
        length = len(conversation.prompt_token_ids) if conversation.prompt_token_ids else count_tokens(text)
        bucket = next(((lo, hi) for lo, hi in ordered if lo <= length < hi), None)
        if bucket is None:
            continue
        metadata = {**conversation.metadata, "input_tokens": length}
        result[bucket].append(conversation.model_copy(update={"metadata": metadata}))
    return result


def output_policy(load: LoadSpec) -> OutputPolicy:
    """The output policy a load asks for: ignore_eos forces max_tokens, else outputs end naturally."""
    return OutputPolicy(mode="fixed" if load.ignore_eos else "natural", max_tokens=load.max_tokens)


class OutputPolicy(BaseModel):
    """How many tokens each request may generate.

    natural: stop at the model's end of sequence or at max_tokens, whichever comes first (the default,
    and the only mode whose acceptance numbers describe real traffic). fixed: force exactly max_tokens
    (ignore_eos + min_tokens), useful to pin the output length in throughput sweeps.
    """

    model_config = ConfigDict(frozen=True)

    mode: Literal["natural", "fixed"] = "natural"
    max_tokens: int = Field(default=512, gt=0)

    def max_tokens_for(self, conversation: Conversation) -> int:
        """natural: the smaller of the item's own cap and the policy's. fixed: the item's own length when
        the workload sets one (random prompts matched to measured lengths), else the policy's."""
        if conversation.max_tokens is None:
            return self.max_tokens
        if self.mode == "natural":
            return min(conversation.max_tokens, self.max_tokens)
        return conversation.max_tokens

    def request_fields(self, conversation: Conversation) -> dict[str, int | bool]:
        """Sampling fields for an OpenAI-compatible request (ignore_eos/min_tokens are vLLM extensions)."""
        limit = self.max_tokens_for(conversation)
        if self.mode == "fixed":
            return {"max_tokens": limit, "min_tokens": limit, "ignore_eos": True}
        return {"max_tokens": limit}

    def warning(self) -> str | None:
        """The caveat to print with results, or None when there is nothing to warn about."""
        if self.mode == "fixed":
            return (
                f"output length forced to {self.max_tokens} tokens with min_tokens + ignore_eos: text generated past "
                "the natural end of an answer is often repetitive, which biases acceptance (usually upward); "
                "`vllm bench serve` forces lengths with ignore_eos alone, which gives other text and other "
                "acceptance on the same prompts; measure acceptance with the natural output mode"
            )
        return None
