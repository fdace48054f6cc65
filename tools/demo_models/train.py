"""Stages 3 and 5, training: the target as a plain causal LM, the draft on the distillation data (hard and
soft labels) plus some corpus text."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from demo_models.common import Budget, log
from demo_models.distill import DistillSample, distill_batches
from demo_models.model import make_config, n_params, round_to_bf16_, save_model


def lr_at(progress: float, step: int, warmup: int, peak: float, floor_frac: float = 0.1) -> float:
    """Linear warmup over ``warmup`` steps, then cosine from ``peak`` to ``floor_frac*peak``
    as ``progress`` (fraction of the step or time budget used) goes from 0 to 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(max(progress, 0.0), 1.0)
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * p)))




def by_length(seqs: Sequence[list[int]], batch: int, pad_id: int, what: str
              ) -> Iterator[tuple[list[list[int]], torch.Tensor, torch.Tensor]]:
    """The sequences in batches of similar length, right-padded: (sequences, ids, attention mask), for one pass of
    the frozen target over them; a progress line every ten batches names `what` it computes."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    t0 = time.monotonic()
    for b in range(0, len(order), batch):
        group = [seqs[i] for i in order[b : b + batch]]
        t = max(len(x) for x in group)
        ids = torch.full((len(group), t), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), t), dtype=torch.long)
        for r, x in enumerate(group):
            ids[r, : len(x)] = torch.tensor(x)
            mask[r, : len(x)] = 1
        yield group, ids, mask
        if (b // batch) % 10 == 0:
            log(f"{what}: {b + len(group)}/{len(seqs)} sequences, {time.monotonic() - t0:.0f}s")


def train_unrolled(module: torch.nn.Module, loss_of: Callable[[Any], tuple[torch.Tensor, list[float], list[float]]],
                   feed: Iterator[Any], budget: Budget, peak_lr: float, name: str) -> dict[str, Any]:
    """AdamW (warmup, cosine) on an unrolled drafter's loss over the batches ``feed`` gives, gradients clipped at 1:
    ``loss_of(batch)`` returns the total loss and each unrolled step's loss and top-1 agreement, logged as EMAs."""
    opt = torch.optim.AdamW(module.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.01)
    step, ema_loss, ema_acc = 0, None, None
    history: list[dict[str, Any]] = []
    while not budget.done(step):
        lr = lr_at(budget.progress(step), step, 20, peak_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        loss, losses, accs = loss_of(next(feed))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        step += 1
        ema_loss = losses if ema_loss is None else [0.95 * e + 0.05 * v for e, v in zip(ema_loss, losses)]
        ema_acc = accs if ema_acc is None else [0.95 * e + 0.05 * v for e, v in zip(ema_acc, accs)]
        if step % 10 == 0 or step == 1:
            history.append({"step": step, "loss": [round(v, 4) for v in ema_loss],
                            "top1": [round(v, 4) for v in ema_acc]})
            log(f"{name} step {step} loss/step {' '.join(f'{v:.3f}' for v in ema_loss)} "
                f"top1/step {' '.join(f'{v:.3f}' for v in ema_acc)} lr {lr:.2e} "
                f"elapsed {time.monotonic() - budget.start:.0f}s")
    return {"steps": step, "seconds": round(time.monotonic() - budget.start, 1),
            "final_loss_ema": [round(v, 4) for v in ema_loss or []],
            "final_top1_ema": [round(v, 4) for v in ema_acc or []], "history": history}


def sample_windows(stream: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator) -> torch.Tensor:
    """``batch`` random windows of ``seq_len + 1`` tokens from a flat token stream."""
    starts = torch.randint(0, stream.numel() - seq_len - 1, (batch,), generator=gen)
    return torch.stack([stream[s : s + seq_len + 1] for s in starts.tolist()])


@torch.no_grad()
def eval_loss(model: Any, windows: torch.Tensor, batch: int = 8) -> float:
    """Mean next-token cross-entropy (nats) over fixed evaluation windows."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.size(0), batch):
        w = windows[i : i + batch]
        logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    model.train()
    return total / max(count, 1)


def train_lm(
    model: Any,
    stream: torch.Tensor,
    budget: Budget,
    batch: int,
    seq_len: int,
    peak_lr: float,
    warmup: int,
    gen: torch.Generator,
    tag: str,
    log_every: int = 10,
    bf16_autocast: bool = False,
) -> dict[str, Any]:
    """Plain causal-LM training on random windows of ``stream`` with AdamW + cosine LR.

    With ``bf16_autocast`` the forward/backward matmuls run in bfloat16 (CPU autocast, fast with
    AMX) while weights, gradients and optimizer state stay fp32 (mixed precision)."""
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8)
    model.train()
    step, ema = 0, None
    history: list[tuple[int, float]] = []
    while not budget.done(step):
        lr = lr_at(budget.progress(step), step, warmup, peak_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        w = sample_windows(stream, batch, seq_len, gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_autocast):
            logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % log_every == 0 or step == 1:
            history.append((step, round(ema, 4)))
            el = time.monotonic() - budget.start
            log(f"{tag} step {step} loss {loss.item():.4f} ema {ema:.4f} lr {lr:.2e} "
                f"elapsed {el:.0f}s tok/s {step * batch * seq_len / max(el, 1e-9):.0f}")
    return {"steps": step, "final_train_loss_ema": round(ema or float("nan"), 4),
            "seconds": round(time.monotonic() - budget.start, 1), "tokens": step * batch * seq_len,
            "history": history}


def train_draft(
    draft: Any,
    samples: Sequence[DistillSample],
    stream: torch.Tensor,
    budget: Budget,
    batch: int,
    corpus_batch: int,
    corpus_seq: int,
    corpus_every: int,
    max_len: int,
    peak_lr: float,
    soft_weight: float,
    gen: torch.Generator,
    pad_id: int,
) -> dict[str, Any]:
    """Train the draft on the target's continuations (hard CE + top-k soft CE) and some corpus."""
    opt = torch.optim.AdamW(draft.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.05)
    draft.train()
    batches = distill_batches(samples, batch, max_len, gen, pad_id)
    step, ema_h, ema_c = 0, None, None
    history: list[tuple[int, float | None, float | None]] = []
    while not budget.done(step):
        lr = lr_at(budget.progress(step), step, 30, peak_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        if corpus_every and step % corpus_every == corpus_every - 1:
            w = sample_windows(stream, corpus_batch, corpus_seq, gen)
            logits = draft(input_ids=w[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1))
            ema_c = loss.item() if ema_c is None else 0.9 * ema_c + 0.1 * loss.item()
        else:
            ids, mask, labels, tk_ids, tk_lp = next(batches)
            logits = draft(input_ids=ids, attention_mask=mask).logits
            logp = torch.log_softmax(logits, dim=-1)
            valid = labels != -100
            hard = F.nll_loss(logp[valid], labels[valid])
            # soft CE against the target's renormalized top-k distribution
            q = torch.softmax(tk_lp[valid], dim=-1)
            soft = -(q * logp[valid].gather(-1, tk_ids[valid])).sum(-1).mean()
            loss = hard + soft_weight * soft
            ema_h = hard.item() if ema_h is None else 0.95 * ema_h + 0.05 * hard.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 or step == 1:
            history.append((step, None if ema_h is None else round(ema_h, 4),
                            None if ema_c is None else round(ema_c, 4)))
            log(f"draft step {step} distill-CE-ema {ema_h if ema_h is not None else float('nan'):.4f} "
                f"corpus-CE-ema {ema_c if ema_c is not None else float('nan'):.4f} lr {lr:.2e} "
                f"elapsed {time.monotonic() - budget.start:.0f}s")
    return {"steps": step, "distill_ce_ema": None if ema_h is None else round(ema_h, 4),
            "corpus_ce_ema": None if ema_c is None else round(ema_c, 4),
            "seconds": round(time.monotonic() - budget.start, 1), "history": history}


def train_target(
    args: argparse.Namespace, ids: dict[str, int], stream: torch.Tensor, eval_windows: torch.Tensor,
    gen: torch.Generator, tok_dir: Path, tgt_dir: Path, init: Any = None,
) -> Any:
    """Train (from scratch, or on from ``init``), round to bf16, evaluate and save the target;
    its stats are in ``.stats``."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(args.seed)
    if init is None:
        tcfg = make_config(args.target_layers, args.target_hidden, args.target_heads, args.target_intermediate, ids,
                           2048)
        target = LlamaForCausalLM(tcfg).float()
    else:
        target = init.float().train()
        gen.manual_seed(args.seed + 7)  # other windows than the first phase
    log(f"target params {n_params(target) / 1e6:.2f}M")
    tbudget = Budget(args.target_minutes * 60, args.target_steps)
    tstats = train_lm(target, stream, tbudget, args.target_batch, args.target_seq, args.target_lr,
                      30 if init is None else 10, gen, "target", bf16_autocast=args.target_bf16_autocast)
    round_to_bf16_(target)
    target.eval()
    tstats["heldout_loss"] = round(eval_loss(target, eval_windows), 4)
    tstats["params"] = n_params(target)
    tstats["bf16_autocast"] = args.target_bf16_autocast
    tstats["peak_lr"] = args.target_lr  # per phase: --continue-target may use another
    log(f"target done: {tstats['steps']} steps, held-out loss {tstats['heldout_loss']}")
    save_model(target, tok_dir, tgt_dir, ids)
    target.stats = tstats
    return target
