"""Greedy acceptance of the draft against the target, simulated in eager PyTorch: what the training run
checks at its end and tools/measure_demo_models.py reports."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from demo_models.common import log


@dataclass
class AcceptanceResult:
    """Accepted-token counts per speculative step, over one or more prompts."""

    accepted: list[int] = field(default_factory=list)
    generated_tokens: int = 0

    @property
    def steps(self) -> int:
        return len(self.accepted)

    @property
    def al(self) -> float:
        """Mean acceptance length: 1 + mean accepted draft tokens per step."""
        return 1.0 + (sum(self.accepted) / len(self.accepted) if self.accepted else 0.0)

    def extend(self, other: AcceptanceResult) -> None:
        self.accepted += other.accepted
        self.generated_tokens += other.generated_tokens


def crop_cache(cache: Any, keep: int) -> None:
    """Drop cached tokens beyond the first ``keep`` (negative ``crop`` = remove that many)."""
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)


def new_cache(model: Any) -> Any:
    """An empty KV cache for ``model``."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older signature
        return DynamicCache()


@torch.inference_mode()
def target_greedy(model: Any, prompt: Sequence[int], max_new_tokens: int, eos_id: int | None) -> list[int]:
    """The target's greedy continuation (KV cache, batch 1), stopping after eos if ``eos_id``."""
    cache = new_cache(model)
    inp = torch.tensor([list(prompt)])
    out: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(input_ids=inp, past_key_values=cache, use_cache=True).logits
        t = int(logits[0, -1].argmax())
        out.append(t)
        if eos_id is not None and t == eos_id:
            break
        inp = torch.tensor([[t]])
    return out


@torch.inference_mode()
def simulate_greedy_spec(draft: Any, prompt: Sequence[int], target_tokens: Sequence[int], k: int) -> AcceptanceResult:
    """Simulate greedy speculative decoding of ``target_tokens`` with ``draft`` proposing ``k``.

    With greedy verification the output equals the target's greedy output, so only the draft has
    to run: at each step it proposes ``k`` tokens after the current context; the accepted count is
    the longest prefix equal to the target's next tokens; the context then advances by the
    accepted tokens plus the target's bonus token. The draft's KV cache is cropped on rejection.
    """
    res = AcceptanceResult(generated_tokens=len(target_tokens))
    cache = new_cache(draft)
    context = list(prompt)
    cached = 0  # tokens of `context` already in the draft's cache
    pos = 0  # number of target tokens already emitted
    n = len(target_tokens)
    while pos < n:
        inp = context[cached:]
        drafted: list[int] = []
        for _ in range(k):
            logits = draft(input_ids=torch.tensor([inp]), past_key_values=cache, use_cache=True).logits
            t = int(logits[0, -1].argmax())
            drafted.append(t)
            inp = [t]
        cache_len = len(context) + k - 1
        acc = 0
        while acc < k and pos + acc < n and drafted[acc] == target_tokens[pos + acc]:
            acc += 1
        res.accepted.append(acc)
        step_tokens = target_tokens[pos : pos + acc + 1]
        # cache holds context + drafted[:k-1]; the first `acc` drafted tokens are correct
        keep = min(cache_len, len(context) + acc)
        crop_cache(cache, keep)
        context += step_tokens
        cached = keep
        pos += len(step_tokens)
    return res


def acceptance_for_prompts(
    target: Any, draft: Any, prompts: Sequence[Sequence[int]], k: int, max_new_tokens: int, eos_id: int | None
) -> AcceptanceResult:
    """Greedy AL at ``k`` aggregated over ``prompts`` (token ids)."""
    total = AcceptanceResult()
    for p in prompts:
        toks = target_greedy(target, p, max_new_tokens, eos_id)
        total.extend(simulate_greedy_spec(draft, p, toks, k))
    return total


def accepted_walk(drafts: torch.Tensor, full: Sequence[int], prompt_len: int) -> AcceptanceResult:
    """Greedy speculative decoding of ``full`` (a prompt of ``prompt_len`` tokens and the target's greedy
    continuation) from per-anchor drafts (T - 1, k): after the prefill the anchor is the prompt's last position; each
    step takes the k drafts at the anchor, accepts the longest prefix equal to the target's tokens, and moves the
    anchor past the accepted tokens and the bonus token, as vLLM runs a head or an MTP layer."""
    k = drafts.size(-1)
    res = AcceptanceResult(generated_tokens=len(full) - prompt_len)
    p, end = prompt_len - 1, len(full) - 1
    while p + 1 < end:  # the target's token at p + 1 is out; the step verifies the drafts after it
        acc = 0
        while acc < k and p + 2 + acc <= end and int(drafts[p, acc]) == full[p + 2 + acc]:
            acc += 1
        res.accepted.append(acc)
        p += acc + 1
    return res


def compare_acceptance(sets: dict[str, list[list[int]]], target: Any, draft: Any, ks: Sequence[int],
                       new_tokens: int, eos: int, name: str,
                       simulate: Callable[[Sequence[int], Sequence[int], int], AcceptanceResult]) -> dict[str, Any]:
    """Greedy AL of a drafter (``simulate``: prompt, the target's continuation, k) and of the ``draft`` model at each
    K on the same prompts, per set of prompts, as the training reports record it."""
    result: dict[str, Any] = {}
    for set_name, prompts in sets.items():
        conts = [target_greedy(target, p, new_tokens, eos) for p in prompts]
        row: dict[str, Any] = {"prompts": len(prompts)}
        for k in ks:
            mine, theirs = AcceptanceResult(), AcceptanceResult()
            for p, c in zip(prompts, conts):
                mine.extend(simulate(p, c, k))
                theirs.extend(simulate_greedy_spec(draft, p, c, k))
            row[f"k{k}"] = {name: round(mine.al, 3), "demo_draft": round(theirs.al, 3)}
            log(f"AL@K={k} {set_name}: {name} {row[f'k{k}'][name]}, demo-draft {row[f'k{k}']['demo_draft']}")
        result[set_name] = row
    return result


def heldout_sets(seed: int, n: int, heldout_files: Any, held_docs: list[list[int]],
                 encode_many: Callable[[Sequence[str]], list[list[int]]]) -> dict[str, list[list[int]]]:
    """The held-out prompts a training run checks acceptance on: ``n`` chat prompts made from the held-out files'
    docstrings (first turn, chat template) and ``n`` excerpts of the held-out corpus, seeded."""
    from demo_models.common import render_chat
    from demo_models.corpus import extract_doc_items
    from demo_models.examples import instruction_prompts

    rng = random.Random(seed + 3)
    held_chat = [q for _, q in instruction_prompts(extract_doc_items(heldout_files), rng, n_doc=n)]
    sets: dict[str, list[list[int]]] = {
        "heldout-chat": encode_many([render_chat([{"role": "user", "content": q}], True) for q in held_chat[-n:]]),
        "heldout-corpus": [],
    }
    for d in rng.sample([d for d in held_docs if len(d) > 100], min(n, len(held_docs))):
        s = rng.randint(0, len(d) - 65)
        sets["heldout-corpus"].append([d[0], *d[s + 1 : s + 64]])
    return sets
