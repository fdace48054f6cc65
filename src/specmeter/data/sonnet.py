"""Sonnet-style prompts shaped to exactly N tokens: poem lines after an instruction, the vLLM benchmark tradition.

Each prompt is an instruction followed by poem lines in a seeded order, each line kept (at most once) while the
whole prompt still fits, then the leading characters of lines in a second seeded order until the prompt is exactly
`input_len` tokens. Lengths are counted by `count_tokens` on the whole text: pass the counter of what the server is sent
(data/shaping.py: the target's tokenizer with its BOS for a raw completion, the full chat template for a chat
request), so `input_len` is the request's prompt tokens as the engine counts them. A length that no cut of the
text reaches exactly (a tokenizer that merges the last characters) is an error, never a silent truncation.

Prompts are sent raw (raw_prompt=True, /v1/completions) by default; chat=True sends them as a chat message (count
them with the template then). Asking the model to repeat lines makes the output copy the input: drafters (n-gram
especially) score far higher here than on real traffic, which is the point of this contrast set, not a realistic
measurement.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data._rows import read_text
from specmeter.data.model import Conversation

INSTRUCTION = "Pick as many lines as you can from these poem lines and repeat them:\n"
_NUDGE = 16  # characters tried around the longest fitting cut, where the tokenizer merges across it
_ORDERS = 8  # seeded orders of the filler lines tried before a length counts as unreachable


def load_sonnet(
    path: str | Path,
    count_tokens: Callable[[str], int],
    input_len: int = 550,
    num_prompts: int = 100,
    seed: int = 0,
    chat: bool = False,
) -> list[Conversation]:
    """Build `num_prompts` prompts of exactly `input_len` tokens (by `count_tokens`) from the poem at `path`."""
    source = Path(path)
    lines = [line.strip() for line in read_text(source).splitlines() if line.strip()]
    if not lines:
        raise InputError(f"{source}: no text lines; give a poem file with one verse line per line")
    if input_len <= 0 or num_prompts <= 0:
        raise InputError(f"sonnet: input_len and num_prompts must be positive (got {input_len}, {num_prompts})")
    base = count_tokens(INSTRUCTION)
    if base >= input_len:
        raise InputError(f"sonnet: input_len {input_len} is too short; the instruction alone is {base} tokens; "
                         f"raise input_len above {base}")
    # A line's cost: its tokens after the instruction, so a request's fixed tokens (BOS, a chat template) count once.
    costs = [max(count_tokens(INSTRUCTION + line + "\n") - base, 1) for line in lines]
    rng = random.Random(seed)
    conversations = []
    for number in range(num_prompts):
        text, used = _whole_lines(lines, costs, rng, count_tokens, input_len)
        text = _exact(text, lambda: _filler(lines, rng), count_tokens, input_len, where=f"sonnet prompt {number}")
        conversations.append(
            Conversation(
                id=f"sonnet-{number:04d}",
                category="sonnet",
                turns=[text],
                raw_prompt=not chat,
                metadata={"input_tokens": input_len, "target_input_tokens": input_len, "lines": used},
            )
        )
    return conversations


def _whole_lines(lines: list[str], costs: list[int], rng: random.Random, count: Callable[[str], int],
                 n: int) -> tuple[str, int]:
    """The instruction and whole lines in a seeded order, each kept while the prompt fits in n tokens by the lines'
    own costs, then checked whole: lines come off the end until the whole text fits (tokens merge across joins).
    Counting the whole text once per line instead would encode a long prompt hundreds of times."""
    order = list(range(len(lines)))
    rng.shuffle(order)
    chosen, used = [], count(INSTRUCTION)
    for index in order:
        if used + costs[index] <= n:
            chosen.append(lines[index])
            used += costs[index]
    while chosen and count(_joined(chosen)) > n:
        chosen.pop()
    return _joined(chosen), len(chosen)


def _joined(chosen: list[str]) -> str:
    return INSTRUCTION + "".join(line + "\n" for line in chosen)


def _filler(lines: list[str], rng: random.Random) -> str:
    order = list(range(len(lines)))
    rng.shuffle(order)
    return "".join(lines[i] + "\n" for i in order)


def _exact(text: str, fillers: Callable[[], str], count: Callable[[str], int], n: int, where: str) -> str:
    """text plus the longest prefix of a filler (its lines repeated as needed) that makes exactly n tokens. Token
    counts are not monotonic in characters (a longer word can be one token where its prefix was two), so the cuts
    near the longest fitting one are tried, then another seeded order of lines."""
    if count(text) == n:
        return text
    for _ in range(_ORDERS):
        filler = fillers()
        while count(text + filler) < n:  # a short poem: the filler repeats its lines
            filler += filler
        lo, hi = 0, len(filler)  # count(text + filler[:lo]) <= n < count(text + filler[:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(text + filler[:mid]) <= n:
                lo = mid
            else:
                hi = mid
        for cut in sorted(range(max(lo - _NUDGE, 0), min(lo + _NUDGE, len(filler)) + 1), key=lambda c: abs(c - lo)):
            if count(text + filler[:cut]) == n:
                return text + filler[:cut]
    raise InputError(f"{where}: no cut of the poem text gives exactly {n} tokens with this tokenizer; "
                     f"choose an input_len one or two tokens away")
