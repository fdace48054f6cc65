"""The EAGLE-3 head for demo-target: its draft vocabulary, its forward exactly as vLLM 0.32 runs it, the unrolled
(training-time test) forward it is trained with, and how it is saved.

What vLLM does (model_executor/models/llama_eagle3.py, v1/spec_decode/llm_base_proposer.py,
model_executor/models/interfaces.py), and so what this module mirrors:

- The target hands over its residual stream (hidden + residual, before any norm) after layers
  ``AUX_LAYERS`` = (2, L // 2, L - 3) = (2, 4, 5) of its 8, concatenated: 3 x 576 per token.
  ``fc`` (no bias) maps them to the head's width; no norm before it.
- First pass (step 1): for every token the target just verified, at position j, the head gets the
  target's combined state g_j and the embedding of the token at j + 1 (the input ids are shifted by
  one; the last slot holds the token the target just sampled). The embedding table is the target's
  (the checkpoint has none, so vLLM shares it). The layer: ``input_layernorm`` on the embedding,
  ``hidden_norm`` on the hidden state (which itself is the residual), attention over their
  concatenation (2 x 576 in), residual add + ``post_attention_layernorm``, SiLU MLP, residual add,
  ``norm``, ``lm_head`` over the draft vocabulary. Its KV cache keeps every position's entry.
- Steps 2..K: one token per request at the next position, input = embedding of the token drafted
  last and the head's own previous output *before* the final norm (the pre-norm residual stream).
  Its attention sees the first-pass entries up to the anchor and its own entries since.
- Logits over the draft vocabulary go to target id ``draft id + d2t[draft id]``; every other target
  token gets -inf, so the drafted token is the argmax over the draft vocabulary. ``t2d`` is not read.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

#: The target layers whose outputs vLLM passes to an EAGLE-3 head of an 8-layer Llama (its default
#: ``(2, L // 2, L - 3)``); written into the head's config as well, so the head says what it was trained on.
AUX_LAYERS = (2, 4, 5)


def draft_vocabulary(counts: Counter[int], size: int, vocab_size: int, always: Iterable[int]) -> torch.Tensor:
    """The ``size`` target ids the head may draft, sorted: the ``always`` ids (eos and the other special
    tokens, so that a reply can end on a drafted token) and then the most frequent ones."""
    chosen = list(dict.fromkeys(always))
    for tok, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(chosen) >= size:
            break
        if tok not in chosen and 0 <= tok < vocab_size:
            chosen.append(tok)
    for tok in range(vocab_size):  # a corpus with fewer distinct tokens than `size`: fill with the lowest ids
        if len(chosen) >= size:
            break
        if tok not in chosen:
            chosen.append(tok)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def d2t_t2d(draft_ids: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """EAGLE-3's maps: ``d2t[d]`` = target id - d (int64 offsets), ``t2d`` = which target ids are drafted (bool)."""
    d2t = draft_ids - torch.arange(draft_ids.numel())
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[draft_ids] = True
    return d2t, t2d


class RMSNorm(nn.Module):
    """vLLM's RMSNorm: computed in fp32, scaled by the weight; with ``residual``, adds first and returns both."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight.to(x.dtype)


def step_attention(q: torch.Tensor, k1: torch.Tensor, v1: torch.Tensor, keys: list[torch.Tensor],
                   values: list[torch.Tensor], causal: torch.Tensor, scale: float) -> torch.Tensor:
    """One unrolled step's attention at every anchor, as a drafter's KV cache holds it: over the first pass's
    entries (k1, v1: (B, T, heads, head_dim)) at positions up to the anchor (``causal``), and over this anchor's own
    entries of the later steps so far (``keys``/``values``, one (B, T, heads, head_dim) each; none at step 1)."""
    n = k1.size(1)
    scores = (torch.einsum("bqhd,bkhd->bhqk", q, k1) * scale).masked_fill(~causal, float("-inf"))
    if keys:
        own = torch.stack([(q * kk).sum(-1) for kk in keys], dim=-1).transpose(1, 2) * scale  # (B, H, T, s-1)
        scores = torch.cat([scores, own], dim=-1)
    probs = scores.float().softmax(-1).to(q.dtype)
    attn = torch.einsum("bhqk,bkhd->bqhd", probs[..., :n], v1)
    if keys:
        attn = attn + torch.einsum("bhqj,bqjhd->bqhd", probs[..., n:], torch.stack(values, dim=2))
    return attn


@dataclass(frozen=True)
class HeadShape:
    hidden: int
    heads: int
    head_dim: int
    intermediate: int
    draft_vocab: int
    target_vocab: int
    rope_theta: float
    eps: float
    max_pos: int


class Eagle3Head(nn.Module):
    """The head's weights under the names of an EAGLE-3 checkpoint (``fc``, ``midlayer.*``, ``norm``, ``lm_head``);
    ``d2t`` and ``t2d`` are buffers. The embedding table is the target's, passed in, never trained."""

    def __init__(self, shape: HeadShape, draft_ids: torch.Tensor) -> None:
        super().__init__()
        h, nh, hd = shape.hidden, shape.heads, shape.head_dim
        self.shape = shape
        self.fc = nn.Linear(len(AUX_LAYERS) * h, h, bias=False)
        self.midlayer = nn.Module()
        self.midlayer.input_layernorm = RMSNorm(h, shape.eps)
        self.midlayer.hidden_norm = RMSNorm(h, shape.eps)
        self.midlayer.post_attention_layernorm = RMSNorm(h, shape.eps)
        attn = nn.Module()
        attn.q_proj = nn.Linear(2 * h, nh * hd, bias=False)
        attn.k_proj = nn.Linear(2 * h, nh * hd, bias=False)
        attn.v_proj = nn.Linear(2 * h, nh * hd, bias=False)
        attn.o_proj = nn.Linear(nh * hd, h, bias=False)
        self.midlayer.self_attn = attn
        mlp = nn.Module()
        mlp.gate_proj = nn.Linear(h, shape.intermediate, bias=False)
        mlp.up_proj = nn.Linear(h, shape.intermediate, bias=False)
        mlp.down_proj = nn.Linear(shape.intermediate, h, bias=False)
        self.midlayer.mlp = mlp
        self.norm = RMSNorm(h, shape.eps)
        self.lm_head = nn.Linear(h, shape.draft_vocab, bias=False)
        d2t, t2d = d2t_t2d(draft_ids, shape.target_vocab)
        self.register_buffer("d2t", d2t)
        self.register_buffer("t2d", t2d)
        self.register_buffer("draft_ids", draft_ids, persistent=False)
        inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        for lin in (self.fc, attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj,
                    mlp.down_proj, self.lm_head):
            nn.init.normal_(lin.weight, std=0.02)
        # Residual outputs start small, as in a deep transformer's init, so step 2's input starts close to step 1's.
        nn.init.normal_(attn.o_proj.weight, std=0.02 / math.sqrt(2))
        nn.init.normal_(mlp.down_proj.weight, std=0.02 / math.sqrt(2))

    @torch.no_grad()
    def warm_start(self, target: Any) -> None:
        """Start the output side from the target's: ``lm_head`` from its (tied) output rows of the draft vocabulary
        and ``norm`` from its final norm, so the head's first job is only to produce target-like final states."""
        self.lm_head.weight.copy_(target.get_output_embeddings().weight[self.draft_ids])
        self.norm.weight.copy_(target.model.norm.weight)

    def rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Neox-style rotary embedding (vLLM's for Llama) of ``x`` (..., T, heads, head_dim) at ``pos`` (..., T)."""
        ang = pos.float()[..., None] * self.inv_freq  # (..., T, hd/2)
        cos = torch.cat([ang.cos(), ang.cos()], -1)[..., None, :].to(x.dtype)
        sin = torch.cat([ang.sin(), ang.sin()], -1)[..., None, :].to(x.dtype)
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    def _qkv(self, emb: torch.Tensor, hidden: torch.Tensor, pos: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The layer up to attention: (q, k, v) with RoPE applied, each (B, T, heads, head_dim), and the residual."""
        m = self.midlayer
        x = torch.cat([m.input_layernorm(emb), m.hidden_norm(hidden)], dim=-1)
        nh, hd = self.shape.heads, self.shape.head_dim
        q = m.self_attn.q_proj(x).unflatten(-1, (nh, hd))
        k = m.self_attn.k_proj(x).unflatten(-1, (nh, hd))
        v = m.self_attn.v_proj(x).unflatten(-1, (nh, hd))
        return self.rope(q, pos), self.rope(k, pos), v, hidden

    def _after_attention(self, attn_out: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """From the attention output to (draft-vocabulary logits, pre-norm output for the next step)."""
        m = self.midlayer
        residual = m.self_attn.o_proj(attn_out.flatten(-2)) + residual
        x = m.post_attention_layernorm(residual)
        x = m.mlp.down_proj(F.silu(m.mlp.gate_proj(x)) * m.mlp.up_proj(x))
        prenorm = x + residual
        return self.lm_head(self.norm(prenorm)), prenorm

    def unrolled(self, embed: nn.Embedding, tokens: torch.Tensor, aux: torch.Tensor, steps: int
                 ) -> list[torch.Tensor]:
        """Draft-vocabulary logits of ``steps`` unrolled steps for every anchor of every sequence, teacher-forced.

        ``tokens`` (B, T) is the token sequence, ``aux`` (B, T, 3H) the target's aux hidden states at each position.
        Anchor p (0 <= p < T - 1) is the last position the target verified. Step s (1-based) runs at position
        p + s - 1 with the embedding of token p + s and predicts token p + s + 1; step 1's hidden state is
        fc(aux[p]), step s > 1's is step s - 1's pre-norm output at the same anchor. Step s attends to step 1's
        entries at positions <= p (the first pass over the verified tokens) and its own and the earlier steps'
        entries at this anchor, as vLLM's KV cache holds them. The tokens fed at steps > 1 are the true ones: a
        draft that deviates is rejected there anyway, so acceptance is the same as with the head's own tokens.
        Returns one (B, T - 1, draft_vocab) tensor per step; rows whose predicted token lies past the end are
        junk (the caller masks them).
        """
        b, t = tokens.shape
        n = t - 1
        pad = torch.zeros(b, steps, dtype=tokens.dtype, device=tokens.device)
        padded = torch.cat([tokens, pad], dim=1)
        anchor = torch.arange(n, device=tokens.device).expand(b, n)
        hidden = self.fc(aux[:, :n])
        scale = self.shape.head_dim ** -0.5
        causal = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril()
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        out: list[torch.Tensor] = []
        for s in range(1, steps + 1):
            q, k, v, residual = self._qkv(embed(padded[:, s : s + n]), hidden, anchor + s - 1)
            if s == 1:
                k1, v1 = k, v
            else:
                keys.append(k)
                values.append(v)
            attn = step_attention(q, k1, v1, keys, values, causal, scale)
            logits, hidden = self._after_attention(attn, residual)
            out.append(logits)
        return out

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def head_config(shape: HeadShape, target_cfg: dict[str, Any]) -> dict[str, Any]:
    """The head's config.json: a one-layer Llama of the target's width, named as vLLM's EAGLE-3 Llama head."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": shape.hidden,
        "target_hidden_size": target_cfg["hidden_size"],
        "num_hidden_layers": 1,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.heads,
        "head_dim": shape.head_dim,
        "intermediate_size": shape.intermediate,
        "hidden_act": "silu",
        "rms_norm_eps": shape.eps,
        "max_position_embeddings": shape.max_pos,
        "rope_parameters": {"rope_theta": shape.rope_theta, "rope_type": "default"},
        "vocab_size": shape.target_vocab,
        "draft_vocab_size": shape.draft_vocab,
        "eagle_aux_hidden_state_layer_ids": list(AUX_LAYERS),
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": target_cfg["bos_token_id"],
        "eos_token_id": target_cfg["eos_token_id"],
        "pad_token_id": target_cfg["pad_token_id"],
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
    }


def save_head(head: Eagle3Head, target_cfg: dict[str, Any], out_dir: Path) -> None:
    """config.json and one model.safetensors: the weights in bfloat16, d2t int64, t2d bool."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {name: (t.detach().to(torch.bfloat16) if t.is_floating_point() else t.detach()).contiguous()
               for name, t in head.state_dict().items()}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    cfg = head_config(head.shape, target_cfg)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
