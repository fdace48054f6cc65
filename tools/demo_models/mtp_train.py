"""Training and checking demo-mtp's MTP layer: the frozen target's states and top-k distribution for a sequence,
the unrolled loss, the training loop, and greedy acceptance simulated the way vLLM drafts with the layer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from demo_models.acceptance import AcceptanceResult, accepted_walk
from demo_models.common import Budget
from demo_models.mtp import MtpLayer
from demo_models.train import by_length, train_unrolled


@dataclass
class Cached:
    """One training sequence with what the frozen target gives for it, computed once: its pre-norm last states
    (bf16), its top-k next-token ids and log-probs at every position, and its greedy next token."""

    ids: torch.Tensor  # (T,)
    states: torch.Tensor  # (T, H) bf16
    top_ids: torch.Tensor  # (T, k)
    top_logp: torch.Tensor  # (T, k) bf16
    top: torch.Tensor  # (T,)


@torch.no_grad()
def target_states(target: Any, ids: torch.Tensor, mask: torch.Tensor | None, autocast: bool
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's residual stream after its last layer, before the final norm (B, T, H), which is what
    MiMoModel hands the proposer, and its logits (B, T, V)."""
    seen: list[torch.Tensor] = []
    hook = target.model.norm.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = target(input_ids=ids, attention_mask=mask).logits
    finally:
        hook.remove()
    return seen[0].float(), logits.float()


@torch.no_grad()
def precompute(target: Any, seqs: Sequence[list[int]], batch: int, pad_id: int, topk: int, autocast: bool
               ) -> list[Cached]:
    """Run the target once over every sequence (batched by length, right-padded)."""
    out: list[Cached] = []
    for group, ids, mask in by_length(seqs, batch, pad_id, "target states"):
        states, logits = target_states(target, ids, mask, autocast)
        vals, idx = logits.log_softmax(-1).topk(topk, dim=-1)
        for r, x in enumerate(group):
            n = len(x)
            out.append(Cached(ids[r, :n].clone(), states[r, :n].to(torch.bfloat16), idx[r, :n].to(torch.int32),
                              vals[r, :n].to(torch.bfloat16), idx[r, :n, 0].clone()))
    return out


def batches(data: Sequence[Cached], batch: int, gen: torch.Generator, pad_id: int
            ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches, right-padded: (ids, valid, states, top_ids, top_logp, top)."""
    if not data:
        raise ValueError("no sequences to train on")
    batch = min(batch, len(data))
    h, k = data[0].states.size(-1), data[0].top_ids.size(-1)
    while True:
        perm = torch.randperm(len(data), generator=gen).tolist()
        for s in range(0, len(perm) - batch + 1, batch):
            group = [data[i] for i in perm[s : s + batch]]
            t = max(x.ids.numel() for x in group)
            ids = torch.full((batch, t), pad_id, dtype=torch.long)
            valid = torch.zeros((batch, t), dtype=torch.bool)
            states = torch.zeros((batch, t, h))
            top_ids = torch.zeros((batch, t, k), dtype=torch.long)
            top_logp = torch.full((batch, t, k), -1e4)
            top = torch.zeros((batch, t), dtype=torch.long)
            for r, x in enumerate(group):
                n = x.ids.numel()
                ids[r, :n], valid[r, :n], states[r, :n] = x.ids, True, x.states
                top_ids[r, :n], top_logp[r, :n], top[r, :n] = x.top_ids, x.top_logp, x.top
            yield ids, valid, states, top_ids, top_logp, top


def _shifted(x: torch.Tensor, s: int, n: int) -> torch.Tensor:
    """``x[:, s : s + n]``, padded with zeros to length n (the last anchors of a step have no label)."""
    part = x[:, s : s + n]
    if part.size(1) == n:
        return part
    pad = part.new_zeros((part.size(0), n - part.size(1), *part.shape[2:]))
    return torch.cat([part, pad], dim=1)


def unrolled_loss(layer: MtpLayer, embed: torch.nn.Embedding, ids: torch.Tensor, valid: torch.Tensor,
                  states: torch.Tensor, top_ids: torch.Tensor, top_logp: torch.Tensor, top: torch.Tensor,
                  steps: int, decay: float, autocast: bool) -> tuple[torch.Tensor, list[float], list[float]]:
    """Cross-entropy of each unrolled step against the target's top-k distribution (renormalized) at the position
    it predicts, weighted ``decay ** (step - 1)``; and each step's top-1 agreement with the target's greedy token.
    The logits are the target's tied output head over the layer's output, as vLLM shares it."""
    n = ids.size(1) - 1
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        outs = layer.unrolled(embed, ids, states.to(torch.bfloat16) if autocast else states, steps)
    total = torch.zeros((), dtype=torch.float32)
    losses, accs = [], []
    for s, out in enumerate(outs, start=1):
        # anchor p at step s predicts the token after position p + s: the target's distribution at p + s
        m = _shifted(valid, s, n)
        lab_ids, lab_logp, lab_top = _shifted(top_ids, s, n), _shifted(top_logp, s, n), _shifted(top, s, n)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = out @ embed.weight.t().to(out.dtype)
        logp = logits.float().log_softmax(-1)
        p = lab_logp.float().softmax(-1)
        ce = -(p * logp.gather(-1, lab_ids)).sum(-1)
        loss = ce[m].mean()
        total = total + decay ** (s - 1) * loss
        losses.append(loss.item())
        accs.append((logits.argmax(-1) == lab_top)[m].float().mean().item())
    return total, losses, accs


def train_layer(layer: MtpLayer, embed: torch.nn.Embedding, data: Sequence[Cached], budget: Budget, batch: int,
                peak_lr: float, steps: int, decay: float, gen: torch.Generator, pad_id: int, autocast: bool
                ) -> dict[str, Any]:
    """AdamW on the unrolled loss over shuffled batches of the cached sequences; the target stays frozen."""
    return train_unrolled(layer, lambda b: unrolled_loss(layer, embed, *b, steps, decay, autocast),
                          batches(data, batch, gen, pad_id), budget, peak_lr, "mtp")


@torch.no_grad()
def simulate_mtp(layer: MtpLayer, target: Any, prompt: Sequence[int], target_tokens: Sequence[int], k: int
                 ) -> AcceptanceResult:
    """Greedy speculative decoding of ``target_tokens`` (the target's own greedy continuation of ``prompt``) with the
    layer drafting ``k`` as vLLM runs it: each step drafts k tokens from the anchor, accepts the longest prefix equal
    to the target's tokens, and moves the anchor past the accepted tokens and the bonus token (the unrolled forward
    gives every anchor's drafts at once; teacher forcing changes no accepted count)."""
    seq = torch.tensor([[*prompt, *target_tokens]])
    states, _ = target_states(target, seq, None, autocast=False)
    embed = target.get_input_embeddings()
    outs = layer.unrolled(embed, seq, states, k)
    drafts = torch.stack([(o[0] @ embed.weight.t()).argmax(-1) for o in outs], dim=-1)  # (T - 1, k)
    return accepted_walk(drafts, seq[0].tolist(), len(prompt))
