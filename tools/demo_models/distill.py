"""Stage 4, distillation data: the target's greedy continuations with their top-k log-probs, and the
batches the draft learns from."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from demo_models.common import Budget, log


@dataclass
class DistillSample:
    """A prompt and the target's greedy continuation with its top-k log-probs."""

    prompt: list[int]
    cont: list[int]
    topk_ids: torch.Tensor  # (len(cont), k) int32
    topk_logp: torch.Tensor  # (len(cont), k) float16
    chat: bool


@torch.no_grad()
def generate_distill_data(
    target: Any,
    prompts: Sequence[tuple[list[int], int, bool]],
    pad_id: int,
    eos_id: int,
    batch: int,
    topk: int,
    budget: Budget,
) -> list[DistillSample]:
    """Greedy, batched (left-padded, KV cache) continuations of ``prompts`` by the target.

    ``prompts`` holds (prompt ids, max new tokens, is_chat). Batches are formed from prompts of
    similar length; generation stops when the budget is used up.
    """
    from transformers import GenerationConfig

    target.eval()
    gcfg_args = dict(do_sample=False, pad_token_id=pad_id, eos_token_id=eos_id, output_logits=True,
                     return_dict_in_generate=True)
    out: list[DistillSample] = []
    n_tokens = 0
    # group: chunks of `batch * 8` prompts in given (shuffled) order, sorted by length inside
    chunk = batch * 8
    order: list[list[int]] = []
    for c in range(0, len(prompts), chunk):
        idx = sorted(range(c, min(c + chunk, len(prompts))), key=lambda i: len(prompts[i][0]))
        order += [idx[j : j + batch] for j in range(0, len(idx), batch)]
    for bi, group in enumerate(order):
        if budget.done(bi):
            break
        plens = [len(prompts[i][0]) for i in group]
        L = max(plens)
        max_new = max(prompts[i][1] for i in group)
        ids = torch.full((len(group), L), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), L), dtype=torch.long)
        for r, i in enumerate(group):
            p = prompts[i][0]
            ids[r, L - len(p) :] = torch.tensor(p)
            mask[r, L - len(p) :] = 1
        gcfg = GenerationConfig(max_new_tokens=max_new, **gcfg_args)
        res = target.generate(input_ids=ids, attention_mask=mask, generation_config=gcfg)
        seqs = res.sequences[:, L:]
        logits = torch.stack(res.logits, dim=1).float()  # (B, T, V)
        logp = torch.log_softmax(logits, dim=-1)
        tl, ti = logp.topk(topk, dim=-1)
        for r, i in enumerate(group):
            toks = seqs[r].tolist()
            n = len(toks)
            if eos_id in toks:
                n = toks.index(eos_id) + 1
            n = min(n, prompts[i][1])
            if n == 0:
                continue
            out.append(DistillSample(prompts[i][0], toks[:n], ti[r, :n].to(torch.int32).clone(),
                                     tl[r, :n].to(torch.float16).clone(), prompts[i][2]))
            n_tokens += n
        if bi % 5 == 0:
            el = time.monotonic() - budget.start
            log(f"gen batch {bi + 1}/{len(order)} samples {len(out)} tokens {n_tokens} "
                f"elapsed {el:.0f}s tok/s {n_tokens / max(el, 1e-9):.0f}")
    return out


def distill_batches(
    samples: Sequence[DistillSample], batch: int, max_len: int, gen: torch.Generator, pad_id: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches: (input ids, attention mask, hard labels, top-k ids, top-k logp).

    Labels are only set on continuation positions (the target's own tokens); the prompt is
    context. Sequences are right-padded and truncated from the left to ``max_len``.
    """
    if not samples:
        raise ValueError("no distillation samples")
    batch = min(batch, len(samples))
    k = samples[0].topk_ids.size(1)
    while True:
        perm = torch.randperm(len(samples), generator=gen).tolist()
        for s in range(0, len(perm) - batch + 1, batch):
            group = [samples[i] for i in perm[s : s + batch]]
            seqs = []
            for smp in group:
                full = smp.prompt + smp.cont
                cut = max(0, len(full) - max_len)
                seqs.append((full[cut:], len(smp.prompt) - cut, smp))
            T = max(len(f) for f, _, _ in seqs)
            ids = torch.full((batch, T), pad_id, dtype=torch.long)
            mask = torch.zeros((batch, T), dtype=torch.long)
            labels = torch.full((batch, T), -100, dtype=torch.long)
            tk_ids = torch.zeros((batch, T, k), dtype=torch.long)
            tk_lp = torch.full((batch, T, k), -1e4, dtype=torch.float32)
            for r, (full, plen, smp) in enumerate(seqs):
                ids[r, : len(full)] = torch.tensor(full)
                mask[r, : len(full)] = 1
                # position t predicts token t+1; continuation token j sits at index plen + j
                ncont = len(full) - plen
                lo = max(plen, 1)
                skip = lo - plen  # continuation tokens whose predicting position was cut
                pos = torch.arange(lo - 1, plen + ncont - 1)
                labels[r, pos] = torch.tensor(full[lo:])
                tk_ids[r, pos] = smp.topk_ids[skip:].long()
                tk_lp[r, pos] = smp.topk_logp[skip:].float()
            yield ids, mask, labels, tk_ids, tk_lp
