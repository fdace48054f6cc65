"""Sonnet-style prompts: poem lines sampled to a chosen input length, the vLLM benchmark tradition.

Each prompt is an instruction followed by lines drawn (seeded, without repeats within a prompt) from a
poem file until the next line would exceed `input_len` tokens, counted with `count_tokens`: pass the
target model's tokenizer so the length is what the server sees. The count is the sum of the
instruction's and each line's own counts (tokens can merge across line joins, so the whole prompt may
differ by a token or two); metadata["input_tokens"] holds the count of the final text.

Prompts are sent raw (raw_prompt=True, /v1/completions) so no chat template adds tokens the length
does not account for; set chat=True to send them as a chat message instead. Asking the model to repeat
lines makes the output copy the input: drafters (n-gram especially) score far higher here than on real
traffic, which is the point of this contrast set, not a realistic measurement.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from specmeter.data._rows import read_text
from specmeter.data.model import Conversation
from specmeter.errors import InputError

INSTRUCTION = "Pick as many lines as you can from these poem lines and repeat them:\n"


def load_sonnet(
    path: str | Path,
    count_tokens: Callable[[str], int],
    input_len: int = 550,
    num_prompts: int = 100,
    seed: int = 0,
    chat: bool = False,
) -> list[Conversation]:
    """Build `num_prompts` prompts of at most `input_len` tokens from the poem at `path`."""
    source = Path(path)
    lines = [line.strip() for line in read_text(source).splitlines() if line.strip()]
    if not lines:
        raise InputError(f"{source}: no text lines; give a poem file with one verse line per line")
    if input_len <= 0 or num_prompts <= 0:
        raise InputError(f"sonnet: input_len and num_prompts must be positive (got {input_len}, {num_prompts})")
    base = count_tokens(INSTRUCTION)
    costs = [count_tokens(line + "\n") for line in lines]
    if base + min(costs) > input_len:
        raise InputError(
            f"sonnet: input_len {input_len} is too short; the instruction and one line need at least "
            f"{base + min(costs)} tokens; raise input_len"
        )
    rng = random.Random(seed)
    conversations = []
    for number in range(num_prompts):
        order = list(range(len(lines)))
        rng.shuffle(order)
        chosen, used = [], base
        for index in order:
            if used + costs[index] <= input_len:
                chosen.append(lines[index])
                used += costs[index]
        text = INSTRUCTION + "".join(line + "\n" for line in chosen)
        conversations.append(
            Conversation(
                id=f"sonnet-{number:04d}",
                category="sonnet",
                turns=[text],
                raw_prompt=not chat,
                metadata={"input_tokens": count_tokens(text), "target_input_tokens": input_len, "lines": len(chosen)},
            )
        )
    return conversations
