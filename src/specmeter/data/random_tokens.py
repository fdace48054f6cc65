"""Random token-id prompts: the synthetic contrast only, never a stand-in for real data.

Acceptance on random inputs says little about real traffic (random inputs overestimate SD throughput
by about 23% in published comparisons); use them to isolate engine cost at an exact input length, next
to a real workload. Ids are drawn uniformly (seeded) from [low, vocab_size), skipping `exclude` (e.g.
special tokens); the prompt is sent as prompt_token_ids, and turns[0] only labels it.
"""

from __future__ import annotations

import random
from collections.abc import Collection

from specmeter.common.errors import InputError
from specmeter.data.model import Conversation

# What every report of random-token prompts warns: the synthetic bias is the reason they are never the answer.
SYNTHETIC_BIAS = ("random-token workload: random prompts are the contrast, not the answer; acceptance on them says "
                  "little about real traffic")


def load_random(
    num_prompts: int = 100,
    input_len: int = 128,
    vocab_size: int = 32000,
    seed: int = 0,
    low: int = 0,
    exclude: Collection[int] = (),
) -> list[Conversation]:
    """Build `num_prompts` prompts of exactly `input_len` random token ids."""
    if num_prompts <= 0 or input_len <= 0:
        raise InputError(f"random: num_prompts and input_len must be positive (got {num_prompts}, {input_len})")
    excluded = set(exclude)
    allowed = [token for token in range(max(low, 0), vocab_size) if token not in excluded]
    if not allowed:
        raise InputError(f"random: no token ids left in [{low}, {vocab_size}) after exclusions; check vocab_size")
    rng = random.Random(seed)
    return [
        Conversation(
            id=f"random-{number:04d}",
            category="random",
            turns=[f"<{input_len} random token ids, seed {seed}, prompt {number}>"],
            raw_prompt=True,
            prompt_token_ids=[rng.choice(allowed) for _ in range(input_len)],
            metadata={"input_tokens": input_len, "synthetic": True},
        )
        for number in range(num_prompts)
    ]
