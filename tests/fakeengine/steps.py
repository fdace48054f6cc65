"""What the fake engine generates for a request: deterministic speculative steps seeded by the prompt, the
per-request SD statistics of those steps, and running totals over requests (the truth tests compare with)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Plan:
    """One request's generation: content chunks and the speculative step behind each decode chunk."""

    prompt_tokens: int
    chunk_tokens: list[int]  # tokens per content chunk: [1 (prefill)] + [a+1 per decode step]
    per_step_accepted: list[int]
    per_step_drafted: list[int]
    finish_reason: str

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)


def plan_request(seed: str, prompt: str, max_tokens: int, *, output_tokens: int, k: int, alpha: float,
                 no_draft_prob: float, tree_nodes: int | None = None, collapse_after_zero: bool = False) -> Plan:
    """The steps for `prompt`: min(output_tokens, max_tokens) tokens (finish "length" when max_tokens cut
    the reply, else "stop"); each step drafts K and accepts each next draft with probability `alpha`, or,
    with probability `no_draft_prob`, drafts nothing (a plain decode step, which engines do not count).
    `tree_nodes`: each step drafts a tree of that many nodes and depth K instead, and accepts one path of it
    (each next depth with probability `alpha`), as tree drafts count: nodes drafted, at most K accepted.
    `collapse_after_zero`: after the request's first step that drafted nothing, no draft is accepted again (the
    fault of TensorRT-LLM #16888, where acceptance collapsed for the rest of a request after a K = 0 tier)."""
    rng = random.Random(f"{seed}|{prompt}")
    n = max(1, min(output_tokens, max_tokens))
    finish = "length" if max_tokens <= output_tokens else "stop"
    chunks = [1]
    acc: list[int] = []
    dr: list[int] = []
    remaining = n - 1
    paused = False
    while remaining > 0:
        if rng.random() < no_draft_prob:
            a, d = 0, 0
            paused = True
        else:
            d = tree_nodes or k
            a = 0
            while a < k and rng.random() < (0.0 if collapse_after_zero and paused else alpha):
                a += 1
            a = min(a, remaining - 1)
        acc.append(a)
        dr.append(d)
        chunks.append(a + 1)
        remaining -= a + 1
    return Plan(len(prompt.split()) + 3, chunks, acc, dr, finish)


def token_ids(seed: str, prompt: str, n: int) -> list[int]:
    """The ids of the n tokens generated for `prompt`: deterministic, like greedy decoding."""
    rng = random.Random(f"token ids|{seed}|{prompt}")
    return [rng.randrange(100, 32000) for _ in range(n)]


def sd_stats(per_step_accepted: list[int], per_step_drafted: list[int], k: int) -> dict[str, Any]:
    """vLLM's detailed `metrics.speculative_decoding` for the given steps (steps that drafted 0 are not steps);
    the personalities derive their own per-request shapes from it."""
    counted = [(a, d) for a, d in zip(per_step_accepted, per_step_drafted) if d > 0]
    steps = len(counted)
    drafted = sum(d for _, d in counted)
    accepted = sum(a for a, _ in counted)
    hist = [0] * (k + 1)
    for a, _ in counted:
        hist[a] += 1
    return {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
        "per_step_accepted": list(per_step_accepted),
        "per_step_drafted": list(per_step_drafted),
    }


@dataclass
class Tally:
    """SD totals over some requests; accepted_per_pos[i]: steps that accepted more than i drafts."""

    requests: int = 0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def add(self, stats: dict[str, Any]) -> None:
        """Count one request's `sd_stats`."""
        self.requests += 1
        self.steps += stats["num_spec_steps"]
        self.drafted += stats["num_draft_tokens"]
        self.accepted += stats["num_accepted_draft_tokens"]
        hist = stats["acceptance_histogram"]
        per_pos = [sum(hist[i + 1:]) for i in range(len(hist) - 1)]
        self.accepted_per_pos = [a + b for a, b in zip(self.accepted_per_pos or [0] * len(per_pos), per_pos)]
