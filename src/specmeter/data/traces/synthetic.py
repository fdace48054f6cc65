"""A made-up trace in Mooncake's format, for a replay where no real trace fits the target (a 2048-token demo model
cannot replay FAST'25's prompts of tens of thousands of tokens): seeded, so the same call writes the same file.

Its shape is a chat service's, not a measured one's: prompt lengths lognormal (most prompts short, a long tail),
answers lognormal and shorter, arrivals a Poisson process, and a share of the rows opening with one of a few shared
system prompts a whole 512-token block long, so an engine's prefix cache has the reuse a real service offers. Each
row's `hash_ids` has one id per 512-token block, as Mooncake's have (⌈input_length / 512⌉ of them); only whole
blocks are shared, since a partial block's tokens are not a prefix another row could hold.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specmeter.data.traces.mooncake import BLOCK_TOKENS


@dataclass(frozen=True)
class TraceShape:
    """What a made-up trace's rows are drawn from. Lengths are tokens, the rate requests a second."""

    rows: int = 200
    rate: float = 2.0
    input_median: int = 320
    input_sigma: float = 0.9
    output_median: int = 48
    output_sigma: float = 0.5
    output_range: tuple[int, int] = (16, 128)
    context: int = 2048  # the target's context: a prompt and its answer fit in it, with room for the chat template
    template_room: int = 64
    shared_prefixes: int = 3  # distinct system prompts, each one whole block
    shared_share: float = 0.3  # of the rows long enough to hold one


def mooncake_rows(shape: TraceShape, seed: int = 0) -> list[dict[str, Any]]:
    """The rows of a made-up Mooncake trace, in arrival order: timestamp (whole ms), input_length, output_length,
    hash_ids."""
    rng = random.Random(seed)
    lo_out, hi_out = shape.output_range
    rows: list[dict[str, Any]] = []
    clock_s = 0.0
    next_id = shape.shared_prefixes  # ids below it are the shared system prompts
    for i in range(shape.rows):
        if i:
            clock_s += rng.expovariate(shape.rate)
        output = _clipped(rng, shape.output_median, shape.output_sigma, lo_out, hi_out)
        longest = shape.context - hi_out - shape.template_room
        prompt = _clipped(rng, shape.input_median, shape.input_sigma, 16, longest)
        hashes = list(range(next_id, next_id + math.ceil(prompt / BLOCK_TOKENS)))
        next_id += len(hashes)
        if prompt > BLOCK_TOKENS and rng.random() < shape.shared_share:
            hashes[0] = rng.randrange(shape.shared_prefixes)
        rows.append({"timestamp": round(1000 * clock_s), "input_length": prompt, "output_length": output,
                     "hash_ids": hashes})
    return rows


def write_mooncake(path: Path, rows: list[dict[str, Any]]) -> None:
    """One JSON object a line, as Mooncake's files are."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _clipped(rng: random.Random, median: int, sigma: float, lo: int, hi: int) -> int:
    return min(hi, max(lo, round(rng.lognormvariate(math.log(median), sigma))))
