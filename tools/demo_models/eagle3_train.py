"""Training and checking the EAGLE-3 head: the target's features and soft labels for a batch, the unrolled loss,
the training loop, and greedy acceptance simulated the way vLLM drafts with the head."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from demo_models.acceptance import AcceptanceResult, accepted_walk
from demo_models.common import Budget
from demo_models.eagle3 import AUX_LAYERS, Eagle3Head
from demo_models.train import by_length, train_unrolled


@torch.no_grad()
def target_features(target: Any, ids: torch.Tensor, mask: torch.Tensor | None, draft_ids: torch.Tensor,
                    autocast: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The target's aux hidden states (B, T, 3H), its log-probs renormalized over the draft vocabulary (B, T, Vd)
    and its greedy next token (B, T), for a batch of token sequences."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = target(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    # hidden_states[i] is the residual stream after i layers, which is what vLLM hands the head for layer id i.
    aux = torch.cat([out.hidden_states[i] for i in AUX_LAYERS], dim=-1).float()
    logits = out.logits.float()
    return aux, logits[..., draft_ids].log_softmax(-1), logits.argmax(-1)


def unrolled_loss(head: Eagle3Head, embed: torch.nn.Embedding, ids: torch.Tensor, valid: torch.Tensor,
                  aux: torch.Tensor, target_logp: torch.Tensor, target_top: torch.Tensor, steps: int,
                  decay: float, autocast: bool) -> tuple[torch.Tensor, list[float], list[float]]:
    """Soft cross-entropy of each unrolled step against the target's distribution at the position it predicts,
    weighted ``decay ** (step - 1)``; also each step's top-1 agreement with the target's greedy token.

    ``valid`` (B, T) marks the positions whose next-token distribution is a label (padding excluded)."""
    n = ids.size(1) - 1
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        per_step = head.unrolled(embed, ids, aux.to(torch.bfloat16) if autocast else aux, steps)
    total = torch.zeros((), dtype=torch.float32)
    losses, accs = [], []
    for s, logits in enumerate(per_step, start=1):
        # anchor p at step s predicts the token after position p + s: the target's distribution at p + s
        m = torch.zeros_like(valid[:, :n])
        m[:, : n - s + 1] = valid[:, s : n + 1]
        lab = target_logp[:, s : s + n]
        top = target_top[:, s : s + n]
        if lab.size(1) < n:  # the last s - 1 anchors have no label: pad (masked out)
            lab = torch.cat([lab, lab.new_zeros(lab.size(0), n - lab.size(1), lab.size(2))], dim=1)
            top = torch.cat([top, top.new_zeros(top.size(0), n - top.size(1))], dim=1)
        logp = logits.float().log_softmax(-1)
        ce = -(lab.exp() * logp).sum(-1)
        loss = ce[m].mean()
        total = total + decay ** (s - 1) * loss
        losses.append(loss.item())
        drafted = head.draft_ids[logits.argmax(-1)]
        accs.append((drafted == top)[m].float().mean().item())
    return total, losses, accs


@dataclass
class Cached:
    """One training sequence with what the frozen target gives for it, computed once: the aux hidden states and
    the log-probs over the draft vocabulary (bfloat16, to keep thousands in memory) and the greedy next token."""

    ids: torch.Tensor  # (T,)
    aux: torch.Tensor  # (T, 3H) bf16
    logp: torch.Tensor  # (T, Vd) bf16
    top: torch.Tensor  # (T,)


@torch.no_grad()
def precompute(target: Any, seqs: Sequence[list[int]], draft_ids: torch.Tensor, batch: int, pad_id: int,
               autocast: bool) -> list[Cached]:
    """Run the target once over every sequence (batched by length, right-padded)."""
    out: list[Cached] = []
    for group, ids, mask in by_length(seqs, batch, pad_id, "target features"):
        aux, logp, top = target_features(target, ids, mask, draft_ids, autocast)
        for r, x in enumerate(group):
            n = len(x)
            out.append(Cached(ids[r, :n].clone(), aux[r, :n].to(torch.bfloat16), logp[r, :n].to(torch.bfloat16),
                                 top[r, :n].clone()))
    return out


def cached_batches(data: Sequence[Cached], batch: int, gen: torch.Generator, pad_id: int
                   ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches of cached sequences, right-padded: (ids, valid, aux, logp, top)."""
    if not data:
        raise ValueError("no sequences to train on")
    batch = min(batch, len(data))
    while True:
        perm = torch.randperm(len(data), generator=gen).tolist()
        for s in range(0, len(perm) - batch + 1, batch):
            group = [data[i] for i in perm[s : s + batch]]
            t = max(x.ids.numel() for x in group)
            ids = torch.full((batch, t), pad_id, dtype=torch.long)
            valid = torch.zeros((batch, t), dtype=torch.bool)
            aux = torch.zeros((batch, t, group[0].aux.size(-1)))
            logp = torch.zeros((batch, t, group[0].logp.size(-1)))
            top = torch.zeros((batch, t), dtype=torch.long)
            for r, x in enumerate(group):
                n = x.ids.numel()
                ids[r, :n], valid[r, :n], aux[r, :n], logp[r, :n], top[r, :n] = x.ids, True, x.aux, x.logp, x.top
            yield ids, valid, aux, logp, top


def train_head(head: Eagle3Head, embed: torch.nn.Embedding, data: Sequence[Cached], budget: Budget, batch: int,
               peak_lr: float, steps: int, decay: float, gen: torch.Generator, pad_id: int, autocast: bool
               ) -> dict[str, Any]:
    """AdamW on the unrolled loss over shuffled batches of the cached sequences (the target's continuations and
    corpus windows); the target's embedding stays frozen."""
    return train_unrolled(head, lambda b: unrolled_loss(head, embed, *b, steps, decay, autocast),
                          cached_batches(data, batch, gen, pad_id), budget, peak_lr, "head")


@torch.no_grad()
def simulate_eagle3(head: Eagle3Head, target: Any, prompt: Sequence[int], target_tokens: Sequence[int], k: int
                    ) -> AcceptanceResult:
    """Greedy speculative decoding of ``target_tokens`` (the target's own greedy continuation of ``prompt``) with
    the head drafting ``k``, as vLLM runs it: after the prefill the anchor is the prompt's last position; each step
    drafts k tokens from the anchor, accepts the longest prefix equal to the target's tokens, and moves the anchor
    past the accepted tokens and the bonus token. The unrolled forward gives every anchor's k drafts at once (its
    teacher forcing changes no accepted count, see ``Eagle3Head.unrolled``)."""
    seq = torch.tensor([[*prompt, *target_tokens]])
    aux, _, _ = target_features(target, seq, None, head.draft_ids, autocast=False)
    per_step = head.unrolled(target.get_input_embeddings(), seq, aux, k)
    drafts = torch.stack([head.draft_ids[lg[0].argmax(-1)] for lg in per_step], dim=-1)  # (T - 1, k)
    return accepted_walk(drafts, seq[0].tolist(), len(prompt))
